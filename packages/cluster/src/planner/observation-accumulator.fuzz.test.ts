/**
 * Fuzz property of the planner's observation edge: whatever arrives on the three subjects (valid
 * messages with one field corrupted, in any order, decoded by the wire codec or refused), the
 * accumulator never throws, and `collect` gives finite figures only (the one infinity allowed is a
 * histogram's overflow bound), which the planner's `decide` takes as they are.
 */
import { describe, expect, it } from 'vitest';
import { compilePlannerConfig, decide, INITIAL_PLANNER_STATE, type Observations } from '@switchyard/planner';
import { fc, fuzz, jsonText, mutatedJson, parsesOrRefuses, type JsonValue } from '@switchyard/testing/fuzz';
import { decodeWireForwardPass, decodeWireLoad, decodeWireRequestFigures } from '../wire-codec.js';
import { ObservationAccumulator } from './observation-accumulator.js';

const LOAD: JsonValue = { v: 1, instanceId: 'w1', model: 'm', ts: 5, numRunning: 1, numWaiting: 2, kvActiveBlocks: 3, kvTotalBlocks: 8, kvUsage: 0.375, prefixCacheQueries: 4, prefixCacheHits: 1 };
const STEPS: JsonValue = { v: 1, instanceId: 'w1', model: 'm', from: 0, to: 1000, steps: [{ ts: 1, wallMs: 3, prefillTokens: 10, decodeKvTokens: 0 }], dropped: 1 };
const FIGURES: JsonValue = {
  v: 1, routerId: 'r', model: 'm', from: 0, to: 1000, requests: 3, heldRequests: 1,
  isl: { bounds: [16, 32], counts: [1, 2, 0] }, osl: { bounds: [16], counts: [3, 0] }, ttftMs: { bounds: [4, 8], counts: [0, 3, 0] }, itlMs: { bounds: [1], counts: [0, 9] },
};

/** Every number in `o` is finite, except the last bound of a histogram, which may be Infinity. */
function expectFinite(o: Observations): void {
  const walk = (v: unknown, path: string): void => {
    if (typeof v === 'number') {
      if (!Number.isFinite(v)) expect(path).toMatch(/bounds\.\d+$/);
      return;
    }
    if (v !== null && typeof v === 'object') for (const [k, x] of Object.entries(v)) walk(x, `${path}.${k}`);
  };
  walk(o, '');
  for (const d of [o.requests.isl, o.requests.osl, o.requests.ttftMs, o.requests.itlMs]) {
    if (d?.kind === 'histogram') d.bounds.slice(0, -1).forEach((b) => expect(Number.isFinite(b)).toBe(true));
  }
}

describe('ObservationAccumulator (fuzz)', () => {
  it('takes any sequence of corrupted messages without throwing; collect is finite and decide takes it', () => {
    const message = fc.oneof(
      mutatedJson(fc.constant(LOAD)).map((v) => ['load', v] as const),
      mutatedJson(fc.constant(STEPS)).map((v) => ['steps', v] as const),
      mutatedJson(fc.constant(FIGURES)).map((v) => ['figures', v] as const),
    );
    const config = compilePlannerConfig({ mode: 'load' });
    fuzz(fc.tuple(fc.array(message, { maxLength: 12 }), fc.constantFrom('aggregated' as const, 'prefill' as const, 'decode' as const)), ([messages, role]) => {
      const a = new ObservationAccumulator({ model: 'm', start: 0 });
      a.setInstance('w1', role);
      let now = 0;
      for (const [kind, v] of messages) {
        const value = JSON.parse(jsonText(v) || 'null') as unknown;
        now += 100;
        if (kind === 'load') {
          const r = parsesOrRefuses(() => decodeWireLoad(value));
          if (r.ok) a.addLoad(r.value, now);
        } else if (kind === 'steps') {
          const r = parsesOrRefuses(() => decodeWireForwardPass(value));
          if (r.ok) a.addForwardPass(r.value);
        } else {
          const r = parsesOrRefuses(() => decodeWireRequestFigures(value));
          if (r.ok) a.addRequestFigures(r.value);
        }
      }
      const o = a.collect(now + 1000);
      expectFinite(o);
      const result = decide(INITIAL_PLANNER_STATE, o, config);
      for (const d of result.decisions) expect(Number.isFinite(d.to)).toBe(true);
    }, { scale: 0.5 });
  });
});
