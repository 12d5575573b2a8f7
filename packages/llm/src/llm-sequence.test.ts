import { describe, expect, it } from 'vitest';
import { hashTokenBlocks } from './block-hash.js';
import { LlmSequence, type LlmRequest } from './llm-sequence.js';

const tokens = (n: number, base = 0): number[] => Array.from({ length: n }, (_, i) => (base + i * 2654435761) >>> 0);
const req = (promptTokenIds: number[], maxTokens: number, extra: Partial<LlmRequest> = {}): LlmRequest => ({ requestId: 'r', promptTokenIds, maxTokens, ...extra });

/** The specs as hashTokenBlocks gives them for the whole token list. */
function specsOf(all: number[], blockSize: number) {
  const h = hashTokenBlocks(all, blockSize);
  return h.sequenceHashes.map((sequenceHash, i) => ({ sequenceHash, localHash: h.localHashes[i]! }));
}

describe('LlmSequence', () => {
  it('keeps the tokens and the full-block hashes of prompt, prior output and every appended token', () => {
    for (const blockSize of [1, 4, 16, 64]) {
      const p = tokens(3 * blockSize + 2, blockSize);
      const prior = tokens(5, 99);
      // more output than the buffer's first room (1024): it grows and keeps every token
      const seq = new LlmSequence(req(p, 1500, { outputTokenIds: prior }), blockSize, 0);
      const all = [...p, ...prior];
      expect(seq.fullBlockSpecs()).toEqual(specsOf(all, blockSize));
      for (let i = 0; i < 1400; i++) {
        const t = (i * 40503 + 2 ** 31) >>> 0; // ids past 2^31 too
        expect(seq.appendToken(t)).toBe(null);
        all.push(t);
        if (i % 97 === 0 || i > 1390) expect(seq.fullBlockSpecs()).toEqual(specsOf(all, blockSize));
      }
      expect(seq.numTokens).toBe(all.length);
      expect(seq.numOutputTokens).toBe(1405);
      expect(seq.tokenIds(0, seq.numTokens)).toEqual(all);
      expect(seq.tokenIds(7, 12)).toEqual(all.slice(7, 12));
      expect(seq.tokenIds(all.length - 2, all.length + 10)).toEqual(all.slice(-2));
      expect(seq.tokenAt(all.length - 1)).toBe(all.at(-1));
      expect(seq.outputTokenIds).toEqual(all.slice(p.length));
      expect(seq.promptTokenIds).toEqual(p);
    }
  });

  it('finishes on max_tokens (prior output counted) and on an end id after min_tokens', () => {
    const a = new LlmSequence(req([1, 2, 3], 3, { outputTokenIds: [7] }), 4, 0);
    expect(a.appendToken(8)).toBe(null);
    expect(a.appendToken(9)).toBe('length');
    const b = new LlmSequence(req([1, 2, 3], 10, { eosTokenIds: [5], sampling: { min_tokens: 2 } as never }), 4, 0);
    expect(b.appendToken(5)).toBe(null);
    expect(b.appendToken(5)).toBe('stop');
  });

  it('copies and freezes the prompt: the same array each time, deaf to the caller changing its own', () => {
    const p = tokens(10);
    const seq = new LlmSequence(req(p, 4), 4, 0);
    p[0] = 12345;
    expect(seq.promptTokenIds[0]).toBe(tokens(1)[0]);
    expect(Object.isFrozen(seq.promptTokenIds)).toBe(true);
    expect(seq.promptTokenIds).toBe(seq.promptTokenIds);
    expect(Object.isFrozen(seq.priorOutputTokenIds)).toBe(true);
    expect(seq.priorOutputTokenIds).toEqual([]);
  });

  it('refuses a token that is not a u32, wherever it sits (a partial tail too), and a bad sampled token', () => {
    for (const bad of [-1, 1.5, 2 ** 32, Number.NaN]) {
      expect(() => new LlmSequence(req([1, 2, 3, 4, 5, bad], 4), 4, 0)).toThrow(RangeError);
      expect(() => new LlmSequence(req([1, 2], 4, { outputTokenIds: [bad] }), 4, 0)).toThrow(RangeError);
      const seq = new LlmSequence(req([1, 2], 4), 4, 0);
      expect(() => seq.appendToken(bad)).toThrow(RangeError);
      expect(seq.numTokens).toBe(2);
    }
    expect(() => new LlmSequence(req([], 4), 4, 0)).toThrow(/empty prompt/);
    expect(() => new LlmSequence(req([1], 2, { outputTokenIds: [1, 2] }), 4, 0)).toThrow(/nothing to generate/);
  });
});
