// SimulatedExecutor: an Executor with no model (Dynamo's mocker engine). Each step "takes" the timing
// model's time, divided by `speedupRatio`, on the injected clock (a VirtualClock makes replay instant),
// and samples deterministic pseudo-random tokens.
//
// Tokens are a pure function of (seed, request id, position): token at position p of request r is the
// first draw of Xoshiro128 seeded from (fnv1a(r) ^ seed, p). So a sequence generates the same tokens
// whether or not it was preempted and recomputed, and across runs.
//
// KV: there is none; the block manager's bookkeeping and events are the scheduler's (blocks become
// prefix-cache hits after the step that "computes" them, as with a real executor). Cached prefix tokens
// are never scheduled, so they cost no time. Sampling parameters are ignored; `release` is not needed.

import { invalidArgument } from '@switchyard/common';
import type { Executor, ExecutorOutput } from './executor.js';
import type { SchedulerOutput } from './llm-scheduler.js';
import { Xoshiro128 } from './sampling.js';
import { polynomialTimingModel, stepMs, systemClock, type Clock, type TimingModel } from './timing-model.js';

export const DEFAULT_SIM_VOCAB_SIZE = 32000;

export interface SimulatedExecutorOptions {
  /** Default systemClock (real sleeping); pass a VirtualClock for fast replay. */
  readonly clock?: Clock;
  readonly timingModel?: TimingModel;
  /** Simulated time is divided by this; default 1. */
  readonly speedupRatio?: number;
  readonly seed?: number;
  /** Tokens are drawn from [0, vocabSize). */
  readonly vocabSize?: number;
}

export class SimulatedExecutor implements Executor {
  private readonly clock: Clock;
  private readonly model: TimingModel;
  private readonly speedup: number;
  private readonly seed: number;
  private readonly vocabSize: number;
  /** Total simulated prefill tokens and time, for tests and metrics. */
  prefillTokens = 0;
  busyMs = 0;

  constructor(options: SimulatedExecutorOptions = {}) {
    this.clock = options.clock ?? systemClock;
    this.model = options.timingModel ?? polynomialTimingModel;
    this.speedup = options.speedupRatio ?? 1;
    this.seed = options.seed ?? 0;
    this.vocabSize = options.vocabSize ?? DEFAULT_SIM_VOCAB_SIZE;
    if (!(this.speedup > 0)) throw invalidArgument(`speedupRatio must be > 0, got ${this.speedup}`);
    if (!Number.isSafeInteger(this.vocabSize) || this.vocabSize <= 0) throw invalidArgument(`vocabSize must be a positive integer`);
  }

  /** The token a request samples at `position` (= its token count before sampling). */
  tokenAt(requestId: string, position: number): number {
    const key = (fnv1a32(requestId) ^ this.seed) >>> 0;
    const rng = new Xoshiro128(key * 0x10_0000 + (position % 0x10_0000));
    return rng.nextUint32() % this.vocabSize;
  }

  async execute(output: SchedulerOutput): Promise<ExecutorOutput> {
    let prefill = 0;
    let decodes = 0;
    const sampledTokens = new Map<string, number>();
    for (const e of output.scheduled) {
      if (e.isPrefill) prefill += e.numNewTokens;
      else decodes++;
      if (e.samples) sampledTokens.set(e.requestId, this.tokenAt(e.requestId, e.numComputedTokens + e.numNewTokens));
    }
    const elapsedMs = stepMs(this.model, prefill, decodes, output.kvUsage) / this.speedup;
    this.prefillTokens += prefill;
    this.busyMs += elapsedMs;
    await this.clock.sleep(elapsedMs);
    return { sampledTokens, elapsedMs };
  }
}

function fnv1a32(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}
