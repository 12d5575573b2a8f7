/**
 * BLS (Triton's "business logic scripting") for JavaScript models: a model thread asks for an
 * inference on another model of the same server; the main thread runs it through the engine
 * (`submit`, so the target's own scheduler, statistics and errors apply) and posts every result
 * back to the thread.
 *
 * Errors are values, as in Triton's Python BLS: a lookup failure arrives as an error response
 * carrying the engine's own message (`Request for unknown model: 'x' is not found`). A
 * one-response call (`infer`) to a decoupled model is refused with Triton's wording; the
 * streaming form (`inferStream`) takes any model.
 */
import { toSwitchyardError, unavailable, unsupported } from '@switchyard/common';
import type { ModelConfig } from '@switchyard/model-config';
import { blsRequestFromWire, errorToWire, inferResponseToWire, type ToThread, type WireBlsRequest } from './javascript-protocol.js';
import type { InferResult, InferenceEngine } from '../types.js';

/** The part of the engine BLS needs. */
export type BlsPort = Pick<InferenceEngine, 'submit'> & { modelConfig(name: string, version?: number): ModelConfig };

export interface BlsCall {
  callId: number;
  stream: boolean;
  request: WireBlsRequest;
}

/**
 * Run one call; `reply` posts to the thread (with the buffers to transfer). Returns an abort
 * function for when the calling thread goes away. Never throws.
 */
export function runBlsCall(port: BlsPort | undefined, call: BlsCall, reply: (msg: ToThread, transfer: ArrayBuffer[]) => void): () => void {
  const { callId } = call;
  const failNow = (e: unknown): (() => void) => {
    reply({ type: 'bls-result', callId, error: errorToWire(toSwitchyardError(e)), final: true }, []);
    return () => undefined;
  };
  if (port === undefined) return failNow(unavailable('BLS is not available: this JavaScript backend has no engine to call'));
  let request;
  try {
    request = blsRequestFromWire(call.request);
    if (!call.stream) {
      const config = port.modelConfig(request.modelName, request.modelVersion);
      if (config.model_transaction_policy?.decoupled === true) {
        throw unsupported(
          `Model ${request.modelName} is using the decoupled. The current BLS request call doesn't support models using the decoupled transaction policy. Please use 'inferStream' for decoupled models.`,
        );
      }
    }
  } catch (e) {
    return failNow(e);
  }
  const controller = new AbortController();
  port.submit(
    request,
    (result: InferResult) => {
      const transfer: ArrayBuffer[] = [];
      const msg: ToThread = { type: 'bls-result', callId, final: result.final };
      if (result.error !== undefined) msg.error = errorToWire(result.error);
      else if (result.response !== undefined) msg.response = inferResponseToWire(result.response, transfer);
      reply(msg, transfer);
    },
    { signal: controller.signal },
  );
  return () => controller.abort();
}
