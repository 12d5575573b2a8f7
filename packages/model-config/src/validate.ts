/**
 * `validateModelConfig`: the checks Triton core applies to a normalised configuration before a
 * model loads, with Triton's messages (core model_config_utils.cc: `ValidateModelConfig`,
 * `ValidateModelIOConfig`, `ValidateInstanceGroup`). Failures are `invalid_argument` unless
 * Triton classifies them otherwise.
 *
 * GPU instance groups are checked as a Triton build with GPU support checks them, against the
 * GPUs the caller says this server supports (none by default).
 */
import { internal, invalidArgument } from '@switchyard/common';
import { validateEnsembleScheduling } from './validate-ensemble.js';
import type {
  ModelConfig,
  ModelDynamicBatching,
  ModelInput,
  ModelMetrics,
  ModelOutput,
  ModelSequenceBatching,
  SequenceControlKind,
} from './types.js';

const WILDCARD_DIM = -1;

/** Backend type per backend name and per platform name (core's `GetBackendType*`). */
const BACKEND_TYPES: Record<string, string> = {
  tensorflow: 'tensorflow',
  tensorrt: 'tensorrt',
  onnxruntime: 'onnxruntime',
  pytorch: 'pytorch',
};
const PLATFORM_BACKEND_TYPES: Record<string, string> = {
  tensorflow_graphdef: 'tensorflow',
  tensorflow_savedmodel: 'tensorflow',
  tensorrt_plan: 'tensorrt',
  onnxruntime_onnx: 'onnxruntime',
  pytorch_libtorch: 'pytorch',
};

/** Triton's `--min-supported-compute-capability` default (TRITON_MIN_COMPUTE_CAPABILITY). */
export const DEFAULT_MIN_COMPUTE_CAPABILITY = 6.0;

export interface ValidateOptions {
  /** CUDA device ids this server may place instances on (as given to `normalizeModelConfig`). Default none. */
  supportedGpus?: readonly number[];
  /** The minimum compute capability those GPUs were chosen by; named in the refusal. Default 6.0. */
  minComputeCapability?: number;
  /**
   * Said after Triton's refusal of a GPU group that cannot be placed (in parentheses): why this host
   * has no usable GPU and what to install. Triton's words come first, unchanged.
   */
  gpuHint?: string;
}

/** Throw the first problem Triton would report for this (normalised) configuration. */
export function validateModelConfig(config: ModelConfig, options: ValidateOptions = {}): void {
  validateTopLevel(config);
  validateIO(config);
  validateInstanceGroups(config, options);
}

function validateTopLevel(c: ModelConfig): void {
  const fail: (msg: string) => never = (msg) => {
    throw invalidArgument(msg);
  };
  if (c.name === '') fail("model configuration must specify 'name'");
  if (c.backend === '') {
    if (c.platform !== 'ensemble') fail(`unexpected platform type '${c.platform}' for ${c.name}`);
  } else if (c.platform === 'ensemble') {
    fail(`Ensemble model '${c.name}' must have platform type '${c.platform}' and empty backend type`);
  }
  const backendType = BACKEND_TYPES[c.backend];
  if (backendType !== undefined && backendType !== PLATFORM_BACKEND_TYPES[c.platform]) {
    fail(`unexpected 'platform' and 'backend' pair, got:${c.platform}, ${c.backend}`);
  }
  if (c.max_batch_size < 0) fail(`'max_batch_size' must be non-negative value for ${c.name}`);
  if (c.version_policy === undefined) fail(`must specify 'version policy' for ${c.name}`);

  if (c.dynamic_batching !== undefined) validateDynamicBatching(c, c.dynamic_batching);
  if (c.sequence_batching !== undefined) {
    validateSequenceBatching(c, c.sequence_batching as ModelSequenceBatching);
  }

  if (c.ensemble_scheduling !== undefined) validateEnsembleScheduling(c);
  else if (c.platform === 'ensemble') {
    fail(`ensemble scheduling must be set for ensemble ${c.name} whose platform is ensemble`);
  }

  if (c.model_transaction_policy?.decoupled === true && c.response_cache?.enable === true) {
    fail(
      `Response Cache does not currently support model ${c.name} with 'decoupled' transaction policy. ` +
        'Please disable the response cache.',
    );
  }
  if (c.model_metrics !== undefined) {
    for (const control of (c.model_metrics as ModelMetrics).metric_control) {
      if (control.metric_identifier === undefined) fail("metric control must specify 'metric_identifier'");
      if (control.metric_identifier.family === '') fail("metric identifier must specify non-empty 'family'");
      if (control.histogram_options === undefined) fail("metric control must specify 'histogram_options'");
      if (control.histogram_options.buckets.length === 0) fail("histogram options must specify non-empty 'buckets'");
    }
  }
}

function validateDynamicBatching(c: ModelConfig, db: ModelDynamicBatching): void {
  for (const size of db.preferred_batch_size) {
    if (size <= 0) throw invalidArgument(`dynamic batching preferred size must be positive for ${c.name}`);
    if (size > c.max_batch_size) {
      throw invalidArgument(`dynamic batching preferred size must be <= max batch size for ${c.name}`);
    }
  }
  const levels = db.priority_levels;
  if (levels !== 0) {
    if (db.default_priority_level === 0 || db.default_priority_level > levels) {
      throw invalidArgument(`default priority level must be in range [1, ${levels}] for ${c.name}`);
    }
    for (const key of Object.keys(db.priority_queue_policy)) {
      const level = Number(key);
      if (level === 0 || level > levels) {
        throw invalidArgument(`priority queue policy must have priority level in range [1, ${levels}] for ${c.name}`);
      }
    }
  }
  if (db.preserve_ordering) {
    if (levels > 1) {
      throw invalidArgument(`Only one priority level is allowed when 'preserve_ordering' is true for ${c.name}`);
    }
    const policies = [db.default_queue_policy, ...Object.values(db.priority_queue_policy)];
    for (const p of policies) {
      if (p !== undefined && p.default_timeout_microseconds !== 0 && p.timeout_action === 'DELAY') {
        throw invalidArgument(
          `Queue policy can not have DELAY as timeout action when 'preserve_ordering' is true for ${c.name}`,
        );
      }
    }
  }
}

function validateSequenceBatching(c: ModelConfig, sb: ModelSequenceBatching): void {
  if (c.response_cache?.enable === true) {
    throw invalidArgument(
      `Response Cache does not currently support model ${c.name} with sequence batching scheduler. ` +
        'Please disable the response cache.',
    );
  }
  for (const kind of ['CONTROL_SEQUENCE_START', 'CONTROL_SEQUENCE_END', 'CONTROL_SEQUENCE_READY'] as const) {
    checkSequenceControl(c.name, sb, kind, true);
  }
  const corrid = checkSequenceControl(c.name, sb, 'CONTROL_SEQUENCE_CORRID', false);
  if (corrid !== undefined && !['TYPE_UINT64', 'TYPE_INT64', 'TYPE_UINT32', 'TYPE_INT32', 'TYPE_STRING'].includes(corrid)) {
    throw invalidArgument(
      `unexpected data type for control CONTROL_SEQUENCE_CORRID for ${c.name}. Allowed data types are ` +
        'TYPE_UINT64, TYPE_INT64, TYPE_UINT32, TYPE_INT32 and TYPE_STRING',
    );
  }
  if (sb.oldest !== undefined) {
    for (const size of sb.oldest.preferred_batch_size) {
      if (size <= 0) throw invalidArgument(`sequence batching preferred batch size must be positive for ${c.name}`);
      if (size > c.max_batch_size) {
        throw invalidArgument(`sequence batching preferred batch size must be <= max batch size for ${c.name}`);
      }
    }
  }
  if (sb.direct !== undefined) {
    const u = sb.direct.minimum_slot_utilization;
    if (u < 0 || u > 1) {
      throw invalidArgument(`sequence batching minimum slot utilization must be in range (0.0, 1.0] for ${c.name}`);
    }
  }
}

/**
 * Core's Get{Boolean,Typed}SequenceControlProperties as checks. Boolean controls need exactly
 * one two-entry `*_false_true` list; the CORRID control needs none and yields its data type.
 */
function checkSequenceControl(
  model: string,
  sb: ModelSequenceBatching,
  kind: SequenceControlKind,
  boolean: boolean,
): string | undefined {
  const seenTensors = new Set<string>();
  let found: string | undefined;
  for (const input of sb.control_input) {
    if (input.name === '') throw invalidArgument(`sequence batching control tensor must have a name for ${model}`);
    if (seenTensors.has(input.name)) {
      throw invalidArgument(
        `sequence batching control tensor '${input.name}' is specified for multiple control kinds for ${model}`,
      );
    }
    seenTensors.add(input.name);
    for (const control of input.control) {
      if (control.kind !== kind) continue;
      if (found !== undefined) throw invalidArgument(`sequence batching specifies multiple ${kind} tensors for ${model}`);
      found = control.data_type;
      const lists = [
        ['int32_false_true', control.int32_false_true.length],
        ['fp32_false_true', control.fp32_false_true.length],
        ['bool_false_true', control.bool_false_true.length],
      ] as const;
      const given = lists.filter(([, n]) => n !== 0);
      if (!boolean) {
        if (given.length > 0) {
          throw invalidArgument(
            "sequence batching must not specify either 'int32_false_true', 'fp32_false_true' or " +
              `'bool_false_true' for ${kind} for ${model}`,
          );
        }
        continue;
      }
      if (given.length === 0) {
        throw invalidArgument(
          "sequence batching must specify either 'int32_false_true', 'fp32_false_true' or " +
            `'bool_false_true' for ${kind} for ${model}`,
        );
      }
      if (given.length > 1) {
        throw invalidArgument(
          "sequence batching specifies more than one from 'int32_false_true', 'fp32_false_true' and " +
            `'bool_false_true' for ${kind} for ${model}`,
        );
      }
      const [list, n] = given[0] as (typeof lists)[number];
      if (n !== 2) {
        throw invalidArgument(
          `sequence batching control '${list}' must have exactly 2 entries for ${kind} for ${model}`,
        );
      }
    }
  }
  return found;
}

function validateIO(c: ModelConfig): void {
  const withName = (check: () => void): void => {
    try {
      check();
    } catch (e) {
      if (e instanceof Error) e.message = `${e.message} for ${c.name}`;
      throw e;
    }
  };
  for (const io of c.input) withName(() => validateInput(io, c.max_batch_size, c.platform));
  for (const io of c.output) withName(() => validateOutput(io, c.max_batch_size, c.platform));
  withName(() => validateBatchIO(c));
  // Not a core check (backends reject duplicates later, each in its own words); kept here so a
  // broken config fails before any backend sees it.
  for (const [what, list] of [
    ['input', c.input],
    ['output', c.output],
  ] as const) {
    const names = new Set<string>();
    for (const io of list) {
      if (names.has(io.name)) throw invalidArgument(`model ${what} '${io.name}' is specified more than once for ${c.name}`);
      names.add(io.name);
    }
  }
}

function validateInput(io: ModelInput, maxBatchSize: number, platform: string): void {
  validateIOShape(io, maxBatchSize, 'model input ');
  if ((io.format === 'FORMAT_NHWC' || io.format === 'FORMAT_NCHW') && io.dims.length !== 3) {
    throw invalidArgument('model input NHWC/NCHW require 3 dims');
  }
  validateTensorFlags(io, platform, 'input');
}

function validateOutput(io: ModelOutput, maxBatchSize: number, platform: string): void {
  validateIOShape(io, maxBatchSize, 'model output ');
  validateTensorFlags(io, platform, 'output');
}

function validateTensorFlags(
  io: { is_shape_tensor: boolean; is_non_linear_format_io: boolean; dims: number[] },
  platform: string,
  what: 'input' | 'output',
): void {
  if (platform !== 'tensorrt_plan' && io.is_shape_tensor) {
    throw invalidArgument('shape tensors are only supported for TensorRT platform');
  }
  if (io.is_non_linear_format_io) {
    if (platform !== 'tensorrt_plan') {
      throw invalidArgument('Non-linear IO format is only supported for the TensorRT platform');
    }
    if (io.dims.length !== 3) throw invalidArgument(`Non-linear IO format ${what} requires 3 dims`);
  }
}

/** Element count with -1 for any wildcard; an empty shape counts 0 (core's GetElementCount). */
function elementCount(dims: readonly number[]): number {
  if (dims.includes(WILDCARD_DIM)) return -1;
  return dims.length === 0 ? 0 : dims.reduce((a, b) => a * b, 1);
}

/** Products of the runs of fixed dimensions between wildcards. */
function wildcardChunks(dims: readonly number[]): number[] {
  const out: number[] = [];
  let cnt = 1;
  for (const d of dims) {
    if (d === WILDCARD_DIM) {
      out.push(cnt);
      cnt = 1;
    } else cnt *= d;
  }
  out.push(cnt);
  return out;
}

function validateIOShape(
  io: { name: string; data_type: string; dims: number[]; reshape?: { shape: number[] } },
  maxBatchSize: number,
  prefix: string,
): void {
  if (io.name === '') throw invalidArgument(`${prefix}must specify 'name'`);
  const p = `${prefix}'${io.name}' `;
  if (io.data_type === 'TYPE_INVALID') throw invalidArgument(`${p}must specify 'data_type'`);
  if (io.dims.length === 0) throw invalidArgument(`${p}must specify 'dims'`);
  if (io.reshape !== undefined && io.reshape.shape.length === 0 && maxBatchSize === 0) {
    throw invalidArgument(`${p}cannot have empty reshape for non-batching model as scalar tensors are not supported`);
  }
  for (const d of io.dims) {
    if (d < 1 && d !== WILDCARD_DIM) {
      throw invalidArgument(`${p}dimension must be integer >= 1, or -1 to indicate a variable-size dimension`);
    }
  }
  if (io.reshape === undefined) return;
  for (const d of io.reshape.shape) {
    if (d < 1 && d !== WILDCARD_DIM) {
      throw invalidArgument(`${p}reshape dimensions must be integer >= 1, or -1 to indicate a variable-size dimension`);
    }
  }
  const dimsSize = elementCount(io.dims);
  const reshapeSize = elementCount(io.reshape.shape);
  if (dimsSize !== reshapeSize && (reshapeSize !== 0 || dimsSize !== 1)) {
    throw invalidArgument(`${p}has different size for dims and reshape`);
  }
  if (dimsSize === -1) {
    const a = wildcardChunks(io.dims);
    const b = wildcardChunks(io.reshape.shape);
    if (a.length !== b.length) {
      throw invalidArgument(`${p}has different number of variable-size dimensions for dims and reshape`);
    }
    if (a.some((n, i) => n !== b[i])) throw invalidArgument(`${p}has different size for dims and reshape`);
  }
}

interface BatchIO {
  kind: string;
  target_name: string[];
  data_type?: string;
  source_input: string[];
}

function validateBatchIO(c: ModelConfig): void {
  const inputs = new Set(c.input.map((io) => io.name));
  const outputs = new Set(c.output.map((io) => io.name));
  for (const b of c.batch_input as BatchIO[]) {
    if (b.source_input.length !== 1) {
      throw invalidArgument(`batch input kind '${b.kind}' expects 1 source input, got ${b.source_input.length}`);
    }
    if (b.data_type !== 'TYPE_INT32' && b.data_type !== 'TYPE_FP32') {
      throw invalidArgument('batch input data type must be TYPE_INT32 or TYPE_FP32');
    }
    for (const s of b.source_input) {
      if (!inputs.has(s)) throw invalidArgument(`unknown source input name '${s}'`);
    }
  }
  for (const b of c.batch_output as BatchIO[]) {
    if (b.source_input.length !== 1) {
      throw invalidArgument(`batch output kind '${b.kind}' expects 1 source input, got ${b.source_input.length}`);
    }
    for (const s of b.source_input) {
      if (!inputs.has(s)) throw invalidArgument(`unknown source input name '${s}'`);
    }
    const targets = new Set<string>();
    for (const t of b.target_name) {
      if (!outputs.has(t)) throw invalidArgument(`unknown target output name '${t}'`);
      if (targets.has(t)) throw invalidArgument(`target output name '${t}' can only be specified once`);
      targets.add(t);
    }
  }
}

/** C++ `std::to_string(double)`: six decimals. */
const cppDouble = (v: number): string => v.toFixed(6);

function validateInstanceGroups(c: ModelConfig, options: ValidateOptions): void {
  if (c.ensemble_scheduling !== undefined) return;
  const supported = [...new Set(options.supportedGpus ?? [])].sort((a, b) => a - b);
  const hinted = (message: string): string => (options.gpuHint ? `${message.trimEnd()} (${options.gpuHint})` : message);
  if (c.instance_group.length === 0) throw invalidArgument(`must specify one or more 'instance group's for ${c.name}`);
  for (const g of c.instance_group) {
    const which = `instance group ${g.name} of model ${c.name}`;
    if (g.kind === 'KIND_MODEL' || g.kind === 'KIND_CPU') {
      if (g.gpus.length > 0) throw invalidArgument(`${which} has kind ${g.kind} but specifies one or more GPUs`);
    } else if (g.kind === 'KIND_GPU') {
      if (g.gpus.length === 0) {
        throw invalidArgument(supported.length === 0 ? hinted(`${which} has kind KIND_GPU but no GPUs are available`) : `${which} has kind KIND_GPU but specifies no GPUs`);
      }
      for (const id of g.gpus) {
        if (!supported.includes(id)) {
          const minimum = cppDouble(options.minComputeCapability ?? DEFAULT_MIN_COMPUTE_CAPABILITY);
          throw invalidArgument(
            hinted(`${which} specifies invalid or unsupported gpu id ${id}. GPUs with at least the minimum required CUDA compute compatibility of ${minimum} are: ${supported.join(', ')}`),
          );
        }
      }
    } else {
      throw internal(`${which} has unexpected kind KIND_AUTO`);
    }
    if (c.platform !== 'tensorrt_plan' && g.profile.length > 0) {
      // Triton's message has no space before "specifies".
      throw invalidArgument(
        `${which} and platform ${c.platform}specifies profile field which is only supported for TensorRT models`,
      );
    }
  }
}
