/**
 * The messages between the server (main thread) and a JavaScript model's thread
 * (`worker/javascript-instance.mjs`), and the conversions between them and the engine's types.
 *
 * Tensors cross as `WireTensor`: Triton's byte layout in a buffer of their own, transferred
 * (never a view into a larger buffer: structured clone would copy the whole backing store).
 * Requests are identified by a `key` unique within one thread; BLS calls by a `callId` chosen by
 * the thread. Timestamps are `process.hrtime.bigint()`, one clock for every thread.
 */
import { internal, SwitchyardError, type ErrorCode } from '@switchyard/common';
import { modelParameters, type DataType, type InferRequest, type InferResponse, type InferTensor, type Parameters } from '@switchyard/kserve';
import type { BackendResponse } from '../backend.js';
import type { NormalizedRequest } from '../request-normalizer.js';
import { sequenceOf } from '../sequence/sequence-controls.js';

export interface WireTensor {
  name: string;
  datatype: DataType;
  shape: number[];
  data: Uint8Array;
}

export interface WireError {
  message: string;
  code: ErrorCode;
}

export type WireResponse = { outputs: WireTensor[]; parameters: Parameters } | { error: WireError };

export interface WireRequest {
  key: number;
  id: string;
  modelName: string;
  modelVersion: string;
  /** The custom parameters (`modelParameters`): the request properties travel apart, as below. */
  parameters: Parameters;
  /** Python's `request.correlation_id()`: the sequence id (a number, a bigint past 2^53, or a string); 0 when none. */
  correlationId: number | bigint | string;
  /** Python's `request.flags()`: 1 (sequence start) | 2 (sequence end), Triton's TRITONSERVER_REQUEST_FLAG_SEQUENCE_*. */
  flags: number;
  inputs: WireTensor[];
  requestedOutputs: string[];
}

/** A BLS request as the model built it. */
export interface WireBlsRequest {
  id: string;
  modelName: string;
  modelVersion: number | undefined;
  parameters: Parameters;
  inputs: WireTensor[];
  outputs: string[];
}

/** What `initialize(args)` receives (besides `pb`), Python backend's keys. */
export interface InitializeArgs {
  model_config: unknown;
  model_name: string;
  model_version: string;
  model_repository: string;
  model_instance_name: string;
  model_instance_kind: string;
  model_instance_device_id: string;
}

export interface ThreadData {
  mode: 'instance' | 'autocomplete';
  modelFile: string;
  /** The model configuration in Triton's JSON form. */
  config: unknown;
  decoupled: boolean;
  args?: InitializeArgs;
}

export type ToThread =
  | { type: 'execute'; executeId: number; requests: WireRequest[] }
  | { type: 'cancel'; key: number }
  | { type: 'bls-result'; callId: number; response?: WireResponse; error?: WireError; final: boolean }
  | { type: 'finalize' };

export type FromThread =
  | { type: 'ready' }
  | { type: 'init-error'; message: string }
  | { type: 'autocomplete'; config: unknown | null }
  | { type: 'executed'; executeId: number; results: (WireResponse | null)[]; inputEndNs: bigint; outputStartNs: bigint }
  | { type: 'execute-error'; executeId: number; message: string; code: ErrorCode }
  | { type: 'response'; key: number; response: WireResponse | undefined; final: boolean; sentNs: bigint }
  | { type: 'bls'; callId: number; stream: boolean; request: WireBlsRequest }
  | { type: 'log'; level: 'verbose' | 'info' | 'warn' | 'error'; message: string }
  | { type: 'finalized'; error?: string };

/** A copy of `data` in a buffer of its own (safe to transfer). */
export function ownedCopy(data: Uint8Array): Uint8Array {
  const copy = new Uint8Array(data.byteLength);
  copy.set(data);
  return copy;
}

export function tensorToWire(t: InferTensor, transfer: ArrayBuffer[]): WireTensor {
  const data = ownedCopy(t.data);
  transfer.push(data.buffer as ArrayBuffer);
  return { name: t.name, datatype: t.datatype, shape: [...t.shape], data };
}

export function tensorFromWire(t: WireTensor): InferTensor {
  return { name: t.name, datatype: t.datatype, shape: t.shape, data: t.data, parameters: {} };
}

export function errorFromWire(e: WireError): SwitchyardError {
  return new SwitchyardError(e.code, e.message);
}

export function errorToWire(e: SwitchyardError): WireError {
  return { message: e.message, code: e.code };
}

/** A request for the model's thread: inputs in the shape backends see (batch dimension first, after `reshape`). */
export function requestToWire(key: number, normalized: NormalizedRequest, modelVersion: number, transfer: ArrayBuffer[]): WireRequest {
  const { request } = normalized;
  const sequence = sequenceOf(request);
  const id = sequence.id.value;
  return {
    key,
    id: request.id,
    modelName: request.modelName,
    modelVersion: String(modelVersion),
    // What Triton's backends see: the custom parameters, not the request properties (sequence, priority, timeout).
    parameters: modelParameters(request.parameters),
    correlationId: typeof id === 'bigint' && id <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(id) : id,
    flags: (sequence.start ? 1 : 0) | (sequence.end ? 2 : 0),
    inputs: normalized.inputs.map((i) => tensorToWire({ name: i.name, datatype: i.datatype, shape: i.shape, data: i.data, parameters: {} }, transfer)),
    requestedOutputs: [...normalized.requestedOutputs],
  };
}

export function responseFromWire(r: WireResponse): BackendResponse {
  if ('error' in r) return { error: errorFromWire(r.error) };
  return { outputs: r.outputs.map(tensorFromWire), parameters: r.parameters };
}

/** A BLS request as the engine's `InferRequest`. */
export function blsRequestFromWire(r: WireBlsRequest): InferRequest {
  if (typeof r.modelVersion === 'number' && !Number.isInteger(r.modelVersion)) throw internal(`invalid model version '${r.modelVersion}'`);
  return {
    id: r.id,
    modelName: r.modelName,
    modelVersion: r.modelVersion,
    parameters: r.parameters,
    inputs: r.inputs.map(tensorFromWire),
    outputs: r.outputs.map((name) => ({ name, parameters: {} })),
  };
}

/** An engine response for the model's thread. */
export function inferResponseToWire(r: InferResponse, transfer: ArrayBuffer[]): WireResponse {
  return { outputs: r.outputs.map((t) => tensorToWire(t, transfer)), parameters: r.parameters };
}
