/**
 * Steps shared by ModelInfer and ModelStreamInfer, in Triton's order: parse the version string,
 * look the model up (for its transaction policy), decode the request, resolve shared-memory
 * inputs and validate shared-memory outputs; after the engine answers, write shared-memory
 * outputs, apply classification and encode the response.
 */
import type { Metadata } from '@grpc/grpc-js';
import type { GrpcModelInferResponse, InferRequest, InferResponse } from '@switchyard/kserve';
import { forwardHeaders } from '../header-forward.js';
import { classificationCounts, encodeModelInferResponse, parseModelVersion } from '@switchyard/kserve';
import type { ModelConfig } from '@switchyard/model-config';
import type { GrpcInferHeader } from '../codec-thread.js';
import type { GrpcContext } from './grpc-context.js';
import type { InferMessage } from './infer-message.js';
import { useSharedMemory, writeSharedMemoryOutputs, type SharedMemoryTarget } from '../shared-memory-io.js';

/** A call's metadata as name/value pairs; binary (`-bin`) values are not text and are left out. */
export function* metadataPairs(metadata: Metadata): Iterable<readonly [string, string]> {
  for (const [name, values] of Object.entries(metadata.getMap())) {
    if (typeof values === 'string') yield [name, values];
  }
}

/**
 * The configuration of the requested model version. Throws invalid_argument for a malformed
 * version string and the engine's lookup errors (unknown model, version not ready, ...).
 */
export function lookupModel(ctx: GrpcContext, msg: GrpcInferHeader): ModelConfig {
  return ctx.engine.modelConfig(msg.model_name, parseModelVersion(msg.model_version));
}

export function isDecoupled(config: ModelConfig): boolean {
  return config.model_transaction_policy?.decoupled === true;
}

export interface PreparedInfer {
  /** Ready for the engine: shared-memory inputs already read. */
  request: InferRequest;
  enableEmptyFinalResponse: boolean;
  /** Outputs to write to client shared memory instead of the response. */
  outputTargets: Map<string, SharedMemoryTarget>;
  /** Ends the request's hold on its shared memory regions: called once it is over (idempotent). */
  releaseSharedMemory(): void;
  /** Outputs to replace by their top-k classification. */
  classification: Map<string, number>;
  /** The model batches: classification keeps the batch dimension. */
  batching: boolean;
  /** The request's id and model as requested (version string verbatim), echoed by stream errors. */
  echo: { id: string; model: { name: string; version: string } };
}

/**
 * Decode and resolve a request for the model `config` describes; throws SwitchyardErrors with
 * Triton's messages. A prepared request holds its shared memory regions until the caller calls
 * `releaseSharedMemory` (a throw here holds nothing).
 */
export function prepareInfer(ctx: GrpcContext, message: InferMessage, config: ModelConfig, metadata: Metadata): PreparedInfer {
  const msg = message.header;
  const decoded = message.decode();
  const shm = useSharedMemory(ctx.shm, decoded.request);
  const request = shm.request;
  forwardHeaders(ctx.headerForward, metadataPairs(metadata), request.parameters);
  return {
    request,
    enableEmptyFinalResponse: decoded.enableEmptyFinalResponse,
    outputTargets: shm.targets,
    releaseSharedMemory: shm.release,
    classification: classificationCounts(request),
    batching: config.max_batch_size > 0,
    echo: { id: request.id, model: { name: msg.model_name, version: msg.model_version ?? '' } },
  };
}

/** Write shared-memory outputs, then encode the response without their bytes. */
export function encodeInferResponse(ctx: GrpcContext, prepared: PreparedInfer, response: InferResponse): GrpcModelInferResponse {
  const omitData = writeSharedMemoryOutputs(ctx.shm, prepared.outputTargets, response);
  // Class labels come from the version that answered, and only when some output is classified.
  const labels = prepared.classification.size > 0 ? ctx.engine.classificationLabels?.(response.modelName, Number(response.modelVersion)) : undefined;
  return encodeModelInferResponse(response, { omitData, classification: prepared.classification, batching: prepared.batching, labels });
}
