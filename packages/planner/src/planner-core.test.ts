import { describe, expect, it } from 'vitest';
import { parsesOrRefuses } from '@switchyard/testing/fuzz';
import type { LoadSample, Observations, Pool } from './observations.js';
import { compilePlannerConfig, decide, INITIAL_PLANNER_STATE, type PlannerState } from './planner-core.js';
import { parseProfile } from './profile.js';
import { sizePool } from './sla-sizing.js';

const profile = parseProfile({
  version: 1,
  prefill: { isl: [128, 1024, 4096], ttftMs: [20, 80, 400], throughputTokensPerSec: [8000, 12000, 10000] },
  decode: { kvUsage: [0.1, 0.5, 0.9], contextLength: [256, 4096], itlMs: [[10, 12], [20, 30], [40, 60]], kvCapacityTokens: 100_000 },
});

const sample = (instanceId: string, kvUsage: number, numWaiting = 0, numRunning = 1): LoadSample => ({
  instanceId,
  ts: 0,
  numRunning,
  numWaiting,
  kvActiveBlocks: Math.round(kvUsage * 1000),
  kvTotalBlocks: 1000,
  kvUsage,
  prefixCacheQueries: 0,
  prefixCacheHits: 0,
});

function loadObs(pool: Pool, replicas: number, kvUsage: number): Observations {
  return { intervalSec: 30, pools: { [pool]: { replicas, load: [sample('a', kvUsage)] } }, requests: { requests: 100 } };
}

describe('compilePlannerConfig', () => {
  it('fills defaults: 1..8 replicas per pool, Dynamo thresholds, p90 SLOs, Holt', () => {
    const c = compilePlannerConfig({ mode: 'load', bounds: { decode: { minReplicas: 0 } } });
    expect(c.bounds.prefill).toEqual({ minReplicas: 1, maxReplicas: 8 });
    expect(c.bounds.decode).toEqual({ minReplicas: 0, maxReplicas: 8 });
    expect(c.loadRules.kvUsageUp).toBe(0.9);
    expect(c.sla).toEqual({ ttftMs: 500, itlMs: 50, percentile: 90 });
    expect(c.predictor.kind).toBe('holt');
  });

  it('refuses bad options naming the field', () => {
    const cases: [object, RegExp][] = [
      [{ mode: 'sla' }, /profile is required/],
      [{ mode: 'fast' }, /mode/],
      [{ mode: 'load', bounds: { prefill: { minReplicas: 5, maxReplicas: 2 } } }, /bounds\.prefill\.maxReplicas/],
      [{ mode: 'load', defaultBounds: { minReplicas: -1 } }, /bounds\.prefill\.minReplicas/],
      [{ mode: 'load', bounds: { decode: { maxReplicas: 0 } } }, /bounds\.decode\.maxReplicas/],
      [{ mode: 'load', sla: { percentile: 0 } }, /sla\.percentile/],
      [{ mode: 'load', sla: { itlMs: Infinity } }, /sla\.itlMs/],
      [{ mode: 'load', minCorrection: 2 }, /minCorrection/],
      [{ mode: 'load', slaMaxStep: 0 }, /slaMaxStep/],
      [{ mode: 'load', predictor: { kind: 'moving-average', window: 0 } }, /predictor\.window/],
      [{ mode: 'load', loadRules: { queueDown: 0.9 } }, /loadRules\.queueDown/],
    ];
    for (const [o, message] of cases) {
      const r = parsesOrRefuses(() => compilePlannerConfig(o as never));
      expect(r.ok, JSON.stringify(o)).toBe(false);
      if (!r.ok) expect(r.error.message).toMatch(message);
    }
  });
});

describe('decide: load mode', () => {
  it('holds decode scale-down for 3 intervals after a scale-up, then removes one per interval', () => {
    const config = compilePlannerConfig({ mode: 'load' });
    let state: PlannerState = INITIAL_PLANNER_STATE;
    let replicas = 2;
    const trail: string[] = [];
    for (const usage of [0.95, 0.1, 0.1, 0.1, 0.1, 0.1]) {
      const { decisions, nextState } = decide(state, loadObs('decode', replicas, usage), config);
      expect(decisions).toHaveLength(1);
      trail.push(`${decisions[0]!.to}:${decisions[0]!.reason}`);
      replicas = decisions[0]!.to;
      state = nextState;
    }
    expect(trail).toEqual(['3:kv_usage_high', '3:scale_up_cooldown', '3:scale_up_cooldown', '3:scale_up_cooldown', '2:kv_usage_low', '1:kv_usage_low']);
    expect(state.interval).toBe(6);
  });

  it("carries each pool's queue to the next interval: a queue draining fast adds no prefill worker", () => {
    const config = compilePlannerConfig({ mode: 'load' });
    const prefill = (waiting: number): Observations => ({ intervalSec: 30, pools: { prefill: { replicas: 2, load: [sample('p', 0, waiting)] } }, requests: { requests: 5 } });
    const first = decide(INITIAL_PLANNER_STATE, prefill(8), config);
    expect(first.decisions[0]).toMatchObject({ to: 3, reason: 'queue_high' });
    expect(first.nextState.lastQueuePerWorker).toEqual({ prefill: 8 });
    // 8 → 4: four fewer per interval, under 0.5 well within 3 intervals
    const second = decide(first.nextState, prefill(4), config);
    expect(second.decisions[0]).toMatchObject({ to: 2, reason: 'queue_draining' });
    // 4 → 5: growing again
    expect(decide(second.nextState, prefill(5), config).decisions[0]).toMatchObject({ to: 3, reason: 'queue_high' });
  });

  it('prefill has no cooldown; every pool present gets a decision, in pool order', () => {
    const config = compilePlannerConfig({ mode: 'load' });
    const obs: Observations = {
      intervalSec: 30,
      pools: { decode: { replicas: 2, load: [sample('d', 0.95)] }, prefill: { replicas: 2, load: [sample('p', 0, 2)] } },
      requests: { requests: 5 },
    };
    const first = decide(INITIAL_PLANNER_STATE, obs, config);
    expect(first.decisions.map((d) => `${d.pool}:${d.direction}`)).toEqual(['prefill:up', 'decode:up']);
    const calm: Observations = { ...obs, pools: { decode: { replicas: 3, load: [sample('d', 0.1)] }, prefill: { replicas: 3, load: [sample('p', 0, 0)] } } };
    const second = decide(first.nextState, calm, config);
    expect(second.decisions.map((d) => `${d.pool}:${d.direction}`)).toEqual(['prefill:down', 'decode:hold']);
  });
});

const slaObs = (replicas: number, requests: number, isl: number[], osl: number[], extra: Partial<Observations['requests']> = {}): Observations => ({
  intervalSec: 10,
  pools: { prefill: { replicas, load: [] }, decode: { replicas, load: [] } },
  requests: { requests, isl: { kind: 'samples', values: isl }, osl: { kind: 'samples', values: osl }, ...extra },
});

describe('decide: sla mode', () => {
  const config = compilePlannerConfig({ mode: 'sla', profile, predictor: { kind: 'constant' }, defaultBounds: { minReplicas: 0, maxReplicas: 20 } });

  it('sizes from the predicted rate and the p90 lengths (constant predictor: this interval again)', () => {
    // 20 prompts: 17 of 1000 tokens, 2 of 2000, 1 of 4096 → p90 2000, p99 4096, mean 1254.8.
    const isl = [...Array.from({ length: 17 }, () => 1000), 2000, 2000, 4096];
    const osl = Array.from({ length: 20 }, () => 500);
    const r = decide(INITIAL_PLANNER_STATE, slaObs(1, 250, isl, osl), config);
    expect(r.predicted).toMatchObject({ requestRate: 25, islMean: 1254.8, islAtPercentile: 2000, oslAtPercentile: 500 });
    const expected = sizePool('prefill', profile, r.predicted!, config.sla, { prefill: 1, decode: 1 })!;
    expect(r.decisions[0]).toMatchObject({ pool: 'prefill', from: 1, to: expected.replicas, reason: 'sla_sizing' });
    expect(expected.replicas).toBe(3); // 25 × 1254.8 tokens/s over ~11364 tokens/s at 2000 tokens
    expect(r.decisions[1]).toMatchObject({ pool: 'decode', reason: 'sla_sizing' });
    // p99 reaches the 4096-token prompt, and needs more prefill workers.
    const p99 = compilePlannerConfig({ mode: 'sla', profile, predictor: { kind: 'constant' }, sla: { percentile: 99 }, defaultBounds: { minReplicas: 0, maxReplicas: 20 } });
    const r99 = decide(INITIAL_PLANNER_STATE, slaObs(1, 250, isl, osl), p99);
    expect(r99.predicted!.islAtPercentile).toBe(4096);
    expect(r99.decisions[0]!.to).toBe(4); // the same load over 10000 tokens/s at 4096 tokens
  });

  it('zero traffic after traffic scales to the minimum with finite inputs (no NaN, unlike Dynamo #6985)', () => {
    const holt = compilePlannerConfig({ mode: 'sla', profile, defaultBounds: { minReplicas: 0, maxReplicas: 20 } });
    let state = decide(INITIAL_PLANNER_STATE, slaObs(3, 300, [2000], [300]), holt).nextState;
    let replicas = 3;
    for (let i = 0; i < 8; i++) {
      const r = decide(state, slaObs(replicas, 0, [], [], { ttftMs: { kind: 'samples', values: [] } }), holt);
      for (const d of r.decisions) for (const v of Object.values(d.inputs)) expect(Number.isFinite(v)).toBe(true);
      replicas = r.decisions[0]!.to;
      state = r.nextState;
    }
    expect(replicas).toBe(0);
    expect(JSON.parse(JSON.stringify(state))).toEqual(state);
  });

  it('requests held for a pool with no worker start one', () => {
    const r = decide(INITIAL_PLANNER_STATE, slaObs(0, 0, [], [], { heldRequests: 2 }), config);
    expect(r.decisions.map((d) => `${d.to}:${d.reason}`)).toEqual(['1:demand_without_worker', '1:demand_without_worker']);
  });

  it('observed latency above the profile raises the correction and the replicas', () => {
    const isl = [1000, 1000];
    const base = decide(INITIAL_PLANNER_STATE, slaObs(1, 400, isl, [100]), config);
    const slow = decide(INITIAL_PLANNER_STATE, slaObs(1, 400, isl, [100], { ttftMs: { kind: 'samples', values: [500] } }), config);
    expect(slow.decisions[0]!.inputs.prefillCorrection).toBe(4); // 500 / ~79 clamped at 4
    expect(slow.decisions[0]!.to).toBeGreaterThan(base.decisions[0]!.to);
  });

  it('a pool the profile cannot size falls back to the load rules', () => {
    const prefillOnly = parseProfile({ version: 1, prefill: { isl: [1], ttftMs: [1], throughputTokensPerSec: [1000] } });
    const c = compilePlannerConfig({ mode: 'sla', profile: prefillOnly });
    const r = decide(INITIAL_PLANNER_STATE, { intervalSec: 10, pools: { decode: { replicas: 2, load: [sample('a', 0.95)] } }, requests: { requests: 3 } }, c);
    expect(r.decisions[0]).toMatchObject({ pool: 'decode', to: 3, reason: 'kv_usage_high' });
  });

  it('traffic without length figures is left to the load rules, not sized as zero-length requests', () => {
    const obs: Observations = { intervalSec: 10, pools: { decode: { replicas: 3, load: [sample('a', 0.95)] } }, requests: { requests: 500 } };
    const r = decide(INITIAL_PLANNER_STATE, obs, config);
    expect(r.decisions[0]).toMatchObject({ pool: 'decode', from: 3, to: 4, reason: 'kv_usage_high' });
  });

  it('is pure: the same inputs give the same result, and the input state is not changed', () => {
    const obs = slaObs(2, 50, [100, 200, 300], [10, 20]);
    const s0 = decide(INITIAL_PLANNER_STATE, obs, config).nextState;
    const frozen = JSON.stringify(s0);
    const a = decide(s0, obs, config);
    const b = decide(JSON.parse(frozen) as PlannerState, obs, config);
    expect(a).toEqual(b);
    expect(JSON.stringify(s0)).toBe(frozen);
  });
});
