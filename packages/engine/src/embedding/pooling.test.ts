import { describe, expect, it } from 'vitest';
import { normalizeEmbedding, poolSequence, truncateEmbedding } from './pooling.js';

// Two sequences of width 2, padded to 3 tokens: [1,2] [3,4] [pad] and [5,-6] [pad] [pad].
const hidden = Float32Array.of(1, 2, 3, 4, 99, 99, 5, -6, 99, 99, 99, 99);

describe('poolSequence', () => {
  it('pools only the attended tokens of each sequence', () => {
    expect(Array.from(poolSequence('mean', hidden, 0, 2, 2))).toEqual([2, 3]);
    expect(Array.from(poolSequence('max', hidden, 0, 2, 2))).toEqual([3, 4]);
    expect(Array.from(poolSequence('cls', hidden, 0, 2, 2))).toEqual([1, 2]);
    expect(Array.from(poolSequence('lasttoken', hidden, 0, 2, 2))).toEqual([3, 4]);
    expect(Array.from(poolSequence('mean', hidden, 6, 1, 2))).toEqual([5, -6]);
    expect(Array.from(poolSequence('lasttoken', hidden, 6, 1, 2))).toEqual([5, -6]);
  });
});

describe('truncateEmbedding / normalizeEmbedding', () => {
  it('keeps the first dimensions, then normalises to unit length; a zero vector stays zero', () => {
    const v = normalizeEmbedding(truncateEmbedding(Float32Array.of(3, 4, 12), 2));
    expect(Array.from(v)).toEqual([Math.fround(0.6), Math.fround(0.8)]);
    expect(truncateEmbedding(Float32Array.of(1, 2), undefined)).toHaveLength(2);
    expect(truncateEmbedding(Float32Array.of(1, 2), 5)).toHaveLength(2);
    expect(Array.from(normalizeEmbedding(new Float32Array(3)))).toEqual([0, 0, 0]);
  });
});
