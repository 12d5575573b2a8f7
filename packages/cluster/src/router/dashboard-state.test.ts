import { describe, expect, it } from 'vitest';
import { ITL_MS_BOUNDS, TTFT_MS_BOUNDS } from '../figure-histogram.js';
import { DashboardState, RingBuffer, histogramQuantile, type DashboardDecision } from './dashboard-state.js';

const HEADER = { routerId: 'r1', mode: 'kv', namespace: 'ns' };
const decision = (i: number): DashboardDecision => ({
  ts: i,
  model: 'm',
  pool: 'decode',
  mode: 'kv',
  instanceId: `w${i}`,
  overlapBlocks: i,
  cost: i / 2,
  candidates: 2,
  promptTokens: 10 * i,
  fallback: false,
});

describe('RingBuffer', () => {
  it('keeps the newest `capacity` entries, oldest first, and counts every push', () => {
    const r = new RingBuffer<number>(3);
    expect(r.toArray()).toEqual([]);
    for (let i = 1; i <= 2; i++) r.push(i);
    expect(r.toArray()).toEqual([1, 2]);
    for (let i = 3; i <= 7; i++) r.push(i);
    expect(r.toArray()).toEqual([5, 6, 7]);
    expect(r.size).toBe(3);
    expect(r.total).toBe(7);
  });

  it('refuses a capacity below 1', () => {
    expect(() => new RingBuffer(0)).toThrow(RangeError);
    expect(() => new RingBuffer(1.5)).toThrow(RangeError);
  });
});

describe('histogramQuantile', () => {
  const bounds = [10, 20, 40];
  it('is null for an empty histogram', () => {
    expect(histogramQuantile(bounds, [0, 0, 0, 0], 0.5)).toBeNull();
  });
  it('interpolates inside the bucket holding the rank', () => {
    // 10 values in (10, 20]: the median sits halfway through that bucket
    expect(histogramQuantile(bounds, [0, 10, 0, 0], 0.5)).toBe(15);
    // 5 in [0, 10], 5 in (20, 40]: p90 is 80 % through the third bucket
    expect(histogramQuantile(bounds, [5, 0, 5, 0], 0.9)).toBeCloseTo(36);
    expect(histogramQuantile(bounds, [5, 0, 5, 0], 0.1)).toBeCloseTo(2);
  });
  it('answers the last bound for the overflow bucket', () => {
    expect(histogramQuantile(bounds, [0, 0, 0, 3], 0.5)).toBe(40);
  });
});

describe('DashboardState', () => {
  it('keeps at most maxDecisions decisions, newest first, and counts them all', () => {
    const s = new DashboardState({ maxDecisions: 4 });
    for (let i = 1; i <= 10; i++) s.decided(decision(i));
    const snap = s.snapshot(100, HEADER, []);
    expect(snap.decisions.map((d) => d.instanceId)).toEqual(['w10', 'w9', 'w8', 'w7']);
    expect(snap.decisionsTotal).toBe(10);
    expect(s.decisionsTotal).toBe(10);
  });

  it('bounds planner decisions and worker events the same way', () => {
    const s = new DashboardState({ maxPlannerDecisions: 2, maxWorkerEvents: 3 });
    for (let i = 0; i < 5; i++) {
      s.plannerDecided({ ts: i, plannerId: 'p', model: 'm', pool: 'decode', from: i, to: i + 1, direction: 'up', reason: 'kv_usage', dryRun: false });
      s.workerEvent({ ts: i, type: i % 2 === 0 ? 'joined' : 'left', model: 'm', instanceId: `w${i}` });
    }
    const snap = s.snapshot(10, HEADER, []);
    expect(snap.plannerDecisions.map((d) => d.from)).toEqual([4, 3]);
    expect(snap.workerEvents.map((e) => e.instanceId)).toEqual(['w4', 'w3', 'w2']);
  });

  it('charts the last window in buckets: rate per second, TTFT and ITL percentiles', () => {
    const s = new DashboardState({ bucketMs: 1000, windowMs: 5000 });
    const t0 = 1_000_000;
    // bucket t0: 4 requests, TTFT 100 ms each, ITL 8 gaps of 5 ms (two frames of 4 tokens 20 ms apart)
    for (let i = 0; i < 4; i++) {
      s.arrived(t0 + i);
      s.firstToken(t0 + i, 100);
    }
    s.laterTokens(t0 + 10, 20, 4);
    s.laterTokens(t0 + 20, 20, 4);
    // bucket t0 + 2 s: one request, TTFT 1000 ms
    s.arrived(t0 + 2000);
    s.firstToken(t0 + 2000, 1000);
    const snap = s.snapshot(t0 + 3500, HEADER, []);
    expect(snap.series.map((p) => p.t)).toEqual([t0 - 1000, t0, t0 + 1000, t0 + 2000, t0 + 3000]);
    expect(snap.series.map((p) => p.rate)).toEqual([0, 4, 0, 1, 0]);
    const at = snap.series[1]!;
    // 100 ms falls in the TTFT bucket whose bound is the first at or above it
    const i = TTFT_MS_BOUNDS.findIndex((b) => b >= 100);
    expect(at.ttftP50!).toBeGreaterThan(TTFT_MS_BOUNDS[i - 1]!);
    expect(at.ttftP50!).toBeLessThanOrEqual(TTFT_MS_BOUNDS[i]!);
    const j = ITL_MS_BOUNDS.findIndex((b) => b >= 5);
    expect(at.itlP90!).toBeGreaterThan(ITL_MS_BOUNDS[j - 1]!);
    expect(at.itlP90!).toBeLessThanOrEqual(ITL_MS_BOUNDS[j]!);
    expect(snap.series[3]!.ttftP50!).toBeGreaterThan(500);
    expect(snap.series[2]).toMatchObject({ rate: 0, ttftP50: null, itlP50: null });
    expect(snap.series[3]!.itlP50).toBeNull();
  });

  it('forgets buckets that left the window, and reuses their slots', () => {
    const s = new DashboardState({ bucketMs: 1000, windowMs: 3000 });
    s.arrived(0);
    s.firstToken(0, 50);
    // three seconds later the slot of second 0 is second 3's
    let snap = s.snapshot(3000, HEADER, []);
    expect(snap.series.map((p) => p.rate)).toEqual([0, 0, 0]);
    expect(snap.series.every((p) => p.ttftP50 === null)).toBe(true);
    s.arrived(3000);
    snap = s.snapshot(3999, HEADER, []);
    expect(snap.series.at(-1)!.ttftP50).toBeNull(); // second 0's TTFT did not carry over
    expect(snap.series.at(-1)!.rate).toBeCloseTo(1 / 0.999);
  });

  it('rates the current bucket over the time it has lasted', () => {
    const s = new DashboardState({ bucketMs: 5000, windowMs: 10000 });
    for (let i = 0; i < 10; i++) s.arrived(10_000 + i);
    expect(s.snapshot(12_000, HEADER, []).series.at(-1)!.rate).toBe(5);
  });

  it('counts the disaggregation split per model, at most maxModels models', () => {
    const s = new DashboardState({ maxModels: 2 });
    s.disaggPath('b', 'remote');
    s.disaggPath('b', 'remote');
    s.disaggPath('a', 'local');
    s.disaggPath('b', 'fallback');
    s.disaggPath('c', 'remote'); // a third model: not kept
    expect(s.snapshot(0, HEADER, []).disagg).toEqual([
      { model: 'a', remote: 0, local: 1, fallback: 0 },
      { model: 'b', remote: 2, local: 0, fallback: 1 },
    ]);
  });

  it('passes the header and workers through', () => {
    const s = new DashboardState();
    const workers = [{ instanceId: 'abc', model: 'm', kind: 'llm' as const, role: 'aggregated', load: null, decisions: 3 }];
    const snap = s.snapshot(42, HEADER, workers);
    expect(snap).toMatchObject({ now: 42, routerId: 'r1', mode: 'kv', namespace: 'ns', bucketMs: 5000, workers, workersTotal: 1 });
    expect(s.snapshot(42, HEADER, workers, 700).workersTotal).toBe(700);
    expect(snap.series).toHaveLength(60);
  });

  it('refuses options that are not positive integers, or a window that is not whole buckets', () => {
    expect(() => new DashboardState({ maxDecisions: 0 })).toThrow(RangeError);
    expect(() => new DashboardState({ bucketMs: 1000, windowMs: 1500 })).toThrow(RangeError);
  });

  it('ignores non-finite and negative figures', () => {
    const s = new DashboardState({ bucketMs: 1000, windowMs: 1000 });
    s.firstToken(0, Number.NaN);
    s.firstToken(0, -1);
    s.laterTokens(0, Number.POSITIVE_INFINITY, 2);
    s.laterTokens(0, 10, 0);
    const p = s.snapshot(500, HEADER, []).series[0]!;
    expect(p.ttftP50).toBeNull();
    expect(p.itlP50).toBeNull();
  });
});
