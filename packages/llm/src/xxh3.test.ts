import { xxhash3 } from 'hash-wasm';
import { describe, expect, it } from 'vitest';
import { u64Hex, xxh3_64, xxh3_64Hex, xxh3_64Into } from './xxh3.js';
import { mulberry32 } from '@switchyard/onnx-builder';

// xxHash's own sanity buffer (cli/xsum_sanity_check.c): byteGen = PRIME32, byte = byteGen >> 56,
// byteGen *= PRIME64 (mod 2^64).
const PRIME32 = 2654435761n;
const PRIME64 = 11400714785074694797n;
function sanityBuffer(size: number): Uint8Array {
  const buf = new Uint8Array(size);
  let gen = PRIME32;
  for (let i = 0; i < size; i++) {
    buf[i] = Number(gen >> 56n);
    gen = (gen * PRIME64) & ((1n << 64n) - 1n);
  }
  return buf;
}

// XSUM_XXH3_testdata (XXH3_64bits_withSeed), xxHash 0.8.x: [length, seed, expected].
const VECTORS: ReadonlyArray<readonly [number, bigint, bigint]> = [
  [0, 0n, 0x2d06800538d394c2n], [0, PRIME64, 0xa8a6b918b2f0364an],
  [1, 0n, 0xc44bdff4074eecdbn], [1, PRIME64, 0x032be332dd766ef8n],
  [6, 0n, 0x27b56a84cd2d7325n], [6, PRIME64, 0x84589c116ab59ab9n],
  [12, 0n, 0xa713daf0dfbb77e7n], [12, PRIME64, 0xe7303e1b2336de0en],
  [24, 0n, 0xa3fe70bf9d3510ebn], [24, PRIME64, 0x850e80fc35bdd690n],
  [48, 0n, 0x397da259ecba1f11n], [48, PRIME64, 0xadc2cbaa44acc616n],
  [80, 0n, 0xbcdefbbb2c47c90an], [80, PRIME64, 0xc6dd0cb699532e73n],
  [195, 0n, 0xcd94217ee362ec3an], [195, PRIME64, 0xba68003d370cb3d9n],
  [403, 0n, 0xcdeb804d65c6dea4n], [403, PRIME64, 0x6259f6ecfd6443fdn],
  [512, 0n, 0x617e49599013cb6bn], [512, PRIME64, 0x3ce457de14c27708n],
  [2048, 0n, 0xdd59e2c3a5f038e0n], [2048, PRIME64, 0x66f81670669ababcn],
  [2099, 0n, 0xc6b9d9b3fc9ac765n], [2099, PRIME64, 0x184f316843663974n],
  [2240, 0n, 0x6e73a90539cf2948n], [2240, PRIME64, 0x757ba8487d1b5247n],
  [2367, 0n, 0xcb37aeb9e5d361edn], [2367, PRIME64, 0xd2db3415b942b42an],
];


async function oracle(data: Uint8Array, seed: bigint): Promise<bigint> {
  return BigInt('0x' + (await xxhash3(data, Number(seed & 0xffffffffn), Number(seed >> 32n))));
}

describe('xxh3_64', () => {
  it('matches the xxHash sanity vectors', () => {
    const buf = sanityBuffer(2367);
    for (const [len, seed, want] of VECTORS) {
      expect(xxh3_64(buf.subarray(0, len), seed), `len ${len} seed ${seed}`).toBe(want);
    }
  });

  it('matches hash-wasm bit for bit on every length 0..300 and at block boundaries', async () => {
    const next = mulberry32(42);
    const lengths = [...Array(301).keys(), 511, 512, 513, 1023, 1024, 1025, 1087, 1088, 2047, 2048, 4097];
    for (const len of lengths) {
      const data = new Uint8Array(len).map(() => Math.floor(next() * 256));
      for (const seed of [0n, 1337n]) {
        expect(xxh3_64(data, seed), `len ${len} seed ${seed}`).toBe(await oracle(data, seed));
      }
    }
  });

  it('matches hash-wasm on random lengths, seeds and unaligned views', async () => {
    const next = mulberry32(7);
    for (let n = 0; n < 400; n++) {
      const len = Math.floor(next() * (n % 4 === 0 ? 5000 : 300));
      const seed = (BigInt(Math.floor(next() * 2 ** 32)) << 32n) | BigInt(Math.floor(next() * 2 ** 32));
      const backing = new Uint8Array(len + 3).map(() => Math.floor(next() * 256));
      const data = backing.subarray(3); // byteOffset 3: the hash must not assume alignment
      expect(xxh3_64(data, seed), `len ${len} seed ${seed}`).toBe(await oracle(data, seed));
    }
  });

  it('matches hash-wasm on extreme inputs (all-ones bytes and seeds: largest products and carries)', async () => {
    for (const len of [1, 3, 4, 8, 9, 16, 17, 100, 128, 129, 240, 241, 1024, 1500]) {
      const data = new Uint8Array(len).fill(0xff);
      for (const seed of [0n, (1n << 64n) - 1n, 1n << 63n, 0xffffffffn]) {
        expect(xxh3_64(data, seed), `len ${len} seed ${seed}`).toBe(await oracle(data, seed));
      }
    }
  });

  it('reads whole words when the range is 4-byte aligned and a multiple of 4 long: the same hash as at any other alignment', async () => {
    const next = mulberry32(13);
    const out = new Uint32Array(2);
    const lengths = [244, 256, 260, 512, 1020, 1024, 1028, 1088, 2048, 2052, 3072, 4100];
    for (const fill of ['random', 'ones'] as const) {
      for (const len of lengths) {
        const bytes = new Uint8Array(len).map(() => (fill === 'ones' ? 0xff : Math.floor(next() * 256)));
        for (const seed of [1337n, (1n << 64n) - 1n]) {
          const want = await oracle(bytes, seed);
          for (let shift = 0; shift < 4; shift++) {
            const backing = new Uint8Array(len + 8);
            backing.set(bytes, 4 + shift); // byte offset 4: aligned; 5..7: not
            xxh3_64Into(out, 0, new DataView(backing.buffer), 4 + shift, len, Number(seed >> 32n), Number(seed & 0xffffffffn));
            expect((BigInt(out[0]!) << 32n) | BigInt(out[1]!), `${fill} len ${len} shift ${shift} seed ${seed}`).toBe(want);
          }
        }
      }
    }
  });

  it('wraps negative seeds modulo 2^64', () => {
    const data = new Uint8Array([1, 2, 3, 4, 5]);
    expect(xxh3_64(data, -1n)).toBe(xxh3_64(data, (1n << 64n) - 1n));
  });

  it('xxh3_64Into hashes a range at any offset of a view, seed as halves, as xxh3_64 does', async () => {
    const next = mulberry32(11);
    const backing = new Uint8Array(6000).map(() => Math.floor(next() * 256));
    const view = new DataView(backing.buffer, 5); // an unaligned view as well
    const out = new Uint32Array(4);
    for (let n = 0; n < 300; n++) {
      const len = Math.floor(next() * (n % 3 === 0 ? 2000 : 300));
      const offset = Math.floor(next() * (view.byteLength - len));
      const seed = (BigInt(Math.floor(next() * 2 ** 32)) << 32n) | BigInt(Math.floor(next() * 2 ** 32));
      const data = backing.subarray(5 + offset, 5 + offset + len);
      const want = await oracle(data, seed);
      xxh3_64Into(out, 2, view, offset, len, Number(seed >> 32n), Number(seed & 0xffffffffn));
      expect((BigInt(out[2]!) << 32n) | BigInt(out[3]!), `len ${len} offset ${offset}`).toBe(want);
    }
    expect(() => xxh3_64Into(out, 0, view, view.byteLength - 3, 4, 0, 0)).toThrow(RangeError);
    expect(() => xxh3_64Into(out, 0, view, -1, 4, 0, 0)).toThrow(RangeError);
  });

  it('u64Hex and xxh3_64Hex print the u64 as 16 lower-case digits, zero padded', () => {
    expect(u64Hex(0, 0)).toBe('0000000000000000');
    expect(u64Hex(0xffffffff, 0xffffffff)).toBe('ffffffffffffffff');
    expect(u64Hex(0x0123abcd, 0x00ef4567)).toBe('0123abcd00ef4567');
    const data = new Uint8Array(300).map((_, i) => (i * 7) & 255);
    for (const len of [0, 5, 16, 100, 240, 300]) {
      const want = xxh3_64(data.subarray(0, len), 1337n).toString(16).padStart(16, '0');
      expect(xxh3_64Hex(new DataView(data.buffer), len, 0, 1337)).toBe(want);
    }
  });
});
