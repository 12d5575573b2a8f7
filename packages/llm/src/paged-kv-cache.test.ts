import { describe, expect, it } from 'vitest';
import { SwitchyardError } from '@switchyard/common';
import type { DecoderTensor } from './decoder-session.js';
import type { BlockRef, BlockId } from './kv-block-manager.js';
import { PagedKvCache, type KvDtype } from './paged-kv-cache.js';

const H = 2;
const D = 3;
const BS = 4;

const block = (slot: number, full = false): BlockRef => ({ id: `b${slot}` as BlockId, slot, full });

/** A present tensor [rows, H, total, D] whose element at (b, h, t, d) encodes all four. */
function present(rows: number, total: number, dtype: KvDtype): DecoderTensor {
  const n = rows * H * total * D;
  const data = dtype === 'fp16' ? new Uint16Array(n) : new Float32Array(n);
  for (let b = 0; b < rows; b++)
    for (let h = 0; h < H; h++) for (let t = 0; t < total; t++) for (let d = 0; d < D; d++) data[((b * H + h) * total + t) * D + d] = code(b, h, t, d);
  return { type: dtype === 'fp16' ? 'float16' : 'float32', dims: [rows, H, total, D], data };
}
const code = (b: number, h: number, t: number, d: number): number => 1 + b * 1000 + h * 100 + t * 4 + d;

/** Element (b, h, t, d) of a gathered past. */
const at = (t: DecoderTensor, b: number, h: number, pos: number, d: number): number => Number(t.data[((b * H + h) * t.dims[2]! + pos) * D + d]);

describe('PagedKvCache', () => {
  for (const dtype of ['fp32', 'fp16'] as const) {
    it(`scatter then gather round-trips across blocks, left-padding shorter rows (${dtype})`, () => {
      const kv = new PagedKvCache({ numLayers: 2, numKvHeads: H, headDim: D, numBlocks: 8, blockSize: BS, dtype });
      const seqA = [block(5), block(2)]; // 6 tokens
      const seqB = [block(7)]; // 3 tokens
      // One run of two rows, no past, 6 new tokens for A and 3 for B (B's last 3 are padding).
      kv.scatter(1, 'value', present(2, 6, dtype), 0, [
        { blocks: seqA, from: 0, count: 6 },
        { blocks: seqB, from: 0, count: 3 },
      ]);
      const past = kv.gather(1, 'value', [{ blocks: seqA, length: 6 }, { blocks: seqB, length: 3 }], 6);
      expect(past.dims).toEqual([2, H, 6, D]);
      expect(past.type).toBe(dtype === 'fp16' ? 'float16' : 'float32');
      for (let h = 0; h < H; h++) {
        for (let d = 0; d < D; d++) {
          for (let t = 0; t < 6; t++) expect(at(past, 0, h, t, d)).toBe(code(0, h, t, d));
          for (let t = 0; t < 3; t++) expect(at(past, 1, h, t, d)).toBe(0); // left padding
          for (let t = 0; t < 3; t++) expect(at(past, 1, h, 3 + t, d)).toBe(code(1, h, t, d));
        }
      }
      // Other layers and the keys are untouched.
      expect(kv.gather(0, 'value', [{ blocks: seqA, length: 6 }], 6).data.every((x) => x === 0)).toBe(true);
      expect(kv.gather(1, 'key', [{ blocks: seqA, length: 6 }], 6).data.every((x) => x === 0)).toBe(true);
    });
  }

  it('scatter takes the new positions after the past and never writes into full blocks', () => {
    const kv = new PagedKvCache({ numLayers: 1, numKvHeads: H, headDim: D, numBlocks: 4, blockSize: BS, dtype: 'fp32' });
    // Positions 3..5 of a sequence whose first block is full (shared): only 4 and 5 land (in block 1).
    const blocks = [block(0, true), block(1)];
    kv.scatter(0, 'key', present(1, 2 + 3, 'fp32'), 2, [{ blocks, from: 3, count: 3 }]);
    const past = kv.gather(0, 'key', [{ blocks, length: 6 }], 6);
    expect(at(past, 0, 1, 3, 2)).toBe(0);
    expect(at(past, 0, 1, 4, 2)).toBe(code(0, 1, 3, 2));
    expect(at(past, 0, 1, 5, 2)).toBe(code(0, 1, 4, 2));
  });

  it('refuses a present that does not fit and a past longer than its blocks (internal)', () => {
    const kv = new PagedKvCache({ numLayers: 1, numKvHeads: H, headDim: D, numBlocks: 4, blockSize: BS, dtype: 'fp16' });
    const rows = [{ blocks: [block(0)], from: 0, count: 2 }];
    const fail = (fn: () => unknown): string => {
      try {
        fn();
      } catch (e) {
        expect(e).toBeInstanceOf(SwitchyardError);
        expect((e as SwitchyardError).code).toBe('internal');
        return (e as SwitchyardError).message;
      }
      throw new Error('did not throw');
    };
    expect(fail(() => kv.scatter(0, 'key', present(1, 2, 'fp32'), 0, rows))).toMatch(/float32 present/);
    expect(fail(() => kv.scatter(0, 'key', present(1, 1, 'fp16'), 0, rows))).toMatch(/writes 2 tokens/);
    expect(fail(() => kv.scatter(0, 'key', present(1, 8, 'fp16'), 0, [{ blocks: [block(0)], from: 2, count: 4 }]))).toMatch(/1 blocks/);
    expect(fail(() => kv.gather(0, 'key', [{ blocks: [block(0)], length: 5 }], 5))).toMatch(/5 tokens, 1 blocks/);
    expect(() => new PagedKvCache({ numLayers: 0, numKvHeads: H, headDim: D, numBlocks: 4, blockSize: BS, dtype: 'fp16' })).toThrow(/numLayers/);
  });

  it('reports its size', () => {
    const kv = new PagedKvCache({ numLayers: 3, numKvHeads: H, headDim: D, numBlocks: 10, blockSize: BS, dtype: 'fp16' });
    expect(kv.byteSize).toBe(3 * 2 * 10 * H * BS * D * 2);
  });

  it('writeBlock takes bytes at any offset, a Node Buffer view too (its own slice is not a copy)', () => {
    for (const dtype of ['fp32', 'fp16'] as const) {
      const kv = new PagedKvCache({ numLayers: 2, numKvHeads: H, headDim: D, numBlocks: 4, blockSize: BS, dtype });
      const esz = dtype === 'fp16' ? 2 : 4;
      const n = kv.bytesPerBlock / esz;
      const elements = dtype === 'fp16' ? new Uint16Array(n).map((_, i) => 0x3c00 + (i % 64)) : new Float32Array(n).map((_, i) => i / 8);
      const bytes = new Uint8Array(elements.buffer);
      // the block one byte into a received frame, as the TCP plane hands it over
      const frame = Buffer.alloc(kv.bytesPerBlock + 1);
      frame.set(bytes, 1);
      kv.writeBlock(2, frame.subarray(1));
      expect(kv.readBlock(2)).toEqual(bytes);
    }
  });
});
