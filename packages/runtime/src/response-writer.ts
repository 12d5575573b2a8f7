/**
 * `writeResponse`: the worker side of the response-stream protocol, shared by every RequestPlane. It
 * runs one request's handler and sends its frames: `data` with seq 0.., then exactly one `final` or
 * `error` — unless the request was aborted (cancelled by the caller or past its deadline), when nothing
 * more is sent, except a `cancelled` error frame when the endpoint was stopped without draining.
 * The envelope's deadline aborts `abort` when it passes. Never rejects.
 */
import { SwitchyardError, deadlineExceeded, toSwitchyardError } from '@switchyard/common';
import type { RequestEnvelope, ResponseFrame } from './protocols.js';
import type { EndpointHandler } from './request-plane.js';

export interface ResponseWriter {
  readonly handler: EndpointHandler;
  readonly envelope: RequestEnvelope;
  /** Aborted by a cancel message, a stop without drain, or the deadline. */
  readonly abort: AbortController;
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
    for await (const payload of handler(envelope.payload, ctx)) {
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
