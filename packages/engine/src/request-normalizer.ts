/**
 * Request normalisation (Triton's `InferenceRequest::Normalize` + input byte-size validation):
 * a pure function from (model config, request) to a request the schedulers and backends can
 * trust, or an invalid_argument error with Triton's exact message.
 *
 * Order of checks follows Triton so that a request with several problems reports the same one:
 * duplicates, requested outputs, input count, batch dimension, then per input: name, datatype,
 * shape, reshape, and finally byte sizes.
 */
import { invalidArgument, type SwitchyardError } from '@switchyard/common';
import { dimsToString, elementByteSize, elementCount, requestPrefix, type InferRequest } from '@switchyard/kserve';
import type { ModelConfig, ModelInput } from '@switchyard/model-config';
import { configDataTypeToWire } from '@switchyard/model-config';
import type { NormalizedInput, NormalizedRequest } from './normalized-request.js';
import { checkSequenceParameters } from './sequence/sequence-controls.js';

export type { NormalizedInput, NormalizedRequest } from './normalized-request.js';

// Triton's request prefix and dims rendering live beside the shape check in @switchyard/kserve.
export { dimsToString, requestPrefix };

const IMPLICIT_BATCH_NOTE =
  'NOTE: Setting a non-zero max_batch_size in the model config requires a batch dimension to be prepended to each input shape. ' +
  'If you want to specify the full shape including the batch dim in your input dims config, try setting max_batch_size to zero. ' +
  'See the model configuration docs for more info on max_batch_size.';

interface ConfigIndex {
  inputs: Map<string, ModelInput>;
  outputNames: Set<string>;
  allOutputs: string[];
  required: ModelInput[];
}

/** Lookup tables per (immutable, loaded) config, built once instead of per request. */
const indexes = new WeakMap<ModelConfig, ConfigIndex>();

function indexOf(config: ModelConfig): ConfigIndex {
  let index = indexes.get(config);
  if (index === undefined) {
    index = {
      inputs: new Map(config.input.map((i) => [i.name, i])),
      outputNames: new Set(config.output.map((o) => o.name)),
      allOutputs: config.output.map((o) => o.name),
      required: config.input.filter((i) => !i.optional),
    };
    indexes.set(config, index);
  }
  return index;
}

/** Validate and normalise `request` against `config` (treated as immutable). Throws invalid_argument. */
export function normalizeRequest(config: ModelConfig, request: InferRequest): NormalizedRequest {
  const model = config.name;
  // The request prefix is built only for a refusal.
  const fail = (message: string): SwitchyardError => invalidArgument(requestPrefix(request.id) + message);
  const { inputs: inputConfigs, outputNames, allOutputs, required } = indexOf(config);
  // Sequence id rules Triton applies while building the request (string length, CORRID kind).
  checkSequenceParameters(config, request);

  const repeated = repeatedName(request.inputs);
  if (repeated !== undefined) throw fail(`input '${repeated}' already exists in request`);

  // 1. Requested outputs must exist (Triton's Model::GetOutput message carries no request prefix).
  let requestedOutputs: string[];
  if (request.outputs.length === 0) {
    requestedOutputs = allOutputs.slice();
  } else {
    const seen = new Set<string>();
    requestedOutputs = [];
    for (const output of request.outputs) {
      if (seen.has(output.name)) throw fail(`output '${output.name}' already exists in request`);
      seen.add(output.name);
      if (!outputNames.has(output.name)) {
        throw invalidArgument(`unexpected inference output '${output.name}' for model '${model}'`);
      }
      requestedOutputs.push(output.name);
    }
  }

  // 2. Input count.
  if (request.inputs.length > config.input.length || request.inputs.length < required.length) {
    throw fail(inputCountMessage(config, request, required));
  }

  // 3. Batch dimension.
  let batchSize = 0;
  if (config.max_batch_size > 0) {
    for (const input of request.inputs) {
      const inputConfig = inputConfigs.get(input.name);
      if (inputConfig === undefined) throw unexpectedInput(input.name, model);
      if (inputConfig.is_shape_tensor) continue;
      const first = input.shape[0];
      if (first === undefined) {
        throw fail(`input '${input.name}' has no shape but model requires batch dimension for '${model}'`);
      }
      if (batchSize === 0) batchSize = first;
      else if (first !== batchSize) {
        throw fail(`input '${input.name}' batch size does not match other inputs for '${model}'`);
      }
    }
    if (batchSize > config.max_batch_size) {
      throw fail(`inference request batch-size must be <= ${config.max_batch_size} for '${model}'`);
    }
  }

  // 4. Per input: name, datatype, shape against dims, reshape.
  const inputs: NormalizedInput[] = [];
  for (const input of request.inputs) {
    const inputConfig = inputConfigs.get(input.name);
    if (inputConfig === undefined) throw unexpectedInput(input.name, model);
    const expected = configDataTypeToWire(inputConfig.data_type);
    if (input.datatype !== expected) {
      throw fail(`inference input '${input.name}' data-type is '${input.datatype}', but model '${model}' expects '${expected}'`);
    }
    const batched = config.max_batch_size > 0 && !inputConfig.is_shape_tensor;
    const dims = batched ? input.shape.slice(1) : input.shape.slice();
    checkShape(inputConfig, dims, input.shape, config.max_batch_size > 0, fail, model);
    let backendDims = dims;
    if (inputConfig.reshape !== undefined) backendDims = applyReshape(inputConfig.dims, dims, inputConfig.reshape.shape);
    const shape = batched ? [batchSize, ...backendDims] : backendDims;
    inputs.push({ name: input.name, datatype: input.datatype, shape, originalShape: input.shape.slice(), data: input.data });
  }

  // 5. Byte sizes (Triton validates these once the data is attached). Triton walks its inputs in
  // the order of its input map (an unordered_map, which lists the latest added first), so when
  // several inputs are wrong the last one in the request is the one named (qa L0_input_validation
  // test_input_string_shape_validation names 'INPUT1').
  for (let i = inputs.length - 1; i >= 0; i--) checkByteSize(inputs[i] as NormalizedInput, model, request.id);

  return { request, batchSize, inputs, requestedOutputs };
}

/** The first name that repeats an earlier one, or undefined; a Set only for many inputs (most requests have one or two). */
function repeatedName(list: readonly { name: string }[]): string | undefined {
  if (list.length <= 8) {
    for (let i = 1; i < list.length; i++) {
      const name = (list[i] as { name: string }).name;
      for (let j = 0; j < i; j++) if ((list[j] as { name: string }).name === name) return name;
    }
    return undefined;
  }
  const seen = new Set<string>();
  for (const { name } of list) {
    if (seen.has(name)) return name;
    seen.add(name);
  }
  return undefined;
}

function unexpectedInput(name: string, model: string): SwitchyardError {
  return invalidArgument(`unexpected inference input '${name}' for model '${model}'`);
}

/**
 * Triton's input-count message. Reproduces its list rendering exactly, including the quirk that
 * an empty "missing" list renders as `]` (it pops the opening bracket).
 */
function inputCountMessage(config: ModelConfig, request: InferRequest, required: readonly ModelInput[]): string {
  const given = new Set(request.inputs.map((i) => i.name));
  const missing = config.input.filter((i) => !i.optional && !given.has(i.name)).map((i) => `'${i.name}'`);
  const missingList = missing.length === 0 ? ']' : `[${missing.join(',')}]`;
  const givenList = `[${request.inputs.map((i) => `'${i.name}'`).join(',')}]`;
  const head =
    config.input.length === required.length
      ? `expected ${config.input.length} inputs but got ${request.inputs.length} inputs`
      : `expected number of inputs between ${required.length} and ${config.input.length} but got ${request.inputs.length} inputs`;
  return `${head} for model '${config.name}'. Got input(s) ${givenList}, but missing required input(s) ${missingList}. Please provide all required input(s).`;
}

function checkShape(
  inputConfig: ModelInput,
  dims: readonly number[],
  originalShape: readonly number[],
  batching: boolean,
  fail: (message: string) => SwitchyardError,
  model: string,
): void {
  const configDims = inputConfig.dims;
  let matches = configDims.length === dims.length;
  if (matches) {
    for (let i = 0; i < configDims.length; i++) {
      if (dims[i] === -1) {
        throw fail(`All input dimensions should be specified for input '${inputConfig.name}' for model '${model}', got ${dimsToString(originalShape)}`);
      }
      if (configDims[i] !== -1 && configDims[i] !== dims[i]) {
        matches = false;
        break;
      }
    }
  }
  if (!matches) {
    const full = batching && !inputConfig.is_shape_tensor ? [-1, ...configDims] : [...configDims];
    const note = batching ? IMPLICIT_BATCH_NOTE : '';
    throw fail(`unexpected shape for input '${inputConfig.name}' for model '${model}'. Expected ${dimsToString(full)}, got ${dimsToString(originalShape)}. ${note}`);
  }
}

/** Map request dims onto `reshape`: each -1 in the reshape takes the next variable dim's value. */
export function applyReshape(configDims: readonly number[], dims: readonly number[], reshape: readonly number[]): number[] {
  const variable: number[] = [];
  configDims.forEach((d, i) => {
    if (d === -1) variable.push(dims[i] ?? 0);
  });
  return reshape.map((d) => (d === -1 ? (variable.shift() ?? 0) : d));
}

function checkByteSize(input: NormalizedInput, model: string, requestId: string): void {
  const count = elementCount(input.shape);
  if (input.datatype !== 'BYTES') {
    const expected = count * elementByteSize(input.datatype);
    if (input.data.byteLength !== expected) {
      throw invalidArgument(`${requestPrefix(requestId)}input byte size mismatch for input '${input.name}' for model '${model}'. Expected ${expected}, got ${input.data.byteLength}`);
    }
    return;
  }
  // BYTES: walk the 4-byte length prefixes and count elements against the shape.
  const data = input.data;
  let offset = 0;
  let elements = 0;
  while (offset < data.byteLength) {
    if (offset + 4 > data.byteLength) {
      throw invalidArgument(
        `${requestPrefix(requestId)}incomplete string length indicator for inference input '${input.name}' for model '${model}', expecting 4 bytes but only ${data.byteLength - offset} bytes available. Please make sure the string length indicator is in one buffer.`,
      );
    }
    // Byte by byte: unaligned DataView reads cost ~5x more, and 800k-element tensors are common.
    const length = ((data[offset] as number) | ((data[offset + 1] as number) << 8) | ((data[offset + 2] as number) << 16) | ((data[offset + 3] as number) << 24)) >>> 0;
    offset += 4;
    if (offset + length > data.byteLength) {
      throw invalidArgument(`${requestPrefix(requestId)}element byte size indicator exceeds the end of the buffer for inference input '${input.name}' for model '${model}'`);
    }
    offset += length;
    elements++;
    if (elements > count) {
      throw invalidArgument(`${requestPrefix(requestId)}unexpected number of string elements ${elements} for inference input '${input.name}' for model '${model}', expecting ${count}`);
    }
  }
  if (elements !== count) {
    throw invalidArgument(`${requestPrefix(requestId)}expected ${count} string elements for inference input '${input.name}' for model '${model}', got ${elements}`);
  }
}
