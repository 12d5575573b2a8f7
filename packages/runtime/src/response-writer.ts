/**
 * Both sides of the response-stream protocol, shared by every RequestPlane.
 *
 * `writeResponse`: the worker side. It
 * runs one request's handler and sends its frames: `data` with seq 0.., then exactly one `final` or
 * `error` — unless the request was aborted (cancelled by the caller or past its deadline), when nothing
 * more is sent, except a `cancelled` error frame when the endpoint was stopped without draining.
 * The envelope's deadline aborts `abort` when it passes. Never rejects.
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

export async function writeResponse({ handler, envelope, abort, send, stopped }: ResponseWriter): Promise<void> {
  let seq = 0;
  const timer =
    envelope.deadline === null
      ? undefined
      : setTimeout(() => abort.abort(deadlineExceeded('request deadline passed')), Math.max(0, envelope.deadline - Date.now()));
  try {
    const ctx = { requestId: envelope.requestId, signal: abort.signal, deadline: envelope.deadline };
    // (aborted before it started: superseded while it waited for an older attempt, or stopped)
    for await (const payload of abort.signal.aborted ? [] : handler(envelope.payload, ctx)) {
      if (abort.signal.aborted) break;
      send({ v: 1, type: 'data', seq: seq++, payload });
    }
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
    if (abort.signal.aborted && !stopped()) return; // the caller is gone: nobody reads an error frame
    const err = toSwitchyardError(e);
    send({ v: 1, type: 'error', seq: seq++, error: { code: err.code, message: err.message } });
  } finally {
    clearTimeout(timer);
  }
}

/**
 * `readFrame`: the caller side. Checks the frame that should carry sequence number `expected` (after
 * `received` data frames): a gap is StreamIncompleteError, an error frame throws its SwitchyardError,
 * `final` ends the stream (null), a data frame yields its payload.
 */
export function readFrame(
  frame: ResponseFrame,
  expected: number,
  target: EndpointAddress | InstanceAddress,
  received: number,
): { readonly payload: Payload } | null {
  if (frame.seq !== expected) {
    throw new StreamIncompleteError(target, received, unavailable(`frame ${expected} missing (got ${frame.seq})`));
  }
  if (frame.type === 'final') return null;
  if (frame.type === 'error') throw new SwitchyardError(frame.error.code, frame.error.message);
  return { payload: frame.payload };
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
