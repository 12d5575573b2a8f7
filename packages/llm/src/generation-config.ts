/**
 * A model folder's `generation_config.json` (Hugging Face `GenerationConfig`), read as vLLM reads it
 * (`try_get_generation_config`, `ModelConfig.get_diff_sampling_param`):
 *
 * - its `eos_token_id` (an id or a list: Qwen3's `<|endoftext|>`, Llama 3's `<|end_of_text|>`) ends
 *   generation always, whatever the `generation_config` mode;
 * - its sampling fields — `temperature`, `top_k`, `top_p`, `min_p`, `repetition_penalty`, and
 *   `max_new_tokens` as `max_tokens` — are the defaults of requests that do not set them, in mode
 *   `auto` (vLLM's default); mode `vllm` keeps the engine's neutral defaults.
 *
 * Like `GenerationConfig.to_diff_dict()`, a field equal to Hugging Face's own default (temperature 1,
 * top_k 50, top_p 1, repetition_penalty 1) is no default of the model: vLLM's neutral value applies
 * (so `top_k: 50` written out in the file does not turn top-k on). `null` is absent. Any other field
 * (`do_sample`, `bos_token_id`, `transformers_version`, ...) is ignored. A field of the wrong type or
 * range is `invalid_argument` naming the file and the field: the model fails to load rather than
 * serve with a setting it was not given.
 *
 * Pure: `readModelFolder` reads the file (confined to the folder, size-limited).
 */
import { describeValue, invalidArgument } from '@switchyard/common';
import type { SamplingDefaults } from './sampling-params.js';

/** `auto`: the model's sampling defaults apply; `vllm`: only its end ids do (vLLM's `--generation-config`). */
export type GenerationConfigMode = 'auto' | 'vllm';

/** Every mode, for flag parsers. */
export const GENERATION_CONFIG_MODES: readonly GenerationConfigMode[] = ['auto', 'vllm'];

export const DEFAULT_GENERATION_CONFIG_MODE: GenerationConfigMode = 'auto';

/** Largest generation_config.json read (real ones are well under 1 KiB). */
export const MAX_GENERATION_CONFIG_BYTES = 64 * 1024;

/** The mode a flag or model parameter names, or invalid_argument naming `what`. */
export function parseGenerationConfigMode(value: string, what: string): GenerationConfigMode {
  if (value === 'auto' || value === 'vllm') return value;
  throw invalidArgument(`${what} must be 'auto' or 'vllm', got ${describeValue(value)}`);
}

/** Hugging Face GenerationConfig's defaults for the fields vLLM reads (`to_diff_dict` drops these). */
const HF_DEFAULTS: Readonly<Record<string, number>> = { temperature: 1, top_k: 50, top_p: 1, repetition_penalty: 1 };

/**
 * The defaults `json` (a parsed generation_config.json; undefined when the folder has none) gives a
 * model's requests in `mode`. `file` names the file in messages.
 */
export function generationDefaults(json: Readonly<Record<string, unknown>> | undefined, mode: GenerationConfigMode, file = 'generation_config.json'): SamplingDefaults {
  if (json === undefined) return {};
  const bad = (field: string, what: string): never => {
    throw invalidArgument(`${file}: ${field} must be ${what}, got ${describeValue(json[field])}`);
  };
  const eos = endIds(json['eos_token_id'], () => bad('eos_token_id', 'a token id or a list of token ids'));
  const out: { -readonly [K in keyof SamplingDefaults]: SamplingDefaults[K] } = {};
  if (eos.length > 0) out.eos_token_ids = eos;
  const field = (name: string, ok: (x: number) => boolean, what: string, integer = false): number | undefined => {
    const v = json[name];
    if (v === undefined || v === null) return undefined;
    if (typeof v !== 'number' || !Number.isFinite(v) || (integer && !Number.isSafeInteger(v)) || !ok(v)) bad(name, what);
    return v === HF_DEFAULTS[name] ? undefined : (v as number);
  };
  // Validated in both modes: a broken file is refused even where its values would not be used.
  const temperature = field('temperature', (x) => x >= 0, 'a number >= 0');
  const topK = field('top_k', (x) => x >= -1, 'an integer >= -1', true);
  const topP = field('top_p', (x) => x > 0 && x <= 1, 'a number in (0, 1]');
  const minP = field('min_p', (x) => x >= 0 && x <= 1, 'a number in [0, 1]');
  const repetition = field('repetition_penalty', (x) => x > 0, 'a number > 0');
  const maxNew = field('max_new_tokens', (x) => x >= 1, 'an integer >= 1', true);
  if (mode === 'vllm') return out;
  if (temperature !== undefined) out.temperature = temperature;
  if (topK !== undefined) out.top_k = topK === -1 ? 0 : topK;
  if (topP !== undefined) out.top_p = topP;
  if (minP !== undefined) out.min_p = minP;
  if (repetition !== undefined) out.repetition_penalty = repetition;
  if (maxNew !== undefined) out.max_tokens = maxNew;
  return out;
}

/** `eos_token_id` as a list of ids (none when absent or null). */
function endIds(v: unknown, bad: () => never): number[] {
  if (v === undefined || v === null) return [];
  const list = Array.isArray(v) ? v : [v];
  if (list.length > 1024) bad();
  for (const id of list) if (typeof id !== 'number' || !Number.isSafeInteger(id) || id < 0) bad();
  return [...new Set(list as number[])];
}

/**
 * The ids of `defaults.eos_token_ids` that are not already among the model's EOS ids: those become
 * stop token ids (vLLM drops the primary EOS from them, so it still ends with stop_reason null).
 */
export function withoutModelEos(defaults: SamplingDefaults, eosTokenIds: Iterable<number>): SamplingDefaults {
  const ids = defaults.eos_token_ids;
  if (ids === undefined) return defaults;
  const eos = new Set(eosTokenIds);
  const rest = ids.filter((id) => !eos.has(id));
  const { eos_token_ids: _ids, ...others } = defaults;
  return rest.length === 0 ? others : { ...others, eos_token_ids: rest };
}
