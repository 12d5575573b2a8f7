/**
 * Engine settings of an LLM model (`backend: "llm"` or `"mocker"`), read from the model config's
 * `parameters` (string values, as Triton requires) with vLLM's engine-argument names. This is the one
 * place they are validated; a bad value fails the load with a message naming the parameter.
 *
 * | parameter                | default (llm / mocker)         | meaning |
 * |--------------------------|--------------------------------|---------|
 * | `block_size`             | 16 / 64                        | tokens per KV block |
 * | `num_gpu_blocks`         | 1024 / 16384                   | KV blocks the engine holds (CPU memory for `llm`) |
 * | `max_num_seqs`           | 256                            | sequences running at once |
 * | `max_num_batched_tokens` | 2048 / 8192                    | tokens computed per step |
 * | `max_model_len`          | config.json max_position_embeddings, else 2048 | prompt + completion limit |
 * | `enable_prefix_caching`  | true                           | keep freed full blocks as a prefix cache |
 * | `enable_chunked_prefill` | true                           | split long prompts across steps |
 * | `watermark`              | 0.01                           | fraction of blocks admission keeps free |
 * | `kv_cache_dtype`         | auto                           | `auto`, `fp32` or `fp16`: checked against the model's KV inputs (`llm`) |
 * | `speedup_ratio`          | 1                              | `mocker`: simulated time is divided by it |
 * | `seed`                   | unset / 0                      | `llm`: seeds the stream each unseeded request draws its own seed from (reproducible for the same arrival order; unset: random, as in vLLM); `mocker`: the token stream seed |
 * | `default_max_tokens`     | 16                             | KServe generate: `max_tokens` when a request gives none (vLLM's default) |
 * | `generation_config`      | the worker's `--generation-config` (`auto`) | `auto`: generation_config.json's sampling fields are the defaults of requests that do not set them; `vllm`: only its end ids apply (vLLM's `--generation-config`) |
 * | `tool_call_parser`       | unset                          | OpenAI chat: the model's tool-call format (`hermes`, `llama3_json`, `mistral`, `pythonic`; vLLM's `--tool-call-parser`) |
 * | `enable_auto_tool_choice`| true when `tool_call_parser` is set | OpenAI chat: `tool_choice: "auto"` parses calls (vLLM's `--enable-auto-tool-choice`) |
 * | `reasoning_parser`       | unset                          | OpenAI chat: `deepseek_r1` or `qwen3` splits `<think>…</think>` into `reasoning_content` (vLLM's `--reasoning-parser`); guided decoding then starts after `</think>` |
 *
 * A model that sets any of the three parsing parameters is parsed by them alone; one that sets none, by the front
 * door's flags (`--enable-auto-tool-choice`, `--tool-call-parser`, `--reasoning-parser`).
 */
import { invalidArgument } from '@switchyard/common';
import { REASONING_PARSERS, TOOL_CALL_PARSERS, type GenerationConfigMode, type OutputParsingConfig } from '@switchyard/llm';
import type { ModelConfig } from '@switchyard/model-config';

export type LlmKind = 'llm' | 'mocker';

export interface LlmModelOptions {
  readonly blockSize: number;
  readonly numBlocks: number;
  readonly maxNumSeqs: number;
  readonly maxNumBatchedTokens: number;
  /** undefined: take it from config.json (max_position_embeddings), else 2048. */
  readonly maxModelLen: number | undefined;
  readonly enablePrefixCaching: boolean;
  readonly enableChunkedPrefill: boolean;
  readonly watermark: number;
  readonly kvCacheDtype: 'auto' | 'fp32' | 'fp16';
  readonly speedupRatio: number;
  readonly seed: number;
  /** The config set `seed`: unseeded `llm` requests then draw their seeds from a stream it starts (reproducible for the same arrival order); else each draws a random seed, as in vLLM. */
  readonly seedGiven: boolean;
  readonly defaultMaxTokens: number;
  /** undefined: the worker's default (EngineOptions.generationConfig). */
  readonly generationConfig: GenerationConfigMode | undefined;
  /** The model's chat output parsing; empty: the front door's flags apply (`resolveOutputParsing`). */
  readonly outputParsing: OutputParsingConfig;
}

export const DEFAULT_MAX_MODEL_LEN = 2048;

/** The parameters the LLM backends read (also their `--backend-config` settings). */
export const KNOWN_LLM_PARAMETERS: ReadonlySet<string> = new Set([
  'block_size',
  'num_gpu_blocks',
  'max_num_seqs',
  'max_num_batched_tokens',
  'max_model_len',
  'enable_prefix_caching',
  'enable_chunked_prefill',
  'watermark',
  'kv_cache_dtype',
  'speedup_ratio',
  'seed',
  'default_max_tokens',
  'generation_config',
  'tool_call_parser',
  'enable_auto_tool_choice',
  'reasoning_parser',
]);

/** Parameter keys this backend does not know (the loader warns about them; they do not fail the load). */
export function unknownLlmParameters(config: ModelConfig): string[] {
  return Object.keys(config.parameters).filter((k) => !KNOWN_LLM_PARAMETERS.has(k));
}

/**
 * `defaults`: parameter values used where the config has none (the backend's `--backend-config`
 * settings). `subject`: who a bad value is reported against (default the model's parameter).
 */
export function compileLlmOptions(config: ModelConfig, kind: LlmKind, subject?: string, defaults: Readonly<Record<string, string>> = {}): LlmModelOptions {
  const raw = (key: string): string | undefined => {
    const v = config.parameters[key]?.string_value ?? defaults[key];
    return v === undefined || v.trim() === '' ? undefined : v.trim();
  };
  const fail = (key: string, what: string): never => {
    const who = subject ?? `unable to load model '${config.name}': parameter '${key}'`;
    throw invalidArgument(`${who} must be ${what}, got '${raw(key) ?? ''}'`);
  };
  const int = (key: string, dflt: number, min: number): number => {
    const v = raw(key);
    if (v === undefined) return dflt;
    const n = Number(v);
    return Number.isSafeInteger(n) && n >= min ? n : fail(key, `an integer >= ${min}`);
  };
  const num = (key: string, dflt: number, ok: (x: number) => boolean, what: string): number => {
    const v = raw(key);
    if (v === undefined) return dflt;
    const n = Number(v);
    return Number.isFinite(n) && ok(n) ? n : fail(key, what);
  };
  const bool = (key: string, dflt: boolean): boolean => {
    const v = raw(key)?.toLowerCase();
    if (v === undefined) return dflt;
    if (v === 'true' || v === '1') return true;
    if (v === 'false' || v === '0') return false;
    return fail(key, "'true' or 'false'");
  };
  const mocker = kind === 'mocker';
  const dtype = raw('kv_cache_dtype') ?? 'auto';
  if (dtype !== 'auto' && dtype !== 'fp32' && dtype !== 'fp16') fail('kv_cache_dtype', "'auto', 'fp32' or 'fp16'");
  const maxModelLen = raw('max_model_len') === undefined ? undefined : int('max_model_len', 0, 2);
  const mode = raw('generation_config');
  const generationConfig = mode === undefined || mode === 'auto' || mode === 'vllm' ? mode : fail('generation_config', "'auto' or 'vllm'");
  const parser = (key: string, known: Readonly<Record<string, unknown>>): string | undefined => {
    const v = raw(key);
    if (v !== undefined && !Object.hasOwn(known, v)) fail(key, `one of ${Object.keys(known).join(', ')}`);
    return v;
  };
  const toolCallParser = parser('tool_call_parser', TOOL_CALL_PARSERS);
  const reasoningParser = parser('reasoning_parser', REASONING_PARSERS);
  const autoGiven = raw('enable_auto_tool_choice') !== undefined;
  const enableAutoToolChoice = bool('enable_auto_tool_choice', toolCallParser !== undefined);
  return {
    blockSize: int('block_size', mocker ? 64 : 16, 1),
    numBlocks: int('num_gpu_blocks', mocker ? 16384 : 1024, 1),
    maxNumSeqs: int('max_num_seqs', 256, 1),
    maxNumBatchedTokens: int('max_num_batched_tokens', mocker ? 8192 : 2048, 1),
    maxModelLen,
    enablePrefixCaching: bool('enable_prefix_caching', true),
    enableChunkedPrefill: bool('enable_chunked_prefill', true),
    watermark: num('watermark', 0.01, (x) => x >= 0 && x < 1, 'a number in [0, 1)'),
    kvCacheDtype: dtype as LlmModelOptions['kvCacheDtype'],
    speedupRatio: num('speedup_ratio', 1, (x) => x > 0, 'a number > 0'),
    seed: int('seed', 0, 0),
    seedGiven: raw('seed') !== undefined,
    defaultMaxTokens: int('default_max_tokens', 16, 1),
    generationConfig,
    outputParsing: {
      ...(toolCallParser === undefined ? {} : { toolCallParser }),
      ...(reasoningParser === undefined ? {} : { reasoningParser }),
      ...(autoGiven || toolCallParser !== undefined ? { enableAutoToolChoice } : {}),
    },
  };
}
