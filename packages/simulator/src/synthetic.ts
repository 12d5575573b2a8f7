/**
 * Synthetic traces: Poisson arrivals whose rate follows a shape over time (constant, a sinusoid like
 * Dynamo's `sin_synth`, or periodic bursts), with log-normal input and output lengths and an
 * optional shared prefix. Seeded: the same spec and seed give the same requests, one at a time
 * (bounded memory whatever the duration).
 *
 * Shapes (`parseRateShape`; rates in requests/s, times in s):
 * - `constant:rate=R`
 * - `sin:min=A,max=B,period=P[,phase=F]`: rate(t) = A + (B − A)(1 − cos(2π(t/P + F)))/2, so it starts
 *   at the trough (phase 0) and peaks at P/2.
 * - `burst:base=R,peak=Q,every=E,length=L`: `peak` for the first L s of every E s, `base` otherwise.
 *
 * Arrivals are a non-homogeneous Poisson process drawn by thinning against the shape's largest rate;
 * peak rate × duration may not exceed `MAX_SYNTHETIC_REQUESTS` (10 M), so a run's time stays bounded.
 * Prompts: with `prefixGroups` > 0 each request takes one of that many shared prefixes of
 * `prefixBlocks` blocks (its first blocks' hash ids are the group's); the rest of the prompt is its own.
 */
import { invalidArgument } from '@switchyard/common';
import { SeededRandom } from './random.js';
import { MAX_TRACE_TIMESTAMP_MS, type TraceRequest, type TraceSource } from './trace.js';

export type RateShape =
  | { readonly kind: 'constant'; readonly rate: number }
  | { readonly kind: 'sin'; readonly min: number; readonly max: number; readonly periodSec: number; readonly phase: number }
  | { readonly kind: 'burst'; readonly base: number; readonly peak: number; readonly everySec: number; readonly lengthSec: number };

/** Largest rate a shape may ask for, requests/s (a simulated cluster is not a load generator). */
export const MAX_SYNTHETIC_RATE = 100_000;
/** Most requests a synthetic trace may ask for (peak rate × duration): a run's time stays bounded. */
export const MAX_SYNTHETIC_REQUESTS = 10_000_000;

/** Requests per second at `tSec`. */
export function rateAt(shape: RateShape, tSec: number): number {
  switch (shape.kind) {
    case 'constant':
      return shape.rate;
    case 'sin':
      return shape.min + ((shape.max - shape.min) * (1 - Math.cos(2 * Math.PI * (tSec / shape.periodSec + shape.phase)))) / 2;
    case 'burst':
      return tSec % shape.everySec < shape.lengthSec ? shape.peak : shape.base;
  }
}

export function peakRate(shape: RateShape): number {
  return shape.kind === 'constant' ? shape.rate : shape.kind === 'sin' ? shape.max : Math.max(shape.base, shape.peak);
}

/** `kind:key=value,...` → a shape; invalid_argument naming what is wrong. */
export function parseRateShape(spec: string): RateShape {
  const colon = spec.indexOf(':');
  const kind = colon === -1 ? spec : spec.slice(0, colon);
  const params = new Map<string, number>();
  if (colon !== -1 && spec.length > colon + 1) {
    for (const part of spec.slice(colon + 1).split(',')) {
      const eq = part.indexOf('=');
      const key = part.slice(0, eq).trim();
      const text = part.slice(eq + 1).trim();
      const value = Number(text);
      if (eq <= 0 || text === '' || !Number.isFinite(value)) throw invalidArgument(`synthetic spec '${spec}': '${part}' is not key=number`);
      if (params.has(key)) throw invalidArgument(`synthetic spec '${spec}': '${key}' given twice`);
      params.set(key, value);
    }
  }
  const allowed: Record<string, readonly string[]> = {
    constant: ['rate'],
    sin: ['min', 'max', 'period', 'phase'],
    burst: ['base', 'peak', 'every', 'length'],
  };
  const keys = Object.hasOwn(allowed, kind) ? allowed[kind]! : undefined;
  if (keys === undefined) throw invalidArgument(`synthetic spec '${spec}': the kind must be constant, sin or burst`);
  for (const k of params.keys()) if (!keys.includes(k)) throw invalidArgument(`synthetic spec '${spec}': unknown parameter '${k}' (${kind} takes ${keys.join(', ')})`);
  const get = (k: string, min: number, max: number, fallback?: number): number => {
    const v = params.get(k) ?? fallback;
    if (v === undefined) throw invalidArgument(`synthetic spec '${spec}': '${k}' is required`);
    if (!(v >= min && v <= max)) throw invalidArgument(`synthetic spec '${spec}': '${k}' must be in [${min}, ${max}], got ${v}`);
    return v;
  };
  const R = MAX_SYNTHETIC_RATE;
  switch (kind) {
    case 'constant':
      return positive(spec, { kind, rate: get('rate', 0, R) });
    case 'sin': {
      const min = get('min', 0, R);
      const max = get('max', min, R);
      return positive(spec, { kind, min, max, periodSec: get('period', 1e-3, 1e9), phase: get('phase', 0, 1, 0) });
    }
    default: {
      const everySec = get('every', 1e-3, 1e9);
      return positive(spec, { kind: 'burst', base: get('base', 0, R), peak: get('peak', 0, R), everySec, lengthSec: get('length', 0, everySec) });
    }
  }
}

function positive(spec: string, s: RateShape): RateShape {
  if (!(peakRate(s) > 0)) throw invalidArgument(`synthetic spec '${spec}': the rate is 0 everywhere`);
  return s;
}

export interface SyntheticOptions {
  readonly shape: RateShape;
  readonly durationSec: number;
  readonly seed: number;
  /** Block size the hash ids are counted in (the engine's). */
  readonly blockSize: number;
  /** Mean input length, tokens. */
  readonly islMean: number;
  readonly oslMean: number;
  /** σ of the log-normal lengths (0: every request has the mean). */
  readonly islSpread: number;
  readonly oslSpread: number;
  /** Lengths are clamped to [1, max]. */
  readonly islMax: number;
  readonly oslMax: number;
  /** Shared prefixes (0: none). */
  readonly prefixGroups: number;
  /** Blocks of each shared prefix (capped by the prompt's full blocks). */
  readonly prefixBlocks: number;
}

/** Hash ids of requests' own blocks start here (shared prefixes use ids below it). */
const OWN_BLOCK_IDS = 1 << 30;

export class SyntheticTraceSource implements TraceSource {
  private readonly rng: SeededRandom;
  private readonly peak: number;
  private tSec = 0;
  private nextOwnId = OWN_BLOCK_IDS;

  constructor(private readonly o: SyntheticOptions) {
    checkSynthetic(o);
    this.rng = new SeededRandom(o.seed);
    this.peak = peakRate(o.shape);
  }

  next(): TraceRequest | undefined {
    const { o, rng } = this;
    for (;;) {
      this.tSec += rng.exponential(this.peak);
      if (this.tSec >= o.durationSec) return undefined;
      if (rng.next() * this.peak < rateAt(o.shape, this.tSec)) break;
    }
    const inputLength = rng.logNormalInt(o.islMean, o.islSpread, o.islMax);
    const outputLength = rng.logNormalInt(o.oslMean, o.oslSpread, o.oslMax);
    const blocks = Math.ceil(inputLength / o.blockSize);
    const shared = o.prefixGroups > 0 ? Math.min(o.prefixBlocks, Math.floor(inputLength / o.blockSize)) : 0;
    const group = o.prefixGroups > 0 ? Math.floor(rng.next() * o.prefixGroups) : 0;
    const hashIds: number[] = [];
    for (let i = 0; i < shared; i++) hashIds.push(group * o.prefixBlocks + i);
    while (hashIds.length < blocks) hashIds.push(this.nextOwnId++);
    return { arrivalMs: this.tSec * 1000, inputLength, outputLength, hashIds };
  }

  close(): void {}
}

function checkSynthetic(o: SyntheticOptions): void {
  const need = (ok: boolean, what: string): void => {
    if (!ok) throw invalidArgument(`synthetic trace: ${what}`);
  };
  need(Number.isFinite(o.durationSec) && o.durationSec > 0 && o.durationSec * 1000 <= MAX_TRACE_TIMESTAMP_MS, `duration must be in (0, ${MAX_TRACE_TIMESTAMP_MS / 1000}] s, got ${o.durationSec}`);
  need(Number.isSafeInteger(o.blockSize) && o.blockSize > 0, `block size must be a positive integer, got ${o.blockSize}`);
  const most = peakRate(o.shape) * o.durationSec;
  need(!(most > MAX_SYNTHETIC_REQUESTS), `peak rate × duration is ${Math.round(most)} requests; at most ${MAX_SYNTHETIC_REQUESTS}`);
  for (const [k, v, max] of [['isl', o.islMean, o.islMax], ['osl', o.oslMean, o.oslMax]] as const) {
    need(Number.isSafeInteger(max) && max >= 1, `${k} max must be a positive integer, got ${max}`);
    need(Number.isFinite(v) && v >= 1 && v <= max, `${k} mean must be in [1, ${max}], got ${v}`);
  }
  for (const [k, v] of [['isl', o.islSpread], ['osl', o.oslSpread]] as const) need(Number.isFinite(v) && v >= 0 && v <= 3, `${k} spread must be in [0, 3], got ${v}`);
  need(Number.isSafeInteger(o.prefixGroups) && o.prefixGroups >= 0 && o.prefixGroups <= 1_000_000, `prefix groups must be an integer in [0, 1e6], got ${o.prefixGroups}`);
  need(Number.isSafeInteger(o.prefixBlocks) && o.prefixBlocks >= 0 && o.prefixGroups * o.prefixBlocks < OWN_BLOCK_IDS, `prefix blocks must be an integer >= 0 (groups × blocks < 2^30), got ${o.prefixBlocks}`);
}
