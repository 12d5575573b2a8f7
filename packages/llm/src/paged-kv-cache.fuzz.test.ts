/**
 * Fuzz properties of PagedKvCache's block bytes (KV transfer): for any geometry and dtype, a block
 * written from finite elements reads back byte for byte, lands in exactly its slot, in the documented
 * order (layer l's keys are what `gather` returns for that layer); any other byte string is written
 * whole or refused with invalid_argument, changing nothing.
 */
import { describe, expect, it } from 'vitest';
import { SwitchyardError } from '@switchyard/common';
import { fc, fuzz } from '@switchyard/testing/fuzz';
import { PagedKvCache, type KvDtype } from './paged-kv-cache.js';
import type { BlockId } from './kv-block-manager.js';

const geometry = fc.record({
  numLayers: fc.integer({ min: 1, max: 3 }),
  numKvHeads: fc.integer({ min: 1, max: 3 }),
  headDim: fc.integer({ min: 1, max: 4 }),
  blockSize: fc.integer({ min: 1, max: 4 }),
  numBlocks: fc.integer({ min: 1, max: 4 }),
  dtype: fc.constantFrom<KvDtype>('fp32', 'fp16'),
});

/** `count` finite elements of `dtype` as little-endian bytes. */
function finiteBytes(dtype: KvDtype, count: number): fc.Arbitrary<Uint8Array> {
  if (dtype === 'fp16') {
    return fc
      .array(fc.integer({ min: 0, max: 0xffff }).filter((h) => (h & 0x7c00) !== 0x7c00), { minLength: count, maxLength: count })
      .map((a) => new Uint8Array(Uint16Array.from(a).buffer));
  }
  return fc
    .array(fc.float({ noNaN: true, noDefaultInfinity: true }), { minLength: count, maxLength: count })
    .map((a) => new Uint8Array(Float32Array.from(a).buffer));
}

const elementBytes = (d: KvDtype): number => (d === 'fp16' ? 2 : 4);

describe('PagedKvCache block bytes (fuzz)', () => {
  it('a block of finite elements round-trips into exactly its slot, in the documented order', () => {
    const input = geometry.chain((g) =>
      fc.record({
        g: fc.constant(g),
        slot: fc.integer({ min: 0, max: g.numBlocks - 1 }),
        bytes: finiteBytes(g.dtype, g.numLayers * 2 * g.numKvHeads * g.blockSize * g.headDim),
        offset: fc.integer({ min: 0, max: 3 }),
      }),
    );
    fuzz(input, ({ g, slot, bytes, offset }) => {
      const kv = new PagedKvCache(g);
      expect(bytes.byteLength).toBe(kv.bytesPerBlock);
      // an unaligned view (a network buffer) is accepted like an aligned one
      const shifted = new Uint8Array(bytes.byteLength + offset);
      shifted.set(bytes, offset);
      kv.writeBlock(slot, shifted.subarray(offset));
      expect(Buffer.from(kv.readBlock(slot)).equals(Buffer.from(bytes))).toBe(true);
      for (let s = 0; s < g.numBlocks; s++) if (s !== slot) expect(kv.readBlock(s).every((b) => b === 0)).toBe(true);
      // layer l's keys, then (after every layer's keys) its values: what gather reads for that layer
      const part = g.numKvHeads * g.blockSize * g.headDim * elementBytes(g.dtype);
      const rows = [{ blocks: [{ id: 'x' as BlockId, slot, full: true }], length: g.blockSize }];
      for (let l = 0; l < g.numLayers; l++) {
        for (const [kind, at] of [['key', l * part], ['value', (g.numLayers + l) * part]] as const) {
          const t = kv.gather(l, kind, rows, g.blockSize);
          const got = new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength);
          expect(Buffer.from(got).equals(Buffer.from(bytes.subarray(at, at + part)))).toBe(true);
        }
      }
    });
  });

  it('any byte string is written whole or refused with invalid_argument, changing nothing', () => {
    const input = geometry.chain((g) =>
      fc.record({
        g: fc.constant(g),
        slot: fc.integer({ min: 0, max: g.numBlocks - 1 }),
        bytes: fc.uint8Array({ maxLength: g.numLayers * 2 * g.numKvHeads * g.blockSize * g.headDim * 4 + 4 }),
      }),
    );
    fuzz(input, ({ g, slot, bytes }) => {
      const kv = new PagedKvCache(g);
      try {
        kv.writeBlock(slot, bytes);
        expect(Buffer.from(kv.readBlock(slot)).equals(Buffer.from(bytes))).toBe(true);
      } catch (e) {
        expect(e).toBeInstanceOf(SwitchyardError);
        expect((e as SwitchyardError).code).toBe('invalid_argument');
        expect(kv.checkBlockBytes(bytes)).toBeDefined();
        expect(kv.readBlock(slot).every((b) => b === 0)).toBe(true);
      }
    });
  });
});
