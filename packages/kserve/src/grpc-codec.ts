/**
 * The gRPC codec: `ModelInferRequest` plain objects → `InferRequest`, and `InferResponse` →
 * `ModelInferResponse` / `ModelStreamInferResponse`. Pure: no IO, no engine, no shared memory.
 *
 * Decoding follows Triton's gRPC front end (`server:src/grpc/infer_handler.{h,cc}`) rule for rule
 * and message for message:
 * - an input's bytes come from shared memory (parameters `shared_memory_region`, `_byte_size`,
 *   `_offset`), from typed `contents`, or from the next `raw_input_contents` entry, in that order
 *   of precedence; raw entries are consumed in input order only by inputs that use them;
 * - `contents` together with any `raw_input_contents` is an error;
 * - so is a `raw_input_contents` entry no input reads. Triton's reader stops at the last entry an
 *   input used and leaves the rest unread; here a count that does not match the inputs is refused
 *   (INVALID_ARGUMENT), since it means the client paired entries with inputs other than it thinks;
 * - shared-memory inputs come out with their shm parameters and empty `data`: the front door
 *   resolves them (see `InferTensor`).
 * - every input shape passes `checkInputShape` (no negative dimension, no element count or byte
 *   size past what a tensor can be here) before anything is sized from it.
 * Model lookups, shapes and byte sizes against the model config are the engine's business.
 */
import { invalidArgument } from '@switchyard/common';
import { contentsToBytes } from './grpc-contents.js';
import { classifyTensor } from './http-classification.js';
import type {
  GrpcInferParameter,
  GrpcInferRequestedOutputTensor,
  GrpcModelInferRequest,
  GrpcModelInferResponse,
  GrpcModelStreamInferResponse,
} from './grpc-messages.js';
import { FINAL_RESPONSE_PARAMETER, decodeRequestParameters, encodeParameters, parameterChoice, parameterValue, parseModelVersion } from './grpc-parameters.js';
import type { InferRequest, InferResponse, InferTensor, Parameters, RequestedOutput } from './protocols.js';
import { checkInputShape, dataTypeOf } from './tensor.js';

export interface DecodedGrpcInferRequest {
  request: InferRequest;
  /** `triton_enable_empty_final_response` was set: stream an empty final response for decoupled models. */
  enableEmptyFinalResponse: boolean;
}

const EMPTY = new Uint8Array(0);

/**
 * A plain `Uint8Array` view of the same bytes. grpc-js hands over `Buffer`s, whose `slice()` is a
 * view rather than a copy; downstream code that copies unaligned data with `slice()` needs the
 * standard semantics.
 */
function plainBytes(b: Uint8Array): Uint8Array {
  return Object.getPrototypeOf(b) === Uint8Array.prototype ? b : new Uint8Array(b.buffer, b.byteOffset, b.byteLength);
}

function toShape(shape: readonly (string | number)[] | undefined): number[] {
  return (shape ?? []).map((d) => Number(d));
}

interface SharedMemoryParams {
  region: string;
  offset: number;
  byteSize: number;
}

/** Triton's ParseSharedMemoryParams: region (string), offset and byte size (int64); byte size is required with a region. */
function sharedMemoryParams(tensor: string, params: Record<string, GrpcInferParameter> | undefined): SharedMemoryParams | undefined {
  const p = params ?? {};
  const region = p['shared_memory_region'];
  const has = region !== undefined;
  if (has && parameterChoice(region) !== 'string_param') {
    throw invalidArgument(`invalid value type for 'shared_memory_region' parameter for tensor '${tensor}', expected string_param.`);
  }
  const number = (key: 'shared_memory_offset' | 'shared_memory_byte_size'): number | undefined => {
    const v = p[key];
    if (v === undefined) return undefined;
    if (!has) throw invalidArgument(`'${key}' can not be specified without 'shared_memory_region' parameter for tensor '${tensor}'`);
    if (parameterChoice(v) !== 'int64_param') {
      throw invalidArgument(`invalid value type for '${key}' parameter for tensor '${tensor}', expected int64_param.`);
    }
    return Number(parameterValue(v));
  };
  const offset = number('shared_memory_offset') ?? 0;
  const byteSize = number('shared_memory_byte_size');
  if (!has) return undefined;
  if (byteSize === undefined) {
    throw invalidArgument(`'shared_memory_byte_size' must be specified along with 'shared_memory_region' parameter for tensor '${tensor}'`);
  }
  return { region: region.string_param ?? '', offset, byteSize };
}

function shmParameters(shm: SharedMemoryParams): Parameters {
  return { shared_memory_region: shm.region, shared_memory_byte_size: shm.byteSize, shared_memory_offset: shm.offset };
}

/** Triton adds every input, then every requested output, refusing a name seen twice. */
function assertUniqueNames(msg: GrpcModelInferRequest): void {
  const inputs = new Set<string>();
  for (const io of msg.inputs ?? []) {
    if (inputs.has(io.name)) throw invalidArgument(`input '${io.name}' already exists in request`);
    inputs.add(io.name);
  }
  const outputs = new Set<string>();
  for (const o of msg.outputs ?? []) {
    if (outputs.has(o.name)) throw invalidArgument(`output '${o.name}' already exists in request`);
    outputs.add(o.name);
  }
}

/** Requested outputs with their shared-memory and classification parameters validated as Triton does. */
function decodeOutputs(outputs: readonly GrpcInferRequestedOutputTensor[]): RequestedOutput[] {
  return outputs.map((o) => {
    const parameters: Parameters = {};
    const shm = sharedMemoryParams(o.name, o.parameters);
    const cls = o.parameters?.['classification'];
    if (cls !== undefined) {
      if (parameterChoice(cls) !== 'int64_param') {
        throw invalidArgument("invalid value type for 'classification' parameter, expected int64_param");
      }
      const count = Number(parameterValue(cls));
      if (count <= 0) throw invalidArgument("invalid value for 'classification' parameter, expected >= 0");
      if (shm !== undefined) throw invalidArgument("output can't set both 'shared_memory_region' and 'classification'");
      parameters['classification'] = count;
    }
    if (shm !== undefined) Object.assign(parameters, shmParameters(shm));
    return { name: o.name, parameters };
  });
}

/**
 * Decode a `ModelInferRequest`. `modelVersion` is parsed with Triton's version-string rules;
 * callers that must check the version before anything else (ModelInfer does) can call
 * `parseModelVersion` first. Throws `SwitchyardError` (invalid_argument) with Triton's messages.
 */
export function decodeModelInferRequest(msg: GrpcModelInferRequest): DecodedGrpcInferRequest {
  const model = msg.model_name;
  const modelVersion = parseModelVersion(msg.model_version);
  const { parameters, enableEmptyFinalResponse } = decodeRequestParameters(msg.parameters);
  assertUniqueNames(msg);
  const raw = msg.raw_input_contents ?? [];
  const inputs: InferTensor[] = [];
  let rawIndex = 0;
  for (const io of msg.inputs ?? []) {
    const datatype = dataTypeOf(io.datatype);
    if (datatype === undefined) {
      throw invalidArgument(`unexpected datatype '${io.datatype}' for input tensor '${io.name}' for model '${model}'`);
    }
    const shape = toShape(io.shape);
    checkInputShape({ name: io.name, datatype, shape }, { requestId: msg.id ?? '', model });
    const hasContents = io.contents !== undefined && io.contents !== null;
    const shm = sharedMemoryParams(io.name, io.parameters);
    if (shm !== undefined) {
      if (hasContents) {
        throw invalidArgument(`unexpected 'content' provided when using shared memory for input tensor '${io.name}' for model '${model}'`);
      }
      inputs.push({ name: io.name, datatype, shape, data: EMPTY, parameters: shmParameters(shm) });
      continue;
    }
    let data: Uint8Array;
    if (hasContents && raw.length > 0) {
      throw invalidArgument(`contents field must not be specified when using raw_input_contents for '${io.name}' for model '${model}'`);
    } else if (io.contents !== undefined && io.contents !== null) {
      data = contentsToBytes(io.name, model, datatype, io.contents);
    } else if (rawIndex < raw.length) {
      data = plainBytes(raw[rawIndex++] as Uint8Array);
    } else {
      throw invalidArgument(`unable to find data for input tensor '${io.name}' for model '${model}' in request.`);
    }
    inputs.push({ name: io.name, datatype, shape, data, parameters: {} });
  }
  if (rawIndex < raw.length) {
    throw invalidArgument(
      `expected ${rawIndex} raw_input_contents for model '${model}' (one per input without 'contents' or shared memory), got ${raw.length}`,
    );
  }
  const request: InferRequest = {
    id: msg.id ?? '',
    modelName: model,
    modelVersion,
    parameters,
    inputs,
    outputs: decodeOutputs(msg.outputs ?? []),
  };
  return { request, enableEmptyFinalResponse };
}

export interface EncodeResponseOptions {
  /** Outputs written to shared memory: listed with datatype and shape, but with empty raw contents. */
  omitData?: ReadonlySet<string>;
  /** Output name → k for outputs requested with `classification` (see `classificationCounts`). */
  classification?: ReadonlyMap<string, number>;
  /** The model batches (max_batch_size > 0): classification then keeps the batch dimension. */
  batching?: boolean;
  /** Output name → class labels of the version that answered, appended to classification results. */
  labels?: ReadonlyMap<string, readonly string[]>;
}

/** The `classification` counts of a decoded request's outputs, for `encodeModelInferResponse`. */
export function classificationCounts(request: InferRequest): Map<string, number> {
  const counts = new Map<string, number>();
  for (const o of request.outputs) {
    const k = o.parameters['classification'];
    if (typeof k === 'number' && k > 0) counts.set(o.name, k);
  }
  return counts;
}

/**
 * Encode an `InferResponse`. Every output gets exactly one `raw_output_contents` entry at the same
 * index (empty for shared-memory outputs); `contents` is never used, as in Triton. Outputs
 * requested with `classification` are replaced by their top-k BYTES strings with their labels,
 * as the HTTP codec does; classifying an output of a type without values (BYTES, BOOL, FP16, BF16)
 * throws invalid_argument, Triton's `class result not available ...`.
 */
export function encodeModelInferResponse(response: InferResponse, options: EncodeResponseOptions = {}): GrpcModelInferResponse {
  const omit = options.omitData;
  const outputs = response.outputs.map((t) => {
    const k = options.classification?.get(t.name) ?? 0;
    return k > 0 ? classifyTensor(t, k, options.batching === true, options.labels?.get(t.name)) : t;
  });
  return {
    model_name: response.modelName,
    model_version: response.modelVersion,
    id: response.id,
    parameters: encodeParameters(response.parameters),
    outputs: outputs.map((o) => ({ name: o.name, datatype: o.datatype, shape: o.shape, parameters: {} })),
    raw_output_contents: outputs.map((o) => (omit?.has(o.name) === true ? EMPTY : o.data)),
  };
}

/** A streamed response: `triton_final_response` tells the client whether more will follow for this request. */
export function streamInferResponse(response: GrpcModelInferResponse, final: boolean): GrpcModelStreamInferResponse {
  response.parameters[FINAL_RESPONSE_PARAMETER] = { bool_param: final };
  return { error_message: '', infer_response: response };
}

/** What a streamed error or empty final response echoes from its request. */
export interface StreamEcho {
  id: string;
  /** Model name and the version string as requested; set when the request reached the engine. */
  model?: { name: string; version: string };
  /** Set `triton_final_response` to this; omitted for requests refused before they were issued. */
  final?: boolean;
}

function echoResponse(echo: StreamEcho): GrpcModelInferResponse {
  const parameters: Record<string, GrpcInferParameter> = {};
  if (echo.final !== undefined) parameters[FINAL_RESPONSE_PARAMETER] = { bool_param: echo.final };
  return {
    model_name: echo.model?.name ?? '',
    model_version: echo.model?.version ?? '',
    id: echo.id,
    parameters,
    outputs: [],
    raw_output_contents: [],
  };
}

/**
 * A per-request error on a stream: the stream stays open and the client matches the error to
 * its request by `infer_response.id`. Triton echoes only the id for requests refused before
 * they were issued, and also model name/version and the final flag for failures reported
 * by the engine.
 */
export function streamInferError(message: string, echo: StreamEcho): GrpcModelStreamInferResponse {
  return { error_message: message, infer_response: echoResponse(echo) };
}

/** The empty final response a decoupled request asked for with `triton_enable_empty_final_response`. */
export function emptyFinalStreamResponse(echo: { id: string; model: { name: string; version: string } }): GrpcModelStreamInferResponse {
  return { error_message: '', infer_response: echoResponse({ ...echo, final: true }) };
}
