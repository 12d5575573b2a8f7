// LlmSequence: one generation request as the LLM scheduler sees it (vLLM v1 `Request`, Dynamo mocker
// `ActiveSequence`). Pure state; the scheduler (llm-scheduler.ts) is the only writer.
//
// One idea instead of prefill/decode modes (vLLM v1): `numComputedTokens` catches up to `numTokens`
// (prompt + generated so far). A step schedules some of the missing tokens; when a step brings the
// sequence level with `numTokens`, the executor samples one new token, which makes it one behind again.
// A long prompt therefore takes several steps (chunked prefill), a decode step computes exactly one
// token, and a preempted sequence simply restarts from 0 (recompute) over prompt AND output tokens.
//
// Hashes of the full token blocks are kept incrementally (block-hash.ts), so the scheduler can look up
// the prefix cache and hand full blocks to the block manager without rehashing.
//
// Storage: the tokens live once, in one Uint32Array sized for the prompt and the output to come (grown
// if a long output outruns it), so a block is hashed in place (on little-endian hosts), appending
// never copies the prompt, and `promptTokenIds` is built only when someone asks for it.

import { invalidArgument } from '@switchyard/common';
import { blockHashFromHalves, chainHashInto, hashTokenBlockInto, type LocalBlockHash, type SequenceHash } from './block-hash.js';
import type { CompiledSamplingParams } from './sampling-params.js';
import type { FinishReason } from './stop-checker.js';
import type { BlockRef, FullBlockSpec } from './kv-block-manager.js';

/**
 * Lifecycle. Transitions (all made by LlmScheduler):
 *   waiting   → running    admitted by `schedule()` (blocks allocated for its first chunk)
 *   running   → preempted  blocks ran out; its blocks are freed and it goes to the FRONT of waiting
 *   preempted → running    re-admitted; recomputes from its cached prefix (recompute, not swap)
 *   running   → finished   `update()` saw max_tokens, EOS, or the first token of a prefill-only request
 *   waiting | preempted | running → finished   `abort()`
 */
export type SequenceStatus = 'waiting' | 'running' | 'preempted' | 'finished';

/** What a caller submits. Minimal sampling: only max_tokens and EOS matter to the scheduler. */
export interface LlmRequest {
  readonly requestId: string;
  readonly promptTokenIds: readonly number[];
  /** Maximum generated tokens, >= 1. */
  readonly maxTokens: number;
  /**
   * Token ids that end generation (the EOS token is produced and counted, then generation stops);
   * not before `sampling.min_tokens` output tokens.
   */
  readonly eosTokenIds?: readonly number[];
  /**
   * Disaggregation: compute the prompt's KV, sample one token, finish (reason 'length'). The scheduler
   * then pins the prompt's full blocks (SequenceOutput.pinnedBlocks) before it frees the sequence's.
   */
  readonly prefillOnly?: boolean;
  /**
   * Tokens generated before this request reached this engine (disaggregation's first token, a migrated
   * stream): the sequence starts as prompt + these; they count as output (`maxTokens` includes them).
   */
  readonly outputTokenIds?: readonly number[];
  /** Arrival time in ms on the engine's clock; default: when added. */
  readonly arrivalTime?: number;
  /** How the executor picks tokens; absent = greedy. Only executors that sample read it. */
  readonly sampling?: CompiledSamplingParams;
}

/** Shared by every sequence without prior output tokens or end ids (frozen / never written). */
const NO_TOKENS: readonly number[] = Object.freeze([]);
const NO_END_IDS: ReadonlySet<number> = new Set<number>();
/** Output tokens room is made for up front, beyond the prompt (more grows the buffer). */
const INITIAL_OUTPUT_ROOM = 1024;
/** Hash halves: [0, 1] a block's local hash, [2, 3] its sequence hash (synchronous use only). */
const H = new Uint32Array(4);

export class LlmSequence {
  readonly requestId: string;
  readonly promptLength: number;
  readonly maxTokens: number;
  readonly eosTokenIds: ReadonlySet<number>;
  /** Output tokens before an end id may finish the sequence (sampling.min_tokens; 0 without sampling). */
  readonly minTokens: number;
  readonly prefillOnly: boolean;
  readonly arrivalTime: number;
  readonly blockSize: number;
  readonly sampling: CompiledSamplingParams | undefined;
  /** The request's `outputTokenIds` (frozen; the same array every step): the sampler counts them. */
  readonly priorOutputTokenIds: readonly number[];
  status: SequenceStatus = 'waiting';
  finishReason: FinishReason | null = null;
  /** Tokens whose KV is computed (or taken from the prefix cache). */
  numComputedTokens = 0;
  /**
   * Blocks held, in order: the full (hashed, possibly shared) blocks first, then the private partial
   * blocks the scheduled step fills (several under chunked prefill; `update` promotes each once its tokens
   * are computed, see llm-scheduler.ts). Owned: freed exactly once.
   */
  blocks: BlockRef[] = [];
  /** Tokens found in the prefix cache at the last admission (for metrics and tests). */
  numCachedTokens = 0;
  numPreemptions = 0;
  /** Prompt then generated tokens; the first `count` are set. Only appended to. */
  private buf: Uint32Array;
  private count = 0;
  /** `promptTokenIds`, once asked for. */
  private prompt: readonly number[] | undefined;
  /** Full-block hashes of the tokens, one per full block. */
  private readonly specs: FullBlockSpec[] = [];
  /** The last full block's sequence hash as u32 halves (valid when `specs` is not empty). */
  private lastHi = 0;
  private lastLo = 0;

  /**
   * Throws invalid_argument for an empty prompt, a bad max_tokens or prior output that leaves nothing
   * to generate, and RangeError for a prompt or prior token that is not a u32 integer.
   */
  constructor(request: LlmRequest, blockSize: number, now: number) {
    const { requestId, promptTokenIds, maxTokens } = request;
    if (promptTokenIds.length === 0) throw invalidArgument(`request ${requestId}: empty prompt`);
    if (!Number.isSafeInteger(maxTokens) || maxTokens < 1) {
      throw invalidArgument(`request ${requestId}: max_tokens must be a positive integer, got ${maxTokens}`);
    }
    this.requestId = requestId;
    this.promptLength = promptTokenIds.length;
    this.maxTokens = request.prefillOnly === true ? 1 : maxTokens;
    const eos = request.eosTokenIds;
    this.eosTokenIds = eos === undefined || eos.length === 0 ? NO_END_IDS : new Set(eos);
    this.minTokens = request.sampling?.min_tokens ?? 0;
    this.prefillOnly = request.prefillOnly ?? false;
    this.arrivalTime = request.arrivalTime ?? now;
    this.blockSize = blockSize;
    this.sampling = request.sampling;
    const prior = request.outputTokenIds;
    this.priorOutputTokenIds = prior === undefined || prior.length === 0 ? NO_TOKENS : Object.freeze([...prior]);
    if (this.priorOutputTokenIds.length >= this.maxTokens) {
      throw invalidArgument(`request ${requestId}: ${this.priorOutputTokenIds.length} prior output tokens leave nothing to generate under max_tokens ${this.maxTokens}`);
    }
    const room = Math.min(this.maxTokens, INITIAL_OUTPUT_ROOM);
    this.buf = new Uint32Array(this.promptLength + room);
    this.count = copyTokens(this.buf, 0, promptTokenIds);
    this.count = copyTokens(this.buf, this.count, this.priorOutputTokenIds);
    this.extendHashes();
  }

  get numTokens(): number {
    return this.count;
  }

  get numOutputTokens(): number {
    return this.count - this.promptLength;
  }

  /** The prompt, frozen (safe to hand to executors): the same array every time. */
  get promptTokenIds(): readonly number[] {
    return (this.prompt ??= Object.freeze(this.tokenIds(0, this.promptLength)));
  }

  get outputTokenIds(): number[] {
    return this.tokenIds(this.promptLength, this.count);
  }

  /** A new array of tokens [from, to) (clamped to the tokens there are), as `Array.prototype.slice`. */
  tokenIds(from: number, to: number): number[] {
    const end = Math.min(to, this.count);
    const n = Math.max(0, end - from);
    const out = new Array<number>(n);
    const buf = this.buf;
    for (let i = 0; i < n; i++) out[i] = buf[from + i]!;
    return out;
  }

  /** Token at position `i` (0 <= i < numTokens). */
  tokenAt(i: number): number {
    return this.buf[i]!;
  }

  /** Hashes (block-manager specs) of every full block of the tokens, in order. */
  fullBlockSpecs(): readonly FullBlockSpec[] {
    return this.specs;
  }

  /**
   * Append a sampled token; returns the finish reason it causes, if any (does not change status).
   * Throws RangeError if `token` is not a u32 integer (an executor bug).
   */
  appendToken(token: number): FinishReason | null {
    if (token >>> 0 !== token) throw new RangeError(`token ${token} at ${this.count} is not a u32`);
    if (this.count === this.buf.length) this.grow();
    this.buf[this.count++] = token;
    if (this.count % this.blockSize === 0) this.extendHashes();
    if (this.eosTokenIds.has(token) && this.numOutputTokens >= this.minTokens) return 'stop';
    if (this.numOutputTokens >= this.maxTokens) return 'length';
    return null;
  }

  /** Room for the remaining output (or twice the room there was, whichever is less). */
  private grow(): void {
    const most = this.promptLength + this.maxTokens;
    const next = new Uint32Array(Math.max(this.count + 1, Math.min(most, 2 * this.buf.length)));
    next.set(this.buf.subarray(0, this.count));
    this.buf = next;
  }

  private extendHashes(): void {
    const bs = this.blockSize;
    const full = Math.floor(this.count / bs);
    const specs = this.specs;
    for (let i = specs.length; i < full; i++) {
      hashTokenBlockInto(H, 0, this.buf, i * bs, bs);
      const lh = H[0]!;
      const ll = H[1]!;
      const localHash = blockHashFromHalves<LocalBlockHash>(lh, ll);
      let sequenceHash: SequenceHash;
      if (i === 0) {
        this.lastHi = lh;
        this.lastLo = ll;
        sequenceHash = localHash as string as SequenceHash;
      } else {
        chainHashInto(H, 2, this.lastHi, this.lastLo, lh, ll);
        this.lastHi = H[2]!;
        this.lastLo = H[3]!;
        sequenceHash = blockHashFromHalves<SequenceHash>(this.lastHi, this.lastLo);
      }
      specs.push({ sequenceHash, localHash });
    }
  }
}

/** Copy `src` into `dst` from `at` (it has room), each checked to be a u32; returns the end position. */
function copyTokens(dst: Uint32Array, at: number, src: readonly number[]): number {
  for (let i = 0; i < src.length; i++) {
    const t = src[i]!;
    if (t >>> 0 !== t) throw new RangeError(`token ${t} at ${at + i} is not a u32`);
  }
  dst.set(src, at);
  return at + src.length;
}
