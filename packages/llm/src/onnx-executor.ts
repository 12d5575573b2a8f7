// OnnxExecutor: runs a decoder-only model in the Hugging Face / Optimum `*-with-past` signature
// (input_ids, attention_mask, position_ids when present, past_key_values.N.key/value → logits,
// present.N.key/value; grouped-query attention; fp32 or fp16 KV; fp32 or fp16 logits) with its KV cache
// in the engine's paged blocks (PagedKvCache): a prefix-cache hit is never recomputed, preempted
// sequences recompute from their cached prefix, and one step runs several sequences.
//
// A step (one SchedulerOutput): entries with the same number of new tokens share one session.run —
// all decodes (one token each) form one batch, equal-length chunks (a burst of same-length prompts)
// another; lengths are not padded to each other, since padded query tokens cost real compute. In a
// run, every row's past is gathered from its blocks left-padded to the longest, the padding hidden by
// attention_mask, and position_ids (when the model takes them) give each token its own position. The
// runs of a step may go in any order: under the scheduler's KV-validity contract no entry reads KV
// another entry of the same step writes (blocks computed this step are private partial blocks).
//
// New keys/values are scattered from `present` into the sequence's partial blocks only; full blocks are
// immutable and may be shared (a fully cached prompt's recomputed last token is not written back).
// One token is sampled per entry with `samples`, from its last position's logits (cut to `vocabSize`),
// with the request's own SamplerState: created at its first sample (counting the request's prior
// output tokens, its random stream advanced past their draws), kept across preemption (so a
// recomputed sequence continues its random stream), dropped by `release`. Sampling happens where the
// forward pass ran when the session can (`sampling-rows.ts`: the decoder's thread samples each row
// without a guided-decoding constraint and returns its token, not [B, n, V] logits); rows with a
// constraint get their logits row back and are sampled here, with the same `sample` either way.
//
// Optimum's merged decoder (`decoder_model_merged.onnx`) takes one more input, `use_cache_branch`
// (bool [1]): false runs its without-past branch, which ignores the past inputs; true its with-past
// branch. A run feeds true exactly when its past has length > 0 (some row has computed tokens; rows
// without are left-padded under the mask as in any mixed batch) and false on a batch of first chunks,
// whose past is empty. Any other input the executor cannot feed is refused at load, by name.
//
// KV transfer: with a `modelId`, blocks move as PagedKvCache's block bytes (`readBlock` / `writeBlock`).
//
// Failure: a session.run error rejects `execute` with `internal`; the executor touches no block
// manager, and the KV it may already have written went only to the step's partial blocks, which the
// caller frees when it discards the step.

import { internal, invalidArgument, toSwitchyardError } from '@switchyard/common';
import type { DecoderSession, DecoderTensor, DecoderValueMetadata } from './decoder-session.js';
import type { Executor, ExecutorOutput } from './executor.js';
import type { ScheduledSequence, SchedulerOutput } from './llm-scheduler.js';
import type { KvLayout } from './kv-transfer.js';
import { PagedKvCache, type KvDtype } from './paged-kv-cache.js';
import { compileSamplingParams } from './sampling-params.js';
import { compileTokenConstraint, type TokenConstraint } from './guided/token-constraint.js';
import type { TokenVocabulary } from './guided/token-vocabulary.js';
import { gateOnReasoning, type ReasoningMarkers } from './guided/reasoning-gate.js';
import { Xoshiro128, createSamplerState, sample, type SampleResult, type SamplerState, type TopLogprobs } from './sampling.js';
import { LOGIT_ROWS_OUTPUT, SAMPLED_OUTPUT, commitSample, encodeSampleRows, lastLogitsRow, readSampledRows, sampledLogitsDims } from './sampling-rows.js';

export interface OnnxExecutorOptions {
  /** KV blocks (slots) to hold: the KvBlockManager's numBlocks. */
  readonly numBlocks: number;
  /** Tokens per block: the KvBlockManager's blockSize. */
  readonly blockSize: number;
  /** 'auto' (default): the model's KV type; otherwise it must match the model. */
  readonly kvCacheDtype?: 'auto' | 'fp32' | 'fp16';
  /**
   * Tokenizer vocabulary size. The model's logits must be at least this wide; tokens are sampled from
   * the first `vocabSize` logits only (exports often pad the LM head). Default: the logits' width.
   */
  readonly vocabSize?: number;
  /**
   * Seed of the stream that gives requests without a seed theirs (one draw per request, in the order
   * they first sample), so a run is reproducible; default: a random seed per request.
   */
  readonly seed?: number;
  /**
   * Called with the KV cache's size in bytes once the model's layers are known, before it is
   * allocated; throws to refuse it (the engine's load limits).
   */
  readonly checkKvCacheBytes?: (bytes: number) => void;
  /**
   * The model's identity for KV transfer (KvLayout.modelId): a digest of the ONNX file's bytes, which
   * the caller that read the file computes. Absent: this executor does not transfer KV.
   */
  readonly modelId?: string;
  /**
   * The tokenizer's tokens as bytes, for guided decoding (`guided/token-vocabulary.ts`); called at the
   * first guided request and kept. Absent: guided requests are refused by the engine.
   */
  readonly tokenVocabulary?: () => TokenVocabulary;
  /**
   * A reasoning model's think markers (its config names a reasoning parser): guided decoding then
   * starts after the reasoning (`guided/reasoning-gate.ts`). Absent: from the first token.
   */
  readonly reasoningMarkers?: ReasoningMarkers;
  /**
   * Rows are sampled where the forward pass ran (`DecoderSession.run`'s `sampleRows`) only when the
   * vocabulary (`vocabSize`, else the logits' static width) is at least this wide; below it the logits
   * come back and the event loop samples them, which then costs less than the rows' state crossing.
   * Default `THREAD_SAMPLING_MIN_VOCAB`; 0: always (when the width is unknown: always).
   */
  readonly threadSamplingMinVocab?: number;
}

/**
 * Narrowest vocabulary sampled where the forward pass runs. Measured on the 384-token tiny decoder
 * (bench/llm-onnx.mjs, 16 streams, alternating): 2,597 tokens/s sampled on its thread against 3,873
 * returning logits; at 151,936 tokens the event loop's CPU per token is 4–19x lower on the thread
 * (bench/llm-sampling-cpu.mjs). Real tokenizers have 32,000 tokens or more.
 */
export const THREAD_SAMPLING_MIN_VOCAB = 8192;

const GREEDY = compileSamplingParams({ temperature: 0 });
const PAST_KEY = /^past_key_values\.(\d+)\.key$/;
const PAST_INPUT = /^past_key_values\.(\d+)\.(key|value)$/;
/** Optimum merged decoders' branch switch. */
const USE_CACHE_BRANCH = 'use_cache_branch';
const FED_INPUTS: ReadonlySet<string> = new Set(['input_ids', 'attention_mask', 'position_ids', USE_CACHE_BRANCH]);

/** What `create` reads from the session's metadata. */
interface Signature {
  readonly numLayers: number;
  readonly numKvHeads: number;
  readonly headDim: number;
  readonly kvDtype: KvDtype;
  readonly hasPositionIds: boolean;
  /** Optimum merged decoder: a bool `use_cache_branch` input. */
  readonly hasUseCacheBranch: boolean;
}

export class OnnxExecutor implements Executor {
  /** Per request id: its sampler, from its first sample until `release`. */
  private readonly samplers = new Map<string, SamplerState>();
  private readonly seeds: Xoshiro128 | null;
  private vocabulary: TokenVocabulary | undefined;
  readonly guidedDecoding: boolean;
  /** Whether runs send their rows' sampling to be done where the pass runs (`threadSamplingMinVocab`). */
  private sampleWhereRun = true;

  private constructor(
    private readonly session: DecoderSession,
    /** The KV memory behind the block manager's slots (exposed for tests and metrics). */
    readonly kv: PagedKvCache,
    private readonly signature: Signature,
    private readonly vocabSize: number | undefined,
    seed: number | undefined,
    private readonly modelId: string | undefined,
    private readonly tokenVocabulary: (() => TokenVocabulary) | undefined,
    private readonly reasoningMarkers: ReasoningMarkers | undefined,
  ) {
    this.seeds = seed === undefined ? null : new Xoshiro128(seed);
    this.guidedDecoding = tokenVocabulary !== undefined;
  }

  /** KV transfer layout: the model's KV geometry in the engine's blocks; undefined without a modelId. */
  kvLayout(): KvLayout | undefined {
    if (this.modelId === undefined) return undefined;
    const { numLayers, numKvHeads, headDim, blockSize, dtype, bytesPerBlock } = this.kv;
    return { modelId: this.modelId, engine: 'llm', dtype, numLayers, numKvHeads, headDim, blockSize, bytesPerBlock };
  }

  /** A block's payload is its KV bytes (PagedKvCache's block order); the hash is not needed. */
  checkBlock(_hash: string, data: Uint8Array): string | undefined {
    return this.kv.checkBlockBytes(data);
  }

  readBlock(slot: number): Uint8Array {
    return this.kv.readBlock(slot);
  }

  writeBlock(slot: number, _hash: string, data: Uint8Array): void {
    this.kv.writeBlock(slot, data);
  }

  /**
   * Check the session has the decoder signature (invalid_argument naming what is missing or wrong) and
   * size the KV pages from its metadata: layers, kv heads, head dim and KV type.
   */
  static create(session: DecoderSession, options: OnnxExecutorOptions): OnnxExecutor {
    const signature = readSignature(session);
    const wanted = options.kvCacheDtype ?? 'auto';
    if (wanted !== 'auto' && wanted !== signature.kvDtype) {
      throw invalidArgument(`kv_cache_dtype '${wanted}' does not match the model's KV cache type '${signature.kvDtype}'`);
    }
    const { vocabSize } = options;
    if (vocabSize !== undefined) {
      if (!Number.isSafeInteger(vocabSize) || vocabSize <= 0) throw invalidArgument(`vocabSize must be a positive integer, got ${vocabSize}`);
      const width = session.outputMetadata.find((m) => m.name === 'logits')!.shape[2];
      if (typeof width === 'number' && width < vocabSize) {
        throw invalidArgument(`the model's logits are ${width} wide, the tokenizer has ${vocabSize} tokens`);
      }
    }
    const elementBytes = signature.kvDtype === 'fp16' ? 2 : 4;
    options.checkKvCacheBytes?.(
      signature.numLayers * 2 * options.numBlocks * signature.numKvHeads * options.blockSize * signature.headDim * elementBytes,
    );
    const kv = new PagedKvCache({
      numLayers: signature.numLayers,
      numKvHeads: signature.numKvHeads,
      headDim: signature.headDim,
      numBlocks: options.numBlocks,
      blockSize: options.blockSize,
      dtype: signature.kvDtype,
    });
    const executor = new OnnxExecutor(session, kv, signature, vocabSize, options.seed, options.modelId, options.tokenVocabulary, options.reasoningMarkers);
    const staticWidth = session.outputMetadata.find((m) => m.name === 'logits')?.shape[2];
    const width = vocabSize ?? (typeof staticWidth === 'number' ? staticWidth : undefined);
    executor.sampleWhereRun = width === undefined || width >= (options.threadSamplingMinVocab ?? THREAD_SAMPLING_MIN_VOCAB);
    return executor;
  }

  release(requestId: string): void {
    this.samplers.delete(requestId);
  }

  async execute(output: SchedulerOutput): Promise<ExecutorOutput> {
    const start = performance.now();
    const groups = new Map<number, ScheduledSequence[]>();
    for (const e of output.scheduled) {
      const list = groups.get(e.numNewTokens);
      if (list === undefined) groups.set(e.numNewTokens, [e]);
      else list.push(e);
    }
    const sampledTokens = new Map<string, number>();
    const logprobs = new Map<string, number>();
    const topLogprobs = new Map<string, TopLogprobs>();
    const seeds = new Map<string, number>();
    for (const [n, entries] of groups) {
      // Samplers first (the rows' states go with the run); a run that fails leaves none it created.
      const seedsBefore = this.seeds?.state();
      const created = new Map<string, number>();
      let states: Array<SamplerState | null>;
      let out: Record<string, DecoderTensor>;
      try {
        states = entries.map((e) => (e.samples ? this.sampler(e, created) : null));
        // A state with a guided-decoding constraint asks for its logits row (`encodeSampleRows`).
        out = await this.run(entries, n, this.sampleWhereRun ? encodeSampleRows(this.vocabSize, states) : undefined);
      } catch (e) {
        for (const id of created.keys()) this.samplers.delete(id);
        if (seedsBefore !== undefined) this.seeds!.setState(seedsBefore);
        throw e;
      }
      for (const [id, seed] of created) seeds.set(id, seed);
      const sampled = out[SAMPLED_OUTPUT];
      const rows = sampled === undefined ? null : readSampledRows(sampled, out[LOGIT_ROWS_OUTPUT]);
      entries.forEach((e, b) => {
        const state = states[b];
        if (state === null || state === undefined) return;
        let picked: SampleResult;
        if (rows === null) picked = sample(lastLogitsRow(out['logits']!, b, n, this.vocabSize ?? out['logits']!.dims[2]!), state);
        else {
          const row = rows[b];
          if (row === null || row === undefined) throw internal(`the LLM's forward pass sampled nothing for row ${b}, which asked for a sample`);
          picked = 'logits' in row ? sample(row.logits, state) : commitSample(state, row);
        }
        sampledTokens.set(e.requestId, picked.tokenId);
        if (picked.logprob !== null) logprobs.set(e.requestId, picked.logprob);
        if (picked.top !== null) topLogprobs.set(e.requestId, picked.top);
      });
    }
    return { sampledTokens, ...(logprobs.size > 0 ? { logprobs } : {}), ...(topLogprobs.size > 0 ? { topLogprobs } : {}), seeds, elapsedMs: performance.now() - start };
  }

  /** The request's sampler; one created now (its first sample) also goes into `created` with its seed. */
  private sampler(e: ScheduledSequence, created: Map<string, number>): SamplerState {
    let s = this.samplers.get(e.requestId);
    if (s === undefined) {
      const params = e.sampling ?? GREEDY;
      const fallback = this.seeds === null ? undefined : this.seeds.nextUint32();
      let constraint: TokenConstraint | null = null;
      if (params.guided_decoding !== null && params.guided_decoding !== undefined) {
        if (this.tokenVocabulary === undefined) throw internal('guided decoding without a token vocabulary (the engine admits it only with one)');
        this.vocabulary ??= this.tokenVocabulary();
        constraint = compileTokenConstraint(params.guided_decoding, this.vocabulary, e.endTokenIds);
        if (this.reasoningMarkers !== undefined) constraint = gateOnReasoning(constraint, this.reasoningMarkers, e.promptTokenIds);
      }
      s = createSamplerState(params, e.promptTokenIds, fallback, e.priorOutputTokenIds, e.endTokenIds, constraint);
      this.samplers.set(e.requestId, s);
      created.set(e.requestId, s.seed);
    }
    return s;
  }

  /**
   * One session.run over `entries` (each computing `n` new tokens) with their rows' sampling
   * (`encodeSampleRows`); scatters the new KV; returns the outputs: logits [B, n, V], or the rows
   * sampled where the pass ran (SAMPLED_OUTPUT, LOGIT_ROWS_OUTPUT).
   */
  private async run(entries: readonly ScheduledSequence[], n: number, sampleRows: Float64Array | undefined): Promise<Record<string, DecoderTensor>> {
    const B = entries.length;
    const P = entries.reduce((m, e) => Math.max(m, e.numComputedTokens), -Infinity);
    const ids = new BigInt64Array(B * n);
    const mask = new BigInt64Array(B * (P + n));
    const positions = new BigInt64Array(B * n);
    entries.forEach((e, b) => {
      const c = e.numComputedTokens;
      for (let i = 0; i < n; i++) {
        ids[b * n + i] = BigInt(e.tokenIds[i]!);
        positions[b * n + i] = BigInt(c + i);
      }
      mask.fill(1n, b * (P + n) + P - c, (b + 1) * (P + n));
    });
    const feeds: Record<string, DecoderTensor> = {
      input_ids: { type: 'int64', dims: [B, n], data: ids },
      attention_mask: { type: 'int64', dims: [B, P + n], data: mask },
    };
    if (this.signature.hasPositionIds) feeds['position_ids'] = { type: 'int64', dims: [B, n], data: positions };
    if (this.signature.hasUseCacheBranch) feeds[USE_CACHE_BRANCH] = { type: 'bool', dims: [1], data: new Uint8Array([P > 0 ? 1 : 0]) };
    const rows = entries.map((e) => ({ blocks: e.blocks, length: e.numComputedTokens }));
    for (let l = 0; l < this.kv.numLayers; l++) {
      for (const kind of ['key', 'value'] as const) feeds[`past_key_values.${l}.${kind}`] = this.kv.gather(l, kind, rows, P);
    }
    const what = `${B} sequence(s) × ${n} token(s) after a past of ${P}`;
    let out: Record<string, DecoderTensor>;
    try {
      out = await this.session.run(feeds, sampleRows);
    } catch (e) {
      throw internal(`the LLM's forward pass failed (${what}): ${toSwitchyardError(e).message}`, e);
    }
    const sampled = out[SAMPLED_OUTPUT];
    const dims = sampled !== undefined ? sampledLogitsDims(sampled) : out['logits']?.dims;
    if (dims === undefined || dims.length !== 3 || dims[0] !== B || dims[1] !== n) {
      throw internal(`the LLM's forward pass (${what}) returned logits of shape [${dims?.join(',') ?? ''}], expected [${B},${n},vocab]`);
    }
    if (this.vocabSize !== undefined && dims[2]! < this.vocabSize) {
      throw internal(`the model's logits are ${dims[2]} wide, the tokenizer has ${this.vocabSize} tokens`);
    }
    const writes = entries.map((e) => ({ blocks: e.blocks, from: e.numComputedTokens, count: n }));
    for (let l = 0; l < this.kv.numLayers; l++) {
      for (const kind of ['key', 'value'] as const) {
        const present = out[`present.${l}.${kind}`];
        if (present === undefined) throw internal(`the LLM's forward pass returned no present.${l}.${kind}`);
        this.kv.scatter(l, kind, present, P, writes);
      }
    }
    return out;
  }
}

/** The Optimum with-past signature, or invalid_argument saying what does not match. */
function readSignature(session: DecoderSession): Signature {
  const bad = (why: string): never => {
    throw invalidArgument(`not a decoder in the Optimum with-past signature: ${why}`);
  };
  const inputs = new Map(session.inputMetadata.map((m) => [m.name, m]));
  const outputs = new Map(session.outputMetadata.map((m) => [m.name, m]));
  for (const name of ['input_ids', 'attention_mask', 'position_ids']) {
    const m = inputs.get(name);
    if (m === undefined && name !== 'position_ids') bad(`no '${name}' input`);
    if (m !== undefined && m.type !== 'int64') bad(`input '${name}' is ${m.type ?? 'not a tensor'}, expected int64`);
  }
  const cacheBranch = inputs.get(USE_CACHE_BRANCH);
  if (cacheBranch !== undefined && (cacheBranch.type !== 'bool' || cacheBranch.shape.length > 1 || (cacheBranch.shape.length === 1 && cacheBranch.shape[0] !== 1 && typeof cacheBranch.shape[0] === 'number'))) {
    bad(`input '${USE_CACHE_BRANCH}' is ${cacheBranch.type ?? 'not a tensor'} of shape [${cacheBranch.shape.join(',')}], expected bool [1]`);
  }
  // Every input must be one the executor feeds: a session.run without it fails every request.
  for (const name of inputs.keys()) {
    if (!FED_INPUTS.has(name) && !PAST_INPUT.test(name)) {
      bad(`input '${name}' is not one this engine can feed (input_ids, attention_mask, position_ids, past_key_values.N.key/value, use_cache_branch)`);
    }
  }
  const logits = outputs.get('logits') ?? bad("no 'logits' output");
  if (logits.type !== 'float32' && logits.type !== 'float16') bad(`output 'logits' is ${logits.type ?? 'not a tensor'}, expected float32 or float16`);
  const numLayers = [...inputs.keys()].filter((n) => PAST_KEY.test(n)).length;
  if (numLayers === 0) bad("no 'past_key_values.N.key' inputs");
  const first = inputs.get('past_key_values.0.key') ?? bad("no 'past_key_values.0.key' input");
  const [, numKvHeads, , headDim] = first.shape;
  if (first.shape.length !== 4 || typeof numKvHeads !== 'number' || typeof headDim !== 'number') {
    bad(`past_key_values.0.key has shape [${first.shape.join(',')}], expected [batch, num_kv_heads, past, head_dim] with fixed num_kv_heads and head_dim`);
  }
  const kvDtype: KvDtype = first.type === 'float16' ? 'fp16' : first.type === 'float32' ? 'fp32' : bad(`unsupported KV type ${first.type ?? 'none'}`);
  // Every past input like the first; every present output of the same type, its dims fixed or symbolic.
  const like = (m: DecoderValueMetadata | undefined, symbolicOk: boolean): boolean => {
    const fits = (d: number | string | undefined, want: number): boolean => d === want || (symbolicOk && typeof d === 'string');
    return m !== undefined && m.type === first.type && m.shape.length === 4 && fits(m.shape[1], numKvHeads as number) && fits(m.shape[3], headDim as number);
  };
  for (let l = 0; l < numLayers; l++) {
    for (const kind of ['key', 'value']) {
      if (!like(inputs.get(`past_key_values.${l}.${kind}`), false)) bad(`input past_key_values.${l}.${kind} is missing or differs from past_key_values.0.key`);
      if (!like(outputs.get(`present.${l}.${kind}`), true)) bad(`output present.${l}.${kind} is missing or differs from past_key_values.0.key`);
    }
  }
  return {
    numLayers,
    numKvHeads: numKvHeads as number,
    headDim: headDim as number,
    kvDtype,
    hasPositionIds: inputs.has('position_ids'),
    hasUseCacheBranch: cacheBranch !== undefined,
  };
}
