import { describe, expect, it } from 'vitest';
import { distributionCount, distributionQuantile, summarisePoolLoad } from '@switchyard/planner';
import { TOKEN_BOUNDS } from '../figure-histogram.js';
import type { WireForwardPass, WireHistogram, WireLoad, WireRequestFigures } from '../protocols.js';
import { ObservationAccumulator } from './observation-accumulator.js';

const M = 'm';
const load = (instanceId: string, ts: number, fields: Partial<WireLoad> = {}): WireLoad => ({
  v: 1, instanceId, model: M, ts, numRunning: 1, numWaiting: 0, kvActiveBlocks: 2, kvTotalBlocks: 8, kvUsage: 0.25, prefixCacheQueries: 0, prefixCacheHits: 0, ...fields,
});
const batch = (instanceId: string, steps: number, dropped = 0, model = M): WireForwardPass => ({
  v: 1, instanceId, model, from: 0, to: 1000, dropped,
  steps: Array.from({ length: steps }, (_, i) => ({ ts: i, wallMs: 5, prefillTokens: i, decodeKvTokens: 100 })),
});
const hist = (bounds: number[], counts: number[]): WireHistogram => ({ bounds, counts });
const empty = hist([10], [0, 0]);
const figures = (routerId: string, fields: Partial<WireRequestFigures> = {}): WireRequestFigures => ({
  v: 1, routerId, model: M, from: 0, to: 1000, requests: 0, heldRequests: 0, isl: empty, osl: empty, ttftMs: empty, itlMs: empty, ...fields,
});

function accumulator(options: Partial<ConstructorParameters<typeof ObservationAccumulator>[0]> = {}): ObservationAccumulator {
  return new ObservationAccumulator({ model: M, start: 0, ...options });
}

describe('ObservationAccumulator', () => {
  it('splits workers by the role on their card and keeps the latest load sample per instance across intervals', () => {
    const a = accumulator();
    a.setInstance('p1', 'prefill');
    a.setInstance('d1', 'decode');
    a.setInstance('d2', 'decode');
    a.setInstance('g1', 'aggregated');
    a.addLoad(load('p1', 10, { numWaiting: 4 }), 100);
    a.addLoad(load('d1', 10, { kvActiveBlocks: 4 }), 100);
    a.addLoad(load('d1', 20, { kvActiveBlocks: 6 }), 200);
    a.addLoad(load('d1', 15, { kvActiveBlocks: 1 }), 300); // a redelivered older sample
    a.addLoad(load('d2', 10, { kvActiveBlocks: 8 }), 100);
    const o = a.collect(2000);
    expect(o.intervalSec).toBe(2);
    expect(Object.keys(o.pools).sort()).toEqual(['aggregated', 'decode', 'prefill']);
    expect(o.pools.prefill).toEqual({ replicas: 1, load: [expect.objectContaining({ instanceId: 'p1', numWaiting: 4 })] });
    expect(o.pools.aggregated).toEqual({ replicas: 1, load: [] });
    expect(o.pools.decode!.replicas).toBe(2);
    expect(summarisePoolLoad(o.pools.decode!.load).kvUsage).toBeCloseTo((6 / 8 + 8 / 8) / 2);
    // quiet workers publish on change only: their last sample is still their load next interval
    const next = a.collect(3000);
    expect(next.intervalSec).toBe(1);
    expect(next.pools.decode!.load.map((l) => l.instanceId).sort()).toEqual(['d1', 'd2']);
  });

  it('drops a load sample not renewed for staleLoadMs, and the sample of an instance whose card left', () => {
    const a = accumulator({ staleLoadMs: 5000 });
    a.setInstance('w1', 'aggregated');
    a.setInstance('w2', 'aggregated');
    a.addLoad(load('w1', 1), 0);
    a.addLoad(load('w2', 1), 4000);
    expect(a.collect(6000).pools.aggregated!.load.map((l) => l.instanceId)).toEqual(['w2']);
    a.removeInstance('w2', 6000);
    expect(a.collect(7000).pools).toEqual({ aggregated: { replicas: 1, load: [] } });
  });

  it('a card missing from a discovery resync counts as gone only after the grace; a put within it keeps the instance', () => {
    const a = accumulator({ resyncGraceMs: 3000 });
    a.setInstance('w1', 'decode');
    a.setInstance('w2', 'decode');
    a.removeInstance('w1', 1000, true);
    a.removeInstance('w2', 1000, true);
    a.setInstance('w2', 'decode');
    expect(a.collect(2000).pools.decode!.replicas).toBe(2);
    expect(a.collect(4000).pools.decode!.replicas).toBe(1);
  });

  it('a pool whose last worker left stays in the observations with 0 replicas (scale from zero)', () => {
    const a = accumulator();
    a.setInstance('w1', 'decode');
    a.addLoad(load('w1', 1), 0);
    a.removeInstance('w1', 100);
    a.addRequestFigures(figures('r1', { requests: 2, heldRequests: 2 }));
    expect(a.collect(1000)).toMatchObject({ pools: { decode: { replicas: 0, load: [] } }, requests: { requests: 2, heldRequests: 2 } });
  });

  it('a load sample that arrives before the card is placed once the card is seen', () => {
    const a = accumulator();
    a.addLoad(load('w1', 1), 0);
    expect(a.collect(500).pools).toEqual({});
    a.setInstance('w1', 'prefill');
    expect(a.collect(1000).pools.prefill!.load).toHaveLength(1);
  });

  it('forward-pass steps of the interval go to their pool, capped; left-out steps are counted', () => {
    const a = accumulator({ maxForwardPassSamples: 5 });
    a.setInstance('p1', 'prefill');
    a.setInstance('d1', 'decode');
    a.addForwardPass(batch('p1', 3, 10));
    a.addForwardPass(batch('p1', 4));
    a.addForwardPass(batch('d1', 2));
    a.addForwardPass(batch('stranger', 2)); // no card: not placed
    a.addForwardPass(batch('p1', 2, 0, 'other-model')); // ignored
    const o = a.collect(1000);
    expect(o.pools.prefill!.forwardPass).toHaveLength(5);
    expect(o.pools.decode!.forwardPass!.map((s) => s.instanceId)).toEqual(['d1', 'd1']);
    expect(a.counters()).toMatchObject({ forwardPassBatches: 4, forwardPassDropped: 10 + 2 + 2, unplaced: 1 });
    // the next interval starts without them
    expect(a.collect(2000).pools.prefill!.forwardPass).toBeUndefined();
  });

  it("merges the routers' request figures: counts added, histograms added bucket by bucket, held requests per router's latest report", () => {
    const a = accumulator();
    const isl1 = new Array<number>(TOKEN_BOUNDS.length + 1).fill(0);
    const isl2 = [...isl1];
    isl1[0] = 3; // 3 prompts <= 16 tokens
    isl2[TOKEN_BOUNDS.length] = 1; // 1 prompt above the last bound
    a.addRequestFigures(figures('r1', { requests: 3, heldRequests: 2, from: 0, to: 500, isl: hist(TOKEN_BOUNDS as number[], isl1) }));
    a.addRequestFigures(figures('r1', { requests: 0, heldRequests: 1, from: 500, to: 1000 }));
    a.addRequestFigures(figures('r2', { requests: 1, heldRequests: 4, isl: hist(TOKEN_BOUNDS as number[], isl2), ttftMs: hist([100, 200], [0, 5, 0]) }));
    a.addRequestFigures(figures('r3', { model: 'other', requests: 100 }));
    const o = a.collect(1000);
    expect(o.requests.requests).toBe(4);
    expect(o.requests.heldRequests).toBe(1 + 4);
    expect(o.requests.isl).toMatchObject({ kind: 'histogram' });
    expect(distributionCount(o.requests.isl)).toBe(4);
    if (o.requests.isl?.kind === 'histogram') expect(o.requests.isl.bounds.at(-1)).toBe(Number.POSITIVE_INFINITY);
    expect(distributionQuantile(o.requests.ttftMs, 90)).toBeGreaterThan(100);
    expect(distributionQuantile(o.requests.ttftMs, 90)).toBeLessThanOrEqual(200);
    // histograms that counted nothing are left out, not reported as empty
    expect(o.requests.osl).toBeUndefined();
    expect(o.requests.itlMs).toBeUndefined();
  });

  it('an interval without anything is zero requests and no pools, never NaN', () => {
    const a = accumulator();
    const o = a.collect(1000);
    expect(o).toEqual({ intervalSec: 1, pools: {}, requests: { requests: 0, heldRequests: 0 } });
    expect(JSON.stringify(a.collect(1000))).not.toContain('null');
  });

  it('stays bounded: instances and routers past their limits are counted, not kept', () => {
    const a = accumulator({ maxInstances: 2, maxRouters: 2 });
    for (let i = 0; i < 5; i++) {
      a.setInstance(`w${i}`, 'aggregated');
      a.addLoad(load(`w${i}`, 1), 0);
      a.addRequestFigures(figures(`r${i}`, { requests: 1, heldRequests: 1 }));
    }
    const o = a.collect(1000);
    expect(o.pools.aggregated!.replicas).toBe(2);
    expect(o.pools.aggregated!.load).toHaveLength(2);
    expect(o.requests).toMatchObject({ requests: 2, heldRequests: 2 });
    expect(a.counters().unplaced).toBe(3 + 3 + 3);
  });
});
