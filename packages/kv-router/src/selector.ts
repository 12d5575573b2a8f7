/**
 * The scoring and selection math of KV-aware routing, pure. The Redis implementation's Lua script
 * (@switchyard/runtime redis-routing-scripts.ts) mirrors it step for step; both are held to the same
 * conformance suite.
 *
 * Algorithm, for a request (promptTokens, blockSize, overlapWeight, temperature, random, scoring) and
 * candidates c_1..c_n in the caller's order, each with overlap o_i (leading prompt blocks it holds),
 * reserved load (activeBlocks a_i, pending prefill tokens p_i) and indexed block count (tree size) s_i:
 *
 *   requestBlocks = ceil(promptTokens / blockSize)
 *   kv:   prefillBlocks_i = (p_i + max(promptTokens − o_i·blockSize, 0)) / blockSize
 *         decodeBlocks_i  = a_i + max(requestBlocks − o_i, 0)
 *         cost_i          = overlapWeight · prefillBlocks_i + decodeBlocks_i
 *   load: cost_i          = a_i + p_i / blockSize          (prefill/decode blocks reported as in kv)
 *
 *   temperature 0:  the candidates with the minimal cost; among them those with the minimal s_i; among
 *                   those (m of them, in candidate order) the one at index floor(random · m).
 *   temperature T:  if all costs are equal, index floor(random · n); else weights
 *                   w_i = exp(−(cost_i − min) / ((max − min) · T)), and walking candidates in order,
 *                   the first i whose cumulative weight exceeds random · Σw (the last one if rounding
 *                   leaves none).
 *
 * Costs are compared exactly (no epsilon): both implementations compute them with the same double
 * arithmetic in the same order.
 */
import type { WorkerScore } from './routing-table.js';

/** One candidate's inputs to scoring. */
export interface CandidateState {
  readonly worker: string;
  readonly overlapBlocks: number;
  readonly activeBlocks: number;
  readonly prefillTokens: number;
  /** Indexed blocks of the worker (tie break: the emptier cache wins). */
  readonly treeSize: number;
}

export interface ScoringInput {
  readonly promptTokens: number;
  readonly blockSize: number;
  readonly overlapWeight: number;
  readonly scoring: 'kv' | 'load';
}

/** The score of one candidate (see the header for the formulas). */
export function scoreCandidate(c: CandidateState, r: ScoringInput): WorkerScore {
  const requestBlocks = Math.ceil(r.promptTokens / r.blockSize);
  const uncachedTokens = Math.max(r.promptTokens - c.overlapBlocks * r.blockSize, 0);
  const prefillBlocks = (c.prefillTokens + uncachedTokens) / r.blockSize;
  const decodeBlocks = c.activeBlocks + Math.max(requestBlocks - c.overlapBlocks, 0);
  const cost = r.scoring === 'load' ? c.activeBlocks + c.prefillTokens / r.blockSize : r.overlapWeight * prefillBlocks + decodeBlocks;
  return { worker: c.worker, overlapBlocks: c.overlapBlocks, prefillBlocks, decodeBlocks, cost };
}

/**
 * Index of the chosen candidate. `scores[i]` and `treeSizes[i]` belong to candidate i; `random` is
 * uniform in [0, 1). Throws RangeError on an empty list (a caller bug: the table checks first).
 */
export function chooseCandidate(scores: readonly WorkerScore[], treeSizes: readonly number[], temperature: number, random: number): number {
  const n = scores.length;
  if (n === 0) throw new RangeError('chooseCandidate: no candidates');
  let min = Infinity;
  let max = -Infinity;
  for (const s of scores) {
    if (s.cost < min) min = s.cost;
    if (s.cost > max) max = s.cost;
  }
  if (temperature > 0) {
    if (max === min) return Math.min(n - 1, Math.floor(random * n));
    const weights = new Array<number>(n);
    let total = 0;
    for (let i = 0; i < n; i++) {
      weights[i] = Math.exp(-(scores[i]!.cost - min) / ((max - min) * temperature));
      total += weights[i]!;
    }
    const target = random * total;
    let acc = 0;
    for (let i = 0; i < n; i++) {
      acc += weights[i]!;
      if (acc > target) return i;
    }
    return n - 1;
  }
  let minTree = Infinity;
  for (let i = 0; i < n; i++) if (scores[i]!.cost === min && treeSizes[i]! < minTree) minTree = treeSizes[i]!;
  const tied: number[] = [];
  for (let i = 0; i < n; i++) if (scores[i]!.cost === min && treeSizes[i] === minTree) tied.push(i);
  return tied[Math.min(tied.length - 1, Math.floor(random * tied.length))]!;
}
