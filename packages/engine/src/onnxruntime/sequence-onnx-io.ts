/**
 * The sequence-batching part of the ONNX Runtime backend's load-time I/O check (Triton's
 * onnxruntime backend: `ValidateBooleanSequenceControl`, `ValidateTypedSequenceControl` and the
 * state checks of `ValidateOutputs`), pure. Called from `checkOnnxIo`:
 * - `checkSequenceControlInputs`: every configured control tensor is a model input of shape [1]
 *   (after the batch dimension) and of the control's datatype; returns how many model inputs the
 *   sequence batcher supplies (controls + implicit states) so the input count check includes them;
 * - `checkSequenceStateOutputs`: every state's `output_name` is a model output of its datatype.
 */
import { internal, invalidArgument } from '@switchyard/common';
import type { ModelConfig, ModelSequenceBatching } from '@switchyard/model-config';
import type { OnnxIo } from './onnx-io.js';
import { configTypeOfOrt } from './onnx-tensor-codec.js';
import { SequenceControls } from '../sequence/sequence-controls.js';

/** ONNX element type names as Triton's ORT backend prints them (`OnnxDataTypeName`). */
const ONNX_TYPE_NAMES: Readonly<Record<string, string>> = {
  float32: 'FLOAT',
  float64: 'DOUBLE',
  float16: 'FLOAT16',
  bfloat16: 'BFLOAT16',
};

function onnxTypeName(ortType: string): string {
  return ONNX_TYPE_NAMES[ortType] ?? ortType.toUpperCase();
}

/** Validate the control inputs against the model; returns the number of inputs the sequence batcher feeds. */
export function checkSequenceControlInputs(config: ModelConfig, io: OnnxIo): number {
  const sb = config.sequence_batching as ModelSequenceBatching | undefined;
  if (sb === undefined) return 0;
  const model = config.name;
  const inputs = new Map(io.inputs.map((i) => [i.name, i]));
  const specs = new SequenceControls(config).specs();
  for (const { name, configType } of specs) {
    const info = inputs.get(name);
    if (info === undefined) throw internal(`configuration specified sequence control '${name}', but model does not provide that input`);
    const dims = config.max_batch_size > 0 ? info.dims.slice(1) : info.dims;
    if (dims.length !== 1 || dims[0] !== 1) {
      throw invalidArgument(`unable to load model '${model}', sequence control '${name}' in model has dims [${dims.join(',')}] but dims [1] is expected`);
    }
    if (configTypeOfOrt(info.type) !== configType) {
      throw invalidArgument(
        `unable to load model '${model}', sequence control '${name}', the model expects data-type ${onnxTypeName(info.type)} but the model configuration specifies data-type ${configType}`,
      );
    }
  }
  return specs.length + (sb.state?.length ?? 0);
}

/** Validate that each implicit state's output exists in the model with the state's datatype. */
export function checkSequenceStateOutputs(config: ModelConfig, io: OnnxIo): void {
  const sb = config.sequence_batching as ModelSequenceBatching | undefined;
  if (sb === undefined) return;
  const outputs = new Map(io.outputs.map((o) => [o.name, o]));
  for (const state of sb.state ?? []) {
    const info = outputs.get(state.output_name);
    if (info === undefined) {
      throw invalidArgument(`unexpected inference output '${state.output_name}', allowed outputs are: ${[...outputs.keys()].sort().join(', ')}`);
    }
    const provided = configTypeOfOrt(info.type);
    if (provided !== state.data_type) {
      throw invalidArgument(
        `unable to load model '${config.name}', configuration expects datatype ${state.data_type} for output state '${state.output_name}', model provides ${provided}`,
      );
    }
  }
}
