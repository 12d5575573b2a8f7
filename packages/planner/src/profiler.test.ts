import { describe, expect, it } from 'vitest';
import { decodeItlMs, parseProfile, prefillThroughput, prefillTtftMs } from './profile.js';
import { DEFAULT_SWEEP, assembleProfile, median, planSweep, profileWorker, runSweep, spread, type DecodePoint, type ProfilerProbe, type WorkerLimits } from './profiler.js';

const LIMITS: WorkerLimits = { maxModelLen: 8192, blockSize: 16, numBlocks: 4096, maxNumSeqs: 64 };

/** A worker whose latencies follow a known law, with ±2% deterministic jitter. */
function lawProbe(): ProfilerProbe & { calls: number } {
  let k = 0;
  const jitter = (): number => 1 + 0.02 * Math.sin(++k * 12.9898);
  return {
    calls: 0,
    prefillTtftMs(isl) {
      this.calls++;
      return Promise.resolve((10 + 0.05 * isl) * jitter());
    },
    decodeItlMs(p: DecodePoint) {
      this.calls++;
      return Promise.resolve((5 + 40 * p.kvUsage + 0.002 * p.context) * jitter());
    },
  };
}

describe('spread', () => {
  it('spreads distinct ascending integers over the range, ends included', () => {
    expect(spread(1, 9, 5)).toEqual([1, 3, 5, 7, 9]);
    expect(spread(1, 3, 10)).toEqual([1, 2, 3]);
    expect(spread(4, 4, 3)).toEqual([4]);
    expect(spread(5, 4, 3)).toEqual([]);
    expect(spread(1, 100, 1)).toEqual([100]);
  });
});

describe('planSweep', () => {
  it('spreads prefill ISLs up to maxIsl and decode points over contexts and concurrencies within the limits', () => {
    const plan = planSweep(LIMITS, { ...DEFAULT_SWEEP, maxIsl: 4096, islPoints: 4, contextPoints: 3, concurrencyPoints: 4, maxConcurrency: 32, decodeOsl: 32 });
    expect(plan.prefillIsl).toEqual([1024, 2048, 3072, 4096]);
    expect(plan.kvCapacityTokens).toBe(4096 * 16);
    const contexts = [...new Set(plan.decode.map((d) => d.context))];
    expect(contexts).toEqual([1365, 2731, 4096]);
    for (const d of plan.decode) {
      expect(d.isl + d.osl / 2).toBe(d.context);
      expect(d.isl + d.osl).toBeLessThanOrEqual(LIMITS.maxModelLen);
      expect(d.concurrency).toBeLessThanOrEqual(32);
      expect(d.kvUsage).toBeCloseTo((d.concurrency * Math.ceil(d.context / 16)) / 4096, 12);
      // Every point fits the cache at its peak.
      expect(d.concurrency * Math.ceil((d.isl + d.osl) / 16)).toBeLessThanOrEqual(4096);
    }
    // The longest context: 4096 + 16 tokens peak = 257 blocks, 15 fit in 98% of 4096 blocks.
    expect(plan.decode.filter((d) => d.context === 4096).map((d) => d.concurrency)).toEqual([1, 6, 10, 15]);
  });

  it('clamps to the model length and max_num_seqs', () => {
    const plan = planSweep({ maxModelLen: 512, blockSize: 16, numBlocks: 64, maxNumSeqs: 8 }, { ...DEFAULT_SWEEP, maxIsl: 100_000, maxConcurrency: 100 });
    expect(Math.max(...plan.prefillIsl)).toBe(511);
    for (const d of plan.decode) {
      expect(d.isl + d.osl).toBeLessThanOrEqual(512);
      expect(d.concurrency).toBeLessThanOrEqual(8);
      expect(d.kvUsage).toBeLessThanOrEqual(1);
    }
  });

  it('refuses bad options and a worker with no room', () => {
    expect(() => planSweep(LIMITS, { ...DEFAULT_SWEEP, repeats: 0 })).toThrow(/repeats/);
    expect(() => planSweep(LIMITS, { ...DEFAULT_SWEEP, islPoints: 33 })).toThrow(/islPoints/);
    expect(() => planSweep(LIMITS, { ...DEFAULT_SWEEP, maxIsl: 1.5 })).toThrow(/maxIsl/);
    expect(() => planSweep({ ...LIMITS, numBlocks: Number.NaN }, DEFAULT_SWEEP)).toThrow(/numBlocks/);
    expect(() => planSweep({ ...LIMITS, maxModelLen: 1 }, DEFAULT_SWEEP)).toThrow(/no room/);
  });
});

describe('profileWorker with a fake probe', () => {
  it('gives back the latency law within tolerance', async () => {
    const probe = lawProbe();
    const options = { ...DEFAULT_SWEEP, maxIsl: 4096, islPoints: 6, contextPoints: 3, concurrencyPoints: 5, repeats: 3 };
    const profile = await profileWorker(LIMITS, options, probe);
    const plan = planSweep(LIMITS, options);
    expect(probe.calls).toBe((plan.prefillIsl.length + plan.decode.length) * 3 + 2); // + one warm-up per phase
    expect(parseProfile(JSON.parse(JSON.stringify(profile)))).toEqual(profile);

    for (const isl of [700, 1500, 3000, 4096]) {
      expect(prefillTtftMs(profile.prefill!, isl) / (10 + 0.05 * isl)).toBeGreaterThan(0.97);
      expect(prefillTtftMs(profile.prefill!, isl) / (10 + 0.05 * isl)).toBeLessThan(1.03);
      expect(prefillThroughput(profile.prefill!, isl)).toBeGreaterThan(0);
    }
    const d = profile.decode!;
    expect(d.kvCapacityTokens).toBe(4096 * 16);
    // Inside each context's measured usage range, the grid reads back the law.
    for (const c of d.contextLength) {
      const reached = plan.decode.filter((p) => p.context === c).map((p) => p.kvUsage);
      for (const u of [Math.min(...reached), (Math.min(...reached) + Math.max(...reached)) / 2, Math.max(...reached)]) {
        const law = 5 + 40 * u + 0.002 * c;
        expect(decodeItlMs(d, u, c) / law).toBeGreaterThan(0.97);
        expect(decodeItlMs(d, u, c) / law).toBeLessThan(1.03);
      }
    }
  });

  it('takes the median of repeats, so one outlier run does not move a point', async () => {
    let n = 0;
    const probe: ProfilerProbe = {
      // The warm-up is call 1; each point's third run is an outlier.
      prefillTtftMs: (isl) => Promise.resolve(n++ % 3 === 0 && n > 1 ? 1e6 : isl / 10),
      decodeItlMs: () => Promise.resolve(7),
    };
    const plan = planSweep(LIMITS, { ...DEFAULT_SWEEP, islPoints: 2, contextPoints: 1, concurrencyPoints: 1, repeats: 3 });
    const m = await runSweep(plan, probe);
    expect(m.prefill.map((p) => p.ttftMs)).toEqual(plan.prefillIsl.map((isl) => isl / 10));
    expect(median([3, 1, 2, 100])).toBe(2.5);
  });

  it('stops with a clear error when the probe fails or returns a non-latency', async () => {
    const plan = planSweep(LIMITS, { ...DEFAULT_SWEEP, islPoints: 2, contextPoints: 1, concurrencyPoints: 1, repeats: 1 });
    await expect(runSweep(plan, { prefillTtftMs: () => Promise.resolve(Number.NaN), decodeItlMs: () => Promise.resolve(1) })).rejects.toThrow(/prefill warm-up at ISL \d+/);
    await expect(runSweep(plan, { prefillTtftMs: () => Promise.resolve(1), decodeItlMs: () => Promise.resolve(-1) })).rejects.toThrow(/decode warm-up/);
    let calls = 0;
    const later: ProfilerProbe = { prefillTtftMs: () => Promise.resolve(1), decodeItlMs: () => Promise.resolve(calls++ === 0 ? 1 : Number.POSITIVE_INFINITY) };
    await expect(runSweep(plan, later)).rejects.toThrow(/decode at context \d+ × \d+: the probe returned Infinity/);
    await expect(runSweep(plan, { prefillTtftMs: () => Promise.reject(new Error('refused')), decodeItlMs: () => Promise.resolve(1) })).rejects.toThrow('refused');
  });
});

describe('assembleProfile', () => {
  it('builds a grid over every measured usage, clamping a column past its measurements', () => {
    const point = (context: number, kvUsage: number): DecodePoint => ({ context, concurrency: 1, isl: context - 8, osl: 16, kvUsage });
    const profile = assembleProfile(
      {
        prefill: [
          { isl: 100, ttftMs: 20 },
          { isl: 200, ttftMs: 40 },
        ],
        decode: [
          { point: point(100, 0.1), itlMs: 10 },
          { point: point(100, 0.5), itlMs: 30 },
          { point: point(400, 0.2), itlMs: 20 },
          { point: point(400, 0.8), itlMs: 50 },
        ],
      },
      1000,
    );
    expect(profile.prefill).toEqual({ isl: [100, 200], ttftMs: [20, 40], throughputTokensPerSec: [5000, 5000] });
    expect(profile.decode!.kvUsage).toEqual([0.1, 0.2, 0.5, 0.8]);
    expect(profile.decode!.contextLength).toEqual([100, 400]);
    const want = [
      [10, 20],
      [15, 20],
      [30, 35],
      [30, 50],
    ];
    profile.decode!.itlMs.forEach((row, i) => row.forEach((v, j) => expect(v).toBeCloseTo(want[i]![j]!, 9)));
  });

  it('refuses measurements parseProfile would refuse', () => {
    expect(() => assembleProfile({ prefill: [{ isl: 10, ttftMs: Number.POSITIVE_INFINITY }], decode: [] }, 1)).toThrow(/ttftMs/);
    expect(() => assembleProfile({ prefill: [], decode: [] }, 1)).toThrow(/prefill or decode/);
  });
});
