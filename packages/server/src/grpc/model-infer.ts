/**
 * `ModelInfer`: one request, one response. Decoupled models are refused (they answer only over
 * ModelStreamInfer). A client cancel or deadline aborts the request through the engine's signal.
 */
import type { handleUnaryCall } from '@grpc/grpc-js';
import { unsupported } from '@switchyard/common';
import type { GrpcModelInferResponse } from '@switchyard/kserve';
import { unary, type GrpcContext } from './grpc-context.js';
import { encodeInferResponse, isDecoupled, lookupModel, prepareInfer } from './infer-request.js';
import { readInferMessage, type ReceivedInferMessage } from './infer-message.js';
import { waitForModel } from '../wait-for-model.js';
import { compressResponse, startCompressedResponses } from './response-compression.js';

export const DECOUPLED_MODEL_INFER_MESSAGE = "ModelInfer RPC doesn't support models with decoupled transaction policy";

export function modelInferHandler(ctx: GrpcContext): handleUnaryCall<ReceivedInferMessage, GrpcModelInferResponse> {
  return unary(ctx, async (received: ReceivedInferMessage, call) => {
    // large messages are decoded on the codec thread (infer-message.ts)
    const msg = await readInferMessage(ctx.codecThread, received);
    await waitForModel(ctx.engine, msg.header.model_name, call, 'cancelled');
    const config = lookupModel(ctx, msg.header);
    if (isDecoupled(config)) throw unsupported(DECOUPLED_MODEL_INFER_MESSAGE);
    const prepared = prepareInfer(ctx, msg, config, call.metadata);
    const controller = new AbortController();
    const abort = (): void => controller.abort();
    call.once('cancelled', abort);
    if (call.cancelled) abort();
    try {
      const response = await ctx.engine.infer(prepared.request, { signal: controller.signal });
      const encoded = encodeInferResponse(ctx, prepared, response);
      // compressed on libuv's thread pool, not the event loop
      return await compressResponse(encoded, startCompressedResponses(ctx.compression, call), ctx.serializeInferResponse);
    } finally {
      call.removeListener('cancelled', abort);
    }
  });
}
