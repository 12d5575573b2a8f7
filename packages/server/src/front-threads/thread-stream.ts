/**
 * A front thread's gRPC stream (ModelStreamInfer) as the main thread's handler sees it: the part of
 * grpc-js's ServerDuplexStream the stream session uses (grpc/stream-infer.ts `StreamCall`), its
 * messages crossing the thread's port (front-messages.ts) instead of HTTP/2. grpc-js runs on the
 * thread (HTTP/2, TLS, restricted protocols, deadlines, flow control to the client); here each
 * message goes through the door's own request deserializer and each response through its own
 * serializer, so the session sees and sends the same as without threads.
 *
 * What it keeps of grpc-js's stream:
 * - 'data' events stop while paused and start again after `resume`, on a later tick; 'end' comes
 *   after the last message;
 * - a message the deserializer refuses ends the call with INTERNAL `Error deserializing request`,
 *   then 'cancelled' is emitted, and nothing more is read;
 * - an 'error' emitted on the call ends it with that error's status (code and details);
 * - `write` returns false while the thread's write buffer is full, and 'drain' follows;
 * - a client that cancels (or a thread that exits) sets `cancelled` and emits 'cancelled'.
 * Every message the session takes is acknowledged to the thread, which holds at most
 * STREAM_WINDOW unacknowledged: on the stream's next write, or alone once STREAM_ACK_AT are owed
 * (one message per turn however many). Messages wait here only while the session is paused, and
 * then at most that many.
 */
import { EventEmitter } from 'node:events';
import { Metadata, status } from '@grpc/grpc-js';
import { deserializeError } from '../grpc/infer-message.js';
import { type Answer, type MetadataEntry, type Outbox, ownedBytes, STREAM_ACK_AT } from './front-messages.js';

export interface ThreadStreamOptions {
  /** The door's request deserializer for this method (it may throw: the call ends as grpc-js ends it). */
  readonly deserialize: (bytes: Buffer) => unknown;
  /** The door's response serializer for this method. */
  readonly serialize: (value: unknown) => Buffer;
  /** The thread's answers (batched per turn). */
  readonly answers: Outbox<Answer>;
  /** The call has ended (its status sent) or was cancelled: the host forgets it. */
  readonly onDone: () => void;
}

export class ThreadStreamCall extends EventEmitter {
  readonly metadata: Metadata;
  readonly #id: number;
  readonly #o: ThreadStreamOptions;
  /** Messages received and not yet taken (only while paused, or within the turn they arrived). */
  readonly #queue: unknown[] = [];
  #paused = false;
  #halfClosed = false;
  #endEmitted = false;
  /** The status is sent, or the client cancelled: nothing more is read or written. */
  #done = false;
  #cancelled = false;
  /** The thread's write buffer is full (a 'drain' follows). */
  #full = false;
  /** Messages taken and not yet acknowledged to the thread. */
  #owed = 0;
  /** The `took` answer not sent yet, to count more messages in (`Outbox.sent` when it was added). */
  #took: { readonly answer: { t: 'took'; id: number; n: number }; readonly batch: number } | undefined;

  constructor(id: number, metadata: readonly MetadataEntry[], options: ThreadStreamOptions) {
    super();
    this.#id = id;
    this.#o = options;
    this.metadata = metadataOf(metadata);
    // as grpc-js's stream: an 'error' emitted on the call ends it with that error's status
    this.on('error', (e: unknown) => this.#finish(statusCodeOf(e), detailsOf(e)));
  }

  get cancelled(): boolean {
    return this.#cancelled;
  }

  // ---- from the thread ----

  /** A message the client sent. */
  receive(bytes: Uint8Array): void {
    if (this.#done) return;
    let message: unknown;
    try {
      message = this.#o.deserialize(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength));
    } catch (e) {
      const refused = deserializeError(e instanceof Error ? e.message : String(e));
      this.#finish(refused.code, refused.details);
      // as grpc-js: the handler hears 'cancelled' after that status (and lets go of the stream)
      this.#cancelled = true;
      this.emit('cancelled', 'cancelled');
      return;
    }
    this.#queue.push(message);
    this.#pump();
  }

  /** The client half-closed: 'end' once every message before it is taken. */
  halfClose(): void {
    this.#halfClosed = true;
    this.#pump();
  }

  /** The client cancelled, or its thread is gone. */
  cancel(): void {
    if (this.#done) return;
    this.#done = true;
    this.#cancelled = true;
    this.#queue.length = 0;
    this.#o.onDone();
    this.emit('cancelled', 'cancelled');
  }

  /** The thread's write buffer is full / has drained. */
  congested(full: boolean): void {
    if (this.#full === full) return;
    this.#full = full;
    if (!full) this.emit('drain');
  }

  // ---- for the handler (grpc-js's ServerDuplexStream) ----

  pause(): this {
    this.#paused = true;
    return this;
  }

  resume(): this {
    if (!this.#paused) return this;
    this.#paused = false;
    process.nextTick(() => this.#pump());
    return this;
  }

  write(message: unknown): boolean {
    if (this.#done) return false;
    const bytes = ownedBytes(this.#o.serialize(message));
    const owed = this.#owed;
    this.#owed = 0;
    this.#o.answers.add(owed > 0 ? { t: 'write', id: this.#id, bytes, took: owed } : { t: 'write', id: this.#id, bytes }, [bytes.buffer as ArrayBuffer]);
    return !this.#full;
  }

  end(): this {
    this.#finish(status.OK, '');
    return this;
  }

  /**
   * Initial metadata: only response compression sends any (startCompressedResponses), and a door
   * with front threads never compresses (grpc-server.ts refuses that pair), so nothing is sent.
   */
  sendMetadata(): void {}

  #pump(): void {
    while (!this.#paused && !this.#done && this.#queue.length > 0) {
      const message = this.#queue.shift();
      this.#count();
      this.emit('data', message);
    }
    if (!this.#paused && !this.#done && this.#queue.length === 0 && this.#halfClosed && !this.#endEmitted) {
      this.#endEmitted = true;
      this.emit('end');
    }
  }

  /** One more message taken: owed to the thread until a write carries it, or alone once STREAM_ACK_AT are owed. */
  #count(): void {
    this.#owed += 1;
    if (this.#owed < STREAM_ACK_AT) return;
    const n = this.#owed;
    this.#owed = 0;
    const answers = this.#o.answers;
    if (this.#took !== undefined && this.#took.batch === answers.sent) {
      this.#took.answer.n += n;
      return;
    }
    const answer = { t: 'took' as const, id: this.#id, n };
    this.#took = { answer, batch: answers.sent };
    answers.add(answer);
  }

  #finish(code: number, details: string): void {
    if (this.#done) return;
    this.#done = true;
    this.#queue.length = 0;
    this.#o.answers.add({ t: 'end', id: this.#id, code, details });
    this.#o.onDone();
  }
}

/**
 * The call's metadata as the client sent it (`-bin` values as bytes). grpc-js on the thread has
 * already dropped what it would not accept; an entry it would refuse here is dropped too, never thrown.
 */
function metadataOf(entries: readonly MetadataEntry[]): Metadata {
  const md = new Metadata();
  for (const [key, value] of entries) {
    try {
      md.add(key, typeof value === 'string' ? value : Buffer.from(value));
    } catch {
      // an illegal key, or a text value under a -bin key
    }
  }
  return md;
}

/** The status code grpc-js sends for an error emitted on a call (server-call.js serverErrorToStatus). */
function statusCodeOf(e: unknown): number {
  const code = (e as { code?: unknown } | undefined)?.code;
  return typeof code === 'number' && Number.isInteger(code) ? code : status.UNKNOWN;
}

function detailsOf(e: unknown): string {
  const err = e as { code?: unknown; details?: unknown; message?: unknown } | undefined;
  if (typeof err?.code === 'number' && Number.isInteger(err.code) && typeof err.details === 'string') return err.details;
  return typeof err?.message === 'string' ? err.message : 'Unknown Error';
}
