/**
 * Sampling parameters: the user type (every field optional, documented default), the compiled type
 * (every field present, normalised), and the one function that validates and compiles.
 *
 * Field names are snake_case on purpose: they are the OpenAI / vLLM wire names, so the OpenAI front
 * door passes request fields straight through and every `invalid_argument` message names the field
 * the client actually sent.
 */
import { describeValue, invalidArgument } from '@switchyard/common';
import { decodeGuidedDecoding, type GuidedDecoding } from './guided/json-schema.js';

/** What a request may ask for. Omitted (or `null`) fields take the `DEFAULT_*` below. */
export interface SamplingParams {
  /** Softmax temperature, >= 0. `0` means greedy (argmax; `seed`, `top_*`, `min_p` are then ignored). */
  temperature?: number | null;
  /** Keep only the k most likely tokens (ties at the k-th logit are kept). `0` or `-1` = disabled. */
  top_k?: number | null;
  /** Nucleus sampling: keep the smallest top set whose probability reaches `top_p`, in (0, 1]. */
  top_p?: number | null;
  /** Drop tokens whose probability is below `min_p` times the top token's, in [0, 1]. `0` = off. */
  min_p?: number | null;
  /**
   * Seed for this request's private PRNG: the same seed, logits and params give the same tokens in
   * any process. Any safe integer. Absent = a random seed per request.
   */
  seed?: number | null;
  /** Maximum generated tokens, >= 1. Absent = until the engine's context limit. */
  max_tokens?: number | null;
  /** Stop strings (OpenAI: string or list). Matched on the detokenised text; never emitted. */
  stop?: string | readonly string[] | null;
  /** Token ids that end generation with finish_reason "stop" (the token itself is not emitted as text). */
  stop_token_ids?: readonly number[] | null;
  /** Keep generating past the model's EOS token(s). */
  ignore_eos?: boolean | null;
  /** OpenAI: subtract `count(token) * frequency_penalty` from a generated token's logit, in [-2, 2]. */
  frequency_penalty?: number | null;
  /** OpenAI: subtract `presence_penalty` once from every token generated so far, in [-2, 2]. */
  presence_penalty?: number | null;
  /**
   * vLLM / CTRL: for tokens in the prompt or the output, divide positive logits by it and multiply
   * negative ones, > 0. `1` = off.
   */
  repetition_penalty?: number | null;
  /** Report the log-probability of each chosen token (one extra pass over the vocabulary). */
  logprobs?: boolean | null;
  /**
   * With `logprobs`: also report this many most likely tokens at each position, 0..MAX_TOP_LOGPROBS
   * (vLLM's `logprobs` count, OpenAI's `top_logprobs`). Default 0. Ignored without `logprobs`.
   */
  top_logprobs?: number | null;
  /**
   * OpenAI: token id (a decimal string, as JSON object keys are) → bias added to its logit before
   * sampling. Values are clamped to [-100, 100] as OpenAI does. Ids beyond the logits are ignored by
   * the sampler; front doors refuse ids outside the tokenizer's vocabulary (`checkLogitBiasIds`).
   */
  logit_bias?: Readonly<Record<string, number>> | null;
  /**
   * vLLM: generate at least this many tokens before EOS, stop token ids or stop strings may end the
   * sequence (the end ids are masked until then), >= 0 and <= max_tokens. Default 0.
   */
  min_tokens?: number | null;
  /** vLLM: drop special tokens (`<|im_end|>`, ...) from the text. Default true. */
  skip_special_tokens?: boolean | null;
  /**
   * vLLM: put spaces between special tokens in the text. Default true. Accepted and validated; like
   * vLLM with a fast tokenizer, the text is the tokenizer's decode either way.
   */
  spaces_between_special_tokens?: boolean | null;
  /**
   * Structured output (vLLM's guided decoding; OpenAI's `response_format`): tokens that would leave
   * the language are masked at sampling time, and once the document is complete only the end ids
   * are allowed. The schema is checked here (`decodeGuidedDecoding`: unsupported keywords refused by
   * name). Needs an executor with logits and a tokenizer (the engine refuses it otherwise).
   */
  guided_decoding?: GuidedDecoding | null;
}

export const DEFAULT_TEMPERATURE = 1;
export const DEFAULT_TOP_K = 0;
export const DEFAULT_TOP_P = 1;
export const DEFAULT_MIN_P = 0;
export const DEFAULT_FREQUENCY_PENALTY = 0;
export const DEFAULT_PRESENCE_PENALTY = 0;
export const DEFAULT_REPETITION_PENALTY = 1;
export const DEFAULT_MIN_TOKENS = 0;
/** Most alternatives a request may ask for per position (vLLM's default `max_logprobs`). */
export const MAX_TOP_LOGPROBS = 20;
/** OpenAI's range for a logit_bias value; values outside it are clamped. */
export const LOGIT_BIAS_LIMIT = 100;

/**
 * Defaults a model brings along (vLLM's generation config, `generation-config.ts`): fields a request
 * does not set take these instead of the `DEFAULT_*` above; `max_tokens` is a ceiling even on a
 * request that sets one (vLLM takes the least of the request's, the model's and what the context
 * leaves). `eos_token_ids` are the model's extra end ids: unless `ignore_eos`, they join
 * `stop_token_ids` (so the stop reason names them, as in vLLM).
 */
export interface SamplingDefaults {
  readonly temperature?: number;
  readonly top_k?: number;
  readonly top_p?: number;
  readonly min_p?: number;
  readonly repetition_penalty?: number;
  readonly max_tokens?: number;
  readonly eos_token_ids?: readonly number[];
}

/** Validated and normalised parameters; the only shape the sampler and stop checker read. */
export interface CompiledSamplingParams {
  readonly temperature: number;
  /** 0 = disabled. */
  readonly top_k: number;
  readonly top_p: number;
  readonly min_p: number;
  /** `null` = the caller did not ask for determinism; `createSamplerState` then draws one. */
  readonly seed: number | null;
  /** `null` = no limit from the request (the engine applies the context limit). */
  readonly max_tokens: number | null;
  /**
   * With `max_tokens` null only: the model's default (generation config); the engine takes the least
   * of it and what the context leaves (vLLM), so it never makes a request too long. `null` = none.
   */
  readonly default_max_tokens: number | null;
  readonly stop: readonly string[];
  readonly stop_token_ids: readonly number[];
  readonly ignore_eos: boolean;
  readonly frequency_penalty: number;
  readonly presence_penalty: number;
  readonly repetition_penalty: number;
  readonly logprobs: boolean;
  /** Alternatives reported per position, 0..MAX_TOP_LOGPROBS; always 0 when `logprobs` is false. */
  readonly top_logprobs: number;
  /** Token id (decimal string) → bias in [-100, 100]; `{}` = none. */
  readonly logit_bias: Readonly<Record<string, number>>;
  readonly min_tokens: number;
  readonly skip_special_tokens: boolean;
  readonly spaces_between_special_tokens: boolean;
  /** null = unconstrained. Plain JSON, so compiled params travel on the cluster wire as they are. */
  readonly guided_decoding: GuidedDecoding | null;
}

function num(
  name: string,
  v: unknown,
  dflt: number,
  ok: (x: number) => boolean,
  range: string,
): number {
  if (v === undefined || v === null) return dflt;
  if (typeof v !== 'number' || !Number.isFinite(v) || !ok(v)) {
    throw invalidArgument(`${name} must be ${range}, got ${describeValue(v)}`);
  }
  return v;
}

function int(name: string, v: unknown, ok: (x: number) => boolean, range: string): number | null {
  if (v === undefined || v === null) return null;
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || !ok(v)) {
    throw invalidArgument(`${name} must be ${range}, got ${describeValue(v)}`);
  }
  return v;
}

function bool(name: string, v: unknown, dflt = false): boolean {
  if (v === undefined || v === null) return dflt;
  if (typeof v !== 'boolean') throw invalidArgument(`${name} must be a boolean, got ${describeValue(v)}`);
  return v;
}

/**
 * Validate a request's sampling parameters and fill in defaults. Throws `invalid_argument` naming the
 * first bad field. Takes `unknown`-ish input on purpose (fields may come straight from JSON).
 */
export function compileSamplingParams(params: SamplingParams = {}, defaults: SamplingDefaults = {}): CompiledSamplingParams {
  const p = params as Record<string, unknown>;
  const temperature = num('temperature', p.temperature, defaults.temperature ?? DEFAULT_TEMPERATURE, (x) => x >= 0, 'a number >= 0');
  const topK = int('top_k', p.top_k, (x) => x >= -1, 'an integer >= 1, or 0 / -1 to disable') ?? defaults.top_k ?? DEFAULT_TOP_K;
  const top_p = num('top_p', p.top_p, defaults.top_p ?? DEFAULT_TOP_P, (x) => x > 0 && x <= 1, 'a number in (0, 1]');
  const min_p = num('min_p', p.min_p, defaults.min_p ?? DEFAULT_MIN_P, (x) => x >= 0 && x <= 1, 'a number in [0, 1]');
  const seed = int('seed', p.seed, () => true, 'an integer');
  const requestedMax = int('max_tokens', p.max_tokens, (x) => x >= 1, 'an integer >= 1');
  const max_tokens = requestedMax === null ? null : Math.min(requestedMax, defaults.max_tokens ?? Infinity);
  // Idempotent: a compiled request's own default travels with it (the router compiles, the worker again).
  const default_max_tokens = max_tokens !== null ? null : (int('default_max_tokens', p.default_max_tokens, (x) => x >= 1, 'an integer >= 1') ?? defaults.max_tokens ?? null);
  const penalty = (x: number) => x >= -2 && x <= 2;
  const frequency_penalty = num('frequency_penalty', p.frequency_penalty, DEFAULT_FREQUENCY_PENALTY, penalty, 'a number in [-2, 2]');
  const presence_penalty = num('presence_penalty', p.presence_penalty, DEFAULT_PRESENCE_PENALTY, penalty, 'a number in [-2, 2]');
  const repetition_penalty = num('repetition_penalty', p.repetition_penalty, defaults.repetition_penalty ?? DEFAULT_REPETITION_PENALTY, (x) => x > 0, 'a number > 0');
  const min_tokens = int('min_tokens', p.min_tokens, (x) => x >= 0, 'an integer >= 0') ?? DEFAULT_MIN_TOKENS;
  if (requestedMax !== null && min_tokens > requestedMax) {
    throw invalidArgument(`min_tokens must be less than or equal to max_tokens=${requestedMax}, got ${min_tokens}`);
  }
  const logit_bias = logitBias(p.logit_bias);
  const logprobs = bool('logprobs', p.logprobs);
  const topLogprobs = int('top_logprobs', p.top_logprobs, (x) => x >= 0 && x <= MAX_TOP_LOGPROBS, `an integer in [0, ${MAX_TOP_LOGPROBS}]`) ?? 0;
  const ignore_eos = bool('ignore_eos', p.ignore_eos);
  const guided = p.guided_decoding === undefined || p.guided_decoding === null ? null : decodeGuidedDecoding(p.guided_decoding);
  // Past a complete document only an end id may follow: generating on past it would loop on end ids.
  if (guided !== null && ignore_eos) throw invalidArgument('ignore_eos cannot be combined with guided decoding (response_format)');

  let stop: string[] = [];
  if (p.stop !== undefined && p.stop !== null) {
    const list = typeof p.stop === 'string' ? [p.stop] : p.stop;
    if (!Array.isArray(list) || !list.every((s) => typeof s === 'string' && s.length > 0)) {
      throw invalidArgument('stop must be a non-empty string or a list of non-empty strings');
    }
    stop = [...new Set(list as string[])];
  }
  let stop_token_ids: number[] = [];
  if (p.stop_token_ids !== undefined && p.stop_token_ids !== null) {
    const ids = p.stop_token_ids;
    if (!Array.isArray(ids) || !ids.every((t) => typeof t === 'number' && Number.isSafeInteger(t) && t >= 0)) {
      throw invalidArgument('stop_token_ids must be a list of integers >= 0');
    }
    stop_token_ids = [...new Set(ids as number[])];
  }
  // vLLM (update_from_generation_config): the model's extra end ids stop generation as stop ids.
  if (!ignore_eos && defaults.eos_token_ids !== undefined && defaults.eos_token_ids.length > 0) {
    stop_token_ids = [...new Set([...defaults.eos_token_ids, ...stop_token_ids])];
  }

  return {
    temperature,
    top_k: topK === -1 ? 0 : topK,
    top_p,
    min_p,
    seed,
    max_tokens,
    default_max_tokens,
    stop,
    stop_token_ids,
    ignore_eos,
    frequency_penalty,
    presence_penalty,
    repetition_penalty,
    logprobs,
    top_logprobs: logprobs ? topLogprobs : 0,
    logit_bias,
    min_tokens,
    skip_special_tokens: bool('skip_special_tokens', p.skip_special_tokens, true),
    spaces_between_special_tokens: bool('spaces_between_special_tokens', p.spaces_between_special_tokens, true),
    guided_decoding: guided,
  };
}

/** Most logit_bias entries one request may carry (the body is size-limited too; this bounds the work per token). */
export const MAX_LOGIT_BIAS_ENTRIES = 1024;

const TOKEN_ID_KEY = /^[0-9]{1,15}$/;

/** logit_bias validated (keys are decimal token ids, values finite numbers), values clamped to ±100. */
function logitBias(v: unknown): Readonly<Record<string, number>> {
  if (v === undefined || v === null) return {};
  if (typeof v !== 'object' || Array.isArray(v)) throw invalidArgument(`logit_bias must be an object of token id → bias, got ${describeValue(v)}`);
  const entries = Object.entries(v as Record<string, unknown>);
  if (entries.length > MAX_LOGIT_BIAS_ENTRIES) throw invalidArgument(`logit_bias may hold at most ${MAX_LOGIT_BIAS_ENTRIES} tokens, got ${entries.length}`);
  const out: Record<string, number> = {};
  for (const [key, bias] of entries) {
    if (!TOKEN_ID_KEY.test(key)) {
      throw invalidArgument(`Found token_id ${JSON.stringify(key.slice(0, 40))} in logit_bias that is not an integer or string representing an integer`);
    }
    if (typeof bias !== 'number' || !Number.isFinite(bias)) throw invalidArgument(`logit_bias of token_id ${key} must be a number, got ${describeValue(bias)}`);
    out[String(Number(key))] = Math.min(LOGIT_BIAS_LIMIT, Math.max(-LOGIT_BIAS_LIMIT, bias));
  }
  return out;
}

/**
 * The first logit_bias token id at or beyond `vocabSize` (vLLM's out-of-vocab refusal), as
 * invalid_argument; front doors call it once the model (its tokenizer) is known.
 */
export function checkLogitBiasIds(params: CompiledSamplingParams, vocabSize: number): void {
  for (const key of Object.keys(params.logit_bias)) {
    if (Number(key) >= vocabSize) throw invalidArgument(`token_id ${key} in logit_bias contains out-of-vocab token id`);
  }
}

/**
 * `value` (JSON from another process: a model card) as SamplingDefaults, every field checked against
 * the same ranges as a request's; invalid_argument naming `what` and the field otherwise.
 */
export function decodeSamplingDefaults(value: unknown, what: string): SamplingDefaults {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw invalidArgument(`${what} must be an object`);
  const o = value as Record<string, unknown>;
  const out: { -readonly [K in keyof SamplingDefaults]: SamplingDefaults[K] } = {};
  const field = (name: 'temperature' | 'top_k' | 'top_p' | 'min_p' | 'repetition_penalty' | 'max_tokens', integer: boolean, ok: (x: number) => boolean): void => {
    const v = o[name];
    if (v === undefined) return;
    if (typeof v !== 'number' || !Number.isFinite(v) || (integer && !Number.isSafeInteger(v)) || !ok(v)) {
      throw invalidArgument(`${what}: ${name} is out of range, got ${describeValue(v)}`);
    }
    out[name] = v;
  };
  field('temperature', false, (x) => x >= 0);
  field('top_k', true, (x) => x >= 0);
  field('top_p', false, (x) => x > 0 && x <= 1);
  field('min_p', false, (x) => x >= 0 && x <= 1);
  field('repetition_penalty', false, (x) => x > 0);
  field('max_tokens', true, (x) => x >= 1);
  const ids = o['eos_token_ids'];
  if (ids !== undefined) {
    if (!Array.isArray(ids) || ids.length > 1024 || !ids.every((t) => typeof t === 'number' && Number.isSafeInteger(t) && t >= 0)) {
      throw invalidArgument(`${what}: eos_token_ids must be a list of at most 1024 token ids`);
    }
    out.eos_token_ids = [...(ids as number[])];
  }
  return out;
}
