/**
 * Triton's generate extension (`POST /v2/models/{m}/generate` and `/generate_stream`): a flat
 * JSON object whose keys name model inputs (→ tensors) or request parameters (everything else),
 * answered by a flat JSON object of `model_name`, `model_version`, `id`, response parameters and
 * outputs by name (a one-element output is unwrapped to a scalar).
 *
 * Shapes are deduced from the model metadata: fixed dimensions take their share of the element
 * count, the innermost variable dimension takes the rest, other variable dimensions become 1.
 */
import { invalidArgument } from '@switchyard/common';
import { type JsonValue, isJsonObject, parseJson, setOwn, stringifyJson } from './http-json.js';
import { tensorDataToJson, jsonToTensorData } from './json-data.js';
import type { InferRequest, InferResponse, InferTensor } from './protocols.js';
import { dataTypeOf } from './tensor.js';

export interface GenerateInputMetadata {
  name: string;
  datatype: string;
  /** Metadata shape: `[-1, ...dims]` for batching models. */
  shape: readonly number[];
}

/** Decode a generate request body into an `InferRequest` (all outputs requested, as JSON). */
export function decodeHttpGenerateRequest(
  src: { modelName: string; modelVersion: number | undefined; body: Uint8Array },
  inputs: readonly GenerateInputMetadata[],
): InferRequest {
  const root = parseJson(src.body);
  const request: InferRequest = {
    id: '',
    modelName: src.modelName,
    modelVersion: src.modelVersion,
    parameters: {},
    inputs: [],
    outputs: [],
  };
  if (!isJsonObject(root)) return request;
  const byName = new Map(inputs.map((i) => [i.name, i]));
  for (const key of Object.keys(root)) {
    const value = root[key] as JsonValue;
    const meta = byName.get(key);
    if (meta === undefined) {
      // The documented form nests request parameters: `"parameters": {"stream": true, "temperature": 0}`.
      if (key === 'parameters' && isJsonObject(value)) {
        for (const name of Object.keys(value)) setOwn(request.parameters, name, generateParameter(name, value[name] as JsonValue));
        continue;
      }
      setOwn(request.parameters, key, generateParameter(key, value));
      continue;
    }
    request.inputs.push(generateInput(key, meta, value));
  }
  return request;
}

/**
 * A request parameter's value: string, bool, integer or (unlike Triton's older releases, which
 * refused them) a finite double such as a sampling temperature.
 */
function generateParameter(key: string, value: JsonValue): string | boolean | number | bigint {
  if (typeof value === 'string' || typeof value === 'boolean' || typeof value === 'bigint') return value;
  if (typeof value === 'number' && Number.isFinite(value)) return value;
  throw invalidArgument(`parameter '${key}' has invalid type. It should be either 'int', 'bool', 'double', or 'string'.`);
}

function generateInput(name: string, meta: GenerateInputMetadata, value: JsonValue): InferTensor {
  const datatype = dataTypeOf(meta.datatype);
  if (datatype === undefined) throw invalidArgument(`invalid datatype for input ${name}`);
  let remaining = Array.isArray(value) ? value.length : 1;
  const shape = [...meta.shape];
  const bad = () => invalidArgument(`The schema can not convert input '${name}' to tensor with proper shape`);
  for (let d = shape.length - 1; d >= 0; d--) {
    const dim = shape[d] as number;
    if (dim !== -1) {
      if (dim === 0 || remaining % dim !== 0) throw bad();
      remaining /= dim;
    }
  }
  for (let d = shape.length - 1; d >= 0; d--) {
    if (shape[d] === -1) {
      shape[d] = remaining;
      remaining = 1;
    }
  }
  if (remaining !== 1) throw bad();
  const data = jsonToTensorData(name, datatype, shape, Array.isArray(value) ? value : [value]);
  return { name, datatype, shape, data, parameters: {} };
}

/**
 * Encode one generate response as its JSON text. Keys are written in byte order (Triton
 * collects them in a `std::map`); when names collide the first of id / model_name /
 * model_version, then parameters, then outputs wins.
 */
export function encodeHttpGenerateResponse(response: InferResponse): string {
  const fields = new Map<string, string>();
  const put = (k: string, v: string) => {
    if (!fields.has(k)) fields.set(k, v);
  };
  if (response.id !== '') put('id', JSON.stringify(response.id));
  put('model_name', JSON.stringify(response.modelName));
  put('model_version', JSON.stringify(String(response.modelVersion)));
  for (const [k, v] of Object.entries(response.parameters)) put(k, stringifyJson(v));
  for (const t of response.outputs) {
    const data = tensorDataToJson(t.name, t.datatype, t.shape, t.data);
    const length = Array.isArray(data) ? data.length : data.values.length;
    if (length === 1 && Array.isArray(data)) put(t.name, stringifyJson(data[0]));
    else if (length === 1) put(t.name, stringifyJson(data).slice(1, -1));
    else put(t.name, stringifyJson(data));
  }
  const keys = [...fields.keys()].sort(compareBytes);
  return `{${keys.map((k) => `${JSON.stringify(k)}:${fields.get(k) as string}`).join(',')}}`;
}

function compareBytes(a: string, b: string): number {
  return Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8'));
}
