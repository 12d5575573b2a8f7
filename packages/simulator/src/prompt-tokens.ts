/**
 * Prompt token ids for a trace request. A trace names blocks by id (`hash_ids`), not tokens; the
 * router and the engine hash tokens (`hashTokenBlocks`). So each trace block id stands for a fixed
 * run of `traceBlockSize` tokens, a pure function of the id: two requests that share leading block
 * ids share those leading tokens, and every engine block size sees the sharing the trace meant.
 * Tokens past the named blocks are the request's own (drawn from its index), never shared.
 */
import type { TraceRequest } from './trace.js';

/** A 32-bit mix of (a, b) (murmur3's finaliser over a combination). */
function mix(a: number, b: number): number {
  let h = Math.imul(a ^ 0x9e3779b9, 0x85ebca6b) ^ Math.imul(b + 0x7f4a7c15, 0xc2b2ae35);
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  return (h ^ (h >>> 16)) >>> 0;
}

/**
 * The prompt of `request` (the `index`-th of its trace): `inputLength` ids in [0, vocabSize).
 * Shared-block tokens and own tokens come from disjoint streams (salted differently).
 */
export function promptTokens(request: TraceRequest, index: number, traceBlockSize: number, vocabSize: number): number[] {
  const out = new Array<number>(request.inputLength);
  const own = mix(mix(index, 0x5eed), Math.floor(index / 0x1_0000_0000));
  let salt = 0;
  for (let p = 0; p < request.inputLength; p++) {
    const offset = p % traceBlockSize;
    if (offset === 0) {
      const id = request.hashIds[p / traceBlockSize];
      salt = id === undefined ? own : mix(id, Math.floor(id / 0x1_0000_0000));
    }
    // An own block's tokens run on from the prompt position, a shared block's restart per block.
    out[p] = mix(salt, salt === own ? p : offset) % vocabSize;
  }
  return out;
}
