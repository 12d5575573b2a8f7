/**
 * A worker's performance profile (what `switchyard planner profile` measures, Dynamo's
 * `profile_sla` tables): prefill TTFT and throughput against input length (batch 1), and decode
 * ITL over a grid of KV usage × context length, plus the KV capacity the decode figures assume.
 *
 * `parseProfile` is the decode edge for a profile read from a file: anything it returns is sorted,
 * finite and within sane bounds, so interpolation below never meets NaN. Interpolation is linear in
 * one dimension and bilinear on the grid, clamped at the edges (no extrapolation: outside the
 * measured range the nearest measured figure stands).
 */
import { invalidArgument } from '@switchyard/common';

export const PROFILE_VERSION = 1;
/** Most points per axis (a profile is a few dozen measurements; this bounds the work per decision). */
export const MAX_PROFILE_POINTS = 1024;
/** Largest accepted latency (ms), throughput (tokens/s), length or capacity (tokens). */
export const MAX_PROFILE_VALUE = 1e9;

export interface PrefillProfile {
  /** Input lengths, tokens, strictly ascending. */
  readonly isl: readonly number[];
  /** TTFT at each input length, ms. */
  readonly ttftMs: readonly number[];
  /** Prompt tokens per second one worker computes at each input length. */
  readonly throughputTokensPerSec: readonly number[];
}

export interface DecodeProfile {
  /** KV usage points, 0..1, strictly ascending. */
  readonly kvUsage: readonly number[];
  /** Context lengths, tokens, strictly ascending. */
  readonly contextLength: readonly number[];
  /** itlMs[i][j]: ITL at kvUsage[i] and contextLength[j], ms. */
  readonly itlMs: readonly (readonly number[])[];
  /** KV tokens one decode worker holds at usage 1. */
  readonly kvCapacityTokens: number;
}

export interface Profile {
  readonly version: typeof PROFILE_VERSION;
  readonly prefill?: PrefillProfile;
  readonly decode?: DecodeProfile;
}

type Json = Record<string, unknown>;

const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);
const own = (o: Json, k: string): unknown => (Object.hasOwn(o, k) ? o[k] : undefined);

function numbers(o: Json, key: string, field: string, min: number, max: number): number[] {
  const v = own(o, key);
  if (!Array.isArray(v) || v.length === 0 || v.length > MAX_PROFILE_POINTS) {
    throw invalidArgument(`${field} must be an array of 1 to ${MAX_PROFILE_POINTS} numbers`);
  }
  return v.map((x, i) => {
    if (typeof x !== 'number' || !Number.isFinite(x) || x < min || x > max) {
      throw invalidArgument(`${field}[${i}] must be a finite number in [${min}, ${max}], got ${typeof x === 'number' ? x : typeof x}`);
    }
    return x;
  });
}

function ascending(xs: readonly number[], field: string): void {
  for (let i = 1; i < xs.length; i++) {
    if (!(xs[i]! > xs[i - 1]!)) throw invalidArgument(`${field} must be strictly ascending (index ${i})`);
  }
}

function sameLength(xs: readonly unknown[], n: number, field: string, of: string): void {
  if (xs.length !== n) throw invalidArgument(`${field} must have one entry per ${of} (${n}), got ${xs.length}`);
}

function parsePrefill(v: unknown): PrefillProfile {
  if (!isObject(v)) throw invalidArgument('profile.prefill must be an object');
  const isl = numbers(v, 'isl', 'profile.prefill.isl', 1, MAX_PROFILE_VALUE);
  ascending(isl, 'profile.prefill.isl');
  const ttftMs = numbers(v, 'ttftMs', 'profile.prefill.ttftMs', Number.MIN_VALUE, MAX_PROFILE_VALUE);
  sameLength(ttftMs, isl.length, 'profile.prefill.ttftMs', 'isl point');
  const throughputTokensPerSec = numbers(v, 'throughputTokensPerSec', 'profile.prefill.throughputTokensPerSec', Number.MIN_VALUE, MAX_PROFILE_VALUE);
  sameLength(throughputTokensPerSec, isl.length, 'profile.prefill.throughputTokensPerSec', 'isl point');
  return { isl, ttftMs, throughputTokensPerSec };
}

function parseDecode(v: unknown): DecodeProfile {
  if (!isObject(v)) throw invalidArgument('profile.decode must be an object');
  const kvUsage = numbers(v, 'kvUsage', 'profile.decode.kvUsage', 0, 1);
  ascending(kvUsage, 'profile.decode.kvUsage');
  const contextLength = numbers(v, 'contextLength', 'profile.decode.contextLength', 1, MAX_PROFILE_VALUE);
  ascending(contextLength, 'profile.decode.contextLength');
  const rows = own(v, 'itlMs');
  if (!Array.isArray(rows)) throw invalidArgument('profile.decode.itlMs must be an array of rows, one per kvUsage point');
  sameLength(rows, kvUsage.length, 'profile.decode.itlMs', 'kvUsage point');
  const itlMs = rows.map((row, i) => {
    const r = numbers({ row }, 'row', `profile.decode.itlMs[${i}]`, Number.MIN_VALUE, MAX_PROFILE_VALUE);
    sameLength(r, contextLength.length, `profile.decode.itlMs[${i}]`, 'contextLength point');
    return r;
  });
  const cap = own(v, 'kvCapacityTokens');
  if (typeof cap !== 'number' || !Number.isFinite(cap) || cap < 1 || cap > MAX_PROFILE_VALUE) {
    throw invalidArgument(`profile.decode.kvCapacityTokens must be a finite number in [1, ${MAX_PROFILE_VALUE}]`);
  }
  return { kvUsage, contextLength, itlMs, kvCapacityTokens: cap };
}

/** Decode and validate a profile (parsed JSON). Throws invalid_argument naming the first bad field. */
export function parseProfile(value: unknown): Profile {
  if (!isObject(value)) throw invalidArgument('profile must be a JSON object');
  if (own(value, 'version') !== PROFILE_VERSION) throw invalidArgument(`profile.version must be ${PROFILE_VERSION}`);
  const p = own(value, 'prefill');
  const d = own(value, 'decode');
  if (p === undefined && d === undefined) throw invalidArgument('profile must have prefill or decode figures');
  return {
    version: PROFILE_VERSION,
    ...(p === undefined ? {} : { prefill: parsePrefill(p) }),
    ...(d === undefined ? {} : { decode: parseDecode(d) }),
  };
}

// ---- interpolation ----------------------------------------------------------------------------------

/** Index i with xs[i] <= x <= xs[i+1] and the weight of xs[i+1], clamped to the ends. */
function bracket(xs: readonly number[], x: number): [number, number] {
  const n = xs.length;
  if (n === 1 || !(x > xs[0]!)) return [0, 0];
  if (x >= xs[n - 1]!) return [n - 1, 0];
  let lo = 0;
  let hi = n - 1;
  while (hi - lo > 1) {
    const mid = (lo + hi) >> 1;
    if (xs[mid]! <= x) lo = mid;
    else hi = mid;
  }
  return [lo, (x - xs[lo]!) / (xs[lo + 1]! - xs[lo]!)];
}

/** Linear interpolation of ys over ascending xs at x, clamped at the edges (NaN x reads the first point). */
export function interpolate1d(xs: readonly number[], ys: readonly number[], x: number): number {
  const [i, w] = bracket(xs, x);
  return w === 0 ? ys[i]! : ys[i]! * (1 - w) + ys[i + 1]! * w;
}

/** Bilinear interpolation of grid[i][j] over ascending xs (rows) and ys (columns), clamped at the edges. */
export function interpolate2d(xs: readonly number[], ys: readonly number[], grid: readonly (readonly number[])[], x: number, y: number): number {
  const [i, wx] = bracket(xs, x);
  const [j, wy] = bracket(ys, y);
  const at = (a: number, b: number): number => grid[a]![b]!;
  const row = (a: number): number => (wy === 0 ? at(a, j) : at(a, j) * (1 - wy) + at(a, j + 1) * wy);
  return wx === 0 ? row(i) : row(i) * (1 - wx) + row(i + 1) * wx;
}

export const prefillTtftMs = (p: PrefillProfile, isl: number): number => interpolate1d(p.isl, p.ttftMs, isl);
export const prefillThroughput = (p: PrefillProfile, isl: number): number => interpolate1d(p.isl, p.throughputTokensPerSec, isl);
export const decodeItlMs = (d: DecodeProfile, kvUsage: number, context: number): number =>
  interpolate2d(d.kvUsage, d.contextLength, d.itlMs, kvUsage, context);
