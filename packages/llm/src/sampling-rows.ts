/**
 * Sampling next to the forward pass: the decoder's thread samples the rows of a run that need only
 * plain sampling and sends back a token id (and the logprobs asked for) per row instead of [B, n, V]
 * logits; rows whose sampling needs the event loop's state (a guided-decoding constraint) get their
 * last position's logits row back instead.
 *
 * One sampler, two threads: the thread runs the very `sample` of `sampling.ts` on a SamplerState
 * rebuilt from the event loop's (`encodeSampleRows`), and the event loop then moves its own state
 * exactly as `sample` moved the thread's copy (`commitSample`: the RNG's words, the output count), so
 * a request's tokens, random stream, ties and logprob values are those of sampling on the event loop.
 *
 * Both directions are float64 tensors, so they cross the session thread's shared channel like any
 * feed or output (no structured clone): every value in them (ids, counts, RNG words, parameters,
 * logprobs) is a JavaScript number and round-trips exactly.
 *
 * Request (`SAMPLE_ROWS_INPUT`): [vocab (0 = the logits' width), B], then per row its kind —
 * ROW_NONE (a prefill chunk that samples nothing), ROW_LOGITS, or ROW_SAMPLE followed by the state:
 * temperature, top_k, top_p, min_p, frequency, presence and repetition penalty, logprobs (0 / 1),
 * top_logprobs, min_tokens, the four RNG words, tokens generated, then counted lists of logit_bias
 * pairs, output counts (only when a penalty reads them), prompt ids (only for repetition_penalty,
 * -1 = none) and end ids (only while min_tokens masks them).
 * Answer (`SAMPLED_OUTPUT`): [B, n, W] of the logits, then per row its kind — ROW_NONE, ROW_LOGITS
 * (the next row of `LOGIT_ROWS_OUTPUT`, float32 [R, vocab]), or ROW_SAMPLE followed by the token id,
 * has-logprob (0 / 1), the logprob, the four RNG words after the draw, and a counted list of
 * (id, logprob) alternatives (-1 = no top_logprobs).
 * A row the thread cannot sample (`sample` threw: NaN logits, everything masked) comes back as
 * ROW_LOGITS, so the event loop's `sample` throws the same error. Logits the thread cannot read as
 * [B, n, ≥ vocab] are left in the outputs untouched: the executor then reports them as it always did.
 */
import type { CompiledSamplingParams } from './sampling-params.js';
import type { DecoderTensor } from './decoder-session.js';
import { Xoshiro128, sample, type SampleResult, type SamplerState } from './sampling.js';

/** The feed that carries the rows' sampling (never a model input: the executor refuses unknown inputs). */
export const SAMPLE_ROWS_INPUT = '#sample_rows';
/** The outputs that replace 'logits' when the rows were sampled where the pass ran. */
export const SAMPLED_OUTPUT = '#sampled';
export const LOGIT_ROWS_OUTPUT = '#logit_rows';

const ROW_NONE = 0;
const ROW_LOGITS = 1;
const ROW_SAMPLE = 2;

/** What one row of a run needs: nothing, its logits on the event loop, or a sample by this state. */
export type RowSampling = null | 'logits' | SamplerState;

/** One row's outcome on the event loop: nothing, its last logits row, or the thread's sample. */
export type RowOutcome = null | { readonly logits: Float32Array } | SampledRow;

export interface SampledRow extends SampleResult {
  /** The RNG's words after the draw (`Xoshiro128.state()`). */
  readonly rng: readonly number[];
}

/** Whether a state can be sampled off the event loop: it has no guided-decoding constraint. */
export function samplesAnywhere(state: SamplerState): boolean {
  return state.constraint === null;
}

/** The request tensor for a run's rows (`vocab` undefined: the logits' width). */
export function encodeSampleRows(vocab: number | undefined, rows: readonly RowSampling[]): Float64Array {
  const out: number[] = [vocab ?? 0, rows.length];
  for (const r of rows) {
    if (r === null) out.push(ROW_NONE);
    else if (r === 'logits' || !samplesAnywhere(r)) out.push(ROW_LOGITS);
    else {
      const p = r.params;
      out.push(ROW_SAMPLE, p.temperature, p.top_k, p.top_p, p.min_p, p.frequency_penalty, p.presence_penalty, p.repetition_penalty);
      out.push(p.logprobs ? 1 : 0, p.top_logprobs, p.min_tokens, ...r.rng.state(), r.generated);
      out.push(r.bias.length);
      for (const [id, b] of r.bias) out.push(id, b);
      const counted = p.frequency_penalty !== 0 || p.presence_penalty !== 0 || p.repetition_penalty !== 1;
      out.push(counted ? r.outputCounts.size : 0);
      if (counted) for (const [id, n] of r.outputCounts) out.push(id, n);
      if (r.promptTokens === null) out.push(-1);
      else {
        out.push(r.promptTokens.size);
        for (const id of r.promptTokens) out.push(id);
      }
      const ends = r.generated < p.min_tokens ? r.endTokenIds : [];
      out.push(ends.length, ...ends);
    }
  }
  return Float64Array.from(out);
}

/** Compiled params with what `sample` reads from `q` at `at` (the rest at their defaults: `sample` does not read them). */
function readParams(q: Float64Array, at: number): CompiledSamplingParams {
  return {
    temperature: q[at]!,
    top_k: q[at + 1]!,
    top_p: q[at + 2]!,
    min_p: q[at + 3]!,
    frequency_penalty: q[at + 4]!,
    presence_penalty: q[at + 5]!,
    repetition_penalty: q[at + 6]!,
    logprobs: q[at + 7] === 1,
    top_logprobs: q[at + 8]!,
    min_tokens: q[at + 9]!,
    seed: null,
    max_tokens: null,
    default_max_tokens: null,
    stop: [],
    stop_token_ids: [],
    ignore_eos: false,
    logit_bias: {},
    skip_special_tokens: true,
    spaces_between_special_tokens: true,
    guided_decoding: null,
  };
}

/**
 * Where the forward pass ran: sample the rows `request` (`encodeSampleRows`) asks for from
 * `outputs.logits` [B, n, W] (each row's last position, cut to the vocabulary; float16 read as
 * float32) and return the outputs with 'logits' replaced by SAMPLED_OUTPUT and, when a row asked for
 * them, LOGIT_ROWS_OUTPUT. Logits that do not fit the request come back untouched.
 */
export function sampleRows(outputs: Record<string, DecoderTensor>, request: Float64Array): Record<string, DecoderTensor> {
  const logits = outputs['logits'];
  const B = request[1]!;
  if (logits === undefined || logits.dims.length !== 3 || logits.dims[0] !== B) return outputs;
  if (!(logits.data instanceof Float32Array) && !(logits.type === 'float16' && logits.data instanceof Uint16Array)) return outputs;
  const [, n, W] = logits.dims as [number, number, number];
  const vocab = request[0]! === 0 ? W : request[0]!;
  if (n < 1 || vocab > W) return outputs;
  const answer: number[] = [B, n, W];
  const rows: Float32Array[] = [];
  let q = 2;
  for (let b = 0; b < B; b++) {
    const kind = request[q++]!;
    if (kind === ROW_NONE) {
      answer.push(ROW_NONE);
      continue;
    }
    const row = lastLogitsRow(logits, b, n, vocab);
    if (kind === ROW_LOGITS) {
      answer.push(ROW_LOGITS);
      rows.push(row);
      continue;
    }
    const params = readParams(request, q);
    q += 10;
    const rng = new Xoshiro128(0);
    rng.setState(request.subarray(q, q + 4));
    q += 4;
    const generated = request[q++]!;
    const bias: Array<readonly [number, number]> = [];
    for (let k = request[q++]!; k > 0; k--, q += 2) bias.push([request[q]!, request[q + 1]!]);
    const outputCounts = new Map<number, number>();
    for (let k = request[q++]!; k > 0; k--, q += 2) outputCounts.set(request[q]!, request[q + 1]!);
    const promptCount = request[q++]!;
    let promptTokens: Set<number> | null = null;
    if (promptCount >= 0) {
      promptTokens = new Set();
      for (let k = 0; k < promptCount; k++) promptTokens.add(request[q++]!);
    }
    const endTokenIds: number[] = [];
    for (let k = request[q++]!; k > 0; k--) endTokenIds.push(request[q++]!);
    const state: SamplerState = { params, seed: 0, rng, outputCounts, promptTokens, endTokenIds, bias, constraint: null, generated };
    let picked: SampleResult;
    try {
      picked = sample(row, state);
    } catch {
      // The event loop's own `sample` meets the same logits and reports it.
      answer.push(ROW_LOGITS);
      rows.push(row);
      continue;
    }
    answer.push(ROW_SAMPLE, picked.tokenId, picked.logprob === null ? 0 : 1, picked.logprob ?? 0, ...rng.state());
    if (picked.top === null) answer.push(-1);
    else {
      answer.push(picked.top.tokenIds.length);
      picked.top.tokenIds.forEach((id, i) => answer.push(id, picked.top!.logprobs[i]!));
    }
  }
  const out: Record<string, DecoderTensor> = {};
  for (const name in outputs) if (name !== 'logits') out[name] = outputs[name]!;
  out[SAMPLED_OUTPUT] = { type: 'float64', dims: [answer.length], data: Float64Array.from(answer) };
  if (rows.length > 0) {
    const all = new Float32Array(rows.length * vocab);
    rows.forEach((r, i) => all.set(r, i * vocab));
    out[LOGIT_ROWS_OUTPUT] = { type: 'float32', dims: [rows.length, vocab], data: all };
  }
  return out;
}

/** The logits' [B, n, W] as the pass returned them, from a SAMPLED_OUTPUT tensor. */
export function sampledLogitsDims(sampled: DecoderTensor): [number, number, number] {
  const a = sampled.data as Float64Array;
  return [a[0]!, a[1]!, a[2]!];
}

/** The per-row outcomes of a SAMPLED_OUTPUT (and LOGIT_ROWS_OUTPUT) tensor. */
export function readSampledRows(sampled: DecoderTensor, logitRows: DecoderTensor | undefined): RowOutcome[] {
  const a = sampled.data as Float64Array;
  const B = a[0]!;
  const vocab = logitRows?.dims[1] ?? 0;
  const rows = logitRows?.data as Float32Array | undefined;
  const out: RowOutcome[] = [];
  let r = 0;
  let q = 3;
  for (let b = 0; b < B; b++) {
    const kind = a[q++]!;
    if (kind === ROW_NONE) out.push(null);
    else if (kind === ROW_LOGITS) {
      out.push({ logits: rows!.subarray(r * vocab, (r + 1) * vocab) });
      r++;
    } else {
      const tokenId = a[q]!;
      const logprob = a[q + 1] === 1 ? a[q + 2]! : null;
      const rng = [a[q + 3]!, a[q + 4]!, a[q + 5]!, a[q + 6]!];
      q += 7;
      const k = a[q++]!;
      let top: SampleResult['top'] = null;
      if (k >= 0) {
        const tokenIds: number[] = [];
        const logprobs: number[] = [];
        for (let j = 0; j < k; j++, q += 2) {
          tokenIds.push(a[q]!);
          logprobs.push(a[q + 1]!);
        }
        top = { tokenIds, logprobs };
      }
      out.push({ tokenId, logprob, top, rng });
    }
  }
  return out;
}

/**
 * Move the event loop's state as `sample` moved the thread's copy for `row`: the RNG to its words
 * after the draw, the token counted as generated. Returns the sample.
 */
export function commitSample(state: SamplerState, row: SampledRow): SampleResult {
  state.rng.setState(row.rng);
  state.constraint?.advance(row.tokenId);
  state.generated++;
  state.outputCounts.set(row.tokenId, (state.outputCounts.get(row.tokenId) ?? 0) + 1);
  return { tokenId: row.tokenId, logprob: row.logprob, top: row.top };
}

/** Row b's logits at its last of n positions, cut to `vocab`, as float32 (a view when they are float32). */
export function lastLogitsRow(logits: DecoderTensor, b: number, n: number, vocab: number): Float32Array {
  const width = logits.dims[2]!;
  const from = (b * n + n - 1) * width;
  const to = from + vocab;
  if (logits.data instanceof Float32Array) return logits.data.subarray(from, to);
  const half = logits.data as Uint16Array;
  const row = new Float32Array(to - from);
  for (let i = 0; i < row.length; i++) row[i] = halfToFloat(half[from + i]!);
  return row;
}

/** IEEE 754 half-precision bits → number. */
export function halfToFloat(h: number): number {
  const sign = h & 0x8000 ? -1 : 1;
  const exp = (h >> 10) & 0x1f;
  const frac = h & 0x3ff;
  if (exp === 0) return sign * frac * 2 ** -24;
  if (exp === 0x1f) return frac === 0 ? sign * Infinity : NaN;
  return sign * (1024 + frac) * 2 ** (exp - 25);
}
