/**
 * `ModelStreamInfer`: a bidirectional stream of requests and `ModelStreamInferResponse`s.
 *
 * Contract, as in Triton's stream_infer_handler.cc:
 * - Requests for non-decoupled models get exactly one response each, written in the order the
 *   requests arrived on this stream (a slow request holds back later ones).
 * - Requests for decoupled models get every result as the engine produces it, interleaved with
 *   the ordered responses; an empty final response only when the request set
 *   `triton_enable_empty_final_response`.
 * - Every response carries `triton_final_response`. Per-request errors become `error_message`
 *   responses and never end the stream. A request refused before it reached the engine echoes
 *   only its id; an engine failure also echoes model name/version and the final flag.
 * - The stream ends with OK once the client has half-closed and every request is answered. A
 *   client cancel aborts every request still in the engine and nothing more is written.
 *
 * Backpressure (HTTP/2 flow control end to end): the stream reads a request only while fewer than
 * `maxStreamInflight` of its requests are unanswered and grpc-js's write buffer is not full.
 * Otherwise it stops reading; the client's further requests wait in its own send buffer and in
 * flow control (they are not refused: Triton queues every request of a stream), and reading
 * resumes once an answer is delivered or the buffer drains. So a client that never reads holds at
 * most the answers of the requests it had in flight when the buffer filled.
 *
 * Large messages arrive undecoded and are decoded on the codec thread (infer-message.ts); reading
 * pauses while one is decoding, so requests still start (lookup, place in the response order,
 * submit) one by one in arrival order, and a decoding one counts against the in-flight cap. A
 * message protobuf cannot parse ends the stream with grpc-js's own status, as an inline one does.
 *
 * An engine that may hold requests (`waitForModel`: a router whose model is scaled to zero) is
 * waited on before each request's lookup, in the same one-by-one order: a held request pauses
 * reading like a decoding one, and its refusal (no worker in time) is answered in order like a
 * failed lookup. A client cancel stops the wait.
 *
 * Closing (`StreamSessions.drain`, the door's close): a stream reads no more requests, answers the
 * ones it has, then ends with UNAVAILABLE "the server is shutting down" (with OK if the client had
 * half-closed), at once when it has none; the door waits for every stream to end.
 */
import { type handleBidiStreamingCall, type Metadata, status } from '@grpc/grpc-js';
import { Cancellation, toSwitchyardError } from '@switchyard/common';
import type { InferResult } from '@switchyard/engine';
import {
  emptyFinalStreamResponse,
  streamInferError,
  streamInferResponse,
  type GrpcModelStreamInferResponse,
} from '@switchyard/kserve';
import type { ModelConfig } from '@switchyard/model-config';
import type { GrpcContext } from './grpc-context.js';
import { GrpcStatusError } from './grpc-status.js';
import { encodeInferResponse, isDecoupled, lookupModel, prepareInfer, type PreparedInfer } from './infer-request.js';
import { markCompressed, startCompressedResponses, type CallCompression } from './response-compression.js';
import { EncodedInferMessage, inlineInferMessage, readInferMessage, type InferMessage, type ReceivedInferMessage } from './infer-message.js';
import { traceParentOf } from './grpc-trace.js';
import { InFlight } from './in-flight.js';

/** What a closing stream ends with when its client had not half-closed. */
export const SHUTTING_DOWN = 'the server is shutting down';

/** A door's open streams: at close, each drains, and the door waits for none to be left. */
export class StreamSessions {
  readonly #open = new Set<StreamSession>();
  readonly #count = new InFlight();
  #draining = false;

  /** Streams open now. */
  get size(): number {
    return this.#open.size;
  }

  add(session: StreamSession): void {
    this.#open.add(session);
    this.#count.begin();
    // opened as the door closes: drained like the others
    if (this.#draining) session.drain();
  }

  remove(session: StreamSession): void {
    if (this.#open.delete(session)) this.#count.end();
  }

  /** Every stream, and every one opened from now on, reads no more and ends once its requests are answered. */
  drain(): void {
    this.#draining = true;
    for (const s of [...this.#open]) s.drain();
  }

  /** Resolves once no stream is open. */
  whenEmpty(): Promise<void> {
    return this.#count.whenIdle();
  }
}

/**
 * What a stream session uses of its call: grpc-js's ServerDuplexStream, or a front thread's stream
 * on the main thread (front-threads/thread-stream.ts).
 */
export interface StreamCall {
  readonly metadata: Metadata;
  readonly cancelled: boolean;
  on(event: 'data', listener: (msg: ReceivedInferMessage) => void): unknown;
  on(event: 'end' | 'cancelled', listener: () => void): unknown;
  on(event: 'error', listener: (e: unknown) => void): unknown;
  once(event: 'drain', listener: () => void): unknown;
  emit(event: 'error', e: unknown): boolean;
  pause(): unknown;
  resume(): unknown;
  write(message: GrpcModelStreamInferResponse): boolean;
  end(): unknown;
  sendMetadata(metadata: Metadata): void;
}

/** The place of one non-decoupled request in the response order; filled when its answer is known. */
interface Slot {
  response?: GrpcModelStreamInferResponse;
}

export function modelStreamInferHandler(ctx: GrpcContext): handleBidiStreamingCall<ReceivedInferMessage, GrpcModelStreamInferResponse> {
  return (call) => serveModelStream(ctx, call);
}

/** Serve one ModelStreamInfer call until it ends. */
export function serveModelStream(ctx: GrpcContext, call: StreamCall): void {
  new StreamSession(ctx, call).start();
}

class StreamSession {
  readonly #ctx: GrpcContext;
  readonly #call: StreamCall;
  /** Non-decoupled requests awaiting their turn to be written, oldest first. */
  readonly #ordered: Slot[] = [];
  /** Requests whose final answer has not been delivered yet. */
  #open = 0;
  readonly #controllers = new Set<Cancellation>();
  #readsDone = false;
  #closed = false;
  /** grpc-js's write buffer is full: wait for 'drain' before reading more requests. */
  #congested = false;
  /** Reading is paused (in-flight cap reached or congested). */
  #paused = false;
  /** The last request still waiting for its decoding or its turn; undefined when none waits. */
  #tail: Promise<void> | undefined;
  /** Aborted when the client cancels: stops a wait in `engine.waitForModel`. */
  readonly #waits = new AbortController();
  /** `--grpc-infer-response-compression-level`: how this stream's responses are sent; undefined = uncompressed. */
  #compression: CallCompression | undefined;
  /** The door is closing: read no more, end once every request is answered. */
  #draining = false;

  constructor(ctx: GrpcContext, call: StreamCall) {
    this.#ctx = ctx;
    this.#call = call;
  }

  start(): void {
    this.#compression = startCompressedResponses(this.#ctx.compression, this.#call);
    this.#call.on('data', (msg: ReceivedInferMessage) => {
      if (this.#closed) return;
      this.#open += 1;
      if (this.#tail === undefined && !(msg instanceof EncodedInferMessage)) {
        const held = this.#ctx.engine.waitForModel?.(msg.model_name, this.#waits.signal);
        if (held === undefined) this.#onRequest(inlineInferMessage(msg));
        else this.#later(msg, held);
      } else this.#later(msg);
      this.#regulate();
    });
    this.#call.on('end', () => {
      this.#readsDone = true;
      this.#maybeEnd();
    });
    this.#call.on('cancelled', () => this.#cancel());
    this.#call.on('error', (e: unknown) => {
      this.#ctx.logger.debug({ err: e }, 'ModelStreamInfer stream error');
      this.#cancel();
    });
    this.#ctx.streams.add(this);
  }

  /** The door is closing: read no more requests; end once those read are answered. */
  drain(): void {
    if (this.#draining) return;
    this.#draining = true;
    this.#regulate();
  }

  /**
   * Decode `received` (on the codec thread when large) now; start it once every earlier request has
   * started and the engine no longer holds it (`held`: the wait already begun for an inline one).
   */
  #later(received: ReceivedInferMessage, held?: Promise<void>): void {
    const decoding = readInferMessage(this.#ctx.codecThread, received).then(
      (msg) => ({ msg }),
      (error: unknown) => ({ error }),
    );
    // Settled into a refusal message (or none) at once: a hold that fails before this request's turn is not an unhandled rejection.
    const refusalOf = (wait: Promise<void>): Promise<string | undefined> =>
      wait.then(
        () => undefined,
        (e: unknown) => toSwitchyardError(e).message,
      );
    const heldRefusal = held === undefined ? undefined : refusalOf(held);
    const tail: Promise<void> = (this.#tail ?? Promise.resolve()).then(async () => {
      const got = await decoding;
      let refused: string | undefined;
      if (heldRefusal !== undefined) refused = await heldRefusal;
      else if ('msg' in got && !this.#closed) {
        const wait = this.#ctx.engine.waitForModel?.(got.msg.header.model_name, this.#waits.signal);
        if (wait !== undefined) refused = await refusalOf(wait);
      }
      if (this.#tail === tail) this.#tail = undefined;
      if (this.#closed) return;
      if (refused !== undefined) this.#deliver(this.#enqueue(), streamInferError(refused, { id: 'msg' in got ? (got.msg.header.id ?? '') : '' }), true);
      else if ('msg' in got) this.#onRequest(got.msg);
      else if (got.error instanceof GrpcStatusError) this.#call.emit('error', got.error);
      // the thread failed: answered in order, like a request whose model cannot be looked up
      else this.#deliver(this.#enqueue(), streamInferError(toSwitchyardError(got.error).message, { id: '' }), true);
      this.#regulate();
    });
    this.#tail = tail;
  }

  /** Start one request; `#open` already counts it. */
  #onRequest(message: InferMessage): void {
    if (this.#closed) return;
    const msg = message.header;
    const id = msg.id ?? '';
    // Triton decides the transaction policy first; a request whose model cannot be looked up
    // is answered in order like any non-decoupled one.
    let config: ModelConfig;
    try {
      config = lookupModel(this.#ctx, msg);
    } catch (e) {
      this.#deliver(this.#enqueue(), streamInferError(toSwitchyardError(e).message, { id }), true);
      return;
    }
    const decoupled = isDecoupled(config);
    const slot = decoupled ? undefined : this.#enqueue();
    let prepared: PreparedInfer;
    try {
      prepared = prepareInfer(this.#ctx, message, config, this.#call.metadata);
    } catch (e) {
      this.#deliver(slot, streamInferError(toSwitchyardError(e).message, { id }), true);
      return;
    }
    const controller = new Cancellation();
    this.#controllers.add(controller);
    // Traced requests: the stream's metadata carries the client's context for all of its requests.
    // A message is read whole before it gets here, so the wait/read stamps are when its turn came.
    const trace = this.#ctx.tracer?.sample(msg.model_name, traceParentOf(this.#call.metadata));
    if (trace !== undefined) {
      const readNs = process.hrtime.bigint();
      trace.capture('GRPC_WAITREAD_START', readNs);
      trace.capture('GRPC_WAITREAD_END', readNs);
    }
    const onResult = (result: InferResult): void => {
      if (result.final) this.#controllers.delete(controller);
      trace?.capture('INFER_RESPONSE_COMPLETE', process.hrtime.bigint());
      const message = this.#render(prepared, decoupled, result);
      // The last result has written its outputs: the request's regions are free to go.
      if (result.final) prepared.releaseSharedMemory();
      if (trace !== undefined && message !== undefined) trace.capture('GRPC_SEND_START', process.hrtime.bigint());
      this.#deliver(slot, message, result.final);
      if (trace !== undefined && message !== undefined) trace.capture('GRPC_SEND_END', process.hrtime.bigint());
      if (result.final) trace?.end();
    };
    try {
      this.#ctx.engine.submit(prepared.request, onResult, trace !== undefined ? { signal: controller.signal, trace: trace.root } : { signal: controller.signal });
    } catch (e) {
      // The engine reports failures through onResult; a throw is a bug, answered like a failure.
      onResult({ error: toSwitchyardError(e), final: true });
    }
  }

  /** The message for one engine result, or undefined when there is nothing to send. */
  #render(prepared: PreparedInfer, decoupled: boolean, result: InferResult): GrpcModelStreamInferResponse | undefined {
    const failed = (e: unknown): GrpcModelStreamInferResponse =>
      streamInferError(toSwitchyardError(e).message, { ...prepared.echo, final: result.final });
    if (result.error !== undefined) return failed(result.error);
    if (result.response !== undefined) {
      try {
        return streamInferResponse(encodeInferResponse(this.#ctx, prepared, result.response), result.final);
      } catch (e) {
        return failed(e);
      }
    }
    if (!result.final) return undefined;
    if (decoupled) return prepared.enableEmptyFinalResponse ? emptyFinalStreamResponse(prepared.echo) : undefined;
    // A one-to-one model must answer; never leave its slot (and every later one) waiting.
    return failed(new Error('expected a single response, got 0'));
  }

  #enqueue(): Slot {
    const slot: Slot = {};
    this.#ordered.push(slot);
    return slot;
  }

  /** Route a message: into its slot (ordered) or straight out (decoupled); `final` closes the request. */
  #deliver(slot: Slot | undefined, message: GrpcModelStreamInferResponse | undefined, final: boolean): void {
    if (slot !== undefined) {
      if (message !== undefined) slot.response = message;
      this.#flush();
    } else if (message !== undefined) {
      this.#write(message);
    }
    if (final) {
      this.#open -= 1;
      this.#regulate();
      this.#maybeEnd();
    }
  }

  /**
   * Read requests only while under the in-flight cap, the write buffer has room and no request
   * is being decoded (the door's one codec thread decodes one at a time anyway; reading on would
   * only take in requests before congestion can show).
   */
  #regulate(): void {
    if (this.#closed) return;
    if (this.#draining && this.#open === 0 && this.#tail === undefined && this.#ordered.length === 0) {
      if (this.#readsDone) this.#maybeEnd();
      else this.#shutDown();
      return;
    }
    const hold = this.#draining || this.#congested || this.#tail !== undefined || this.#open >= this.#ctx.limits.maxStreamInflight;
    if (hold && !this.#paused) {
      this.#paused = true;
      this.#call.pause();
    } else if (!hold && this.#paused) {
      this.#paused = false;
      this.#call.resume();
    }
  }

  #flush(): void {
    while (this.#ordered.length > 0) {
      const head = this.#ordered[0];
      if (head?.response === undefined) return;
      this.#ordered.shift();
      this.#write(head.response);
    }
  }

  #write(message: GrpcModelStreamInferResponse): void {
    if (this.#closed || this.#call.cancelled) return;
    // false: the buffer is full (the client reads slower than we answer); stop taking requests
    // until it drains. What is already in flight still writes.
    if (!this.#call.write(markCompressed(message, this.#compression)) && !this.#congested) {
      this.#congested = true;
      this.#call.once('drain', () => {
        this.#congested = false;
        this.#regulate();
      });
      this.#regulate();
    }
  }

  #maybeEnd(): void {
    if (this.#closed || !this.#readsDone || this.#open > 0 || this.#ordered.length > 0) return;
    this.#closed = true;
    this.#ctx.streams.remove(this);
    this.#call.end();
  }

  /** Closing, nothing in flight, the client still sending: end with UNAVAILABLE (it may go elsewhere). */
  #shutDown(): void {
    this.#closed = true;
    this.#ctx.streams.remove(this);
    this.#call.emit('error', new GrpcStatusError(status.UNAVAILABLE, SHUTTING_DOWN));
  }

  #cancel(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#ctx.streams.remove(this);
    this.#waits.abort();
    for (const c of this.#controllers) c.abort();
    this.#controllers.clear();
  }
}
