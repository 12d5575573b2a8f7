/**
 * Triton's output reshape (`InferenceResponse::AddOutput` → `Output::Reshape` in core), applied to
 * every response the engine delivers, whatever answered it (ONNX Runtime, JavaScript, LLM
 * backends, an ensemble): an output whose config has `reshape` leaves the model in the reshape's
 * shape and reaches clients (and ensembles, BLS callers, the response cache) in the config's
 * `dims`. The batch dimension stays when the model batches (`max_batch_size > 0`) and the output
 * has dimensions; each -1 of `dims` takes, in order, the size the output has at a -1 of
 * `reshape.shape`. Outputs without `reshape`, or not in the config, keep their shape.
 *
 * Deviation: Triton sets the new shape without looking at the data; an output whose elements do
 * not fill it (a model answering in a shape its config does not describe) fails its response
 * here (internal, naming the output) rather than reaching clients with a shape its bytes do not
 * match.
 */
import { internal, type SwitchyardError } from '@switchyard/common';
import { dimsToString, type InferTensor } from '@switchyard/kserve';
import type { ModelConfig, ModelOutput } from '@switchyard/model-config';
import type { InferResult } from './types.js';

/** Per config: its outputs that have a reshape (most configs have none). */
const reshapedOutputs = new WeakMap<ModelConfig, ReadonlyMap<string, ModelOutput>>();

function outputsWithReshape(config: ModelConfig): ReadonlyMap<string, ModelOutput> {
  let found = reshapedOutputs.get(config);
  if (found === undefined) {
    found = new Map(config.output.filter((o) => o.reshape !== undefined).map((o) => [o.name, o]));
    reshapedOutputs.set(config, found);
  }
  return found;
}

/**
 * The client shape of an output the model produced in `shape` (Triton's `Output::Reshape`);
 * undefined when `shape` does not have the variable dimensions `reshape.shape` names.
 */
export function reshapeOutputShape(output: ModelOutput, batching: boolean, shape: readonly number[]): number[] | undefined {
  const from = output.reshape?.shape;
  if (from === undefined) return [...shape];
  const hasBatch = batching && shape.length > 0;
  const offset = batching ? 1 : 0;
  const variable: number[] = [];
  for (let i = 0; i < from.length; i++) {
    if (from[i] !== -1) continue;
    const size = shape[i + offset];
    if (size === undefined) return undefined;
    variable.push(size);
  }
  const out: number[] = hasBatch ? [shape[0] as number] : [];
  for (const d of output.dims) {
    if (d !== -1) out.push(d);
    else {
      const size = variable.shift();
      if (size === undefined) return undefined;
      out.push(size);
    }
  }
  return out;
}

const elements = (shape: readonly number[]): number => shape.reduce((n, d) => n * d, 1);

/** `outputs` in their client shapes, or the error of the first one whose elements do not fit its `dims`. */
export function reshapeOutputs(config: ModelConfig, outputs: InferTensor[]): InferTensor[] | SwitchyardError {
  const reshaped = outputsWithReshape(config);
  if (reshaped.size === 0) return outputs;
  const batching = config.max_batch_size > 0;
  let result: InferTensor[] | undefined;
  for (let i = 0; i < outputs.length; i++) {
    const tensor = outputs[i] as InferTensor;
    const output = reshaped.get(tensor.name);
    if (output === undefined) continue;
    const shape = reshapeOutputShape(output, batching, tensor.shape);
    if (shape === undefined || elements(shape) !== elements(tensor.shape)) {
      return internal(
        `output '${tensor.name}' of model '${config.name}' has shape ${dimsToString(tensor.shape)}, which its reshape ${dimsToString(output.reshape?.shape ?? [])} cannot turn into dims ${dimsToString(output.dims)}`,
      );
    }
    result ??= [...outputs];
    result[i] = { ...tensor, shape };
  }
  return result ?? outputs;
}

/** A result as clients see it: its response's outputs reshaped (or the reshape's error, same finality). */
export function reshapeResult(config: ModelConfig, result: InferResult): InferResult {
  const response = result.response;
  if (response === undefined) return result;
  const outputs = reshapeOutputs(config, response.outputs);
  if (outputs === response.outputs) return result;
  if (outputs instanceof Error) return { final: result.final, error: outputs };
  return { ...result, response: { ...response, outputs } };
}
