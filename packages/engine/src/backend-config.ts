/**
 * Backend settings from the command line (tritonserver's `--backend-config`): backend name →
 * setting → value, with `''` for the settings every backend gets (Triton's
 * `backend_cmdline_config_map`). `compileBackendConfig` is the one place they are checked and turned
 * into what the built-in backends read.
 *
 * | backend | setting | meaning |
 * |---|---|---|
 * | (all) | `default-max-batch-size` | `max_batch_size` auto-complete gives a batchable model (default 4; 0: none) |
 * | `onnxruntime` | `default-max-batch-size` | the same, for this backend only (wins over the global one) |
 * | `onnxruntime` | `enable-global-threadpool` | true: every session uses the thread counts below, whatever its model config says (Triton's global thread pool; onnxruntime-node has none to share, so each session gets them) |
 * | `onnxruntime` | `intra_op_thread_count`, `inter_op_thread_count` | with the global threadpool: each session's threads (0: one per core); without it they are ignored, as in Triton |
 * | `llm`, `mocker` | any model parameter of the LLM backends (`max_num_seqs`, `block_size`, ...) | that parameter's default for every model of the backend; a model's own `parameters` win |
 * | `javascript` | none | |
 *
 * The values of the settings above are checked (an absurd one is refused). A setting these backends
 * do not read is ignored, as Triton's backends ignore settings they do not know (command lines in
 * the wild pass `onnxruntime,enable_mem_arena=0` and the like), and listed in `ignored` so the app
 * can say so; settings of backends this engine does not have (tensorrt, python, ...) are listed in
 * `otherBackends`. Either way a tritonserver command line still runs.
 */
import { invalidArgument } from '@switchyard/common';
import type { ModelConfig } from '@switchyard/model-config';
import { KNOWN_LLM_PARAMETERS, compileLlmOptions, type LlmKind } from './llm/llm-options.js';
import { ONNX_DEFAULT_MAX_BATCH_SIZE } from './onnxruntime/onnx-io-config.js';

/** Backend name (`''`: every backend) → setting → value, as given. */
export type BackendCommandLine = Readonly<Record<string, Readonly<Record<string, string>>>>;

export interface OnnxRuntimeSettings {
  /** `max_batch_size` auto-complete gives a model whose inputs and outputs all batch. */
  readonly defaultMaxBatchSize: number;
  /** `enable-global-threadpool`: every session's thread counts (0 = onnxruntime's default, one per core); undefined = the model config's. */
  readonly sessionThreads?: { readonly intraOp: number; readonly interOp: number };
}

export interface BackendSettings {
  readonly onnxruntime: OnnxRuntimeSettings;
  /** Model parameter defaults of the LLM backends. */
  readonly llm: Readonly<Record<string, string>>;
  readonly mocker: Readonly<Record<string, string>>;
  /** Backends given settings that this engine does not have (their settings have no effect). */
  readonly otherBackends: readonly string[];
  /**
   * Settings given to a built-in backend (or to all, `backend: ''`) that have no effect: unknown to
   * it, or onnxruntime thread counts without `enable-global-threadpool` (ignored, as in Triton).
   */
  readonly ignored: ReadonlyArray<{ backend: string; setting: string; why: string }>;
}

export const DEFAULT_BACKEND_SETTINGS: BackendSettings = {
  onnxruntime: { defaultMaxBatchSize: ONNX_DEFAULT_MAX_BATCH_SIZE },
  llm: {},
  mocker: {},
  otherBackends: [],
  ignored: [],
};

/** Largest thread count a setting may ask for: more than any machine has cores, less than a typo can make absurd. */
const MAX_THREADS = 1024;
/** Largest `default-max-batch-size`: the ceiling tritonserver's config checks allow for a batch dimension. */
const MAX_DEFAULT_BATCH = 2 ** 31 - 1;

const BUILT_IN = new Set(['onnxruntime', 'llm', 'mocker', 'javascript']);

function intSetting(backend: string, setting: string, value: string, max: number): number {
  const n = /^\d+$/.test(value) ? Number(value) : NaN;
  if (!Number.isSafeInteger(n) || n > max) throw invalidArgument(`${backend || 'global'} setting '${setting}' must be an integer from 0 to ${max}, got '${value}'`);
  return n;
}

function boolSetting(backend: string, setting: string, value: string): boolean {
  const v = value.toLowerCase();
  if (['true', '1', 'on', 'yes'].includes(v)) return true;
  if (['false', '0', 'off', 'no'].includes(v)) return false;
  throw invalidArgument(`${backend} setting '${setting}' must be true or false, got '${value}'`);
}

function unknown(backend: string, setting: string, known: readonly string[]): { backend: string; setting: string; why: string } {
  const reads = known.length === 0 ? 'reads no settings' : `reads ${known.join(', ')}`;
  return { backend, setting, why: `${backend === '' ? 'the global settings are default-max-batch-size only' : `the '${backend}' backend ${reads}`}` };
}

/** Check the command line's backend settings. Throws invalid_argument naming the setting. */
export function compileBackendConfig(map: BackendCommandLine = {}): BackendSettings {
  const global = map[''] ?? {};
  const ignored: Array<{ backend: string; setting: string; why: string }> = [];
  let defaultMaxBatchSize = ONNX_DEFAULT_MAX_BATCH_SIZE;
  for (const [setting, value] of Object.entries(global)) {
    if (setting === 'default-max-batch-size') defaultMaxBatchSize = intSetting('', setting, value, MAX_DEFAULT_BATCH);
    else ignored.push(unknown('', setting, []));
  }

  const ort = map['onnxruntime'] ?? {};
  const ortKeys = ['default-max-batch-size', 'enable-global-threadpool', 'intra_op_thread_count', 'inter_op_thread_count'];
  let globalPool = false;
  const threads = { intraOp: 0, interOp: 0 };
  for (const [setting, value] of Object.entries(ort)) {
    if (setting === 'default-max-batch-size') defaultMaxBatchSize = intSetting('onnxruntime', setting, value, MAX_DEFAULT_BATCH);
    else if (setting === 'enable-global-threadpool') globalPool = boolSetting('onnxruntime', setting, value);
    else if (setting === 'intra_op_thread_count') threads.intraOp = intSetting('onnxruntime', setting, value, MAX_THREADS);
    else if (setting === 'inter_op_thread_count') threads.interOp = intSetting('onnxruntime', setting, value, MAX_THREADS);
    else ignored.push(unknown('onnxruntime', setting, ortKeys));
  }
  if (!globalPool) {
    for (const setting of ['intra_op_thread_count', 'inter_op_thread_count'].filter((s) => s in ort)) {
      ignored.push({ backend: 'onnxruntime', setting, why: "it applies only with 'onnxruntime,enable-global-threadpool=true', as in Triton" });
    }
  }

  const llmDefaults = (kind: LlmKind): Record<string, string> => {
    const defaults: Record<string, string> = {};
    for (const [setting, value] of Object.entries(map[kind] ?? {})) {
      if (!KNOWN_LLM_PARAMETERS.has(setting)) {
        ignored.push(unknown(kind, setting, [...KNOWN_LLM_PARAMETERS]));
        continue;
      }
      // the same checks as a model's own parameter, with the flag named in the message
      const probe = { name: kind, parameters: { [setting]: { string_value: value } } } as unknown as ModelConfig;
      compileLlmOptions(probe, kind, `${kind} setting '${setting}'`);
      defaults[setting] = value;
    }
    return defaults;
  };

  for (const setting of Object.keys(map['javascript'] ?? {})) ignored.push(unknown('javascript', setting, []));

  return {
    onnxruntime: { defaultMaxBatchSize, ...(globalPool ? { sessionThreads: threads } : {}) },
    llm: llmDefaults('llm'),
    mocker: llmDefaults('mocker'),
    otherBackends: Object.keys(map).filter((name) => name !== '' && !BUILT_IN.has(name)),
    ignored,
  };
}
