/**
 * `normalizeModelConfig`: the defaults Triton core fills in before a model loads.
 *
 * Mirrors, in order, core's `AutoCompleteBackendFields` (the parts that need no model files,
 * plus file-based detection when the caller lists the first version directory),
 * `NormalizeModelConfig` and `NormalizeInstanceGroup`, with the GPUs the caller says this host
 * has (none by default). The input is not modified; normalising twice gives the same result.
 */
import { invalidArgument } from '@switchyard/common';
import { defaultMessage, messageType } from './schema.js';
import type { ModelConfig, ModelInstanceGroup, ModelOptimizationPolicy, ModelSequenceBatching } from './types.js';

/** Idle time after which a sequence loses its slot, when the config says 0 (Triton's default). */
export const DEFAULT_MAX_SEQUENCE_IDLE_MICROSECONDS = 1_000_000;

export interface NormalizeOptions {
  /** The model's directory name; becomes `name` when the config has none. */
  modelName: string;
  /**
   * Instance count for a KIND_CPU group that gives none. Default: Triton's rule, 2 for the
   * onnxruntime and tensorflow backends, 1 otherwise. Groups of other kinds default to 1.
   */
  defaultInstanceCount?: (backend: string) => number;
  /**
   * Entries of the first (lowest-named) version directory, when known. Lets a config that names
   * neither backend nor platform be completed from the model file present (`model.onnx`, ...).
   */
  versionEntries?: readonly { name: string; isDirectory: boolean }[];
  /**
   * CUDA device ids this server may place instances on (Triton's `GetSupportedGPUs`: devices with
   * at least the minimum compute capability). Default none: `KIND_AUTO` becomes `KIND_CPU`, and a
   * `KIND_GPU` group keeps an empty `gpus` list (validation then refuses it).
   */
  supportedGpus?: readonly number[];
}

/** Triton's default CPU instance count per backend. */
export function tritonDefaultInstanceCount(backend: string): number {
  return backend === 'onnxruntime' || backend === 'tensorflow' ? 2 : 1;
}

/** Return a normalised copy of `config`. */
export function normalizeModelConfig(config: ModelConfig, options: NormalizeOptions): ModelConfig {
  const c = structuredClone(config);
  autoCompleteBackendFields(c, options);

  if (c.version_policy === undefined) c.version_policy = { latest: { num_versions: 1 } };

  if (c.dynamic_batching !== undefined && c.dynamic_batching.preferred_batch_size.length === 0) {
    if (c.max_batch_size > 0) c.dynamic_batching.preferred_batch_size.push(c.max_batch_size);
  }

  const seq = c.sequence_batching as ModelSequenceBatching | undefined;
  if (seq !== undefined) {
    if (!seq.max_sequence_idle_microseconds) {
      seq.max_sequence_idle_microseconds = DEFAULT_MAX_SEQUENCE_IDLE_MICROSECONDS;
    }
    if (seq.oldest !== undefined && seq.oldest.preferred_batch_size.length === 0 && c.max_batch_size > 0) {
      seq.oldest.preferred_batch_size.push(c.max_batch_size);
    }
  }

  if (c.ensemble_scheduling === undefined) {
    const opt = (c.optimization ?? defaultMessage(messageType('ModelOptimizationPolicy'))) as ModelOptimizationPolicy;
    if (opt.input_pinned_memory === undefined) opt.input_pinned_memory = { enable: true };
    if (opt.output_pinned_memory === undefined) opt.output_pinned_memory = { enable: true };
    c.optimization = opt as Record<string, unknown>;
    normalizeInstanceGroups(c, options.defaultInstanceCount ?? tritonDefaultInstanceCount, options.supportedGpus ?? []);
  }
  return c;
}

/**
 * Ensembles have no instance groups; everything else gets at least one, fully specified. Core's
 * rules: `KIND_AUTO` is `KIND_GPU` when GPUs are supported and every GPU it lists is one of them,
 * else `KIND_CPU` (its `gpus` list stays, so an AUTO group naming a missing GPU fails validation as a
 * CPU group with GPUs); a `KIND_GPU` group without `gpus` gets every supported GPU.
 */
function normalizeInstanceGroups(c: ModelConfig, defaultCpuCount: (backend: string) => number, supportedGpus: readonly number[]): void {
  const supported = new Set(supportedGpus);
  if (c.instance_group.length === 0) {
    const group = defaultMessage(messageType('ModelInstanceGroup')) as unknown as ModelInstanceGroup;
    group.name = c.name;
    c.instance_group.push(group);
  }
  c.instance_group.forEach((group, idx) => {
    if (group.name === '') group.name = `${c.name}_${idx}`;
    if (group.kind === 'KIND_AUTO') {
      group.kind = supported.size > 0 && group.gpus.every((id) => supported.has(id)) ? 'KIND_GPU' : 'KIND_CPU';
    }
    if (group.count < 1) group.count = group.kind === 'KIND_CPU' ? defaultCpuCount(c.backend) : 1;
    if (group.kind === 'KIND_GPU' && group.gpus.length === 0) group.gpus = [...supported].sort((a, b) => a - b);
  });
}

const ONNX = { backend: 'onnxruntime', platform: 'onnxruntime_onnx', file: 'model.onnx' };
const TENSORRT = { backend: 'tensorrt', platform: 'tensorrt_plan', file: 'model.plan' };
const PYTORCH = { backend: 'pytorch', platform: 'pytorch_libtorch', file: 'model.pt' };
const TF_SAVEDMODEL = { platform: 'tensorflow_savedmodel', file: 'model.savedmodel' };
const TF_GRAPHDEF = { platform: 'tensorflow_graphdef', file: 'model.graphdef' };

/**
 * Core's server-side auto-complete: name from the directory, then backend, platform and
 * default_model_filename from each other (and from the files present, when listed).
 */
function autoCompleteBackendFields(c: ModelConfig, options: NormalizeOptions): void {
  if (c.name === '') c.name = options.modelName;
  const entries = options.versionEntries;
  const has = (file: string, dir: boolean): boolean =>
    entries?.some((e) => e.name === file && e.isDirectory === dir) ?? false;
  const hasAny = (file: string): boolean => entries?.some((e) => e.name === file) ?? false;
  const probe = entries !== undefined && c.default_model_filename === '';

  // TensorFlow: the platform decides.
  if (c.platform === '' && (c.backend === '' || c.backend === 'tensorflow')) {
    if (c.default_model_filename === TF_SAVEDMODEL.file) c.platform = TF_SAVEDMODEL.platform;
    else if (c.default_model_filename === TF_GRAPHDEF.file) c.platform = TF_GRAPHDEF.platform;
    else if (probe) {
      if (has(TF_SAVEDMODEL.file, true)) c.platform = TF_SAVEDMODEL.platform;
      if (has(TF_GRAPHDEF.file, false)) c.platform = TF_GRAPHDEF.platform;
    }
  }
  if (c.platform === TF_SAVEDMODEL.platform || c.platform === TF_GRAPHDEF.platform) {
    if (c.backend === '') c.backend = 'tensorflow';
    if (c.default_model_filename === '') {
      c.default_model_filename = c.platform === TF_SAVEDMODEL.platform ? TF_SAVEDMODEL.file : TF_GRAPHDEF.file;
    }
    return;
  }

  for (const kind of [TENSORRT, ONNX]) {
    if (c.backend === '') {
      if (c.platform === kind.platform || c.default_model_filename === kind.file) c.backend = kind.backend;
      else if (c.platform === '' && probe) {
        if (kind === ONNX ? hasAny(kind.file) : has(kind.file, false)) c.backend = kind.backend;
      }
    }
    if (c.backend === kind.backend) {
      if (c.platform === '') c.platform = kind.platform;
      if (c.default_model_filename === '') c.default_model_filename = kind.file;
      return;
    }
  }

  if (c.backend === '') {
    if (c.default_model_filename === 'model.xml') c.backend = 'openvino';
    else if (c.platform === '' && probe && hasAny('model.xml')) c.backend = 'openvino';
  }
  if (c.backend === 'openvino') {
    if (c.default_model_filename === '') c.default_model_filename = 'model.xml';
    return;
  }

  if (c.backend === '') {
    if (c.platform === PYTORCH.platform || c.default_model_filename === PYTORCH.file) c.backend = PYTORCH.backend;
    else if (c.platform === '' && probe && has(PYTORCH.file, false)) {
      c.backend = PYTORCH.backend;
      c.platform = PYTORCH.platform;
    }
  }
  if (c.backend === PYTORCH.backend) {
    if (c.platform === '') {
      c.platform = PYTORCH.platform;
      if (c.default_model_filename === '') c.default_model_filename = PYTORCH.file;
    }
    return;
  }

  if (c.backend === '') {
    if (c.default_model_filename === 'model.py') c.backend = 'python';
    else if (c.platform === '' && probe && hasAny('model.py')) c.backend = 'python';
  }
  if (c.backend === 'python') {
    if (c.default_model_filename === '') c.default_model_filename = 'model.py';
    return;
  }

  // Nothing given at all: a custom backend named by the model name's suffix (`model.<backend>`).
  if (c.backend === '' && c.platform === '' && c.default_model_filename === '') {
    const dot = options.modelName.indexOf('.');
    if (dot < 0) {
      throw invalidArgument(
        `Invalid model name: Could not determine backend for model '${options.modelName}' with no backend in ` +
          "model configuration. Expected model name of the form 'model.<backend_name>'.",
      );
    }
    c.backend = options.modelName.slice(dot + 1);
    c.default_model_filename = `model.${c.backend}`;
  }
}
