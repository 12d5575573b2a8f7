/**
 * Pure steps from a model's hidden states to a sentence embedding, as sentence-transformers' `Pooling`
 * and `Normalize` modules compute them and vLLM's pooler reproduces: pooling over the attended tokens
 * of one sequence, Matryoshka truncation, L2 normalisation. Float32 in, Float64 arithmetic, Float32 out.
 */

/** sentence-transformers' `pooling_mode_*` flags this backend serves (one per model). */
export type PoolingMode = 'cls' | 'mean' | 'max' | 'lasttoken';
export const POOLING_MODES: readonly PoolingMode[] = ['cls', 'mean', 'max', 'lasttoken'];

/**
 * Pool one sequence of `hidden` [seq × width] (row-major, `offset` = its first element) whose first
 * `length` tokens are attended (right padding beyond). `length` >= 1.
 */
export function poolSequence(mode: PoolingMode, hidden: Float32Array, offset: number, length: number, width: number): Float32Array {
  const out = new Float32Array(width);
  switch (mode) {
    case 'cls':
      out.set(hidden.subarray(offset, offset + width));
      return out;
    case 'lasttoken':
      out.set(hidden.subarray(offset + (length - 1) * width, offset + length * width));
      return out;
    case 'mean': {
      const sum = new Float64Array(width);
      for (let t = 0; t < length; t++) {
        const base = offset + t * width;
        for (let i = 0; i < width; i++) sum[i]! += hidden[base + i]!;
      }
      for (let i = 0; i < width; i++) out[i] = sum[i]! / length;
      return out;
    }
    case 'max': {
      out.set(hidden.subarray(offset, offset + width));
      for (let t = 1; t < length; t++) {
        const base = offset + t * width;
        for (let i = 0; i < width; i++) if (hidden[base + i]! > out[i]!) out[i] = hidden[base + i]!;
      }
      return out;
    }
  }
}

/** Keep the first `dimensions` values (Matryoshka truncation); `undefined`: all. */
export function truncateEmbedding(v: Float32Array, dimensions: number | undefined): Float32Array {
  return dimensions === undefined || dimensions >= v.length ? v : v.slice(0, dimensions);
}

/** L2-normalise in place (torch's `F.normalize`: the norm is clamped at 1e-12, so a zero vector stays zero). */
export function normalizeEmbedding(v: Float32Array): Float32Array {
  let sq = 0;
  for (const x of v) sq += x * x;
  const norm = Math.max(Math.sqrt(sq), 1e-12);
  for (let i = 0; i < v.length; i++) v[i] = v[i]! / norm;
  return v;
}
