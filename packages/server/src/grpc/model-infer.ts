/**
 * `ModelInfer`: one request, one response. Decoupled models are refused (they answer only over
 * ModelStreamInfer). A client cancel or deadline aborts the request through the engine's signal.
 */
import type { handleUnaryCall } from '@grpc/grpc-js';
import { Cancellation, unsupported } from '@switchyard/common';
import type { GrpcModelInferResponse } from '@switchyard/kserve';
import { unary, type GrpcContext } from './grpc-context.js';
import { encodeInferResponse, isDecoupled, lookupModel, prepareInfer } from './infer-request.js';
import { EncodedInferMessage, inlineInferMessage, readInferMessage, type ReceivedInferMessage } from './infer-message.js';
import { waitForModel } from '../wait-for-model.js';
import type { RequestTrace } from '../trace/request-trace.js';
import { traceParentOf } from './grpc-trace.js';
import { compressResponse, startCompressedResponses } from './response-compression.js';

export const DECOUPLED_MODEL_INFER_MESSAGE = "ModelInfer RPC doesn't support models with decoupled transaction policy";

export function modelInferHandler(ctx: GrpcContext): handleUnaryCall<ReceivedInferMessage, GrpcModelInferResponse> {
  return unary(ctx, async (received: ReceivedInferMessage, call) => {
    const readStartNs = process.hrtime.bigint();
    let trace: RequestTrace | undefined;
    let answered = false;
    try {
      // large messages are decoded on the codec thread (infer-message.ts); a small one is here already
      const msg = received instanceof EncodedInferMessage ? await readInferMessage(ctx.codecThread, received) : inlineInferMessage(received);
      trace = ctx.tracer?.sample(msg.header.model_name, traceParentOf(call.metadata));
      trace?.capture('GRPC_WAITREAD_START', readStartNs);
      trace?.capture('GRPC_WAITREAD_END', process.hrtime.bigint());
      // awaited only for an engine that may hold requests (a router): each await is a turn of the loop
      if (ctx.engine.waitForModel !== undefined) await waitForModel(ctx.engine, msg.header.model_name, call, 'cancelled');
      const config = lookupModel(ctx, msg.header);
      if (isDecoupled(config)) throw unsupported(DECOUPLED_MODEL_INFER_MESSAGE);
      const prepared = prepareInfer(ctx, msg, config, call.metadata);
      const controller = new Cancellation();
      const abort = (): void => controller.abort();
      call.on('cancelled', abort);
      if (call.cancelled) abort();
      try {
        const response = await ctx.engine.infer(prepared.request, trace !== undefined ? { signal: controller.signal, trace: trace.root } : { signal: controller.signal });
        trace?.capture('INFER_RESPONSE_COMPLETE', process.hrtime.bigint());
        const encoded = encodeInferResponse(ctx, prepared, response);
        // compressed on libuv's thread pool, not the event loop
        const compression = startCompressedResponses(ctx.compression, call);
        const sent = compression === undefined ? encoded : await compressResponse(encoded, compression, ctx.serializeInferResponse);
        trace?.capture('GRPC_SEND_START', process.hrtime.bigint());
        answered = true;
        return sent;
      } finally {
        call.removeListener('cancelled', abort);
        prepared.releaseSharedMemory();
      }
    } finally {
      // grpc-js takes the response when this promise settles; by the next turn it is handed over.
      const t = trace;
      if (t !== undefined) {
        setImmediate(() => {
          if (answered) t.capture('GRPC_SEND_END', process.hrtime.bigint());
          t.end();
        });
      }
    }
  });
}
