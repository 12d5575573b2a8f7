import { describe, expect, it } from 'vitest';
import type { SchedulerOutput, ScheduledSequence } from './llm-scheduler.js';
import { SimulatedExecutor, StepTokens, firstDraw } from './simulated-executor.js';
import { Xoshiro128 } from './sampling.js';
import { VirtualClock, polynomialTimingModel, stepMs } from './timing-model.js';

const entry = (over: Partial<ScheduledSequence>): ScheduledSequence => ({
  requestId: 'a',
  numNewTokens: 1,
  numComputedTokens: 0,
  tokenIds: [],
  numCachedTokens: 0,
  samples: true,
  isPrefill: false,
  blocks: [],
  sampling: undefined,
  promptTokenIds: [],
  priorOutputTokenIds: [],
  endTokenIds: new Set(),
  ...over,
});
const output = (scheduled: ScheduledSequence[], kvUsage = 0.5): SchedulerOutput => ({
  step: 0,
  scheduled,
  numScheduledTokens: scheduled.reduce((s, e) => s + e.numNewTokens, 0),
  preempted: [],
  kvUsage,
});

describe('timing model', () => {
  it('matches Dynamo mocker polynomial constants', () => {
    expect(polynomialTimingModel.prefillMs(1000)).toBeCloseTo(4.209989e-7 * 1e6 + 15.18344 + 16.50142, 9);
    expect(polynomialTimingModel.decodeMs(0)).toBeCloseTo(5.74, 9);
    expect(polynomialTimingModel.decodeMs(1)).toBeCloseTo(-25.74 + 54.01 + 5.74, 9);
    expect(stepMs(polynomialTimingModel, 0, 0, 0.3)).toBe(0);
  });
});

describe('SimulatedExecutor', () => {
  it('advances the virtual clock by prefill + decode time over the speedup ratio', async () => {
    const clock = new VirtualClock(100);
    const ex = new SimulatedExecutor({ clock, speedupRatio: 2 });
    const out = output([entry({ requestId: 'p', numNewTokens: 300, isPrefill: true }), entry({ requestId: 'd', numComputedTokens: 40 })], 0.25);
    const r = await ex.execute(out);
    const want = (polynomialTimingModel.prefillMs(300) + polynomialTimingModel.decodeMs(0.25)) / 2;
    expect(r.elapsedMs).toBeCloseTo(want, 9);
    expect(clock.now()).toBeCloseTo(100 + want, 9);
    expect([...r.sampledTokens.keys()]).toEqual(['p', 'd']);
  });

  it('samples deterministic tokens by (seed, request, position), only where asked', async () => {
    const clock = new VirtualClock();
    const a = new SimulatedExecutor({ clock, seed: 3, vocabSize: 1000 });
    const b = new SimulatedExecutor({ clock, seed: 3, vocabSize: 1000 });
    const r = await a.execute(output([entry({ requestId: 'x', numComputedTokens: 9 }), entry({ requestId: 'y', samples: false })]));
    expect(r.sampledTokens.get('x')).toBe(b.tokenAt('x', 10));
    expect(r.sampledTokens.has('y')).toBe(false);
    const toks = Array.from({ length: 50 }, (_, i) => a.tokenAt('x', i));
    expect(new Set(toks).size).toBeGreaterThan(40);
    expect(toks.every((t) => t >= 0 && t < 1000)).toBe(true);
    expect(new SimulatedExecutor({ seed: 4 }).tokenAt('x', 10)).not.toBe(new SimulatedExecutor({ seed: 3 }).tokenAt('x', 10));
  });
});

describe('firstDraw', () => {
  it('is the first output of Xoshiro128 for the same seed', () => {
    const seeds = [0, 1, 2 ** 31, 2 ** 32 - 1, 2 ** 32, 2 ** 52 - 1, 0x10_0000 * 0xffff_ffff + 0xf_ffff];
    let x = 12345;
    for (let i = 0; i < 2000; i++) {
      x = (Math.imul(x, 1103515245) + 12345) >>> 0;
      seeds.push(x * 0x10_0000 + (i % 0x10_0000));
    }
    for (const seed of seeds) expect(firstDraw(seed)).toBe(new Xoshiro128(seed).nextUint32());
  });
});

describe('StepTokens', () => {
  const ids = ['a', 'b', 'c', 'd', 'e'];
  const make = (): StepTokens => new StepTokens(ids.map((requestId) => entry({ requestId })), [5, -1, 0, 9, -1]);
  const want = new Map([['a', 5], ['c', 0], ['d', 9]]);

  it('answers as the Map of the entries that sampled, in the step\'s order', () => {
    const m = make();
    expect(m.size).toBe(3);
    expect([...m]).toEqual([...want]);
    expect([...m.keys()]).toEqual([...want.keys()]);
    expect([...m.values()]).toEqual([...want.values()]);
    expect([...m.entries()]).toEqual([...want.entries()]);
    const seen: Array<[string, number]> = [];
    m.forEach((v, k, map) => {
      expect(map).toBe(m);
      seen.push([k, v]);
    });
    expect(seen).toEqual([...want]);
    for (const id of [...ids, 'zz']) expect(m.has(id), id).toBe(want.has(id));
  });

  it('gives the same answers whatever the order of lookups', () => {
    const orders = [['a', 'c', 'd'], ['d', 'c', 'a', 'b', 'e'], ['a', 'b', 'c', 'zz', 'd', 'd', 'a'], ['e', 'a', 'c', 'd']];
    for (const order of orders) {
      const m = make();
      for (const id of order) expect(m.get(id), `${order.join(',')}: ${id}`).toBe(want.get(id));
    }
  });
});

describe('SimulatedExecutor pace on a clock whose sleeps overrun', () => {
  /** A clock whose every sleep ends `overrunMs` after its deadline; `advance` is time passing outside sleeps. */
  class LateClock extends VirtualClock {
    slept: number[] = [];
    constructor(private readonly overrunMs: number) {
      super();
    }
    override sleep(ms: number): Promise<void> {
      this.slept.push(ms);
      return super.sleep(Math.max(0, ms) + this.overrunMs);
    }
  }
  const decode = () => output([entry({ requestId: 'a' })], 0);

  it('back-to-back steps keep the timing model pace: each overrun is taken off the next step', async () => {
    const clock = new LateClock(0.06);
    const ex = new SimulatedExecutor({ clock, speedupRatio: 10 });
    const step = stepMs(polynomialTimingModel, 0, 1, 0) / 10;
    for (let i = 0; i < 20; i++) await ex.execute(decode());
    // 20 steps take 20 model steps plus the last overrun only, not 20 overruns
    expect(clock.now()).toBeCloseTo(20 * step + 0.06, 6);
    expect(clock.slept[0]).toBeCloseTo(step, 9);
    expect(clock.slept[1]).toBeCloseTo(step - 0.06, 9);
  });

  it('owes nothing after a pause, and never more than a step takes', async () => {
    const clock = new LateClock(0.5);
    const ex = new SimulatedExecutor({ clock, speedupRatio: 1000 }); // steps of 5.74 us, shorter than the overrun
    const step = stepMs(polynomialTimingModel, 0, 1, 0) / 1000;
    await ex.execute(decode());
    await ex.execute(decode());
    expect(clock.slept[1]).toBe(0); // the whole step was owed; the rest stays owed
    clock.advanceTo(clock.now() + 2); // idle: more than BACK_TO_BACK_MS
    await ex.execute(decode());
    expect(clock.slept[2]).toBeCloseTo(step, 9);
  });
});
