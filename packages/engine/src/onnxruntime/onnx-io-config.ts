/**
 * Pure rules that relate an ONNX model's declared inputs/outputs to the model configuration,
 * following Triton's onnxruntime backend:
 * - `autoCompleteOnnxConfig`: fill inputs/outputs/max_batch_size (and dynamic batching) from
 *   the model when the config does not specify both inputs and outputs.
 * - `checkOnnxIo`: on load, the config's inputs/outputs must exist in the model with the same
 *   datatype and compatible dims; messages are Triton's. A ragged input (`allow_ragged_batch`)
 *   must be `[-1]` in the model, whatever the config's dims and max_batch_size: the backend feeds
 *   it the batch's elements end to end as one 1-D tensor. An output named by a `batch_output` is
 *   not compared with the model (its shape is the batch's, scattered back per request).
 */
import { invalidArgument, internal } from '@switchyard/common';
import type { ModelConfig, ModelInput, ModelOutput } from '@switchyard/model-config';
import { configTypeOfOrt } from './onnx-tensor-codec.js';
import type { OnnxIo, OnnxIoInfo } from './onnx-io.js';
import { checkSequenceControlInputs, checkSequenceStateOutputs } from './sequence-onnx-io.js';

export type { OnnxIo, OnnxIoInfo } from './onnx-io.js';

/** Triton's ORT backend `default-max-batch-size`. */
export const ONNX_DEFAULT_MAX_BATCH_SIZE = 4;

function shapeString(dims: readonly number[]): string {
  return `[${dims.join(',')}]`;
}

/**
 * Returns a completed copy of `config`. Leaves it untouched when both inputs and outputs are
 * already given. Throws invalid_argument when the config asks for batching the model cannot do.
 */
export function autoCompleteOnnxConfig(config: ModelConfig, io: OnnxIo, defaultMaxBatchSize = ONNX_DEFAULT_MAX_BATCH_SIZE): ModelConfig {
  const inputCount = config.input.length + config.batch_input.length;
  const outputCount = config.output.length;
  if (inputCount > 0 && outputCount > 0) return config;

  const out: ModelConfig = structuredClone(config);
  const all = [...io.inputs, ...io.outputs];
  const canBatch = all.every((t) => t.dims.length > 0 && t.dims[0] === -1);
  if (canBatch) {
    if (out.max_batch_size === 0) out.max_batch_size = Math.max(defaultMaxBatchSize, 0);
    if (out.max_batch_size > 1 && out.dynamic_batching === undefined && out.sequence_batching === undefined) {
      out.dynamic_batching = {
        preferred_batch_size: [out.max_batch_size],
        max_queue_delay_microseconds: 0,
        preserve_ordering: false,
        priority_levels: 0,
        default_priority_level: 0,
        priority_queue_policy: {},
      };
    }
  } else if (out.max_batch_size !== 0) {
    throw invalidArgument(
      `autofill failed for model '${config.name}': model does not support batching while non-zero max_batch_size is specified`,
    );
  }

  const skip = out.max_batch_size > 0 ? 1 : 0;
  const dimsOf = (info: OnnxIoInfo): { dims: number[]; reshape?: { shape: number[] } } => {
    const dims = info.dims.slice(skip);
    if (dims.length > 0) return { dims };
    // A scalar: dims [1], and with batching an empty reshape so the model sees [batch].
    return out.max_batch_size > 0 ? { dims: [1], reshape: { shape: [] } } : { dims: [1] };
  };
  if (config.input.length === 0) {
    out.input = io.inputs.map((info): ModelInput => ({
      name: info.name,
      data_type: configTypeOfOrt(info.type),
      format: 'FORMAT_NONE',
      ...dimsOf(info),
      is_shape_tensor: false,
      allow_ragged_batch: false,
      optional: false,
      is_non_linear_format_io: false,
    }));
  }
  if (outputCount === 0) {
    out.output = io.outputs.map((info): ModelOutput => ({
      name: info.name,
      data_type: configTypeOfOrt(info.type),
      ...dimsOf(info),
      label_filename: '',
      is_shape_tensor: false,
      is_non_linear_format_io: false,
    }));
  }
  return out;
}

/** Check the config's inputs/outputs against the model. Throws with Triton's messages. */
export function checkOnnxIo(config: ModelConfig, io: OnnxIo): void {
  const model = config.name;
  // Sequence control and implicit-state inputs are model inputs the server feeds (Triton counts them).
  const sequenceInputs = checkSequenceControlInputs(config, io);
  const expectedInputs = config.input.filter((i) => !i.optional).length + config.batch_input.length + sequenceInputs;
  if (io.inputs.length !== expectedInputs) {
    throw invalidArgument(`unable to load model '${model}', configuration expects ${expectedInputs} inputs, model provides ${io.inputs.length}`);
  }
  const inputs = new Map(io.inputs.map((i) => [i.name, i]));
  for (const input of config.input) {
    if (input.optional && config.max_batch_size !== 0) {
      throw invalidArgument(`unable to load model '${model}', optional input '${input.name}' is not supported for models that support batching`);
    }
    const info = inputs.get(input.name);
    if (info === undefined) {
      throw invalidArgument(`unexpected inference input '${input.name}', allowed inputs are: ${[...inputs.keys()].sort().join(', ')}`);
    }
    if (input.optional && input.allow_ragged_batch) {
      checkDatatype(model, 'input', input.name, input.data_type, info);
      throw invalidArgument(
        `unable to load model '${model}', configuration expects model provides input with shape [-1] for ragged input '${input.name}', which is not supported for optional input`,
      );
    }
    if (input.allow_ragged_batch) {
      checkDatatype(model, 'input', input.name, input.data_type, info);
      // Triton's message has two spaces before "for".
      if (info.dims.length !== 1 || info.dims[0] !== -1) {
        throw invalidArgument(
          `unable to load model '${model}', configuration expects model provides input with shape [-1]  for ragged input '${input.name}', model provides ${shapeString(info.dims)}`,
        );
      }
      continue;
    }
    checkTensor(model, 'input', input.name, input.data_type, input.reshape?.shape ?? input.dims, info, config.max_batch_size, false);
  }
  const batchOutputs = batchOutputTargets(config);
  const outputs = new Map(io.outputs.map((o) => [o.name, o]));
  for (const output of config.output) {
    const info = outputs.get(output.name);
    if (info === undefined) {
      throw invalidArgument(`unexpected inference output '${output.name}', allowed outputs are: ${[...outputs.keys()].sort().join(', ')}`);
    }
    // A batch output's shape is the batch's, not the config's: only its datatype is checked.
    if (batchOutputs.has(output.name)) checkDatatype(model, 'output', output.name, output.data_type, info);
    else checkTensor(model, 'output', output.name, output.data_type, output.reshape?.shape ?? output.dims, info, config.max_batch_size, true);
  }
  checkSequenceStateOutputs(config, io);
}

/** Names of the outputs some `batch_output` targets. */
function batchOutputTargets(config: ModelConfig): Set<string> {
  const out = new Set<string>();
  for (const b of config.batch_output as { target_name?: string[] }[]) for (const t of b.target_name ?? []) out.add(t);
  return out;
}

function checkDatatype(model: string, kind: 'input' | 'output', name: string, configType: string, info: OnnxIoInfo): void {
  const modelType = configTypeOfOrt(info.type);
  if (configType === 'TYPE_BF16' || configType === 'TYPE_INVALID') {
    throw internal(`unsupported datatype ${configType} for ${kind} '${name}' for model '${model}'`);
  }
  if (configType !== modelType) {
    throw invalidArgument(`unable to load model '${model}', configuration expects datatype ${configType} for ${kind} '${name}', model provides ${modelType}`);
  }
}

function checkTensor(
  model: string,
  kind: 'input' | 'output',
  name: string,
  configType: string,
  dims: readonly number[],
  info: OnnxIoInfo,
  maxBatchSize: number,
  exact: boolean,
): void {
  checkDatatype(model, kind, name, configType, info);
  if (info.dims.length === 0) {
    // A scalar in the model: the config may only say 1s.
    if (dims.some((d) => d !== 1)) {
      throw invalidArgument(
        `unable to load model '${model}', scalar tensor '${name}', should only provide 1 in the model configuration when the model doesn't support batching. Model configuration provided: ${shapeString(dims)}.`,
      );
    }
    return;
  }
  compareDims(model, name, info.dims, dims, maxBatchSize, exact);
}

function compareDims(model: string, name: string, modelShape: readonly number[], dims: readonly number[], maxBatchSize: number, exact: boolean): void {
  const full = maxBatchSize > 0 ? [-1, ...dims] : [...dims];
  if (maxBatchSize > 0 && (modelShape.length === 0 || modelShape[0] !== -1)) {
    throw invalidArgument(
      `model '${model}', tensor '${name}': for the model to support batching the shape should have at least 1 dimension and the first dimension must be -1; but shape expected by the model is ${shapeString(modelShape)}`,
    );
  }
  let ok = modelShape.length === full.length;
  for (let i = 0; ok && i < full.length; i++) {
    const m = modelShape[i] as number;
    if (exact || m !== -1) ok = m === full[i];
  }
  if (ok) return;
  const detail =
    maxBatchSize > 0
      ? `${full.length} dimensions (an initial batch dimension because max_batch_size > 0 followed by the explicit tensor shape, making complete shape ${shapeString(full)})`
      : `${dims.length} dimensions (shape ${shapeString(dims)})`;
  throw invalidArgument(
    `model '${model}', tensor '${name}': the model expects ${modelShape.length} dimensions (shape ${shapeString(modelShape)}) but the model configuration specifies ${detail}`,
  );
}
