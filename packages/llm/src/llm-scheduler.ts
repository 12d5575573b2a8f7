// LlmScheduler: continuous batching over a KvBlockManager (vLLM v1 scheduler, Dynamo mocker
// scheduler.rs; shared/reference/dynamo-design.md §6.3). Pure and synchronous: no IO, no clock.
//
// Calling protocol, one engine step:
//   1. `addRequest` any time between steps (queues at the back of `waiting`).
//   2. `schedule()` once per step → SchedulerOutput: which sequences compute how many tokens this step.
//   3. the executor runs that batch and samples one token per entry whose `samples` is true.
//   4. `update(output, sampled)` exactly once with that output, before the next `schedule()` — or,
//      when the executor failed, `discardStep(output)` instead (its sequences finish with 'abort').
// `abort` may be called between steps only.
//
// Policy (vLLM v1):
//   - Running sequences first, in admission order, each taking min(missing tokens, remaining token
//     budget): a decode takes 1 token, an unfinished prompt takes a chunk (chunked prefill).
//   - Blocks for the tokens scheduled are allocated now. When the manager returns null, the NEWEST
//     running sequence is preempted (LIFO) with recompute: its blocks are freed, numComputedTokens
//     reset, and it goes to the FRONT of waiting. If the sequence being scheduled is itself the newest,
//     it is the one preempted.
//   - Then, only if nothing was preempted this step, waiting sequences are admitted in FCFS order while
//     max_num_seqs, the token budget and free blocks (minus the watermark) allow. A sequence's cached
//     prefix (findCachedPrefix) counts as computed; at least one token is always recomputed so the step
//     yields logits (vLLM does the same).
//
// KV validity: a step's blocks are allocated in `schedule()`, but only prefix-cache hits are taken as
// full (hashed, announced) blocks; the blocks the step computes are private partial blocks, promoted in
// `update()` — after the forward pass — once all their tokens are computed. So no request can hit KV
// that does not exist yet (another admission in the same step, or a step that failed: `discardStep`
// frees its partial blocks, which never reach the prefix cache). Executors write KV only into partial
// blocks; full blocks are immutable and may be shared. (A fully cached prompt still recomputes its last
// token for the logits; that token's block is a full prefix-cache hit, so its KV write is skipped.)
//
// Block lists are copy-on-write: `seq.blocks` is replaced, never changed in place, so a step's
// ScheduledSequence shares the list as it was at `schedule()` instead of copying it every step.
// In `seq.blocks` the full blocks always come first, then the partial ones.

import { internal, invalidArgument } from '@switchyard/common';
import type { BlockRef, KvBlockManager } from './kv-block-manager.js';
import { LlmSequence, type LlmRequest } from './llm-sequence.js';
import type { CompiledSamplingParams } from './sampling-params.js';
import type { FinishReason } from './stop-checker.js';

export const DEFAULT_MAX_NUM_SEQS = 256;
export const DEFAULT_MAX_NUM_BATCHED_TOKENS = 2048;
export const DEFAULT_WATERMARK = 0.01;

export interface LlmSchedulerOptions {
  /** Most sequences running at once. */
  readonly maxNumSeqs?: number;
  /** Token budget of one step, summed over all scheduled sequences. */
  readonly maxNumBatchedTokens?: number;
  /** Fraction of blocks admission keeps free for running sequences to grow into; in [0, 1). */
  readonly watermark?: number;
  /** Default true. False: a prompt must fit the remaining budget whole or wait. */
  readonly enableChunkedPrefill?: boolean;
}

/** One sequence's share of a step. A value; the scheduler does not mutate it afterwards. */
export interface ScheduledSequence {
  readonly requestId: string;
  /** Tokens to compute this step: tokens [numComputedTokens, numComputedTokens + numNewTokens). */
  readonly numNewTokens: number;
  /** Computed (or prefix-cached) tokens before this step. */
  readonly numComputedTokens: number;
  readonly tokenIds: readonly number[];
  /** Prefix-cache tokens taken at admission in this step (0 if not admitted this step). */
  readonly numCachedTokens: number;
  /** True when this step brings the sequence level with all its tokens: the executor samples one. */
  readonly samples: boolean;
  /** False for a plain decode (one token after a sampled one); true for prompt or recompute chunks. */
  readonly isPrefill: boolean;
  /**
   * The blocks holding the sequence's KV after this step's allocation, in token order (slots for a real
   * executor). Full blocks hold valid, possibly shared KV and must not be written; the partial blocks
   * are this sequence's own and take the KV of the tokens computed this step.
   */
  readonly blocks: readonly BlockRef[];
  /** The request's sampling (undefined: greedy). */
  readonly sampling: CompiledSamplingParams | undefined;
  /** The request's prompt (frozen; the same array every step), e.g. for a repetition penalty. */
  readonly promptTokenIds: readonly number[];
  /** Output tokens the request brought along (LlmRequest.outputTokenIds; frozen): a sampler counts them. */
  readonly priorOutputTokenIds: readonly number[];
  /** The ids that end the sequence (EOS unless ignore_eos, stop ids): a sampler masks them until min_tokens. */
  readonly endTokenIds: ReadonlySet<number>;
}

export interface SchedulerOutput {
  readonly step: number;
  readonly scheduled: readonly ScheduledSequence[];
  readonly numScheduledTokens: number;
  /** Sequences preempted during this step's scheduling. */
  readonly preempted: readonly string[];
  /** Active KV blocks / total after allocation (the decode timing model's u). */
  readonly kvUsage: number;
}

/** What `update` reports per sequence that got a token or finished. */
export interface SequenceOutput {
  readonly requestId: string;
  /** The token sampled in the step: always exactly one (a sequence samples at most one per step). */
  readonly newTokenIds: readonly number[];
  readonly finishReason: FinishReason | null;
  /**
   * A prefill-only sequence that finished with 'length': references on its prompt's full blocks, taken
   * before the sequence's own were freed (so nothing could evict them). The caller owns them and must
   * `free` them exactly once (a KV transfer lease). Absent otherwise.
   */
  readonly pinnedBlocks?: readonly BlockRef[];
}

export class LlmScheduler {
  readonly maxNumSeqs: number;
  readonly maxNumBatchedTokens: number;
  readonly watermark: number;
  readonly enableChunkedPrefill: boolean;
  private readonly kv: KvBlockManager;
  private readonly sequences = new Map<string, LlmSequence>();
  /** FCFS; preempted sequences are put at the front. */
  private readonly waiting: LlmSequence[] = [];
  /** Admission order; the last one is the newest (the LIFO preemption victim). */
  private readonly running: LlmSequence[] = [];
  private steps = 0;
  private inFlight: SchedulerOutput | null = null;

  constructor(kv: KvBlockManager, options: LlmSchedulerOptions = {}) {
    this.kv = kv;
    this.maxNumSeqs = options.maxNumSeqs ?? DEFAULT_MAX_NUM_SEQS;
    this.maxNumBatchedTokens = options.maxNumBatchedTokens ?? DEFAULT_MAX_NUM_BATCHED_TOKENS;
    this.watermark = options.watermark ?? DEFAULT_WATERMARK;
    this.enableChunkedPrefill = options.enableChunkedPrefill ?? true;
    for (const [k, v] of [['maxNumSeqs', this.maxNumSeqs], ['maxNumBatchedTokens', this.maxNumBatchedTokens]] as const) {
      if (!Number.isSafeInteger(v) || v <= 0) throw invalidArgument(`${k} must be a positive integer, got ${v}`);
    }
    if (!(this.watermark >= 0 && this.watermark < 1)) throw invalidArgument(`watermark must be in [0, 1), got ${this.watermark}`);
  }

  /**
   * Queue a request. Throws invalid_argument for a duplicate id or a request that could never fit the
   * KV cache (prompt + max_tokens blocks > numBlocks), which would otherwise preempt itself forever.
   */
  addRequest(request: LlmRequest, now = 0): LlmSequence {
    if (this.sequences.has(request.requestId)) throw invalidArgument(`duplicate request id ${request.requestId}`);
    const seq = new LlmSequence(request, this.kv.blockSize, now);
    const worst = Math.ceil((seq.promptLength + seq.maxTokens) / this.kv.blockSize);
    if (worst > this.kv.numBlocks) {
      throw invalidArgument(`request ${seq.requestId} needs up to ${worst} KV blocks, the cache has ${this.kv.numBlocks}`);
    }
    this.sequences.set(seq.requestId, seq);
    this.waiting.push(seq);
    return seq;
  }

  get numWaiting(): number {
    return this.waiting.length;
  }

  get numRunning(): number {
    return this.running.length;
  }

  hasUnfinished(): boolean {
    return this.waiting.length + this.running.length > 0;
  }

  getSequence(requestId: string): LlmSequence | undefined {
    return this.sequences.get(requestId);
  }

  /** Build the next step's batch (see the file header). An empty `scheduled` means nothing can run. */
  schedule(): SchedulerOutput {
    if (this.inFlight !== null) throw internal('LlmScheduler.schedule called before update of the previous step');
    let budget = this.maxNumBatchedTokens;
    const scheduled: ScheduledSequence[] = [];
    const preempted: string[] = [];

    for (let i = 0; i < this.running.length && budget > 0; i++) {
      const seq = this.running[i]!;
      const n = Math.min(seq.numTokens - seq.numComputedTokens, budget);
      if (n <= 0) throw internal(`running sequence ${seq.requestId} has nothing to compute`);
      let ok = false;
      while (!ok) {
        ok = this.ensureBlocks(seq, seq.numComputedTokens + n);
        if (ok) break;
        const victim = this.running.pop()!;
        this.preempt(victim);
        preempted.push(victim.requestId);
        if (victim === seq) break;
      }
      if (!ok) break;
      scheduled.push(this.entry(seq, n, 0, false));
      budget -= n;
    }

    while (preempted.length === 0 && this.waiting.length > 0 && budget > 0 && this.running.length < this.maxNumSeqs) {
      const seq = this.waiting[0]!;
      const bs = this.kv.blockSize;
      const cachedBlocks = this.kv.findCachedSpecs(seq.fullBlockSpecs());
      const computed = Math.min(cachedBlocks * bs, seq.numTokens - 1);
      const missing = seq.numTokens - computed;
      if (!this.enableChunkedPrefill && missing > budget) break;
      const n = Math.min(missing, budget);
      const target = computed + n;
      const newBlocks = Math.ceil(target / bs) - Math.min(cachedBlocks, Math.floor(target / bs));
      if (this.running.length > 0 && !this.kv.canAllocate(newBlocks, this.watermark)) break;
      seq.numComputedTokens = computed;
      if (!this.ensureBlocks(seq, target, cachedBlocks)) {
        seq.numComputedTokens = 0;
        break;
      }
      this.waiting.shift();
      seq.status = 'running';
      seq.numCachedTokens = computed;
      this.running.push(seq);
      scheduled.push(this.entry(seq, n, computed, true));
      budget -= n;
    }

    const out: SchedulerOutput = {
      step: this.steps++,
      scheduled,
      numScheduledTokens: this.maxNumBatchedTokens - budget,
      preempted,
      kvUsage: this.kv.usage,
    };
    this.inFlight = out;
    return out;
  }

  /**
   * Apply a step's results: advance computed tokens, append each sampled token (`sampled` must hold one
   * for every entry with `samples`), finish sequences on EOS / max_tokens / prefill-only and free their
   * blocks. Returns one SequenceOutput per sequence that got a token.
   */
  update(output: SchedulerOutput, sampled: ReadonlyMap<string, number>): SequenceOutput[] {
    if (output !== this.inFlight) throw internal('LlmScheduler.update: not the output of the last schedule()');
    this.inFlight = null;
    const results: SequenceOutput[] = [];
    const scheduled = output.scheduled;
    const bs = this.kv.blockSize;
    for (let i = 0; i < scheduled.length; i++) {
      const e = scheduled[i]!;
      // (a scheduled sequence is never preempted later in the same schedule(): victims come after it)
      const seq = sequenceOf(e); // (the entries of the last schedule() are all Scheduled)
      if (seq.status !== 'running') throw internal(`scheduled sequence ${e.requestId} is not running`);
      const before = seq.numComputedTokens;
      seq.numComputedTokens = before + e.numNewTokens;
      // Blocks below floor(before / blockSize) were full already (promoted by an earlier update, or
      // prefix-cache hits): only a step that completes a block has anything to promote.
      if (Math.floor(seq.numComputedTokens / bs) > Math.floor(before / bs)) this.promoteComputed(seq);
      if (!e.samples) continue;
      const token = sampled.get(e.requestId);
      if (token === undefined) throw internal(`executor returned no token for ${e.requestId}`);
      const reason = seq.appendToken(token);
      const pinnedBlocks = reason === 'length' && seq.prefillOnly ? this.pinPrompt(seq) : undefined;
      if (reason !== null) this.finish(seq, reason);
      results.push(new TokenOutput(seq.requestId, token, reason, pinnedBlocks));
    }
    return results;
  }

  /** Finish a request early (client went away). Between steps only. Returns false if unknown/finished. */
  abort(requestId: string): boolean {
    if (this.inFlight !== null) throw internal('LlmScheduler.abort during a step');
    const seq = this.sequences.get(requestId);
    if (seq === undefined) return false;
    this.finish(seq, 'abort');
    return true;
  }

  /**
   * The executor failed the step `output` came from: finish every sequence it scheduled with 'abort'
   * (their blocks, computed or not, are freed) and end the step, so scheduling can go on. Returns the
   * ids of those sequences. Called instead of `update`.
   */
  discardStep(output: SchedulerOutput): string[] {
    if (output !== this.inFlight) throw internal('LlmScheduler.discardStep: not the output of the last schedule()');
    this.inFlight = null;
    const ids: string[] = [];
    for (const e of output.scheduled) {
      const seq = this.sequences.get(e.requestId);
      if (seq === undefined) continue;
      this.finish(seq, 'abort');
      ids.push(e.requestId);
    }
    return ids;
  }

  /** An extra reference on each full block of `seq`'s prompt (all resident: the sequence holds them). */
  private pinPrompt(seq: LlmSequence): BlockRef[] {
    const n = Math.floor(seq.promptLength / this.kv.blockSize);
    const refs = this.kv.pin(seq.fullBlockSpecs().slice(0, n).map((s) => s.sequenceHash));
    if (refs === null) throw internal(`prefill-only sequence ${seq.requestId} does not hold its prompt blocks`);
    return refs;
  }

  /** Drop references handed out as `SequenceOutput.pinnedBlocks` (once each). */
  freePinned(refs: readonly BlockRef[]): void {
    this.kv.free(refs);
  }

  private finish(seq: LlmSequence, reason: FinishReason): void {
    remove(this.running, seq);
    remove(this.waiting, seq);
    this.kv.free(seq.blocks);
    seq.blocks = [];
    seq.status = 'finished';
    seq.finishReason = reason;
    this.sequences.delete(seq.requestId);
  }

  private preempt(seq: LlmSequence): void {
    this.kv.free(seq.blocks);
    seq.blocks = [];
    seq.numComputedTokens = 0;
    seq.status = 'preempted';
    seq.numPreemptions++;
    this.waiting.unshift(seq);
  }

  /**
   * Make `seq` hold blocks covering `target` tokens, all or nothing; false: out of blocks. Only blocks
   * whose KV already exists are taken as full blocks: at admission, the `cachedBlocks` prefix-cache
   * hits (which may include the block of a fully cached prompt's last token, recomputed for its logits
   * only); later, none (computed blocks were promoted by `update`). Every other block is allocated as a
   * private partial block, to be promoted by `update` after the forward pass that fills it.
   */
  private ensureBlocks(seq: LlmSequence, target: number, cachedBlocks = 0): boolean {
    const bs = this.kv.blockSize;
    const needTotal = Math.ceil(target / bs);
    const specs = seq.fullBlockSpecs();
    const held = seq.blocks;
    const k = held.length;
    const validBlocks = Math.min(Math.max(Math.floor(seq.numComputedTokens / bs), cachedBlocks), needTotal);
    const partial = needTotal - Math.max(k, validBlocks);
    if (k >= validBlocks && partial <= 0) return true; // (most decode steps)
    const full = k < validBlocks ? specs.slice(k, validBlocks) : [];
    const got = this.kv.allocate({ parent: k > 0 ? specs[k - 1]!.sequenceHash : null, full, partial: Math.max(partial, 0) });
    if (got === null) return false;
    seq.blocks = held.concat(got.blocks); // a new list: steps already scheduled share the old one
    return true;
  }

  /**
   * After the forward pass: every partial block of `seq` whose tokens are now all computed becomes the
   * full block of its hash (`stored` event, visible to the prefix cache), or moves onto the identical
   * resident block when another sequence computed it first.
   */
  private promoteComputed(seq: LlmSequence): void {
    const bs = this.kv.blockSize;
    const specs = seq.fullBlockSpecs();
    const held = seq.blocks;
    const done = Math.min(Math.floor(seq.numComputedTokens / bs), held.length);
    // Full blocks are a prefix of `held` (see ensureBlocks), so the partial ones to promote start
    // after the last full block below `done`.
    let first = done;
    while (first > 0 && !held[first - 1]!.full) first--;
    if (first === done) return;
    const blocks = held.slice(); // copy on write: the step's ScheduledSequence shares `held`
    for (let i = first; i < done; i++) {
      blocks[i] = this.kv.promote(held[i]!, specs[i]!, i > 0 ? specs[i - 1]!.sequenceHash : null);
    }
    seq.blocks = blocks;
  }

  private entry(seq: LlmSequence, n: number, cached: number, admitted: boolean): ScheduledSequence {
    const from = seq.numComputedTokens;
    const isPrefill = admitted || !(n === 1 && from === seq.numTokens - 1 && seq.numOutputTokens > 0);
    return new Scheduled(seq, n, from, cached, from + n === seq.numTokens, isPrefill);
  }
}

/**
 * A `SequenceOutput`: one per sampled token, so its one-token `newTokenIds` array is built only when
 * read (the replay and EngineCore never read it).
 */
class TokenOutput implements SequenceOutput {
  readonly requestId: string;
  readonly token: number;
  readonly finishReason: FinishReason | null;
  declare readonly pinnedBlocks?: readonly BlockRef[]; // (an own property only when set: it rarely is)
  #newTokenIds: readonly number[] | undefined;

  constructor(requestId: string, token: number, finishReason: FinishReason | null, pinnedBlocks: readonly BlockRef[] | undefined) {
    this.requestId = requestId;
    this.token = token;
    this.finishReason = finishReason;
    if (pinnedBlocks !== undefined) this.pinnedBlocks = pinnedBlocks;
  }

  get newTokenIds(): readonly number[] {
    return (this.#newTokenIds ??= [this.token]);
  }
}

const SAMPLES = 1;
const PREFILL = 2;

/** The sequence a `Scheduled` entry was built for (set in its static block: the field is private). */
let sequenceOf: (e: ScheduledSequence) => LlmSequence;

/**
 * A `ScheduledSequence`; `update` finds each entry's sequence through it (no lookup by id). What it reads from its sequence is fixed when it is built: the sequence's
 * tokens are only ever appended to, so `tokenIds` (tokens [numComputedTokens, + numNewTokens), which
 * exist at `schedule()`) is the same whenever it is read; it is copied out only when read (the
 * simulated executor never reads it), once.
 */
class Scheduled implements ScheduledSequence {
  readonly numNewTokens: number;
  readonly numComputedTokens: number;
  readonly numCachedTokens: number;
  readonly blocks: readonly BlockRef[];
  readonly #seq: LlmSequence;
  /** SAMPLES | PREFILL (one field instead of two: an entry is built per sequence per step). */
  readonly #flags: number;
  #tokenIds: readonly number[] | undefined;

  static {
    sequenceOf = (e) => (e as Scheduled).#seq;
  }

  constructor(seq: LlmSequence, n: number, from: number, cached: number, samples: boolean, isPrefill: boolean) {
    this.numNewTokens = n;
    this.numComputedTokens = from;
    this.numCachedTokens = cached;
    this.blocks = seq.blocks;
    this.#seq = seq;
    this.#flags = (samples ? SAMPLES : 0) | (isPrefill ? PREFILL : 0);
  }

  get requestId(): string {
    return this.#seq.requestId;
  }

  get samples(): boolean {
    return (this.#flags & SAMPLES) !== 0;
  }

  get isPrefill(): boolean {
    return (this.#flags & PREFILL) !== 0;
  }

  get tokenIds(): readonly number[] {
    return (this.#tokenIds ??= this.#seq.tokenIds(this.numComputedTokens, this.numComputedTokens + this.numNewTokens));
  }

  get sampling(): CompiledSamplingParams | undefined {
    return this.#seq.sampling;
  }

  get promptTokenIds(): readonly number[] {
    return this.#seq.promptTokenIds;
  }

  get priorOutputTokenIds(): readonly number[] {
    return this.#seq.priorOutputTokenIds;
  }

  get endTokenIds(): ReadonlySet<number> {
    return this.#seq.eosTokenIds;
  }
}

function remove<T>(list: T[], x: T): void {
  const i = list.indexOf(x);
  if (i >= 0) list.splice(i, 1);
}
