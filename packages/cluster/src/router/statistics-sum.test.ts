import { describe, expect, it } from 'vitest';
import type { WireModelStatistics } from '../protocols.js';
import { sumStatistics } from './statistics-sum.js';

const d = (count: number, ns: number) => ({ count, ns });
function stats(name: string, version: string, n: number, last: number): WireModelStatistics {
  return {
    name,
    version,
    last_inference: last,
    inference_count: n,
    execution_count: n,
    inference_stats: { success: d(n, n * 10), fail: d(0, 0), queue: d(n, n) },
    response_stats: { '0': { success: d(n, n * 2), fail: d(1, 1) } },
    batch_stats: [{ batch_size: 1, compute_input: d(n, 1), compute_infer: d(n, 2), compute_output: d(n, 3) }],
    memory_usage: [],
  };
}

describe('sumStatistics', () => {
  it('adds counters and durations per (model, version), keeps the latest inference, sorts by name then version', () => {
    const b2 = { ...stats('b', '2', 1, 5), batch_stats: [{ batch_size: 4, compute_input: d(1, 1), compute_infer: d(1, 1), compute_output: d(1, 1) }] };
    const out = sumStatistics([stats('b', '10', 1, 1), stats('a', '1', 2, 100), b2, stats('a', '1', 3, 50), stats('b', '2', 2, 9)]);
    expect(out.map((s) => `${s.name}/${s.version}`)).toEqual(['a/1', 'b/2', 'b/10']);
    expect(out[0]).toEqual({
      name: 'a',
      version: '1',
      last_inference: 100,
      inference_count: 5,
      execution_count: 5,
      inference_stats: { success: d(5, 50), fail: d(0, 0), queue: d(5, 5) },
      response_stats: { '0': { success: d(5, 10), fail: d(2, 2) } },
      batch_stats: [{ batch_size: 1, compute_input: d(5, 2), compute_infer: d(5, 4), compute_output: d(5, 6) }],
      memory_usage: [],
    });
    expect(out[1]!.batch_stats.map((b) => [b.batch_size, b.compute_infer.count])).toEqual([[1, 2], [4, 1]]);
    expect(out[1]!.last_inference).toBe(9);
    expect(sumStatistics([])).toEqual([]);
  });
});
