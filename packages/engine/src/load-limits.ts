/**
 * What a model load may make the server allocate. A config comes from disk or, in explicit mode,
 * from any client (`POST /v2/repository/models/<m>/load` with a `config` parameter), so every
 * field that sizes an allocation or a thread count is listed here once, as a `LimitCheck`, and
 * refused with a 400 that says why (`enforceLimits`) before anything is created.
 *
 * Each table states its values; the loader checks the config's (`configLimitChecks`) before the
 * backend sees the config and again on the final config, the LLM backend checks its parameters
 * (`llmLimitChecks`) before it builds its engine, and the `llm` executor checks its KV cache bytes
 * (`kvCacheLimitCheck`) once the model's layer shapes are known, before allocating it.
 *
 * Not listed because nothing is allocated from them up front: `max_queue_size` and priority levels
 * (queues grow per request, created on first use), `preferred_batch_size` (bounded by
 * `max_batch_size`, a batch is built from requests that arrived), `max_batch_size` and
 * `oldest.max_candidate_sequences` (sequence slots are made as sequences take them, lowest first),
 * the mocker's `num_gpu_blocks` (its block bookkeeping grows with use), the response cache (a
 * server flag, not a model field).
 */
import type { LimitCheck } from '@switchyard/common';
import { elementByteSize } from '@switchyard/kserve';
import { configDataTypeToWire, type ModelConfig, type ModelSequenceBatching, type ModelWarmup } from '@switchyard/model-config';
import type { LlmModelOptions } from './llm/llm-options.js';

export interface LoadLimits {
  /** Instances of one model version, all groups together: each has its own thread (and, for ONNX, its own session). */
  readonly maxInstances: number;
  /** Bytes of one tensor the server builds from the config (a warmup sample input, an implicit-state value). */
  readonly maxConfigTensorBytes: number;
  /** Warmup executions per instance, all samples together. */
  readonly maxWarmupRuns: number;
  /** ONNX Runtime threads of one instance's session (`intra_op_thread_count`, `inter_op_thread_count`). */
  readonly maxSessionThreads: number;
  /** LLM `max_num_seqs`: sequences scheduled at once. */
  readonly maxLlmSequences: number;
  /** LLM `max_model_len` and `max_num_batched_tokens`: tokens of one sequence, of one step. */
  readonly maxLlmTokens: number;
  /** LLM `block_size`: tokens per KV block. */
  readonly maxLlmBlockSize: number;
  /** LLM `num_gpu_blocks`: KV block slots (numbered by the block manager). */
  readonly maxLlmBlocks: number;
  /** Bytes of the `llm` backend's KV cache (layers x 2 x blocks x heads x block_size x head_dim x element size). */
  readonly maxKvCacheBytes: number;
}

const MiB = 1024 * 1024;

export const DEFAULT_LOAD_LIMITS: LoadLimits = {
  maxInstances: 64,
  maxConfigTensorBytes: 256 * MiB,
  maxWarmupRuns: 10_000,
  maxSessionThreads: 64,
  maxLlmSequences: 65_536,
  maxLlmTokens: 16 * MiB,
  maxLlmBlockSize: 65_536,
  maxLlmBlocks: 2 ** 31 - 1,
  maxKvCacheBytes: 4096 * MiB,
};

/** Elements of `dims` in floating point (cannot wrap); a variable dimension counts 1. */
function elements(dims: readonly number[]): number {
  return dims.reduce((n, d) => n * Math.max(1, d), 1);
}

function tensorBytes(dataType: string, dims: readonly number[]): number {
  let size: number;
  try {
    size = elementByteSize(configDataTypeToWire(dataType as Parameters<typeof configDataTypeToWire>[0]));
  } catch {
    size = 8;
  }
  // BYTES elements are at least their 4-byte length prefix.
  return elements(dims) * Math.max(size, 4);
}

const intParameter = (config: ModelConfig, key: string): number => {
  const raw = config.parameters[key]?.string_value;
  if (raw === undefined || raw.trim() === '') return 0;
  const n = Number.parseInt(raw, 10);
  return Number.isFinite(n) ? n : 0;
};

/** Every value of `config` that sizes an allocation or a thread count, with its ceiling. */
export function configLimitChecks(config: ModelConfig, limits: LoadLimits = DEFAULT_LOAD_LIMITS): LimitCheck[] {
  const checks: LimitCheck[] = [];
  // A group's count below 1 means "the default" (1 or 2), as in Triton's normalisation; a GPU
  // group (or an AUTO one, which may become one) has `count` instances on each GPU it lists.
  const perGroup = (g: ModelConfig['instance_group'][number]): number =>
    Math.max(g.count, 1) * (g.kind === 'KIND_CPU' || g.kind === 'KIND_MODEL' ? 1 : Math.max(g.gpus.length, 1));
  const instances = config.instance_group.reduce((n, g) => n + perGroup(g), 0);
  checks.push({
    what: 'instance_group count (all groups)',
    value: instances,
    max: limits.maxInstances,
    unit: 'instances',
    why: 'each instance runs on its own thread',
  });
  for (const key of ['intra_op_thread_count', 'inter_op_thread_count']) {
    checks.push({ what: `parameter '${key}'`, value: intParameter(config, key), max: limits.maxSessionThreads, unit: 'threads', why: 'per instance' });
  }
  const sb = config.sequence_batching as ModelSequenceBatching | undefined;
  if (sb !== undefined) {
    for (const state of sb.state ?? []) {
      const batch = config.max_batch_size > 0 ? [1] : [];
      checks.push({ what: `state '${state.input_name}'`, value: tensorBytes(state.data_type, [...batch, ...state.dims]), max: limits.maxConfigTensorBytes, unit: 'bytes', why: 'one tensor the server builds' });
      for (const init of state.initial_state ?? []) {
        checks.push({ what: `initial_state of state '${state.input_name}'`, value: tensorBytes(init.data_type, [...batch, ...init.dims]), max: limits.maxConfigTensorBytes, unit: 'bytes', why: 'one tensor the server builds' });
      }
    }
  }
  let runs = 0;
  for (const warmup of config.model_warmup as ModelWarmup[]) {
    runs += Math.max(1, warmup.count);
    const batch = config.max_batch_size > 0 ? [Math.max(1, warmup.batch_size)] : [];
    for (const [name, input] of Object.entries(warmup.inputs)) {
      checks.push({
        what: `warmup sample '${warmup.name}' input '${name}'`,
        value: tensorBytes(input.data_type, [...batch, ...input.dims]),
        max: limits.maxConfigTensorBytes,
        unit: 'bytes',
        why: 'one tensor the server builds',
      });
    }
  }
  checks.push({ what: 'model_warmup count (all samples)', value: runs, max: limits.maxWarmupRuns, unit: 'runs', why: 'per instance, before the model is ready' });
  return checks;
}

/** The LLM engine settings that size what the engine holds. */
export function llmLimitChecks(options: LlmModelOptions, limits: LoadLimits = DEFAULT_LOAD_LIMITS): LimitCheck[] {
  const tokens = (key: string, value: number | undefined): LimitCheck => ({ what: `parameter '${key}'`, value: value ?? 0, max: limits.maxLlmTokens, unit: 'tokens', why: 'per sequence or step' });
  return [
    { what: "parameter 'max_num_seqs'", value: options.maxNumSeqs, max: limits.maxLlmSequences, unit: 'sequences', why: 'scheduled at once' },
    tokens('max_model_len', options.maxModelLen),
    tokens('max_num_batched_tokens', options.maxNumBatchedTokens),
    { what: "parameter 'block_size'", value: options.blockSize, max: limits.maxLlmBlockSize, unit: 'tokens', why: 'per KV block' },
    { what: "parameter 'num_gpu_blocks'", value: options.numBlocks, max: limits.maxLlmBlocks, unit: 'blocks', why: 'KV block slots' },
  ];
}

/** The `llm` executor's KV cache, once the model's layers are known. */
export function kvCacheLimitCheck(bytes: number, limits: LoadLimits = DEFAULT_LOAD_LIMITS): LimitCheck {
  return {
    what: "KV cache (num_gpu_blocks x block_size x the model's layers, kv heads and head size)",
    value: bytes,
    max: limits.maxKvCacheBytes,
    unit: 'bytes',
    why: 'allocated in host memory at load',
  };
}
