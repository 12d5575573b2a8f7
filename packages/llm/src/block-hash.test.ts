import { xxhash3 } from 'hash-wasm';
import { describe, expect, it } from 'vitest';
import {
  blockHashFromBigInt,
  blockHashFromHalves,
  blockHashToBigInt,
  chainHashInto,
  chainSequenceHash,
  hashTokenBlock,
  hashTokenBlockInto,
  hashTokenBlocks,
  type SequenceHash,
} from './block-hash.js';

const tokens = (n: number, base = 0): number[] => Array.from({ length: n }, (_, i) => (base + i * 2654435761) >>> 0);

/** Dynamo's definition, computed independently with hash-wasm (the C implementation). */
async function reference(toks: number[], blockSize: number): Promise<{ local: string[]; seq: string[] }> {
  const local: string[] = [];
  const seq: string[] = [];
  for (let b = 0; b + blockSize <= toks.length; b += blockSize) {
    const bytes = new Uint8Array(blockSize * 4);
    const v = new DataView(bytes.buffer);
    for (let i = 0; i < blockSize; i++) v.setUint32(4 * i, toks[b + i]!, true);
    const l = await xxhash3(bytes, 1337, 0);
    local.push(l);
    if (seq.length === 0) {
      seq.push(l);
    } else {
      const chain = new Uint8Array(16);
      const cv = new DataView(chain.buffer);
      cv.setBigUint64(0, BigInt('0x' + seq[seq.length - 1]!), true);
      cv.setBigUint64(8, BigInt('0x' + l), true);
      seq.push(await xxhash3(chain, 1337, 0));
    }
  }
  return { local, seq };
}

describe('hashTokenBlocks', () => {
  it('follows the Dynamo definition for the common block sizes', async () => {
    for (const blockSize of [1, 8, 16, 32, 64, 128, 256]) {
      const toks = tokens(blockSize * 5 + 3, blockSize);
      const got = hashTokenBlocks(toks, blockSize);
      const want = await reference(toks, blockSize);
      expect(got.localHashes).toEqual(want.local);
      expect(got.sequenceHashes).toEqual(want.seq);
    }
  });

  it('ignores a partial tail and returns nothing for a short prompt', () => {
    expect(hashTokenBlocks(tokens(15), 16)).toEqual({ localHashes: [], sequenceHashes: [] });
    expect(hashTokenBlocks(tokens(40), 16).sequenceHashes).toEqual(hashTokenBlocks(tokens(32), 16).sequenceHashes);
  });

  it('continues a chain from a parent exactly as hashing the whole sequence', () => {
    const toks = tokens(16 * 6);
    const whole = hashTokenBlocks(toks, 16);
    const head = hashTokenBlocks(toks.slice(0, 48), 16);
    const tail = hashTokenBlocks(toks.slice(48), 16, head.sequenceHashes[2]!);
    expect([...head.sequenceHashes, ...tail.sequenceHashes]).toEqual(whole.sequenceHashes);
    expect(chainSequenceHash(whole.sequenceHashes[0]!, whole.localHashes[1]!)).toBe(whole.sequenceHashes[1]);
  });

  it('gives the same block content different sequence hashes under different prefixes', () => {
    const a = hashTokenBlocks([...tokens(16, 1), ...tokens(16, 9)], 16);
    const b = hashTokenBlocks([...tokens(16, 2), ...tokens(16, 9)], 16);
    expect(a.localHashes[1]).toBe(b.localHashes[1]);
    expect(a.sequenceHashes[1]).not.toBe(b.sequenceHashes[1]);
  });

  it('hashes into u32 halves (a Uint32Array in place, at its offset) and chains them exactly as the string forms', () => {
    const toks = tokens(16 * 4 + 5, 3);
    const want = hashTokenBlocks(toks, 16);
    const backing = new Uint32Array(toks.length + 3);
    backing.set(toks, 3);
    const h = new Uint32Array(4);
    for (const src of [backing.subarray(3), toks]) {
      let prev: [number, number] | null = null;
      for (let b = 0; b < 4; b++) {
        hashTokenBlockInto(h, 0, src, 16 * b, 16);
        expect(blockHashFromHalves(h[0]!, h[1]!)).toBe(want.localHashes[b]);
        if (prev !== null) chainHashInto(h, 2, prev[0], prev[1], h[0]!, h[1]!);
        else h.copyWithin(2, 0, 2);
        expect(blockHashFromHalves(h[2]!, h[3]!)).toBe(want.sequenceHashes[b]);
        prev = [h[2]!, h[3]!];
      }
      expect(() => hashTokenBlockInto(h, 0, src, 16 * 4, 16)).toThrow(RangeError);
    }
    expect(() => hashTokenBlockInto(h, 0, [1, -1], 0, 2)).toThrow(RangeError);
    // a parent that is not 16 lower-case hex digits chains as parseInt reads its halves
    const odd = 'ABCDEF0123456789' as SequenceHash;
    chainHashInto(h, 2, 0xabcdef01, 0x23456789, 0, 0);
    expect(chainSequenceHash(odd, blockHashFromHalves(0, 0))).toBe(blockHashFromHalves(h[2]!, h[3]!));
  });

  it('round-trips through bigint, wrapping signed i64', () => {
    const h = hashTokenBlocks(tokens(16), 16).sequenceHashes[0]!;
    expect(h).toMatch(/^[0-9a-f]{16}$/);
    expect(blockHashFromBigInt(blockHashToBigInt(h))).toBe(h);
    expect(blockHashFromBigInt<SequenceHash>(-1n)).toBe('ffffffffffffffff');
  });

  it('rejects tokens that are not u32 and bad block sizes (caller bugs)', () => {
    expect(() => hashTokenBlocks([1, -1], 2)).toThrow(RangeError);
    expect(() => hashTokenBlocks([1, 2 ** 32], 2)).toThrow(RangeError);
    expect(() => hashTokenBlocks([1, 1.5], 2)).toThrow(RangeError);
    expect(() => hashTokenBlocks([1, 2], 0)).toThrow(RangeError);
    expect(() => hashTokenBlock([1, 2], 1, 2)).toThrow(RangeError);
  });

  it('is fast enough for a scheduler step (prints throughput; never fails on timing)', () => {
    const toks = tokens(64 * 1024);
    for (const blockSize of [16, 64]) {
      const t0 = performance.now();
      const r = hashTokenBlocks(toks, blockSize);
      const ms = performance.now() - t0;
      console.log(`hashTokenBlocks: ${toks.length} tokens, block ${blockSize}: ${ms.toFixed(1)} ms ` +
        `(${((toks.length / ms) * 1000 / 1e6).toFixed(2)} M tokens/s)`);
      expect(r.sequenceHashes.length).toBe(toks.length / blockSize);
    }
  });
});
