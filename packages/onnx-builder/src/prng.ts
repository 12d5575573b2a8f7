/**
 * Seeded pseudo-random numbers for model weights: the same seed gives the same sequence on every
 * host and run, so generated .onnx files are byte-for-byte reproducible.
 */

/** mulberry32: a 32-bit-state PRNG; returns a function yielding floats in [0, 1). */
export function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** `count` floats uniform in [-limit, limit), rounded to float32, drawn from `next`. */
export function uniformFloats(next: () => number, count: number, limit: number): Float32Array {
  const out = new Float32Array(count);
  for (let i = 0; i < count; i++) out[i] = (next() * 2 - 1) * limit;
  return out;
}
