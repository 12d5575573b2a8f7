/**
 * Codecs for the worker ↔ router wire types (protocols.ts).
 *
 * - `decode*` is the validation edge: parsed JSON (`unknown`) in, typed value out, `invalid_argument`
 *   naming the bad field otherwise. Every message type of protocols.ts has one.
 * - `*ToWire` / `*FromWire` convert between the in-process shapes (@switchyard/kserve InferRequest /
 *   InferResponse, @switchyard/llm GenerateOutput) and their wire form. `*FromWire` takes an already
 *   decoded wire value, so it never fails.
 *
 * Encodings: tensor bytes travel raw in a binary payload (runtime BinaryPayload, one blob per tensor:
 * `inferRequestToBinary` / `inferResponseToBinary`) or base64 in JSON (`inferRequestToWire` /
 * `inferResponseToWire`, for workers whose card lacks `binaryTensors`, and a worker's answer to a JSON
 * request); `decodeWireInferRequest` / `decodeWireInferResponse` read both. A bigint KServe parameter
 * travels as `{ "$bigint": "<decimal>" }` (JSON numbers cannot hold int64 exactly). The other wire
 * types are plain JSON already; `toJson` only widens their static type for RequestPlane / EventPlane.
 */
import { describeValue, enforceLimits, ERROR_CODES, type ErrorCode, SwitchyardError, invalidArgument } from '@switchyard/common';
import { DEFAULT_LOAD_LIMITS } from '@switchyard/engine';
import { checkInputShape, dataTypeOf, type DataType, type InferRequest, type InferResponse, type InferTensor, type Parameters } from '@switchyard/kserve';
import { MAX_TOP_LOGPROBS, checkOutputParsing, decodeKvCacheEvent, decodeSamplingDefaults, type GenerateOutput, type KvLayout, type KvTransferLease, type OutputParsingConfig, type SnapshotBlock } from '@switchyard/llm';
import { BinaryPayload, INSTANCE_ID_PATTERN, type JsonValue } from '@switchyard/runtime';
import type {
  LlmCardMetadata,
  WireKvImportReport,
  WireKvTransferHandle,
  WorkerRole,
  TensorCardMetadata,
  WireGenerateOutput,
  WireGenerateRequest,
  WireInferRequest,
  WireInferResponse,
  WireForwardPass,
  WireForwardPassStep,
  WireHistogram,
  WireKvEvents,
  WireLoad,
  WireRequestFigures,
  WirePlannerDecision,
  WireParameters,
  WireDuration,
  WireModelStatistics,
  WireSnapshotChunk,
  WireSnapshotRequest,
  WireStats,
  WireStatsRequest,
  WireTensor,
} from './protocols.js';
import { MAX_WIRE_FORWARD_PASS_STEPS, MAX_WIRE_HISTOGRAM_BOUNDS } from './protocols.js';

/** Every wire value of protocols.ts is JSON; this widens its type for the request and event planes. */
export function toJson(value: object): JsonValue {
  return value as unknown as JsonValue;
}

// ---- validation helpers ---------------------------------------------------------------------------

type Obj = { readonly [k: string]: unknown };

function obj(value: unknown, what: string): Obj {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw invalidArgument(`${what}: expected an object`);
  return value as Obj;
}
function version(o: Obj, what: string): void {
  if (o['v'] !== 1) throw invalidArgument(`${what}: unsupported version ${describeValue(o['v'])}`);
}
function str(o: Obj, field: string, what: string, allowEmpty = false): string {
  const v = o[field];
  if (typeof v !== 'string' || (!allowEmpty && v.length === 0)) {
    throw invalidArgument(`${what}: '${field}' must be a ${allowEmpty ? '' : 'non-empty '}string`);
  }
  return v;
}
function int(o: Obj, field: string, what: string, min: number): number {
  const v = o[field];
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < min) throw invalidArgument(`${what}: '${field}' must be an integer >= ${min}`);
  return v;
}
function num(o: Obj, field: string, what: string): number {
  const v = o[field];
  if (typeof v !== 'number' || !Number.isFinite(v)) throw invalidArgument(`${what}: '${field}' must be a finite number`);
  return v;
}
function bool(o: Obj, field: string, what: string): boolean {
  const v = o[field];
  if (typeof v !== 'boolean') throw invalidArgument(`${what}: '${field}' must be a boolean`);
  return v;
}
function optBool(o: Obj, field: string, what: string): boolean | undefined {
  return o[field] === undefined ? undefined : bool(o, field, what);
}
function arr(o: Obj, field: string, what: string): readonly unknown[] {
  const v = o[field];
  if (!Array.isArray(v)) throw invalidArgument(`${what}: '${field}' must be an array`);
  return v;
}
function intArray(o: Obj, field: string, what: string, min: number): number[] {
  return arr(o, field, what).map((x, i) => {
    if (typeof x !== 'number' || !Number.isSafeInteger(x) || x < min) throw invalidArgument(`${what}: '${field}[${i}]' must be an integer >= ${min}`);
    return x;
  });
}
/** Natural-log probabilities: numbers, and null for -Infinity (not JSON: JSON.stringify writes null). */
function logprobArray(o: Obj, field: string, what: string): number[] {
  return arr(o, field, what).map((x, i) => {
    if (x === null) return -Infinity;
    if (typeof x !== 'number') throw invalidArgument(`${what}: '${field}[${i}]' must be a number`);
    return x;
  });
}
function strArray(o: Obj, field: string, what: string): string[] {
  return arr(o, field, what).map((x, i) => {
    if (typeof x !== 'string') throw invalidArgument(`${what}: '${field}[${i}]' must be a string`);
    return x;
  });
}

/**
 * Store `value` under a key a peer or client chose, as an own entry: `obj['__proto__'] = v` would
 * set the object's prototype instead and the entry would vanish.
 */
function setEntry<T>(obj: { [k: string]: T }, key: string, value: T): void {
  // (every other key is a plain data property of a fresh object literal: assigning it is the same,
  // without defineProperty's slow path on every tensor request)
  if (key === '__proto__') Object.defineProperty(obj, key, { value, enumerable: true, writable: true, configurable: true });
  else obj[key] = value;
}

/** True when `o` has no own enumerable key (most requests' and tensors' parameters): nothing to convert. */
function isEmpty(o: object): boolean {
  for (const _ in o) return false;
  return true;
}

const HASH_RE = /^[0-9a-f]{16}$/;
/** A 64-bit integer in decimal: at most 20 digits (longer ones are refused before BigInt's superlinear parse). */
const BIGINT_RE = /^-?[0-9]{1,20}$/;
const BASE64_RE = /^[A-Za-z0-9+/]*={0,2}$/;
const ERROR_CODE_SET: ReadonlySet<string> = new Set(ERROR_CODES);

// ---- parameters and tensors -----------------------------------------------------------------------

export function parametersToWire(parameters: Parameters): WireParameters {
  const out: { [k: string]: WireParameters[string] } = {};
  if (isEmpty(parameters)) return out;
  for (const [k, v] of Object.entries(parameters)) setEntry(out, k, typeof v === 'bigint' ? { $bigint: v.toString() } : v);
  return out;
}

export function parametersFromWire(parameters: WireParameters): Parameters {
  const out: Parameters = {};
  if (isEmpty(parameters)) return out;
  for (const [k, v] of Object.entries(parameters)) setEntry(out, k, typeof v === 'object' ? BigInt(v.$bigint) : v);
  return out;
}

function decodeParameters(value: unknown, what: string): WireParameters {
  const o = obj(value, `${what} parameters`);
  const out: { [k: string]: WireParameters[string] } = {};
  if (isEmpty(o)) return out;
  for (const [k, v] of Object.entries(o)) {
    if (typeof v === 'boolean' || typeof v === 'string' || (typeof v === 'number' && Number.isFinite(v))) setEntry(out, k, v);
    else if (typeof v === 'object' && v !== null && !Array.isArray(v)) {
      const b = (v as Obj)['$bigint'];
      if (Object.keys(v).length !== 1 || typeof b !== 'string' || !BIGINT_RE.test(b)) {
        throw invalidArgument(`${what}: parameter '${k}' must be a boolean, number, string or {"$bigint": "<decimal>"}`);
      }
      setEntry(out, k, { $bigint: b });
    } else throw invalidArgument(`${what}: parameter '${k}' must be a boolean, number, string or {"$bigint": "<decimal>"}`);
  }
  return out;
}

export function tensorToWire(tensor: InferTensor): WireTensor {
  return { ...tensorHeadToWire(tensor), data: Buffer.from(tensor.data.buffer, tensor.data.byteOffset, tensor.data.byteLength).toString('base64') };
}

/** A tensor's wire form without its bytes: the body of a binary payload carries them as a blob. */
type WireTensorHead = Omit<WireTensor, 'data'>;

function tensorHeadToWire(tensor: InferTensor): WireTensorHead {
  return { name: tensor.name, datatype: tensor.datatype, shape: [...tensor.shape], parameters: parametersToWire(tensor.parameters) };
}

export function tensorFromWire(tensor: WireTensor): InferTensor {
  let data: Uint8Array;
  if (typeof tensor.data === 'string') {
    const buf = Buffer.from(tensor.data, 'base64');
    // a plain Uint8Array view (not a Buffer) over exactly the decoded bytes
    data = new Uint8Array(buf.buffer, buf.byteOffset, buf.byteLength);
  } else data = tensor.data;
  return { name: tensor.name, datatype: tensor.datatype as DataType, shape: [...tensor.shape], data, parameters: parametersFromWire(tensor.parameters) };
}

/**
 * `minDim`: inputs take any integer (their sizes are `checkInputShape`'s), outputs none below 0.
 * `blob`: the tensor's bytes from a binary payload (its body then has no `data`); absent: base64 `data`.
 */
function decodeTensor(value: unknown, what: string, minDim = 0, blob?: Uint8Array): WireTensor {
  const o = obj(value, what);
  const name = str(o, 'name', what);
  const datatypeText = str(o, 'datatype', what);
  const datatype = dataTypeOf(datatypeText);
  if (datatype === undefined) throw invalidArgument(`${what}: unknown datatype '${datatypeText}'`);
  const shape = intArray(o, 'shape', what, minDim);
  let data: string | Uint8Array;
  if (blob !== undefined) {
    if (o['data'] !== undefined) throw invalidArgument(`${what}: 'data' must be absent in a binary payload (the tensor's bytes are its blob)`);
    data = blob;
  } else {
    data = str(o, 'data', what, true);
    if (data.length % 4 !== 0 || !BASE64_RE.test(data)) throw invalidArgument(`${what}: 'data' must be base64`);
  }
  return { name, datatype, shape, parameters: decodeParameters(o['parameters'] ?? {}, what), data };
}

/**
 * The body of a payload and the blobs its `field` tensors take (one each, in order) when it is binary;
 * `blobs` undefined for a JSON payload. A binary payload's blob count must match exactly.
 */
function payloadParts(value: unknown, field: string, what: string): { readonly body: Obj; readonly tensors: readonly unknown[]; readonly blobs: readonly Uint8Array[] | undefined } {
  if (value instanceof BinaryPayload) {
    const body = obj(value.body, what);
    const tensors = arr(body, field, what);
    if (tensors.length !== value.blobs.length) {
      throw invalidArgument(`${what}: a binary payload carries one blob per tensor of '${field}' (${tensors.length} tensors, ${value.blobs.length} blobs)`);
    }
    return { body, tensors, blobs: value.blobs };
  }
  const body = obj(value, what);
  return { body, tensors: arr(body, field, what), blobs: undefined };
}

// ---- infer ---------------------------------------------------------------------------------------

export function inferRequestToWire(request: InferRequest): WireInferRequest {
  return requestEnvelope(request, request.inputs.map(tensorToWire));
}

/** A request's wire body around its inputs' wire form (with their bytes, or their heads only). */
function requestEnvelope<T>(request: InferRequest, inputs: T[]) {
  return {
    v: 1 as const,
    id: request.id,
    modelName: request.modelName,
    modelVersion: request.modelVersion ?? null,
    parameters: parametersToWire(request.parameters),
    inputs,
    outputs: request.outputs.map((o) => ({ name: o.name, parameters: parametersToWire(o.parameters) })),
  };
}

/** The request as a binary payload: tensor bytes raw, one blob per input (for a worker whose card has `binaryTensors`). */
export function inferRequestToBinary(request: InferRequest): BinaryPayload {
  return new BinaryPayload(toJson(requestEnvelope(request, request.inputs.map(tensorHeadToWire))), request.inputs.map((t) => t.data));
}

export function inferRequestFromWire(request: WireInferRequest): InferRequest {
  return {
    id: request.id,
    modelName: request.modelName,
    modelVersion: request.modelVersion ?? undefined,
    parameters: parametersFromWire(request.parameters),
    inputs: request.inputs.map(tensorFromWire),
    outputs: request.outputs.map((o) => ({ name: o.name, parameters: parametersFromWire(o.parameters) })),
  };
}

/** A JSON payload (base64 tensors) or a binary one (raw tensors, one blob per input). */
export function decodeWireInferRequest(value: unknown): WireInferRequest {
  const what = 'infer request';
  const { body: o, tensors, blobs } = payloadParts(value, 'inputs', what);
  version(o, what);
  const mv = o['modelVersion'];
  if (mv !== null && (typeof mv !== 'number' || !Number.isSafeInteger(mv) || mv < 1)) {
    throw invalidArgument(`${what}: 'modelVersion' must be an integer >= 1 or null`);
  }
  const id = str(o, 'id', what, true);
  const modelName = str(o, 'modelName', what);
  const inputs = tensors.map((t, i) => decodeTensor(t, `${what} inputs[${i}]`, Number.MIN_SAFE_INTEGER, blobs?.[i]));
  // The front doors' shape check, so a request that reached the wire some other way is refused alike.
  for (const input of inputs) checkInputShape(input, { requestId: id, model: modelName });
  return {
    v: 1,
    id,
    modelName,
    modelVersion: mv,
    parameters: decodeParameters(o['parameters'] ?? {}, what),
    inputs,
    outputs: arr(o, 'outputs', what).map((r, i) => {
      const ro = obj(r, `${what} outputs[${i}]`);
      return { name: str(ro, 'name', `${what} outputs[${i}]`), parameters: decodeParameters(ro['parameters'] ?? {}, `${what} outputs[${i}]`) };
    }),
  };
}

export function inferResponseToWire(response: InferResponse, final = false): WireInferResponse {
  return responseEnvelope(response, final, response.outputs.map(tensorToWire));
}

/** A response's wire body around its outputs' wire form (with their bytes, or their heads only). */
function responseEnvelope<T>(response: InferResponse, final: boolean, outputs: T[]): { final?: true; id: string; modelName: string; modelVersion: string; parameters: WireParameters; outputs: T[] } {
  const { id, modelName, modelVersion } = response;
  const parameters = parametersToWire(response.parameters);
  // (two literals rather than a spread: the same JSON, without V8's slow object-spread path per response)
  return final ? { final: true, id, modelName, modelVersion, parameters, outputs } : { id, modelName, modelVersion, parameters, outputs };
}

/** The response as a binary payload: tensor bytes raw, one blob per output (the answer to a binary request). */
export function inferResponseToBinary(response: InferResponse, final = false): BinaryPayload {
  return new BinaryPayload(toJson(responseEnvelope(response, final, response.outputs.map(tensorHeadToWire))), response.outputs.map((t) => t.data));
}

/** A non-final error response of a decoupled stream (protocols.ts WireInferResponse `error`). */
export function inferErrorToWire(request: { readonly id: string; readonly modelName: string }, error: SwitchyardError): WireInferResponse {
  return { error: { code: error.code, message: error.message }, id: request.id, modelName: request.modelName, modelVersion: '', parameters: {}, outputs: [] };
}

/** The error a WireInferResponse carries, as the engine delivered it on the worker; undefined for a response. */
export function inferErrorFromWire(response: WireInferResponse): SwitchyardError | undefined {
  return response.error === undefined ? undefined : new SwitchyardError(response.error.code, response.error.message);
}

export function inferResponseFromWire(response: WireInferResponse): InferResponse {
  return {
    id: response.id,
    modelName: response.modelName,
    modelVersion: response.modelVersion,
    parameters: parametersFromWire(response.parameters),
    outputs: response.outputs.map(tensorFromWire),
  };
}

/** A JSON payload (base64 tensors) or a binary one (raw tensors, one blob per output). */
export function decodeWireInferResponse(value: unknown): WireInferResponse {
  const what = 'infer response';
  const { body: o, tensors, blobs } = payloadParts(value, 'outputs', what);
  const final = optBool(o, 'final', what);
  let error: WireInferResponse['error'];
  if (o['error'] !== undefined) {
    const e = obj(o['error'], `${what} error`);
    const message = str(e, 'message', `${what} error`, true);
    const code = e['code'];
    if (typeof code !== 'string') throw invalidArgument(`${what} error: 'code' must be a string`);
    if (final === true) throw invalidArgument(`${what}: an error response is never final (a final error is the stream's error frame)`);
    // an unknown code from a newer peer is still an error, just an unclassified one (as runtime frames)
    error = { code: ERROR_CODE_SET.has(code) ? (code as ErrorCode) : 'unknown', message };
  }
  const id = str(o, 'id', what, true);
  const modelName = str(o, 'modelName', what);
  const modelVersion = str(o, 'modelVersion', what, true);
  const parameters = decodeParameters(o['parameters'] ?? {}, what);
  const outputs = tensors.map((t, i) => decodeTensor(t, `${what} outputs[${i}]`, 0, blobs?.[i]));
  // (a literal per case rather than spreads: V8's object-spread path is slow, and this runs per response)
  if (error !== undefined) return { error, id, modelName, modelVersion, parameters, outputs };
  if (final === true) return { final: true, id, modelName, modelVersion, parameters, outputs };
  return { id, modelName, modelVersion, parameters, outputs };
}

// ---- generate ------------------------------------------------------------------------------------

/**
 * The longest context a wire message may describe, in tokens: the engine's ceiling for `max_model_len`
 * (DEFAULT_LOAD_LIMITS.maxLlmTokens), so no worker can need more. Bounds `outputTokenIds` and the
 * number of block hashes a transfer handle may carry when the prompt is not at hand.
 */
export const MAX_WIRE_CONTEXT_TOKENS = DEFAULT_LOAD_LIMITS.maxLlmTokens;
/** Longest lease id and model id in a transfer handle / layout (engines use UUID-sized ids). */
export const MAX_WIRE_ID_LENGTH = 256;
/** Longest `kvImport.fallback` sentence. */
export const MAX_WIRE_REASON_LENGTH = 4096;
/** Longest `host:port` (a 253-character DNS name, or a bracketed IPv6 address, and a port). */
export const MAX_WIRE_ADDRESS_LENGTH = 261;

const WORKER_ROLES: readonly WorkerRole[] = ['aggregated', 'prefill', 'decode'];
// eslint-disable-next-line no-control-regex
const CONTROL_RE = /[\u0000-\u001f\u007f]/;
/** host: a DNS name / IPv4 address (letters, digits, '.', '-', '_') or a bracketed IPv6 address; port: 1-65535. */
const ADDRESS_RE = /^(?:\[[0-9A-Fa-f:.]{2,45}\]|[A-Za-z0-9_](?:[A-Za-z0-9_.-]{0,251}[A-Za-z0-9_])?):([1-9][0-9]{0,4})$/;

/** A bounded identifier: non-empty, at most MAX_WIRE_ID_LENGTH characters, no control characters. */
function id(o: Obj, field: string, what: string): string {
  const v = str(o, field, what);
  if (v.length > MAX_WIRE_ID_LENGTH || CONTROL_RE.test(v)) {
    throw invalidArgument(`${what}: '${field}' must be at most ${MAX_WIRE_ID_LENGTH} characters without control characters`);
  }
  return v;
}

/** `host:port` of a KV transfer server (validated: it is dialled by the worker that reads it). */
export function decodeTransferAddress(value: unknown, what: string): string {
  if (typeof value !== 'string' || value.length > MAX_WIRE_ADDRESS_LENGTH) throw invalidArgument(`${what}: 'address' must be a host:port string`);
  const m = ADDRESS_RE.exec(value);
  if (m === null || Number(m[1]) > 65535) throw invalidArgument(`${what}: 'address' must be host:port with a port in 1-65535, got ${describeValue(value)}`);
  return value;
}

function positive(o: Obj, field: string, what: string): number {
  return int(o, field, what, 1);
}

export function decodeKvLayout(value: unknown, what: string): KvLayout {
  const o = obj(value, what);
  const engine = o['engine'];
  if (engine !== 'llm' && engine !== 'mocker') throw invalidArgument(`${what}: 'engine' must be 'llm' or 'mocker'`);
  const dtype = o['dtype'];
  if (dtype !== 'fp32' && dtype !== 'fp16') throw invalidArgument(`${what}: 'dtype' must be 'fp32' or 'fp16'`);
  return {
    modelId: id(o, 'modelId', what),
    engine,
    dtype,
    numLayers: positive(o, 'numLayers', what),
    numKvHeads: positive(o, 'numKvHeads', what),
    headDim: positive(o, 'headDim', what),
    blockSize: positive(o, 'blockSize', what),
    bytesPerBlock: positive(o, 'bytesPerBlock', what),
  };
}

/**
 * A transfer handle. `promptTokens`: the prompt it belongs to, when known (a decode request carries
 * it): the handle names at most its full blocks; otherwise at most a longest context's.
 */
function decodeKvTransferHandle(value: unknown, what: string, promptTokens: number | undefined): WireKvTransferHandle {
  const o = obj(value, what);
  const instanceId = str(o, 'instanceId', what);
  if (!INSTANCE_ID_PATTERN.test(instanceId)) throw invalidArgument(`${what}: 'instanceId' must be 16 lower-case hex digits`);
  const layout = decodeKvLayout(o['layout'], `${what} layout`);
  const hashes = arr(o, 'blockHashes', what);
  const fullBlocks = Math.floor((promptTokens ?? MAX_WIRE_CONTEXT_TOKENS) / layout.blockSize);
  enforceLimits(what, [
    {
      what: "'blockHashes'",
      value: hashes.length,
      max: fullBlocks,
      unit: 'blocks',
      why: promptTokens !== undefined ? `the prompt's full blocks of ${layout.blockSize} tokens` : `full blocks of a context of at most ${MAX_WIRE_CONTEXT_TOKENS} tokens`,
    },
  ]);
  const seed = o['seed'];
  if (typeof seed !== 'number' || !Number.isSafeInteger(seed)) throw invalidArgument(`${what}: 'seed' must be a safe integer`);
  return {
    address: decodeTransferAddress(o['address'], what),
    instanceId,
    leaseId: id(o, 'leaseId', what),
    blockHashes: hashes.map((h, i) => hash(h, `${what}: blockHashes[${i}]`)),
    layout,
    seed,
  };
}

function decodeKvImportReport(value: unknown, what: string): WireKvImportReport {
  const o = obj(value, what);
  const ms = num(o, 'ms', what);
  if (ms < 0) throw invalidArgument(`${what}: 'ms' must be >= 0`);
  let fallback: string | undefined;
  if (o['fallback'] !== undefined) {
    fallback = str(o, 'fallback', what);
    if (fallback.length > MAX_WIRE_REASON_LENGTH) throw invalidArgument(`${what}: 'fallback' must be at most ${MAX_WIRE_REASON_LENGTH} characters`);
  }
  return {
    pulledBlocks: int(o, 'pulledBlocks', what, 0),
    cachedBlocks: int(o, 'cachedBlocks', what, 0),
    bytes: int(o, 'bytes', what, 0),
    ms,
    ...(fallback !== undefined ? { fallback } : {}),
  };
}

/** What a generate request carries beyond the prompt (the router's builder input; absent fields stay off the wire). */
export interface GenerateRequestFields {
  readonly model: string;
  readonly requestId: string;
  readonly promptTokenIds: readonly number[];
  readonly sampling: { readonly [k: string]: unknown };
  readonly prefillOnly?: boolean;
  readonly outputTokenIds?: readonly number[];
  readonly kvTransfer?: WireKvTransferHandle;
}

/** The wire request; `prefillOnly: false` and empty `outputTokenIds` are left off (absent means the same). */
export function generateRequestToWire(r: GenerateRequestFields): WireGenerateRequest {
  return {
    v: 1,
    model: r.model,
    requestId: r.requestId,
    promptTokenIds: r.promptTokenIds,
    sampling: r.sampling,
    ...(r.prefillOnly === true ? { prefillOnly: true } : {}),
    ...(r.outputTokenIds !== undefined && r.outputTokenIds.length > 0 ? { outputTokenIds: r.outputTokenIds } : {}),
    ...(r.kvTransfer !== undefined ? { kvTransfer: r.kvTransfer } : {}),
  };
}

/**
 * Validation beyond the fields: `outputTokenIds` at most a longest context together with the prompt
 * and not more than `sampling.max_tokens` (which includes them); a `kvTransfer` handle naming at most
 * the prompt's full blocks, and never on a prefill-only request (which makes a handle, not takes one).
 */
export function decodeWireGenerateRequest(value: unknown): WireGenerateRequest {
  const what = 'generate request';
  const o = obj(value, what);
  version(o, what);
  const prefillOnly = optBool(o, 'prefillOnly', what);
  const promptTokenIds = intArray(o, 'promptTokenIds', what, 0);
  // field-level validation is compileSamplingParams' job (it names the offending field)
  const sampling = obj(o['sampling'] ?? {}, `${what} sampling`);
  let outputTokenIds: number[] | undefined;
  if (o['outputTokenIds'] !== undefined) {
    enforceLimits(what, [
      { what: "'promptTokenIds' and 'outputTokenIds'", value: promptTokenIds.length + arr(o, 'outputTokenIds', what).length, max: MAX_WIRE_CONTEXT_TOKENS, unit: 'tokens', why: 'no context is longer' },
    ]);
    outputTokenIds = intArray(o, 'outputTokenIds', what, 0);
    const maxTokens = sampling['max_tokens'];
    if (typeof maxTokens === 'number' && outputTokenIds.length > maxTokens) {
      throw invalidArgument(`${what}: 'outputTokenIds' holds ${outputTokenIds.length} tokens, more than sampling.max_tokens (${maxTokens}), which counts them`);
    }
  }
  let kvTransfer: WireKvTransferHandle | undefined;
  if (o['kvTransfer'] !== undefined) {
    if (prefillOnly === true) throw invalidArgument(`${what}: a prefill-only request cannot carry 'kvTransfer'`);
    kvTransfer = decodeKvTransferHandle(o['kvTransfer'], `${what} kvTransfer`, promptTokenIds.length);
  }
  return {
    v: 1,
    model: str(o, 'model', what),
    requestId: str(o, 'requestId', what),
    promptTokenIds,
    sampling,
    ...(prefillOnly !== undefined ? { prefillOnly } : {}),
    ...(outputTokenIds !== undefined ? { outputTokenIds } : {}),
    ...(kvTransfer !== undefined ? { kvTransfer } : {}),
  };
}

/** The engine's lease as a handle another worker can pull from: the serving worker adds where it is. */
export function kvTransferHandle(lease: KvTransferLease, where: { readonly address: string; readonly instanceId: string }): WireKvTransferHandle {
  return { address: where.address, instanceId: where.instanceId, leaseId: lease.leaseId, blockHashes: [...lease.blockHashes], layout: { ...lease.layout }, seed: lease.seed };
}

/** What a worker adds to an engine output on the wire (protocols.ts WireGenerateOutput). */
export interface GenerateOutputWireExtras {
  /**
   * This worker's KV transfer address and instance id: an output's lease (`kvTransfer`, prefill-only
   * requests) travels as a handle. Without it the lease is left off (the worker cannot serve it and
   * releases it).
   */
  readonly transfer?: { readonly address: string; readonly instanceId: string };
  /** Requests that came with `kvTransfer`: what the import did (first output only). */
  readonly kvImport?: WireKvImportReport;
}

export function generateOutputToWire(output: GenerateOutput, extras: GenerateOutputWireExtras = {}): WireGenerateOutput {
  return {
    tokenIds: [...output.tokenIds],
    finishReason: output.finishReason,
    stopReason: output.stopReason,
    ...(output.logprobs !== undefined ? { logprobs: [...output.logprobs] } : {}),
    ...(output.topLogprobs !== undefined ? { topLogprobs: output.topLogprobs.map((t) => ({ tokenIds: [...t.tokenIds], logprobs: [...t.logprobs] })) } : {}),
    ...(output.usage !== undefined
      ? { usage: { promptTokens: output.usage.promptTokens, completionTokens: output.usage.completionTokens, cachedTokens: output.usage.cachedTokens } }
      : {}),
    ...(output.kvTransfer !== undefined && extras.transfer !== undefined ? { kvTransfer: kvTransferHandle(output.kvTransfer, extras.transfer) } : {}),
    ...(extras.kvImport !== undefined ? { kvImport: { ...extras.kvImport } } : {}),
  };
}

/** The engine-level output; the disaggregation fields (`kvTransfer`, `kvImport`) are the router's, not the caller's. */
export function generateOutputFromWire(output: WireGenerateOutput): GenerateOutput {
  const { kvTransfer: _handle, kvImport: _report, ...rest } = output;
  return rest;
}

/**
 * Validation beyond the fields: `kvTransfer` only on a final output that finished with 'length'
 * (a prefill that stopped has nothing to hand on), naming at most the full blocks of the usage's
 * prompt when usage is present.
 */
export function decodeWireGenerateOutput(value: unknown): WireGenerateOutput {
  const what = 'generate output';
  const o = obj(value, what);
  const fr = o['finishReason'];
  if (fr !== null && fr !== 'stop' && fr !== 'length' && fr !== 'abort') {
    throw invalidArgument(`${what}: 'finishReason' must be 'stop', 'length', 'abort' or null`);
  }
  const sr = o['stopReason'];
  if (sr !== null && (typeof sr !== 'number' || !Number.isSafeInteger(sr))) throw invalidArgument(`${what}: 'stopReason' must be an integer or null`);
  const logprobs = o['logprobs'] === undefined ? undefined : logprobArray(o, 'logprobs', what);
  const tokenIds = intArray(o, 'tokenIds', what, 0);
  let topLogprobs: WireGenerateOutput['topLogprobs'];
  if (o['topLogprobs'] !== undefined) {
    const list = arr(o, 'topLogprobs', what);
    if (list.length !== tokenIds.length) throw invalidArgument(`${what}: 'topLogprobs' must hold one entry per token id`);
    topLogprobs = list.map((entry, i) => {
      const w = `${what} topLogprobs[${i}]`;
      const t = obj(entry, w);
      const ids = intArray(t, 'tokenIds', w, 0);
      const lps = logprobArray(t, 'logprobs', w);
      if (ids.length !== lps.length || ids.length > MAX_TOP_LOGPROBS) {
        throw invalidArgument(`${w}: 'tokenIds' and 'logprobs' must have the same length, at most ${MAX_TOP_LOGPROBS}`);
      }
      return { tokenIds: ids, logprobs: lps };
    });
  }
  let usage: WireGenerateOutput['usage'];
  if (o['usage'] !== undefined) {
    const u = obj(o['usage'], `${what} usage`);
    const w = `${what} usage`;
    usage = { promptTokens: int(u, 'promptTokens', w, 0), completionTokens: int(u, 'completionTokens', w, 0), cachedTokens: int(u, 'cachedTokens', w, 0) };
  }
  let kvTransfer: WireKvTransferHandle | undefined;
  if (o['kvTransfer'] !== undefined) {
    if (fr !== 'length') throw invalidArgument(`${what}: 'kvTransfer' comes only on a final output that finished with 'length'`);
    kvTransfer = decodeKvTransferHandle(o['kvTransfer'], `${what} kvTransfer`, usage?.promptTokens);
  }
  const kvImport = o['kvImport'] === undefined ? undefined : decodeKvImportReport(o['kvImport'], `${what} kvImport`);
  return {
    tokenIds,
    finishReason: fr,
    stopReason: sr,
    ...(logprobs !== undefined ? { logprobs } : {}),
    ...(topLogprobs !== undefined ? { topLogprobs } : {}),
    ...(usage !== undefined ? { usage } : {}),
    ...(kvTransfer !== undefined ? { kvTransfer } : {}),
    ...(kvImport !== undefined ? { kvImport } : {}),
  };
}

// ---- stats ----------------------------------------------------------------------------------------

export function decodeWireStatsRequest(value: unknown): WireStatsRequest {
  const what = 'stats request';
  const o = obj(value, what);
  version(o, what);
  const model = o['model'] === null ? null : str(o, 'model', what);
  const v = o['version'] === null ? null : int(o, 'version', what, 1);
  return { v: 1, model, version: v };
}

function duration(value: unknown, what: string): WireDuration {
  const o = obj(value, what);
  return { count: int(o, 'count', what, 0), ns: int(o, 'ns', what, 0) };
}

function durations(value: unknown, what: string): { [kind: string]: WireDuration } {
  const out: { [kind: string]: WireDuration } = {};
  for (const [k, v] of Object.entries(obj(value, what))) setEntry(out, k, duration(v, `${what}.${k}`));
  return out;
}

export function decodeWireStats(value: unknown): WireStats {
  const what = 'stats';
  const o = obj(value, what);
  const models = arr(o, 'models', what).map((m, i): WireModelStatistics => {
    const w = `${what} models[${i}]`;
    const s = obj(m, w);
    const responses: { [key: string]: { [kind: string]: WireDuration } } = {};
    for (const [k, v] of Object.entries(obj(s['response_stats'], `${w} response_stats`))) setEntry(responses, k, durations(v, `${w} response_stats.${k}`));
    return {
      name: str(s, 'name', w),
      version: str(s, 'version', w),
      last_inference: int(s, 'last_inference', w, 0),
      inference_count: int(s, 'inference_count', w, 0),
      execution_count: int(s, 'execution_count', w, 0),
      inference_stats: durations(s['inference_stats'], `${w} inference_stats`),
      response_stats: responses,
      batch_stats: arr(s, 'batch_stats', w).map((b, j) => {
        const bw = `${w} batch_stats[${j}]`;
        const bo = obj(b, bw);
        return {
          batch_size: int(bo, 'batch_size', bw, 0),
          compute_input: duration(bo['compute_input'], `${bw}.compute_input`),
          compute_infer: duration(bo['compute_infer'], `${bw}.compute_infer`),
          compute_output: duration(bo['compute_output'], `${bw}.compute_output`),
        };
      }),
      memory_usage: arr(s, 'memory_usage', w).map((u, j) => {
        const uw = `${w} memory_usage[${j}]`;
        const uo = obj(u, uw);
        return { type: str(uo, 'type', uw), id: int(uo, 'id', uw, 0), byte_size: int(uo, 'byte_size', uw, 0) };
      }),
    };
  });
  return { models };
}

// ---- KV snapshot ---------------------------------------------------------------------------------

export function decodeWireSnapshotRequest(value: unknown): WireSnapshotRequest {
  const what = 'snapshot request';
  const o = obj(value, what);
  version(o, what);
  return { v: 1, model: str(o, 'model', what) };
}

function hash(v: unknown, what: string): string {
  if (typeof v !== 'string' || !HASH_RE.test(v)) throw invalidArgument(`${what} must be a 16-digit lower-case hex hash`);
  return v;
}

export function decodeWireSnapshotChunk(value: unknown): WireSnapshotChunk {
  const what = 'snapshot chunk';
  const o = obj(value, what);
  const blocks = arr(o, 'blocks', what).map((b, i): SnapshotBlock => {
    const bo = obj(b, `${what} blocks[${i}]`);
    const w = `${what}: blocks[${i}]`;
    return {
      block_hash: hash(bo['block_hash'], `${w}.block_hash`),
      tokens_hash: hash(bo['tokens_hash'], `${w}.tokens_hash`),
      parent_hash: bo['parent_hash'] === null ? null : hash(bo['parent_hash'], `${w}.parent_hash`),
    } as SnapshotBlock;
  });
  return { last_event_id: int(o, 'last_event_id', what, -1), blocks, partial_blocks: int(o, 'partial_blocks', what, 0), done: bool(o, 'done', what) };
}

// ---- events --------------------------------------------------------------------------------------

export function decodeWireKvEvents(value: unknown): WireKvEvents {
  const what = 'KV events';
  const o = obj(value, what);
  version(o, what);
  return {
    v: 1,
    instanceId: str(o, 'instanceId', what),
    model: str(o, 'model', what),
    events: arr(o, 'events', what).map((e) => decodeKvCacheEvent(e)),
  };
}

export function decodeWireLoad(value: unknown): WireLoad {
  const what = 'load';
  const o = obj(value, what);
  version(o, what);
  return {
    v: 1,
    // bounded: consumers keep the latest sample per instance, possibly before they know the instance
    instanceId: id(o, 'instanceId', what),
    model: id(o, 'model', what),
    ts: num(o, 'ts', what),
    numRunning: int(o, 'numRunning', what, 0),
    numWaiting: int(o, 'numWaiting', what, 0),
    kvActiveBlocks: int(o, 'kvActiveBlocks', what, 0),
    kvTotalBlocks: int(o, 'kvTotalBlocks', what, 0),
    kvUsage: num(o, 'kvUsage', what),
    prefixCacheQueries: int(o, 'prefixCacheQueries', what, 0),
    prefixCacheHits: int(o, 'prefixCacheHits', what, 0),
  };
}

function nonNegative(value: unknown, field: string, what: string): number {
  if (typeof value !== 'number' || !Number.isFinite(value) || value < 0) throw invalidArgument(`${what}: '${field}' must be a finite number >= 0`);
  return value;
}

/** A period (from, to] in epoch ms: finite, `to` not before `from`. */
function period(o: Obj, what: string): { from: number; to: number } {
  const from = num(o, 'from', what);
  const to = num(o, 'to', what);
  if (to < from) throw invalidArgument(`${what}: 'to' must not be before 'from'`);
  return { from, to };
}

export function decodeWireForwardPass(value: unknown): WireForwardPass {
  const what = 'forward pass';
  const o = obj(value, what);
  version(o, what);
  const list = arr(o, 'steps', what);
  if (list.length > MAX_WIRE_FORWARD_PASS_STEPS) throw invalidArgument(`${what}: at most ${MAX_WIRE_FORWARD_PASS_STEPS} steps, got ${list.length}`);
  const steps = list.map((x, i): WireForwardPassStep => {
    const s = obj(x, `${what} steps[${i}]`);
    return {
      ts: num(s, 'ts', `${what} steps[${i}]`),
      wallMs: nonNegative(s['wallMs'], 'wallMs', `${what} steps[${i}]`),
      prefillTokens: int(s, 'prefillTokens', `${what} steps[${i}]`, 0),
      decodeKvTokens: int(s, 'decodeKvTokens', `${what} steps[${i}]`, 0),
    };
  });
  return { v: 1, instanceId: id(o, 'instanceId', what), model: id(o, 'model', what), ...period(o, what), steps, dropped: int(o, 'dropped', what, 0) };
}

/** A WireHistogram: 1..MAX_WIRE_HISTOGRAM_BOUNDS finite bounds >= 0, strictly ascending, one count more (integers >= 0). */
export function decodeWireHistogram(value: unknown, what: string): WireHistogram {
  const o = obj(value, what);
  const b = arr(o, 'bounds', what);
  if (b.length === 0 || b.length > MAX_WIRE_HISTOGRAM_BOUNDS) throw invalidArgument(`${what}: 1 to ${MAX_WIRE_HISTOGRAM_BOUNDS} bounds, got ${b.length}`);
  const bounds = b.map((x, i) => {
    const v = nonNegative(x, `bounds[${i}]`, what);
    if (i > 0 && v <= (b[i - 1] as number)) throw invalidArgument(`${what}: 'bounds' must ascend strictly`);
    return v;
  });
  const counts = intArray(o, 'counts', what, 0);
  if (counts.length !== bounds.length + 1) throw invalidArgument(`${what}: 'counts' must have one entry more than 'bounds' (${bounds.length + 1}), got ${counts.length}`);
  return { bounds, counts };
}

export function decodeWireRequestFigures(value: unknown): WireRequestFigures {
  const what = 'request figures';
  const o = obj(value, what);
  version(o, what);
  return {
    v: 1,
    routerId: id(o, 'routerId', what),
    model: id(o, 'model', what),
    ...period(o, what),
    requests: int(o, 'requests', what, 0),
    heldRequests: int(o, 'heldRequests', what, 0),
    isl: decodeWireHistogram(o['isl'], `${what} isl`),
    osl: decodeWireHistogram(o['osl'], `${what} osl`),
    ttftMs: decodeWireHistogram(o['ttftMs'], `${what} ttftMs`),
    itlMs: decodeWireHistogram(o['itlMs'], `${what} itlMs`),
  };
}

const PLANNER_POOLS: readonly WirePlannerDecision['pool'][] = ['prefill', 'decode', 'aggregated'];
const PLANNER_DIRECTIONS: readonly WirePlannerDecision['direction'][] = ['up', 'down', 'hold'];

export function decodeWirePlannerDecision(value: unknown): WirePlannerDecision {
  const what = 'planner decision';
  const o = obj(value, what);
  version(o, what);
  const pool = o['pool'];
  if (!PLANNER_POOLS.includes(pool as WirePlannerDecision['pool'])) throw invalidArgument(`${what}: 'pool' must be one of ${PLANNER_POOLS.join(', ')}`);
  const direction = o['direction'];
  if (!PLANNER_DIRECTIONS.includes(direction as WirePlannerDecision['direction'])) throw invalidArgument(`${what}: 'direction' must be one of ${PLANNER_DIRECTIONS.join(', ')}`);
  const reason = id(o, 'reason', what);
  return {
    v: 1,
    plannerId: id(o, 'plannerId', what),
    model: id(o, 'model', what),
    ts: num(o, 'ts', what),
    pool: pool as WirePlannerDecision['pool'],
    from: int(o, 'from', what, 0),
    to: int(o, 'to', what, 0),
    direction: direction as WirePlannerDecision['direction'],
    reason,
    dryRun: bool(o, 'dryRun', what),
  };
}

// ---- model card metadata -------------------------------------------------------------------------

export function decodeTensorCardMetadata(value: unknown): TensorCardMetadata {
  const what = 'tensor card metadata';
  const o = obj(value, what);
  return {
    modelMetadata: obj(o['modelMetadata'], `${what} modelMetadata`),
    modelConfig: obj(o['modelConfig'], `${what} modelConfig`),
    versions: strArray(o, 'versions', what),
    decoupled: bool(o, 'decoupled', what),
    ...(o['labels'] !== undefined ? { labels: decodeCardLabels(o['labels'], `${what} labels`) } : {}),
    ...(optBool(o, 'binaryTensors', what) === true ? { binaryTensors: true } : {}),
  };
}

function decodeCardLabels(value: unknown, what: string): TensorCardMetadata['labels'] & object {
  const out: { [version: string]: { [output: string]: string[] } } = {};
  for (const [version, outputs] of Object.entries(obj(value, what))) {
    const o = obj(outputs, `${what}['${version}']`);
    const byOutput: { [output: string]: string[] } = {};
    for (const name of Object.keys(o)) setEntry(byOutput, name, strArray(o, name, `${what}['${version}']`));
    setEntry(out, version, byOutput);
  }
  return out;
}

export function decodeLlmCardMetadata(value: unknown): LlmCardMetadata {
  const what = 'LLM card metadata';
  const o = obj(value, what);
  const engine = o['engine'];
  if (engine !== 'llm' && engine !== 'mocker') throw invalidArgument(`${what}: 'engine' must be 'llm' or 'mocker'`);
  const role = o['role'];
  if (role !== undefined && !(WORKER_ROLES as readonly unknown[]).includes(role)) throw invalidArgument(`${what}: 'role' must be one of ${WORKER_ROLES.join(', ')}`);
  let kvTransfer: LlmCardMetadata['kvTransfer'];
  if (o['kvTransfer'] !== undefined) {
    const t = obj(o['kvTransfer'], `${what} kvTransfer`);
    kvTransfer = { address: decodeTransferAddress(t['address'], `${what} kvTransfer`), layout: decodeKvLayout(t['layout'], `${what} kvTransfer layout`) };
  }
  const outputParsing = o['outputParsing'] === undefined ? undefined : decodeOutputParsing(o['outputParsing'], `${what} outputParsing`);
  return {
    ...decodeTensorCardMetadata(o),
    engine,
    totalKvBlocks: int(o, 'totalKvBlocks', what, 0),
    eosTokenIds: intArray(o, 'eosTokenIds', what, 0),
    ...(o['vocabSize'] !== undefined ? { vocabSize: int(o, 'vocabSize', what, 1) } : {}),
    ...(o['samplingDefaults'] !== undefined ? { samplingDefaults: decodeSamplingDefaults(o['samplingDefaults'], `${what} samplingDefaults`) } : {}),
    created: int(o, 'created', what, 0),
    kvEvents: bool(o, 'kvEvents', what),
    ...(role !== undefined ? { role: role as WorkerRole } : {}),
    ...(kvTransfer !== undefined ? { kvTransfer } : {}),
    ...(outputParsing !== undefined ? { outputParsing } : {}),
  };
}

/** The model's chat output parsing: known parser names only (`checkOutputParsing`). */
function decodeOutputParsing(value: unknown, what: string): OutputParsingConfig {
  const o = obj(value, what);
  const name = (key: string): string | undefined => {
    const v = o[key];
    if (v === undefined) return undefined;
    if (typeof v !== 'string') throw invalidArgument(`${what}: '${key}' must be a string`);
    return v;
  };
  const toolCallParser = name('toolCallParser');
  const reasoningParser = name('reasoningParser');
  const auto = o['enableAutoToolChoice'];
  if (auto !== undefined && typeof auto !== 'boolean') throw invalidArgument(`${what}: 'enableAutoToolChoice' must be a boolean`);
  return checkOutputParsing(
    {
      ...(toolCallParser === undefined ? {} : { toolCallParser }),
      ...(reasoningParser === undefined ? {} : { reasoningParser }),
      ...(auto === undefined ? {} : { enableAutoToolChoice: auto }),
    },
    what,
  );
}

/** A card's role; absent = 'aggregated' (protocols.ts LlmCardMetadata.role). */
export function roleOf(metadata: { readonly role?: WorkerRole }): WorkerRole {
  return metadata.role ?? 'aggregated';
}
