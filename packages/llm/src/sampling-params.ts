/**
 * Sampling parameters: the user type (every field optional, documented default), the compiled type
 * (every field present, normalised), and the one function that validates and compiles.
 *
 * Field names are snake_case on purpose: they are the OpenAI / vLLM wire names, so the OpenAI front
 * door passes request fields straight through and every `invalid_argument` message names the field
 * the client actually sent.
 */
import { describeValue, invalidArgument } from '@switchyard/common';

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
}

export const DEFAULT_TEMPERATURE = 1;
export const DEFAULT_TOP_K = 0;
export const DEFAULT_TOP_P = 1;
export const DEFAULT_MIN_P = 0;
export const DEFAULT_FREQUENCY_PENALTY = 0;
export const DEFAULT_PRESENCE_PENALTY = 0;
export const DEFAULT_REPETITION_PENALTY = 1;

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
  readonly stop: readonly string[];
  readonly stop_token_ids: readonly number[];
  readonly ignore_eos: boolean;
  readonly frequency_penalty: number;
  readonly presence_penalty: number;
  readonly repetition_penalty: number;
  readonly logprobs: boolean;
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

function bool(name: string, v: unknown): boolean {
  if (v === undefined || v === null) return false;
  if (typeof v !== 'boolean') throw invalidArgument(`${name} must be a boolean, got ${describeValue(v)}`);
  return v;
}

/**
 * Validate a request's sampling parameters and fill in defaults. Throws `invalid_argument` naming the
 * first bad field. Takes `unknown`-ish input on purpose (fields may come straight from JSON).
 */
export function compileSamplingParams(params: SamplingParams = {}): CompiledSamplingParams {
  const p = params as Record<string, unknown>;
  const temperature = num('temperature', p.temperature, DEFAULT_TEMPERATURE, (x) => x >= 0, 'a number >= 0');
  const topK = int('top_k', p.top_k, (x) => x >= -1, 'an integer >= 1, or 0 / -1 to disable') ?? DEFAULT_TOP_K;
  const top_p = num('top_p', p.top_p, DEFAULT_TOP_P, (x) => x > 0 && x <= 1, 'a number in (0, 1]');
  const min_p = num('min_p', p.min_p, DEFAULT_MIN_P, (x) => x >= 0 && x <= 1, 'a number in [0, 1]');
  const seed = int('seed', p.seed, () => true, 'an integer');
  const max_tokens = int('max_tokens', p.max_tokens, (x) => x >= 1, 'an integer >= 1');
  const penalty = (x: number) => x >= -2 && x <= 2;
  const frequency_penalty = num('frequency_penalty', p.frequency_penalty, DEFAULT_FREQUENCY_PENALTY, penalty, 'a number in [-2, 2]');
  const presence_penalty = num('presence_penalty', p.presence_penalty, DEFAULT_PRESENCE_PENALTY, penalty, 'a number in [-2, 2]');
  const repetition_penalty = num('repetition_penalty', p.repetition_penalty, DEFAULT_REPETITION_PENALTY, (x) => x > 0, 'a number > 0');

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

  return {
    temperature,
    top_k: topK === -1 ? 0 : topK,
    top_p,
    min_p,
    seed,
    max_tokens,
    stop,
    stop_token_ids,
    ignore_eos: bool('ignore_eos', p.ignore_eos),
    frequency_penalty,
    presence_penalty,
    repetition_penalty,
    logprobs: bool('logprobs', p.logprobs),
  };
}
