import { describe, expect, it } from 'vitest';
import { chooseCandidate, scoreCandidate, type CandidateState } from './selector.js';

const input = { promptTokens: 160, blockSize: 16, overlapWeight: 1, scoring: 'kv' } as const;
const c = (worker: string, overlapBlocks: number, activeBlocks = 0, prefillTokens = 0, treeSize = 0): CandidateState => ({ worker, overlapBlocks, activeBlocks, prefillTokens, treeSize });

describe('scoreCandidate', () => {
  it('kv: weight x uncached prefill blocks + active and new blocks', () => {
    expect(scoreCandidate(c('a', 4, 3, 32), input)).toEqual({ worker: 'a', overlapBlocks: 4, prefillBlocks: 8, decodeBlocks: 9, cost: 17 });
    expect(scoreCandidate(c('a', 4, 3, 32), { ...input, overlapWeight: 2 }).cost).toBe(25);
  });

  it('a partial last block is prefill work but never cached', () => {
    const s = scoreCandidate(c('a', 2), { ...input, promptTokens: 40 });
    expect(s.prefillBlocks).toBe(0.5);
    expect(s.decodeBlocks).toBe(1);
  });

  it('load: reserved work only', () => {
    expect(scoreCandidate(c('a', 10, 5, 8), { ...input, scoring: 'load' }).cost).toBe(5.5);
  });
});

describe('chooseCandidate', () => {
  const scores = (costs: number[]) => costs.map((cost, i) => ({ worker: `w${i}`, overlapBlocks: 0, prefillBlocks: 0, decodeBlocks: 0, cost }));

  it("picks Dynamo's worked example: 18, 10, 11 → the second", () => {
    expect(chooseCandidate(scores([18, 10, 11]), [0, 0, 0], 0, 0.9)).toBe(1);
  });

  it('ties: the smallest tree, then random among the rest in order', () => {
    expect(chooseCandidate(scores([5, 5, 5, 5]), [3, 1, 1, 1], 0, 0)).toBe(1);
    expect(chooseCandidate(scores([5, 5, 5, 5]), [3, 1, 1, 1], 0, 0.5)).toBe(2);
    expect(chooseCandidate(scores([5, 5, 5, 5]), [3, 1, 1, 1], 0, 0.999)).toBe(3);
  });

  it('temperature: softmax over normalised costs, inverse CDF on random', () => {
    // weights 1, e^-1 → P(first) = 0.731
    expect(chooseCandidate(scores([0, 16]), [0, 0], 1, 0.73)).toBe(0);
    expect(chooseCandidate(scores([0, 16]), [0, 0], 1, 0.74)).toBe(1);
    // A high temperature flattens toward uniform; equal costs are uniform.
    expect(chooseCandidate(scores([0, 16]), [0, 0], 100, 0.49)).toBe(0);
    expect(chooseCandidate(scores([0, 16]), [0, 0], 100, 0.51)).toBe(1);
    expect(chooseCandidate(scores([3, 3, 3]), [0, 0, 0], 1, 0.5)).toBe(1);
  });

  it('rejects an empty list', () => {
    expect(() => chooseCandidate([], [], 0, 0)).toThrow(RangeError);
  });
});
