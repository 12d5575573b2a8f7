/**
 * Both sides of the response-stream protocol, shared by every RequestPlane.
 *
 * `writeResponse`: the worker side. It
 * runs one request's handler and sends its frames: `data` with seq 0.., then exactly one `final` or
 * `error` — unless the request was aborted (cancelled by the caller or past its deadline), when nothing
 * more is sent, except a `cancelled` error frame when the endpoint was stopped without draining.
 * The envelope's deadline aborts `abort` when it passes. Never rejects.
 *
 * When the request announced `finalData` (protocols.ts), a stream that ends right after its last data
 * frame ends IN that frame (`final: true`), so a unary response is one message instead of two. The
 * writer cannot know a payload is the last before the handler says so: it holds each data frame while
 * it asks the handler for the next one, until the microtasks running now have settled (one
 * `process.nextTick`, shared by every stream, from a microtask: it runs once the queue has drained).
 * A handler that ends in that window — a unary one: its result and its end arrive together — has its
 * last frame marked final; otherwise the frame goes out unmarked in the same event-loop turn as
 * before (a token stream's frames are not delayed to a later turn), and a `final` frame ends the
 * stream later. A held frame is always sent, also when the request is aborted or the handler throws
 * meanwhile: it was produced before, as if it had left at once.
 */
import { Cancellation, SwitchyardError, cancelled, deadlineExceeded, toSwitchyardError, unavailable } from '@switchyard/common';
import type { EndpointAddress, InstanceAddress } from './addressing.js';
import type { Payload, RequestEnvelope, ResponseFrame } from './protocols.js';
import { type EndpointHandler, StreamIncompleteError } from './request-plane.js';

export interface ResponseWriter {
  readonly handler: EndpointHandler;
  readonly envelope: RequestEnvelope;
  /** Aborted by a cancel message, a stop without drain, or the deadline. */
  readonly abort: Cancellation;
  /** Delivers one frame to the caller (best effort). */
  readonly send: (frame: ResponseFrame) => void;
  /** The serving endpoint was stopped (abort then means "stopped without drain"). */
  readonly stopped: () => boolean;
}

/** What `settled()` resolves with: the handler's next step was not ready when the microtasks drained. */
const LATER = Symbol('later');
let settling: Promise<typeof LATER> | undefined;

/**
 * Resolves once the microtask queue has drained. Called from a microtask (an `await`'s continuation),
 * a `process.nextTick` runs after the queue is empty, before the event loop moves on; every stream
 * that waits in the same drain shares one.
 */
function settled(): Promise<typeof LATER> {
  return (settling ??= new Promise((resolve) =>
    process.nextTick(() => {
      settling = undefined;
      resolve(LATER);
    }),
  ));
}

export async function writeResponse({ handler, envelope, abort, send, stopped }: ResponseWriter): Promise<void> {
  let seq = 0;
  const timer =
    envelope.deadline === null
      ? undefined
      : setTimeout(() => abort.abort(deadlineExceeded('request deadline passed')), Math.max(0, envelope.deadline - Date.now()));
  const finalData = envelope.finalData === true;
  // a payload received but not sent yet (finalData: while the handler's next step settles)
  let holding = false;
  let held: Payload = null;
  const sendHeld = (): void => {
    if (!holding) return;
    holding = false;
    send({ v: 1, type: 'data', seq: seq++, payload: held });
  };
  let it: AsyncIterator<Payload> | undefined;
  let done = false;
  try {
    const ctx = { requestId: envelope.requestId, signal: abort.signal, deadline: envelope.deadline };
    // (aborted before it started: superseded while it waited for an older attempt, or stopped)
    if (!abort.signal.aborted) it = handler(envelope.payload, ctx)[Symbol.asyncIterator]();
    let r: IteratorResult<Payload> = it === undefined ? { done: true, value: undefined } : await it.next();
    while (r.done !== true) {
      if (abort.signal.aborted) break;
      if (!finalData) {
        send({ v: 1, type: 'data', seq: seq++, payload: r.value });
        r = await it!.next();
        continue;
      }
      holding = true;
      held = r.value;
      const next = it!.next();
      const first = await Promise.race([next, settled()]);
      if (first !== LATER && first.done === true && !abort.signal.aborted) {
        done = true;
        holding = false;
        send({ v: 1, type: 'data', seq: seq++, payload: held, final: true });
        return;
      }
      sendHeld();
      r = first === LATER ? await next : first;
    }
    done = r.done === true;
    if (abort.signal.aborted) {
      // The caller is gone (cancel / deadline); an endpoint stopped without drain tells it why.
      const reason: unknown = abort.signal.reason;
      if (reason instanceof SwitchyardError && reason.code === 'cancelled' && stopped()) {
        send({ v: 1, type: 'error', seq: seq++, error: { code: 'cancelled', message: reason.message } });
      }
      return;
    }
    send({ v: 1, type: 'final', seq: seq++ });
  } catch (e) {
    done = true; // a handler that threw is finished
    sendHeld();
    if (abort.signal.aborted && !stopped()) return; // the caller is gone: nobody reads an error frame
    const err = toSwitchyardError(e);
    send({ v: 1, type: 'error', seq: seq++, error: { code: err.code, message: err.message } });
  } finally {
    clearTimeout(timer);
    // left early (aborted): let the handler run its own cleanup, as `for await`'s break does
    if (it !== undefined && !done) {
      try {
        await it.return?.();
      } catch {
        // the handler's cleanup failed: nobody is left to tell
      }
    }
  }
}

/**
 * `readFrame`: the caller side. Checks the frame that should carry sequence number `expected` (after
 * `received` data frames): a gap is StreamIncompleteError, an error frame throws its SwitchyardError,
 * `final` ends the stream (null), a data frame yields its payload — and `final: true` when it also
 * ends the stream (the caller yields the payload and stops: nothing follows it).
 */
export function readFrame(
  frame: ResponseFrame,
  expected: number,
  target: EndpointAddress | InstanceAddress,
  received: number,
): { readonly payload: Payload; readonly final: boolean } | null {
  if (frame.seq !== expected) {
    throw new StreamIncompleteError(target, received, unavailable(`frame ${expected} missing (got ${frame.seq})`));
  }
  if (frame.type === 'final') return null;
  if (frame.type === 'error') throw new SwitchyardError(frame.error.code, frame.error.message);
  return { payload: frame.payload, final: frame.final === true };
}

/** True when `frame`, the one expected next, ends its stream (`final`, `error`, or a data frame marked final). */
export function isTerminal(frame: ResponseFrame, expected: number): boolean {
  return frame.seq === expected && (frame.type !== 'data' || frame.final === true);
}

/**
 * The requests one served endpoint is running, by request id (the worker side of every RequestPlane).
 *
 * A request id is live at most once per endpoint: a router that migrates a stream back to the same
 * worker re-sends it under the same id (engines key their sequences by it). The newer attempt then
 * aborts the older one (`cancelled`) and starts once it has finished, so the engine never sees the id
 * twice. A cancel names the attempt it means (RequestEnvelope.attempt): the caller's cancel of an
 * attempt it gave up on can arrive after its next attempt started here (both held through a NATS
 * outage, say), and must not stop that one.
 */
export class RunningRequests {
  private readonly byId = new Map<string, { readonly abort: Cancellation; readonly attempt: string | undefined; done: Promise<void> }>();

  /**
   * Run `body` for attempt `attempt` of `requestId` with a fresh Cancellation (after any older
   * attempt of that id has ended). `body` must not reject.
   */
  start(requestId: string, attempt: string | undefined, body: (abort: Cancellation) => Promise<void>): void {
    const previous = this.byId.get(requestId);
    previous?.abort.abort(cancelled(`request ${requestId} superseded by a newer attempt`));
    const abort = new Cancellation();
    const entry = { abort, attempt, done: Promise.resolve() };
    this.byId.set(requestId, entry);
    entry.done = (async () => {
      if (previous !== undefined) await previous.done;
      try {
        await body(abort);
      } finally {
        if (this.byId.get(requestId) === entry) this.byId.delete(requestId);
      }
    })();
  }

  /**
   * Abort the running attempt of `requestId` if it is `attempt` (any attempt when undefined); unknown
   * ids and other attempts are ignored.
   */
  abort(requestId: string, reason: unknown, attempt?: string): void {
    const entry = this.byId.get(requestId);
    if (entry !== undefined && (attempt === undefined || entry.attempt === undefined || entry.attempt === attempt)) entry.abort.abort(reason);
  }

  abortAll(reason: unknown): void {
    for (const r of this.byId.values()) r.abort.abort(reason);
  }

  /** Resolves when every attempt running now (and any it waits for) has ended. */
  async settled(): Promise<void> {
    await Promise.all([...this.byId.values()].map((r) => r.done));
  }
}
