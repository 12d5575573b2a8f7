/**
 * Fuzz properties of the planner's two edges: a profile read from a file (`parseProfile`: any
 * mutation of a valid profile is a profile that interpolates finitely, or an invalid_argument) and
 * whatever the observations say (`decide`: any sequence of hostile figures gives integer targets
 * within bounds and finite inputs, in both modes). `npm run fuzz` runs these long.
 */
import { describe, expect, it } from 'vitest';
import { fc, fuzz, mutatedJson, parsesOrRefuses, type JsonValue } from '@switchyard/testing/fuzz';
import type { Observations } from './observations.js';
import { compilePlannerConfig, decide, INITIAL_PLANNER_STATE, type PlannerState } from './planner-core.js';
import { decodeItlMs, parseProfile, prefillTtftMs } from './profile.js';

const PROFILE_JSON = {
  version: 1,
  prefill: { isl: [128, 1024, 4096], ttftMs: [20, 80, 400], throughputTokensPerSec: [8000, 12000, 10000] },
  decode: { kvUsage: [0.1, 0.5, 0.9], contextLength: [256, 4096], itlMs: [[10, 12], [20, 30], [40, 60]], kvCapacityTokens: 100_000 },
};
const profile = parseProfile(PROFILE_JSON);

describe('parseProfile fuzz', () => {
  it('property: any mutation of a valid profile parses or is refused with invalid_argument; parsed ones interpolate finitely', () => {
    fuzz(mutatedJson(fc.constant(PROFILE_JSON as unknown as JsonValue)), (j) => {
      const r = parsesOrRefuses(() => parseProfile(j));
      if (!r.ok) return;
      const p = r.value;
      if (p.prefill) expect(Number.isFinite(prefillTtftMs(p.prefill, 777))).toBe(true);
      if (p.decode) expect(Number.isFinite(decodeItlMs(p.decode, 0.3, 999))).toBe(true);
    });
  });
});

describe('decide fuzz', () => {
  const config = compilePlannerConfig({ mode: 'sla', profile, predictor: { kind: 'constant' }, defaultBounds: { minReplicas: 0, maxReplicas: 20 } });
  it('property: any sequence of observations gives bounded integer targets and finite inputs in both modes', () => {
    const num = fc.oneof(fc.double({ min: 0, max: 1e7, noNaN: true }), fc.constantFrom(NaN, Infinity, -1, 0));
    const dist = fc.option(fc.record({ kind: fc.constant('samples' as const), values: fc.array(num, { maxLength: 6 }) }), { nil: undefined });
    const pool = fc.record({ replicas: fc.oneof(fc.nat(30), fc.constantFrom(NaN, -2)), load: fc.array(fc.record({ instanceId: fc.constantFrom('a', 'b'), ts: num, numRunning: num, numWaiting: num, kvActiveBlocks: num, kvTotalBlocks: num, kvUsage: num, prefixCacheQueries: num, prefixCacheHits: num }), { maxLength: 3 }) });
    const obs = fc.record({
      intervalSec: num,
      pools: fc.record({ prefill: pool, decode: pool, aggregated: pool }, { requiredKeys: [] }),
      requests: fc.record({ requests: num, heldRequests: num, isl: dist, osl: dist, ttftMs: dist, itlMs: dist }),
    });
    const configs = [config, compilePlannerConfig({ mode: 'load', defaultBounds: { minReplicas: 0, maxReplicas: 5 } }), compilePlannerConfig({ mode: 'sla', profile, bounds: { decode: { minReplicas: 2, maxReplicas: 4 } } })];
    fuzz(fc.tuple(fc.constantFrom(...configs), fc.array(obs, { minLength: 1, maxLength: 5 })), ([c, seq]) => {
      let state: PlannerState = INITIAL_PLANNER_STATE;
      for (const o of seq) {
        const r = decide(state, o as Observations, c);
        for (const d of r.decisions) {
          const b = c.bounds[d.pool];
          expect(Number.isSafeInteger(d.to)).toBe(true);
          expect(d.to).toBeGreaterThanOrEqual(b.minReplicas);
          expect(d.to).toBeLessThanOrEqual(b.maxReplicas);
          for (const v of Object.values(d.inputs)) expect(Number.isFinite(v)).toBe(true);
        }
        if (r.predicted) for (const v of Object.values(r.predicted)) expect(Number.isFinite(v)).toBe(true);
        state = r.nextState;
      }
    }, { scale: 0.5 });
  });
});
