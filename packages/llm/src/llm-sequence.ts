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

import { invalidArgument } from '@switchyard/common';
import { hashTokenBlocks } from './block-hash.js';
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

export class LlmSequence {
  readonly requestId: string;
  readonly promptLength: number;
  /** The prompt, copied and frozen at construction (safe to hand to executors). */
  readonly promptTokenIds: readonly number[];
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
  /** Prompt then generated tokens; grows with every sampled token (only the scheduler appends). */
  readonly tokens: number[];
  status: SequenceStatus = 'waiting';
  finishReason: FinishReason | null = null;
  /** Tokens whose KV is computed (or taken from the prefix cache). */
  numComputedTokens = 0;
  /** Blocks held, in order; all full except possibly the last. Owned: freed exactly once. */
  blocks: BlockRef[] = [];
  /** Tokens found in the prefix cache at the last admission (for metrics and tests). */
  numCachedTokens = 0;
  numPreemptions = 0;
  /** Full-block hashes of `tokens`, one per full block. */
  private readonly specs: FullBlockSpec[] = [];

  constructor(request: LlmRequest, blockSize: number, now: number) {
    const { requestId, promptTokenIds, maxTokens } = request;
    if (promptTokenIds.length === 0) throw invalidArgument(`request ${requestId}: empty prompt`);
    if (!Number.isSafeInteger(maxTokens) || maxTokens < 1) {
      throw invalidArgument(`request ${requestId}: max_tokens must be a positive integer, got ${maxTokens}`);
    }
    this.requestId = requestId;
    this.promptLength = promptTokenIds.length;
    this.promptTokenIds = Object.freeze([...promptTokenIds]);
    this.maxTokens = request.prefillOnly === true ? 1 : maxTokens;
    this.eosTokenIds = new Set(request.eosTokenIds ?? []);
    this.minTokens = request.sampling?.min_tokens ?? 0;
    this.prefillOnly = request.prefillOnly ?? false;
    this.arrivalTime = request.arrivalTime ?? now;
    this.blockSize = blockSize;
    this.sampling = request.sampling;
    this.priorOutputTokenIds = Object.freeze([...(request.outputTokenIds ?? [])]);
    if (this.priorOutputTokenIds.length >= this.maxTokens) {
      throw invalidArgument(`request ${requestId}: ${this.priorOutputTokenIds.length} prior output tokens leave nothing to generate under max_tokens ${this.maxTokens}`);
    }
    this.tokens = [...promptTokenIds, ...this.priorOutputTokenIds];
    this.extendHashes();
  }

  get numTokens(): number {
    return this.tokens.length;
  }

  get numOutputTokens(): number {
    return this.tokens.length - this.promptLength;
  }

  get outputTokenIds(): number[] {
    return this.tokens.slice(this.promptLength);
  }

  /** Hashes (block-manager specs) of every full block of `tokens`, in order. */
  fullBlockSpecs(): readonly FullBlockSpec[] {
    return this.specs;
  }

  /** Append a sampled token; returns the finish reason it causes, if any (does not change status). */
  appendToken(token: number): FinishReason | null {
    this.tokens.push(token);
    this.extendHashes();
    if (this.eosTokenIds.has(token) && this.numOutputTokens >= this.minTokens) return 'stop';
    if (this.numOutputTokens >= this.maxTokens) return 'length';
    return null;
  }

  private extendHashes(): void {
    const bs = this.blockSize;
    const full = Math.floor(this.tokens.length / bs);
    if (full <= this.specs.length) return;
    const parent = this.specs.length === 0 ? null : this.specs[this.specs.length - 1]!.sequenceHash;
    const fresh = this.tokens.slice(this.specs.length * bs, full * bs);
    const h = hashTokenBlocks(fresh, bs, parent);
    for (let i = 0; i < h.sequenceHashes.length; i++) {
      this.specs.push({ sequenceHash: h.sequenceHashes[i]!, localHash: h.localHashes[i]! });
    }
  }
}
