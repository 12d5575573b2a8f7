// TimingModel: how long a forward pass takes, for the simulated executor (Dynamo mocker's polynomial
// model, shared/reference/dynamo-design.md §6.4), and Clock: where time comes from.
//
// Clock lives here (not in a file of its own) because the timing model is its only reason to exist in
// this package: a real clock sleeps, a VirtualClock just advances (offline replay runs as fast as the
// CPU allows and stays deterministic).

import { sharedPreciseTimer } from './precise-timer.js';

/** Forward-pass cost in milliseconds. */
export interface TimingModel {
  /** `newTokens`: total new, uncached tokens across the step's prefill entries (> 0). */
  prefillMs(newTokens: number): number;
  /** `kvUsage`: active KV fraction in [0, 1]. */
  decodeMs(kvUsage: number): number;
}

/** Dynamo mocker's default polynomial fit (measured on an H100-class GPU). */
export const polynomialTimingModel: TimingModel = {
  prefillMs: (t) => 4.209989e-7 * t * t + 1.518344e-2 * t + 1.650142e1,
  decodeMs: (u) => {
    const x = Math.min(Math.max(u, 0), 1);
    return Math.max(1, -25.74 * x * x + 54.01 * x + 5.74);
  },
};

/**
 * Cost of one step: prefillMs(T) once for the batch's T uncached prompt/recompute tokens (0 if none) plus
 * decodeMs(u) if any sequence decodes. (The mocker adds decode time unconditionally and prefill per
 * chunk; one prefill term per batch follows §6.4's "T is the total across the prefill batch".)
 */
export function stepMs(model: TimingModel, prefillTokens: number, decodes: number, kvUsage: number): number {
  return (prefillTokens > 0 ? model.prefillMs(prefillTokens) : 0) + (decodes > 0 ? model.decodeMs(kvUsage) : 0);
}

/** Milliseconds since an arbitrary origin. */
export interface Clock {
  now(): number;
  /** Resolve after `ms`; a virtual clock advances instead of waiting. */
  sleep(ms: number): Promise<void>;
}

/**
 * Real time: performance.now(), and sleeps on the process's PreciseTimer (they end tens of
 * microseconds after their deadline, where setTimeout rounds to whole milliseconds).
 */
export const systemClock: Clock = {
  now: () => performance.now(),
  sleep: (ms) => sharedPreciseTimer().sleep(ms),
};

/** Time moves only when told: `sleep` and `advanceTo` jump forward. For replay and tests. */
export class VirtualClock implements Clock {
  private t: number;

  constructor(start = 0) {
    this.t = start;
  }

  now(): number {
    return this.t;
  }

  sleep(ms: number): Promise<void> {
    if (ms > 0) this.t += ms;
    return Promise.resolve();
  }

  /** Jump to `t` if it is in the future (never backwards). */
  advanceTo(t: number): void {
    if (t > this.t) this.t = t;
  }
}
