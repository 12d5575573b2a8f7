/**
 * KServe v2 HTTP inference codec with Triton's binary tensor extension: request bodies (JSON
 * header + binary blobs, or a raw binary body) → `InferRequest`, and `InferResponse` → response
 * body (JSON header + binary blobs in output order).
 *
 * Pure: no IO, no engine. Shared memory is described, not touched: shm inputs carry
 * `shared_memory_*` parameters and empty data, shm outputs are listed in `outputs`; the front
 * door reads and writes the regions. Error messages are Triton's (`server:src/http_server.cc`):
 * JSON access problems are `internal` (Triton's TritonJson reports them as INTERNAL → HTTP 500),
 * request-shape problems `invalid_argument`.
 */
import { internal, invalidArgument } from '@switchyard/common';
import { classifyTensor } from './http-classification.js';
import { type JsonObject, type JsonValue, isDoubleLiteralMember, isJsonObject, parseJson, hasDoubleLiteral, setOwn } from './http-json.js';
import { buildHttpInferResponse } from './http-response.js';
import { jsonToTensorData } from './json-data.js';
import type { DataType, InferRequest, InferResponse, InferTensor, Parameters, RequestedOutput } from './protocols.js';
import { checkInputShape, dataTypeOf, elementByteSize } from './tensor.js';

export type HttpOutputKind = 'json' | 'binary' | 'shm';

/** How one requested output is returned. */
export interface HttpRequestedOutput {
  name: string;
  kind: HttpOutputKind;
  /** Top-k classification requested; 0 = none. */
  classification: number;
  /** Set when kind is 'shm'. */
  /** Offset and byte size as sent: a `bigint` past 2^53 (up to 2^64-1), so range checks see the exact value. */
  shm?: { region: string; offset: number | bigint; byteSize: number | bigint };
}

export interface DecodedHttpInferRequest {
  request: InferRequest;
  /** How outputs the client did not list are returned (`binary_data_output`; raw requests: binary). */
  defaultOutputKind: 'json' | 'binary';
  /** The outputs the client listed, by name. */
  outputs: Map<string, HttpRequestedOutput>;
  /** Inputs whose bytes are in shared memory; their `data` is empty until the front door reads it. */
}

export interface HttpInferBody {
  modelName: string;
  modelVersion: number | undefined;
  /** The (decompressed) request body. */
  body: Uint8Array;
}

/** What a raw binary request needs to know about the model (Triton deduces it from the config). */
export interface RawInputModel {
  inputs: ReadonlyArray<{ name: string; datatype: DataType; dims: readonly number[] }>;
  maxBatchSize: number;
}

/**
 * The JSON header length of a request: the `Inference-Header-Content-Length` value parsed like
 * C `atoi` (garbage → 0), or the whole body when the header is absent. 0 means a raw binary body.
 */
export function parseInferenceHeaderLength(headerValue: string | undefined, contentLength: number): number {
  if (headerValue === undefined) return contentLength;
  const m = /^\s*([+-]?\d+)/.exec(headerValue);
  const parsed = m === null ? 0 : Number(m[1]);
  if (parsed < 0 || parsed > contentLength) {
    throw invalidArgument(`inference header size should be in range (0, ${contentLength}), got: ${headerValue}`);
  }
  return parsed;
}

/** Decode a JSON (+ binary blobs) inference request whose JSON header is `headerLength` bytes. */
export function decodeHttpInferRequest(src: HttpInferBody, headerLength: number): DecodedHttpInferRequest {
  // Tensor data are views into the body; make them plain Uint8Arrays (a Node Buffer's slice()
  // is a view, not a copy, which breaks consumers that copy to realign).
  const body = plainBytes(src.body);
  const root = parseJson(body.subarray(0, headerLength));
  const model = src.modelName;
  const request: InferRequest = {
    id: '',
    modelName: model,
    modelVersion: src.modelVersion,
    parameters: {},
    inputs: [],
    outputs: [],
  };
  const obj: JsonObject = isJsonObject(root) ? root : {};

  if ('id' in obj) {
    if (typeof obj.id !== 'string') throw internal("Unable to parse 'id': attempt to access JSON non-string as string");
    request.id = obj.id;
  }
  const defaultOutputKind = decodeRequestParameters(obj, request.parameters);

  const inputsJson = memberArray(obj, 'inputs');
  const seen = new Set<string>();
  let blobOffset = headerLength;
  for (const item of inputsJson) {
    const input = isJsonObject(item) ? item : {};
    validateInputContentType(input);
    const name = memberString(input, 'name');
    const datatypeText = memberString(input, 'datatype');
    const shape = memberUintArray(input, 'shape');
    if (seen.has(name)) throw invalidArgument(`input '${name}' already exists in request`);
    seen.add(name);
    const datatype = dataTypeOf(datatypeText);
    if (datatype === undefined) throw invalidArgument(`invalid datatype for input ${name}`);
    checkInputShape({ name, datatype, shape }, { requestId: request.id, model });
    const params = isJsonObject(input.parameters) ? input.parameters : {};
    const tensor: InferTensor = { name, datatype, shape, data: new Uint8Array(0), parameters: {} };
    if ('binary_data_size' in params) {
      const size = uintValue(params, 'binary_data_size', "Unable to parse 'binary_data_size'");
      const available = body.byteLength - blobOffset;
      if (size > available) {
        throw invalidArgument(`unexpected size for input '${name}', expecting ${size - available} additional bytes for model '${model}'`);
      }
      tensor.data = body.subarray(blobOffset, blobOffset + size);
      blobOffset += size;
    } else if ('shared_memory_region' in params) {
      const shm = sharedMemoryParams(params);
      tensor.parameters.shared_memory_region = shm.region;
      tensor.parameters.shared_memory_offset = shm.offset;
      tensor.parameters.shared_memory_byte_size = shm.byteSize;
    } else {
      tensor.data = jsonToTensorData(name, datatype, shape, input.data);
    }
    request.inputs.push(tensor);
  }
  if (blobOffset !== body.byteLength) throw invalidArgument(`unexpected additional input data for model '${model}'`);

  const outputs = new Map<string, HttpRequestedOutput>();
  if ('outputs' in obj) {
    for (const item of memberArray(obj, 'outputs')) {
      const out = isJsonObject(item) ? item : {};
      validateOutputParameter(out);
      const name = memberString(out, 'name');
      if (outputs.has(name)) throw invalidArgument(`output '${name}' already exists in request`);
      const params = isJsonObject(out.parameters) ? out.parameters : {};
      const classification = 'classification' in params ? uintValue(params, 'classification', "Unable to set 'classification'") : 0;
      const requested: RequestedOutput = { name, parameters: {} };
      const spec: HttpRequestedOutput = { name, kind: 'json', classification };
      if (classification > 0) requested.parameters.classification = classification;
      if ('shared_memory_region' in params) {
        const shm = sharedMemoryParams(params);
        spec.kind = 'shm';
        spec.shm = shm;
        requested.parameters.shared_memory_region = shm.region;
        requested.parameters.shared_memory_offset = shm.offset;
        requested.parameters.shared_memory_byte_size = shm.byteSize;
      } else {
        let binary = false;
        if ('binary_data' in params) {
          if (typeof params.binary_data !== 'boolean') {
            throw internal("Unable to parse 'binary_data': attempt to access JSON non-boolean as boolean");
          }
          binary = params.binary_data;
          requested.parameters.binary_data = binary;
        }
        spec.kind = binary ? 'binary' : 'json';
      }
      outputs.set(name, spec);
      request.outputs.push(requested);
    }
  }
  return { request, defaultOutputKind, outputs };
}

/**
 * Decode a raw binary request (`Inference-Header-Content-Length: 0`): the body is the single
 * input's bytes; name, datatype and shape come from the model configuration. BYTES gets its
 * 4-byte length prefix here; batching models get a batch of 1. All outputs return as binary.
 */
export function decodeHttpRawInferRequest(src: HttpInferBody, model: RawInputModel): DecodedHttpInferRequest {
  const prefix = '[request id: <id_unknown>] ';
  if (model.inputs.length !== 1) {
    throw invalidArgument(
      `${prefix}Raw request must only have 1 input (found 1) to be deduced but got ${model.inputs.length} inputs in '${src.modelName}' model configuration`,
    );
  }
  const config = model.inputs[0] as RawInputModel['inputs'][number];
  const shape: number[] = model.maxBatchSize !== 0 ? [1] : [];
  let dynamicAxis = -1;
  let fixedCount = 1;
  for (const dim of config.dims) {
    if (dim === -1) {
      if (dynamicAxis !== -1) {
        throw invalidArgument(
          `${prefix}The shape of the raw input '${config.name}' can not be deduced because there are more than one variable-sized dimension`,
        );
      }
      dynamicAxis = shape.length;
    } else {
      fixedCount *= dim;
    }
    shape.push(dim);
  }
  let data = plainBytes(src.body);
  if (config.datatype === 'BYTES') {
    if (dynamicAxis !== -1 || fixedCount !== 1) {
      throw invalidArgument(`${prefix}For BYTE datatype raw input '${config.name}', the model must have input shape [1]`);
    }
    data = new Uint8Array(4 + src.body.byteLength);
    new DataView(data.buffer).setUint32(0, src.body.byteLength, true);
    data.set(src.body, 4);
  } else if (dynamicAxis !== -1) {
    const unit = fixedCount * elementByteSize(config.datatype);
    shape[dynamicAxis] = unit === 0 ? 0 : Math.floor(src.body.byteLength / unit);
  }
  const input: InferTensor = { name: config.name, datatype: config.datatype, shape, data, parameters: {} };
  return {
    request: { id: '', modelName: src.modelName, modelVersion: src.modelVersion, parameters: {}, inputs: [input], outputs: [] },
    defaultOutputKind: 'binary',
    outputs: new Map(),
  };
}

export interface HttpResponseOptions {
  defaultOutputKind: 'json' | 'binary';
  outputs: ReadonlyMap<string, HttpRequestedOutput>;
  /** The model batches (max_batch_size > 0); classification then keeps the batch dimension. */
  batching: boolean;
  /** Output name → class labels of the version that answered, appended to classification results. */
  labels?: ReadonlyMap<string, readonly string[]>;
}

export interface EncodedHttpInferResponse {
  /** Byte length of the JSON header: the `Inference-Header-Content-Length` when `binary`. */
  headerLength: number;
  /** The body: the JSON header, then the binary outputs in the order they appear in the JSON. */
  chunks: Uint8Array[];
  /** Binary data follows the JSON: Content-Type application/octet-stream plus the header. */
  binary: boolean;
}

/**
 * Encode a response. Keys in Triton's order (`id` only when non-empty, `model_name`,
 * `model_version`, `parameters` only when set, `outputs`); each output as JSON `data`, as binary
 * (`parameters.binary_data_size`, blob appended; zero-size blobs append nothing), or, for
 * shared-memory outputs, with only name, datatype and shape.
 */
export function encodeHttpInferResponse(response: InferResponse, options: HttpResponseOptions): EncodedHttpInferResponse {
  const outputs = response.outputs.map((t) => {
    const spec = options.outputs.get(t.name);
    const kind: HttpOutputKind = spec?.kind ?? options.defaultOutputKind;
    const k = spec?.classification ?? 0;
    const tensor = k > 0 ? classifyTensor(t, k, options.batching, options.labels?.get(t.name)) : t;
    return { tensor, kind };
  });
  return buildHttpInferResponse(response, outputs);
}

function plainBytes(b: Uint8Array): Uint8Array {
  return Object.getPrototypeOf(b) === Uint8Array.prototype ? b : new Uint8Array(b.buffer, b.byteOffset, b.byteLength);
}

function decodeRequestParameters(obj: JsonObject, out: Parameters): 'json' | 'binary' {
  let kind: 'json' | 'binary' = 'json';
  if (!('parameters' in obj)) return kind;
  const params = obj.parameters;
  if (!isJsonObject(params)) throw internal('failed to get request params.: attempt to access JSON non-object as object');
  for (const key of Object.keys(params)) {
    const v = params[key] as JsonValue;
    switch (key) {
      case 'sequence_id':
        if (isUint(params, key)) out.sequence_id = v as number | bigint;
        else if (typeof v === 'string') out.sequence_id = v;
        else throw internal("Unable to parse 'sequence_id': attempt to access JSON non-string as string");
        break;
      case 'sequence_start':
      case 'sequence_end':
      case 'binary_data_output':
        if (typeof v !== 'boolean') throw internal(`Unable to parse '${key}': attempt to access JSON non-boolean as boolean`);
        // binary_data_output only says how this door returns outputs: Triton's HTTP door consumes it.
        if (key === 'binary_data_output') kind = v ? 'binary' : 'json';
        else out[key] = v;
        break;
      case 'priority':
      case 'timeout':
        out[key] = uintValue(params, key, `Unable to parse '${key}'`);
        break;
      default:
        if (key.startsWith('triton_')) {
          throw invalidArgument("parameter keys starting with 'triton_' are reserved for Triton usage and should not be specified.");
        }
        if (typeof v === 'string' || typeof v === 'boolean' || typeof v === 'number' || typeof v === 'bigint') setOwn(out, key, v);
        else throw invalidArgument(`parameter '${key}' has invalid type. It should be either 'int', 'bool', or 'string'.`);
    }
  }
  return kind;
}

function validateInputContentType(io: JsonObject): void {
  const params = isJsonObject(io.parameters) ? io.parameters : undefined;
  const hasData = 'data' in io;
  const hasBinary = params !== undefined && 'binary_data_size' in params;
  const hasShm = params !== undefined && 'shared_memory_region' in params;
  const count = Number(hasData) + Number(hasBinary) + Number(hasShm);
  if (count === 1) return;
  let msg =
    "Input must set only one of the following fields: 'data', 'binary_data_size' in 'parameters', 'shared_memory_region' in 'parameters'. But";
  if (count === 0) msg += ' no field is set';
  else {
    msg += ' set';
    if (hasData) msg += " 'data'";
    if (hasBinary) msg += " 'binary_data_size'";
    if (hasShm) msg += " 'shared_memory_region'";
  }
  throw invalidArgument(msg);
}

function validateOutputParameter(io: JsonObject): void {
  const params = isJsonObject(io.parameters) ? io.parameters : undefined;
  if (params === undefined || !('shared_memory_region' in params)) return;
  if ('classification' in params) throw invalidArgument("Output can't set both 'shared_memory_region' and 'classification'");
  if ('binary_data' in params) {
    if (typeof params.binary_data !== 'boolean') throw internal("Unable to set 'binary_data': attempt to access JSON non-boolean as boolean");
    if (params.binary_data) throw invalidArgument("Output can't set both 'shared_memory_region' and 'binary_data'");
  }
}

/** Offset and byte size exactly as sent (uint64): the shared-memory manager checks their sum against 2^64-1 as Triton does. */
function sharedMemoryParams(params: JsonObject): { region: string; offset: number | bigint; byteSize: number | bigint } {
  const region = params.shared_memory_region;
  if (typeof region !== 'string') {
    throw internal("Unable to parse 'shared_memory_region': attempt to access JSON non-string as string");
  }
  const offset = 'shared_memory_offset' in params ? exactUintValue(params, 'shared_memory_offset', "Unable to parse 'shared_memory_offset'") : 0;
  const byteSize =
    'shared_memory_byte_size' in params ? exactUintValue(params, 'shared_memory_byte_size', "Unable to parse 'shared_memory_byte_size'") : 0;
  return { region, offset, byteSize };
}

const UINT64_MAX = 2n ** 64n - 1n;

/** A uint64 member (TritonJson's `AsUInt`): a non-negative integer literal up to 2^64-1. */
function isUint(obj: JsonObject, key: string): boolean {
  const v = obj[key];
  if (typeof v === 'bigint') return v >= 0n && v <= UINT64_MAX;
  return typeof v === 'number' && Number.isInteger(v) && v >= 0 && !isDoubleLiteralMember(obj, key);
}

/** A uint member as a number when exact, else as the exact `bigint`. */
function exactUintValue(obj: JsonObject, key: string, context: string): number | bigint {
  if (!isUint(obj, key)) throw internal(`${context}: attempt to access JSON non-unsigned-integer as unsigned-integer`);
  const v = obj[key] as number | bigint;
  return typeof v === 'bigint' && v > BigInt(Number.MAX_SAFE_INTEGER) ? v : Number(v);
}

/** A uint member as a number (values past 2^53 are clamped; no byte size or count gets there). */
function uintValue(obj: JsonObject, key: string, context: string): number {
  if (!isUint(obj, key)) throw internal(`${context}: attempt to access JSON non-unsigned-integer as unsigned-integer`);
  return Number(obj[key]);
}

function memberString(obj: JsonObject, key: string): string {
  if (!(key in obj)) throw internal(`Unable to parse '${key}': attempt to access non-existing object member '${key}'`);
  const v = obj[key];
  if (typeof v !== 'string') throw internal(`Unable to parse '${key}': attempt to access JSON non-string as string`);
  return v;
}

function memberArray(obj: JsonObject, key: string): JsonValue[] {
  if (!(key in obj)) throw internal(`Unable to parse '${key}': attempt to access non-existing object member '${key}'`);
  const v = obj[key];
  if (!Array.isArray(v)) throw internal(`Unable to parse '${key}': attempt to access JSON non-array as array`);
  return v;
}

function memberUintArray(obj: JsonObject, key: string): number[] {
  const arr = memberArray(obj, key);
  const marked = hasDoubleLiteral(arr);
  const out: number[] = [];
  for (const v of arr) {
    const ok = (typeof v === 'number' && Number.isInteger(v) && v >= 0 && !marked) || (typeof v === 'bigint' && v >= 0n);
    if (!ok) throw internal(`Unable to parse '${key}': attempt to access JSON non-unsigned-integer as unsigned-integer`);
    out.push(Number(v));
  }
  return out;
}
