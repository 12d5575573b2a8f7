/**
 * The messages between the main thread and its front threads, and how tensors cross.
 *
 *   main → thread (the worker's port):   {t: 'state', state}                        (front-state.ts)
 *                                        {t: 'answers', batch: [{t: 'result', id, response} (tensor buffers transferred)
 *                                                               | {t: 'error', id, code, message}
 *                                                               | stream answers (below)]}
 *                                        {t: 'close'}                               (stop accepting, finish, exit)
 *   thread → main:                       {t: 'listening', port}                     (bound; the first thread's port is every thread's)
 *                                        {t: 'asks', batch: [{t: 'infer', id, request} (tensor buffers transferred)
 *                                                            | {t: 'cancel', id}    (the client went away: a request or a stream)
 *                                                            | stream asks (below)]}
 *                                        {t: 'failed', message}                     (could not bind)
 *                                        {t: 'log', level, fields, msg}             (the thread's log lines, for the process's logger)
 *
 * A gRPC stream (ModelStreamInfer) runs its session on the main thread, its call on the thread
 * (thread-stream.ts): the thread asks {t: 'open', id, metadata}, then {t: 'data', id, bytes} per
 * message (bytes transferred), {t: 'half', id} when the client half-closes, {t: 'full', id} /
 * {t: 'drain', id} as its call's write buffer fills and drains; the main thread answers
 * {t: 'write', id, bytes, took?} per response message (bytes transferred), and {t: 'end', id, code,
 * details} once (code 0: OK). The thread holds at most STREAM_WINDOW messages the session has not
 * acknowledged taking: acknowledgements ride on writes (`took`), and go alone ({t: 'took', id, n})
 * only once STREAM_ACK_AT are owed, so a request answered at once costs one message each way.
 *
 * Requests and answers travel in batches (`Outbox`): whatever one side has for the other by the end of
 * an event-loop turn goes as one message, so a busy thread wakes the other once per turn, not once
 * per request.
 *
 * Ownership: a buffer is transferred only when the tensor's view covers all of it (Node's Buffer
 * pool and a batch's shared output buffer must never be detached); other tensors are copied first.
 * Request inputs decoded from one body share it: the body is transferred once. Response outputs are
 * always copied (the engine may hold them: a response cache, a batch's buffer).
 */
import type { InferRequest, InferResponse, InferTensor } from '@switchyard/kserve';
import type { FrontState } from './front-state.js';

/** What answers one request or stream (batched: `Outbox`). */
export type Answer = { t: 'result'; id: number; response: InferResponse } | { t: 'error'; id: number; code: string; message: string } | StreamAnswer;
/** What a thread says of one request or stream (batched: `Outbox`). */
export type Ask = { t: 'infer'; id: number; request: InferRequest } | { t: 'cancel'; id: number } | StreamAsk;

/** A stream's messages from its thread: opened (the call's metadata), a message, half-closed, write buffer full / drained. */
export type StreamAsk =
  | { t: 'open'; id: number; metadata: MetadataEntry[] }
  | { t: 'data'; id: number; bytes: Uint8Array }
  | { t: 'half'; id: number }
  | { t: 'full'; id: number }
  | { t: 'drain'; id: number };
/** A stream's messages from the main thread: a response message, n messages taken, the final status (code 0: OK). */
export type StreamAnswer = { t: 'write'; id: number; bytes: Uint8Array; took?: number } | { t: 'took'; id: number; n: number } | { t: 'end'; id: number; code: number; details: string };
/** One metadata value as it crosses: text, or the bytes of a `-bin` key. */
export type MetadataEntry = readonly [key: string, value: string | Uint8Array];

/**
 * Most messages of one stream a thread hands over before the main thread's session takes them;
 * then its call stops reading (HTTP/2 flow control holds the client), as grpc-js's own stream stops
 * at its read buffer's 16 messages.
 */
export const STREAM_WINDOW = 16;
/** Messages taken that the main thread acknowledges alone when no write has carried them (half the window: the thread never waits on an owed acknowledgement). */
export const STREAM_ACK_AT = STREAM_WINDOW / 2;

export type ToThread = { t: 'state'; state: FrontState } | { t: 'answers'; batch: Answer[] } | { t: 'close' };

export type ToMain =
  | { t: 'listening'; port: number }
  | { t: 'asks'; batch: Ask[] }
  | { t: 'failed'; message: string }
  | { t: 'log'; level: LogLevel; fields: Record<string, unknown>; msg: string | undefined };

export type LogLevel = 'trace' | 'debug' | 'info' | 'warn' | 'error';

/** `bytes` itself when it covers its whole (non-shared) buffer, else a copy that does. */
export function ownedBytes(bytes: Uint8Array): Uint8Array {
  return bytes.byteOffset === 0 && bytes.byteLength === bytes.buffer.byteLength && bytes.buffer instanceof ArrayBuffer ? bytes : new Uint8Array(bytes);
}

/**
 * `request` ready to post: every input's bytes in a buffer that may be transferred, and that list.
 * `body`: the owned body (`ownedBytes`) the request was decoded from; inputs that are views into it
 * travel with it (one transfer, no copy).
 */
export function postableRequest(request: InferRequest, body?: Uint8Array): { request: InferRequest; transfer: ArrayBuffer[] } {
  const transfer = new Set<ArrayBuffer>();
  if (body !== undefined && body.buffer instanceof ArrayBuffer) transfer.add(body.buffer);
  const inputs = request.inputs.map((t): InferTensor => {
    if (t.data.buffer instanceof ArrayBuffer && transfer.has(t.data.buffer)) return t;
    const data = t.data.byteLength === 0 ? new Uint8Array(0) : ownedBytes(t.data);
    transfer.add(data.buffer as ArrayBuffer);
    return data === t.data ? t : { ...t, data };
  });
  return { request: { ...request, inputs }, transfer: [...transfer] };
}

/** `response` ready to post: every output's bytes copied into a buffer of its own, and those buffers. */
export function postableResponse(response: InferResponse): { response: InferResponse; transfer: ArrayBuffer[] } {
  const transfer: ArrayBuffer[] = [];
  const outputs = response.outputs.map((t): InferTensor => {
    const data = new Uint8Array(t.data);
    transfer.push(data.buffer);
    return { ...t, data };
  });
  return { response: { ...response, outputs }, transfer };
}

/**
 * Messages for the other side, sent together once per event-loop turn (`setImmediate`: after the
 * turn's I/O, so what one turn's sockets and results produced shares one message).
 */
export class Outbox<M> {
  #batch: M[] = [];
  #transfer: ArrayBuffer[] = [];
  #scheduled = false;
  #sent = 0;
  readonly #send: (batch: M[], transfer: ArrayBuffer[]) => void;

  constructor(send: (batch: M[], transfer: ArrayBuffer[]) => void) {
    this.#send = send;
  }

  add(message: M, transfer?: readonly ArrayBuffer[]): void {
    this.#batch.push(message);
    if (transfer !== undefined) for (const b of transfer) this.#transfer.push(b);
    if (this.#scheduled) return;
    this.#scheduled = true;
    setImmediate(this.#flush);
  }

  /**
   * How many batches have gone so far: a message added while this is unchanged has not been sent
   * yet (a sender may still update it in place, to say "n more" in one message instead of n).
   */
  get sent(): number {
    return this.#sent;
  }

  readonly #flush = (): void => {
    this.#scheduled = false;
    this.#sent += 1;
    const batch = this.#batch;
    const transfer = this.#transfer;
    this.#batch = [];
    this.#transfer = [];
    this.#send(batch, transfer);
  };
}
