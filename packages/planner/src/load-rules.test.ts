import { describe, expect, it } from 'vitest';
import { fc, fuzz } from '@switchyard/testing/fuzz';
import { compileLoadRules, DEFAULT_LOAD_RULES, decideLoadPool, type LoadRuleContext } from './load-rules.js';
import type { LoadSample, Observations, Pool } from './observations.js';

const sample = (instanceId: string, kvUsage: number, numWaiting = 0, numRunning = 1): LoadSample => ({
  instanceId,
  ts: 0,
  numRunning,
  numWaiting,
  kvActiveBlocks: Math.round(kvUsage * 100),
  kvTotalBlocks: 100,
  kvUsage,
  prefixCacheQueries: 0,
  prefixCacheHits: 0,
});

const obs = (pool: Pool, replicas: number, load: LoadSample[], requests = 10, heldRequests = 0): Observations => ({
  intervalSec: 30,
  pools: { [pool]: { replicas, load } },
  requests: { requests, heldRequests },
});

const ctx = (o: Partial<LoadRuleContext> = {}): LoadRuleContext => ({
  rules: DEFAULT_LOAD_RULES,
  bounds: { minReplicas: 1, maxReplicas: 8 },
  scaleDownHeld: false,
  ...o,
});

describe('load rules (Dynamo defaults)', () => {
  it('decode: KV usage above 0.9 adds one, below 0.5 removes one, between holds', () => {
    expect(decideLoadPool('decode', obs('decode', 2, [sample('a', 0.95), sample('b', 0.9)]), ctx())).toMatchObject({ from: 2, to: 3, direction: 'up', reason: 'kv_usage_high' });
    expect(decideLoadPool('decode', obs('decode', 2, [sample('a', 0.4), sample('b', 0.5)]), ctx())).toMatchObject({ to: 1, direction: 'down', reason: 'kv_usage_low' });
    expect(decideLoadPool('decode', obs('decode', 2, [sample('a', 0.7), sample('b', 0.6)]), ctx())).toMatchObject({ to: 2, direction: 'hold', reason: 'within_thresholds' });
  });

  it('decode ignores the queue; prefill ignores KV usage', () => {
    expect(decideLoadPool('decode', obs('decode', 2, [sample('a', 0.7, 9)]), ctx())).toMatchObject({ direction: 'hold' });
    expect(decideLoadPool('prefill', obs('prefill', 2, [sample('a', 0.99, 0), sample('b', 0.99, 0)]), ctx())).toMatchObject({ direction: 'down', reason: 'queue_low' });
  });

  it('prefill: queue per worker above 0.5 adds one, below 0.2 removes one', () => {
    expect(decideLoadPool('prefill', obs('prefill', 2, [sample('a', 0, 2), sample('b', 0, 0)]), ctx())).toMatchObject({ to: 3, reason: 'queue_high' });
    expect(decideLoadPool('prefill', obs('prefill', 2, [sample('a', 0, 0), sample('b', 0, 0.3)]), ctx())).toMatchObject({ to: 1, reason: 'queue_low' });
    expect(decideLoadPool('prefill', obs('prefill', 2, [sample('a', 0, 0.3), sample('b', 0, 0.3)]), ctx())).toMatchObject({ to: 2, reason: 'within_thresholds' });
  });

  it("a high queue that drains fast enough to be under the threshold within 3 intervals adds no worker (Dynamo's trend check)", () => {
    const high = obs('prefill', 2, [sample('a', 0, 2), sample('b', 0, 2)]); // 2 per worker
    // was 3: falling by 1 per interval, 3 intervals ahead is -1 → drains, hold
    expect(decideLoadPool('prefill', high, ctx({ previousQueuePerWorker: 3 }))).toMatchObject({ to: 2, direction: 'hold', reason: 'queue_draining', inputs: { queueAhead: 0 } });
    // was 2.2: 3 intervals ahead is 1.4, still above 0.5 → up
    expect(decideLoadPool('prefill', high, ctx({ previousQueuePerWorker: 2.2 }))).toMatchObject({ to: 3, reason: 'queue_high' });
    // rising, no previous figure, or the check turned off → up
    expect(decideLoadPool('prefill', high, ctx({ previousQueuePerWorker: 1 }))).toMatchObject({ to: 3, reason: 'queue_high' });
    expect(decideLoadPool('prefill', high, ctx())).toMatchObject({ to: 3, reason: 'queue_high' });
    expect(decideLoadPool('prefill', high, ctx({ previousQueuePerWorker: 3, rules: { ...DEFAULT_LOAD_RULES, queueTrendIntervals: 0 } }))).toMatchObject({ to: 3, reason: 'queue_high' });
    // the aggregated pool's queue signal follows the same check; its KV signal does not
    expect(decideLoadPool('aggregated', obs('aggregated', 2, [sample('a', 0.3, 2)]), ctx({ previousQueuePerWorker: 4 }))).toMatchObject({ direction: 'hold', reason: 'queue_draining' });
    expect(decideLoadPool('aggregated', obs('aggregated', 2, [sample('a', 0.95, 2)]), ctx({ previousQueuePerWorker: 4 }))).toMatchObject({ direction: 'up', reason: 'kv_usage_high' });
  });

  it('aggregated: up if either signal is high, down only if both are low', () => {
    expect(decideLoadPool('aggregated', obs('aggregated', 2, [sample('a', 0.3, 2)]), ctx())).toMatchObject({ direction: 'up', reason: 'queue_high' });
    expect(decideLoadPool('aggregated', obs('aggregated', 2, [sample('a', 0.95, 0)]), ctx())).toMatchObject({ direction: 'up', reason: 'kv_usage_high' });
    expect(decideLoadPool('aggregated', obs('aggregated', 2, [sample('a', 0.3, 0.3)]), ctx())).toMatchObject({ direction: 'hold' });
    expect(decideLoadPool('aggregated', obs('aggregated', 2, [sample('a', 0.3, 0.1)]), ctx())).toMatchObject({ direction: 'down' });
  });

  it('bounds: at max holds with at_max, at min holds with at_min, outside moves in at once', () => {
    expect(decideLoadPool('decode', obs('decode', 8, [sample('a', 0.99)]), ctx())).toMatchObject({ to: 8, direction: 'hold', reason: 'at_max' });
    expect(decideLoadPool('decode', obs('decode', 1, [sample('a', 0.1)]), ctx())).toMatchObject({ to: 1, direction: 'hold', reason: 'at_min' });
    expect(decideLoadPool('decode', obs('decode', 12, [sample('a', 0.7)]), ctx())).toMatchObject({ to: 8, direction: 'down', reason: 'above_max' });
    expect(decideLoadPool('decode', obs('decode', 0, []), ctx({ bounds: { minReplicas: 3, maxReplicas: 8 } }))).toMatchObject({ to: 3, reason: 'below_min' });
  });

  it('scale-down hold after a scale-up keeps the replicas', () => {
    expect(decideLoadPool('decode', obs('decode', 3, [sample('a', 0.1)]), ctx({ scaleDownHeld: true }))).toMatchObject({ to: 3, direction: 'hold', reason: 'scale_up_cooldown' });
    expect(decideLoadPool('decode', obs('decode', 3, [sample('a', 0.95)]), ctx({ scaleDownHeld: true }))).toMatchObject({ to: 4, direction: 'up' });
  });

  it('zero traffic scales down to a zero minimum; demand without a worker scales up from zero', () => {
    const zero = ctx({ bounds: { minReplicas: 0, maxReplicas: 4 } });
    expect(decideLoadPool('decode', obs('decode', 1, [sample('a', 0, 0, 0)], 0), zero)).toMatchObject({ to: 0, reason: 'no_traffic' });
    expect(decideLoadPool('decode', obs('decode', 0, [], 0), zero)).toMatchObject({ to: 0, direction: 'hold', reason: 'no_traffic' });
    expect(decideLoadPool('decode', obs('decode', 0, [], 0, 3), zero)).toMatchObject({ to: 1, direction: 'up', reason: 'demand_without_worker' });
    expect(decideLoadPool('decode', obs('decode', 0, [], 5), zero)).toMatchObject({ to: 1, direction: 'up' });
    // Workers not reporting yet: no guess either way.
    expect(decideLoadPool('decode', obs('decode', 2, [], 0), zero)).toMatchObject({ to: 2, reason: 'no_load_samples' });
  });

  it('a pool the observations do not mention gets no decision', () => {
    expect(decideLoadPool('prefill', obs('decode', 1, []), ctx())).toBeUndefined();
  });

  it('config: defaults are Dynamo\'s, bad values are refused naming the field', () => {
    expect(compileLoadRules()).toEqual({ kvUsageUp: 0.9, kvUsageDown: 0.5, queueUp: 0.5, queueDown: 0.2, maxStep: 1, decodeScaleDownCooldownIntervals: 3, queueTrendIntervals: 3 });
    expect(() => compileLoadRules({ queueTrendIntervals: 1.5 })).toThrow(/queueTrendIntervals/);
    expect(() => compileLoadRules({ kvUsageDown: 0.95 })).toThrow(/loadRules\.kvUsageDown/);
    expect(() => compileLoadRules({ queueUp: NaN })).toThrow(/loadRules\.queueUp/);
    expect(() => compileLoadRules({ maxStep: 0 })).toThrow(/loadRules\.maxStep/);
    expect(() => compileLoadRules({ decodeScaleDownCooldownIntervals: -1 })).toThrow(/decodeScaleDownCooldownIntervals/);
    expect(compileLoadRules({ maxStep: 2 }).maxStep).toBe(2);
  });

  it('property: any load gives a decision within bounds, moving at most maxStep (unless out of bounds), with finite inputs', () => {
    const num = fc.oneof(fc.double(), fc.constantFrom(NaN, Infinity, -1, 0, 1e308));
    const load = fc.array(
      fc.record({ instanceId: fc.constantFrom('a', 'b', 'c'), ts: num, numRunning: num, numWaiting: num, kvActiveBlocks: num, kvTotalBlocks: num, kvUsage: num, prefixCacheQueries: num, prefixCacheHits: num }),
      { maxLength: 6 },
    );
    const arb = fc.record({
      pool: fc.constantFrom<Pool>('prefill', 'decode', 'aggregated'),
      replicas: fc.oneof(fc.nat(20), fc.constantFrom(NaN, -1, 2.5)),
      load,
      requests: num,
      held: num,
      min: fc.nat(3),
      extra: fc.nat(5),
      step: fc.integer({ min: 1, max: 3 }),
      heldDown: fc.boolean(),
    });
    fuzz(arb, (a) => {
      const bounds = { minReplicas: a.min, maxReplicas: Math.max(1, a.min) + a.extra };
      const d = decideLoadPool(a.pool, obs(a.pool, a.replicas, a.load, a.requests, a.held), ctx({ bounds, rules: { ...DEFAULT_LOAD_RULES, maxStep: a.step }, scaleDownHeld: a.heldDown }))!;
      expect(d.to).toBeGreaterThanOrEqual(bounds.minReplicas);
      expect(d.to).toBeLessThanOrEqual(bounds.maxReplicas);
      expect(Number.isSafeInteger(d.to)).toBe(true);
      const inBounds = d.from >= bounds.minReplicas && d.from <= bounds.maxReplicas;
      if (inBounds) expect(Math.abs(d.to - d.from)).toBeLessThanOrEqual(a.step);
      if (inBounds && a.heldDown) expect(d.to).toBeGreaterThanOrEqual(d.from);
      for (const v of Object.values(d.inputs)) expect(Number.isFinite(v)).toBe(true);
      expect(d.direction).toBe(d.to > d.from ? 'up' : d.to < d.from ? 'down' : 'hold');
    });
  });
});
