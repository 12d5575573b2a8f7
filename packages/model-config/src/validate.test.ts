import { SwitchyardError } from '@switchyard/common';
import { describe, expect, it } from 'vitest';
import { normalizeModelConfig } from './normalize.js';
import { parseModelConfigText } from './text-parser.js';
import { validateModelConfig } from './validate.js';
import type { ModelConfig } from './types.js';

const load = (pbtxt: string, modelName = 'm'): ModelConfig =>
  normalizeModelConfig(parseModelConfigText(pbtxt), { modelName });

function problem(config: ModelConfig): { code: string; message: string } | undefined {
  try {
    validateModelConfig(config);
    return undefined;
  } catch (e) {
    expect(e).toBeInstanceOf(SwitchyardError);
    return { code: (e as SwitchyardError).code, message: (e as Error).message };
  }
}
const messageOf = (pbtxt: string, modelName = 'm') => problem(load(pbtxt, modelName))?.message;

const SIMPLE = `name: "simple" backend: "onnxruntime" max_batch_size: 8
  input [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ 16 ] }, { name: "INPUT1" data_type: TYPE_INT32 dims: [ 16 ] } ]
  output [ { name: "OUTPUT0" data_type: TYPE_INT32 dims: [ 16 ] } ]`;

describe('validateModelConfig', () => {
  it('accepts valid configs', () => {
    expect(problem(load(SIMPLE))).toBeUndefined();
    expect(problem(load(`${SIMPLE} dynamic_batching { preferred_batch_size: [ 4, 8 ] }`))).toBeUndefined();
    expect(
      problem(
        load(`name: "seq" backend: "onnxruntime" max_batch_size: 8
          sequence_batching { oldest { max_candidate_sequences: 4 }
            control_input [ { name: "START" control [ { kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] } ] },
                            { name: "CORRID" control [ { kind: CONTROL_SEQUENCE_CORRID data_type: TYPE_STRING } ] } ] }
          input { name: "I" data_type: TYPE_INT32 dims: 1 } output { name: "O" data_type: TYPE_INT32 dims: 1 }`),
      ),
    ).toBeUndefined();
  });

  it('reports missing names and bad batch sizes', () => {
    const c = load(SIMPLE);
    expect(problem({ ...c, name: '' })).toEqual({ code: 'invalid_argument', message: "model configuration must specify 'name'" });
    expect(problem({ ...c, max_batch_size: -1 })?.message).toBe("'max_batch_size' must be non-negative value for simple");
    const { version_policy: _vp, ...noPolicy } = c;
    expect(problem(noPolicy as ModelConfig)?.message).toBe("must specify 'version policy' for simple");
  });

  it('checks platform/backend pairs', () => {
    expect(messageOf('backend: "onnxruntime" platform: "pytorch_libtorch"')).toBe(
      "unexpected 'platform' and 'backend' pair, got:pytorch_libtorch, onnxruntime",
    );
    expect(messageOf('backend: "python" platform: "ensemble"')).toBe(
      "Ensemble model 'm' must have platform type 'ensemble' and empty backend type",
    );
    expect(problem({ ...load(SIMPLE), backend: '', platform: 'custom' })?.message).toBe("unexpected platform type 'custom' for simple");
  });

  it('checks inputs and outputs with Triton messages', () => {
    const io = (input: string) => messageOf(`name: "z" backend: "onnxruntime" input { ${input} }`);
    expect(io('data_type: TYPE_FP32 dims: 1')).toBe("model input must specify 'name' for z");
    expect(io('name: "X" dims: 1')).toBe("model input 'X' must specify 'data_type' for z");
    expect(io('name: "X" data_type: TYPE_FP32')).toBe("model input 'X' must specify 'dims' for z");
    expect(io('name: "X" data_type: TYPE_FP32 dims: [ 2, 0 ]')).toBe(
      "model input 'X' dimension must be integer >= 1, or -1 to indicate a variable-size dimension for z",
    );
    expect(io('name: "X" data_type: TYPE_FP32 dims: -2')).toBe(
      "model input 'X' dimension must be integer >= 1, or -1 to indicate a variable-size dimension for z",
    );
    expect(io('name: "X" data_type: TYPE_FP32 dims: [ 2, 3 ] reshape { shape: [ 5 ] }')).toBe(
      "model input 'X' has different size for dims and reshape for z",
    );
    expect(io('name: "X" data_type: TYPE_FP32 dims: [ 2, -1 ] reshape { shape: [ -1, 2 ] }')).toBe(
      "model input 'X' has different size for dims and reshape for z",
    );
    expect(io('name: "X" data_type: TYPE_FP32 dims: 1 reshape { }')).toBe(
      "model input 'X' cannot have empty reshape for non-batching model as scalar tensors are not supported for z",
    );
    expect(io('name: "X" data_type: TYPE_FP32 dims: [ 2, 2 ] format: FORMAT_NCHW')).toBe('model input NHWC/NCHW require 3 dims for z');
    expect(io('name: "X" data_type: TYPE_FP32 dims: 1 is_shape_tensor: true')).toBe(
      'shape tensors are only supported for TensorRT platform for z',
    );
    expect(messageOf('name: "zerodims_output1" backend: "onnxruntime" output { name: "output" data_type: TYPE_FP32 dims: 0 }')).toBe(
      "model output 'output' dimension must be integer >= 1, or -1 to indicate a variable-size dimension for zerodims_output1",
    );
    expect(messageOf(`${SIMPLE} output [ { name: "OUTPUT0" data_type: TYPE_INT32 dims: [ 16 ] } ]`)).toBe(
      "model output 'OUTPUT0' is specified more than once for simple",
    );
  });

  it('checks dynamic batching', () => {
    expect(messageOf(`${SIMPLE} dynamic_batching { preferred_batch_size: 16 }`)).toBe(
      'dynamic batching preferred size must be <= max batch size for simple',
    );
    expect(messageOf(`${SIMPLE} dynamic_batching { preferred_batch_size: 0 }`)).toBe(
      'dynamic batching preferred size must be positive for simple',
    );
    expect(messageOf(`${SIMPLE} dynamic_batching { priority_levels: 2 }`)).toBe(
      'default priority level must be in range [1, 2] for simple',
    );
    expect(
      messageOf(`${SIMPLE} dynamic_batching { priority_levels: 2 default_priority_level: 1 priority_queue_policy { key: 3 value {} } }`),
    ).toBe('priority queue policy must have priority level in range [1, 2] for simple');
    expect(
      messageOf(`name: "preserve_ordering0" backend: "onnxruntime" max_batch_size: 8
        dynamic_batching { preserve_ordering: true priority_levels: 2 default_priority_level: 1 }`),
    ).toBe("Only one priority level is allowed when 'preserve_ordering' is true for preserve_ordering0");
    expect(
      messageOf(`${SIMPLE} dynamic_batching { preserve_ordering: true default_queue_policy { timeout_action: DELAY default_timeout_microseconds: 5 } }`),
    ).toBe("Queue policy can not have DELAY as timeout action when 'preserve_ordering' is true for simple");
  });

  it('checks sequence batching controls', () => {
    const seq = (body: string) => messageOf(`${SIMPLE} sequence_batching { ${body} }`);
    expect(seq('control_input { control { kind: CONTROL_SEQUENCE_START } }')).toBe(
      'sequence batching control tensor must have a name for simple',
    );
    expect(seq('control_input { name: "S" control { kind: CONTROL_SEQUENCE_START } }')).toBe(
      "sequence batching must specify either 'int32_false_true', 'fp32_false_true' or 'bool_false_true' for CONTROL_SEQUENCE_START for simple",
    );
    expect(seq('control_input { name: "S" control { kind: CONTROL_SEQUENCE_END int32_false_true: [ 1 ] } }')).toBe(
      "sequence batching control 'int32_false_true' must have exactly 2 entries for CONTROL_SEQUENCE_END for simple",
    );
    expect(seq('control_input { name: "C" control { kind: CONTROL_SEQUENCE_CORRID data_type: TYPE_FP32 } }')).toBe(
      'unexpected data type for control CONTROL_SEQUENCE_CORRID for simple. Allowed data types are TYPE_UINT64, TYPE_INT64, TYPE_UINT32, TYPE_INT32 and TYPE_STRING',
    );
    expect(seq('oldest { preferred_batch_size: 9 }')).toBe('sequence batching preferred batch size must be <= max batch size for simple');
    expect(seq('direct { minimum_slot_utilization: 1.5 }')).toBe(
      'sequence batching minimum slot utilization must be in range (0.0, 1.0] for simple',
    );
  });

  it('checks ensembles', () => {
    const ens = (steps: string, io = 'input { name: "IN" data_type: TYPE_INT32 dims: 1 } output { name: "OUT" data_type: TYPE_INT32 dims: 1 }') =>
      messageOf(`platform: "ensemble" ${io} ensemble_scheduling { ${steps} }`, 'e');
    const step = (model: string, inMap: string, outMap: string) =>
      `step { model_name: "${model}" model_version: -1 input_map { key: "x" value: "${inMap}" } output_map { key: "y" value: "${outMap}" } }`;
    expect(ens(step('a', 'IN', 'OUT'))).toBeUndefined();
    expect(ens(step('a', 'IN', 'MID') + step('b', 'MID', 'OUT'))).toBeUndefined();
    expect(ens('')).toBe("must specify 'step' for ensemble 'e'");
    expect(ens('step { model_name: "a" }')).toBe("must specify 'input_map' in step 0 of ensemble 'e'");
    expect(ens(step('a', 'OTHER', 'OUT'))).toBe("ensemble input 'IN' for ensemble e' is not used");
    expect(ens(step('a', 'IN', 'MID'))).toBe("ensemble output 'OUT' for ensemble e' is not used");
    expect(ens(step('a', 'IN', 'OUT') + step('b', 'IN', 'OUT'))).toBe(
      "ensemble tensor 'OUT' can appear in an output map only once for ensemble 'e' step 1",
    );
    expect(ens(step('a', 'IN', 'OUT') + step('b', 'IN', 'EXTRA'))).toBe("ensemble tensor 'EXTRA' is unused in ensemble 'e'");
    expect(ens(step('a', 'IN', 'OUT') + step('b', 'GHOST', 'X') + step('c', 'X', 'OUT2'), 'input { name: "IN" data_type: TYPE_INT32 dims: 1 } output { name: "OUT2" data_type: TYPE_INT32 dims: 1 }')).toBe(
      "output 'OUT2' for ensemble 'e' is not written: at least one of its depending tensors, 'GHOST', is not connected",
    );
    expect(messageOf('platform: "ensemble"', 'e')).toBe('ensemble scheduling must be set for ensemble e whose platform is ensemble');
    expect(problem({ ...load(`platform: "ensemble" ensemble_scheduling { ${step('a', 'IN', 'OUT')} }`, 'e'), model_warmup: [{} as never] })?.message).toBe(
      "model_warmup can not be specified for ensemble 'e'",
    );
  });

  it('checks instance groups on a host without GPUs', () => {
    expect(messageOf(`${SIMPLE} instance_group { kind: KIND_GPU }`)).toBe(
      'instance group simple_0 of model simple has kind KIND_GPU but no GPUs are available',
    );
    expect(messageOf(`${SIMPLE} instance_group { kind: KIND_GPU gpus: [ 1 ] }`)).toBe(
      'instance group simple_0 of model simple specifies invalid or unsupported gpu id 1. GPUs with at least the minimum required CUDA compute compatibility of 6.000000 are: ',
    );
    expect(messageOf(`${SIMPLE} instance_group { name: "g" kind: KIND_CPU gpus: 0 }`)).toBe(
      'instance group g of model simple has kind KIND_CPU but specifies one or more GPUs',
    );
    expect(messageOf(`${SIMPLE} instance_group { kind: KIND_CPU profile: "0" }`)).toBe(
      'instance group simple_0 of model simple and platform onnxruntime_onnxspecifies profile field which is only supported for TensorRT models',
    );
    expect(problem({ ...load(SIMPLE), instance_group: [] })?.message).toBe("must specify one or more 'instance group's for simple");
    const auto = load(SIMPLE);
    auto.instance_group[0]!.kind = 'KIND_AUTO';
    expect(problem(auto)).toEqual({ code: 'internal', message: 'instance group simple of model simple has unexpected kind KIND_AUTO' });
  });

  it("places GPU groups on the GPUs it is given, with the hint after Triton's words", () => {
    const gpus = (pbtxt: string, supportedGpus: number[], options: Parameters<typeof validateModelConfig>[1] = {}) => {
      try {
        validateModelConfig(normalizeModelConfig(parseModelConfigText(pbtxt), { modelName: 'm', supportedGpus }), { supportedGpus, ...options });
        return undefined;
      } catch (e) {
        return (e as Error).message;
      }
    };
    expect(gpus(`${SIMPLE} instance_group { kind: KIND_GPU }`, [0, 1])).toBeUndefined();
    expect(gpus(`${SIMPLE} instance_group { kind: KIND_GPU gpus: [ 1 ] }`, [0, 1])).toBeUndefined();
    expect(gpus(`${SIMPLE} instance_group { kind: KIND_GPU gpus: [ 0, 2 ] }`, [0, 1], { minComputeCapability: 7.5 })).toBe(
      'instance group simple_0 of model simple specifies invalid or unsupported gpu id 2. GPUs with at least the minimum required CUDA compute compatibility of 7.500000 are: 0, 1',
    );
    expect(gpus(`${SIMPLE} instance_group { kind: KIND_GPU }`, [], { gpuHint: 'no NVIDIA driver' })).toBe(
      'instance group simple_0 of model simple has kind KIND_GPU but no GPUs are available (no NVIDIA driver)',
    );
    expect(gpus(`${SIMPLE} instance_group { kind: KIND_GPU gpus: 0 }`, [], { gpuHint: 'no NVIDIA driver' })).toBe(
      'instance group simple_0 of model simple specifies invalid or unsupported gpu id 0. GPUs with at least the minimum required CUDA compute compatibility of 6.000000 are: (no NVIDIA driver)',
    );
    // KIND_AUTO naming a GPU that is not there becomes a CPU group that names GPUs (as in Triton).
    expect(gpus(`${SIMPLE} instance_group { kind: KIND_AUTO gpus: 3 }`, [0])).toBe(
      'instance group simple_0 of model simple has kind KIND_CPU but specifies one or more GPUs',
    );
  });

  it('rejects the response cache with decoupled models', () => {
    expect(messageOf(`${SIMPLE} model_transaction_policy { decoupled: true } response_cache { enable: true }`)).toBe(
      "Response Cache does not currently support model simple with 'decoupled' transaction policy. Please disable the response cache.",
    );
  });
});
