// OnnxExecutor: runs a decoder-only model in the Hugging Face / Optimum `*-with-past` signature
// (input_ids, attention_mask, position_ids when present, past_key_values.N.key/value → logits,
// present.N.key/value; grouped-query attention; fp32 or fp16 KV) with its KV cache in the engine's
// paged blocks (PagedKvCache): a prefix-cache hit is never recomputed, preempted sequences recompute
// from their cached prefix, and one step runs several sequences.
//
// A step (one SchedulerOutput):
//   1. every decode entry (one new token) in ONE batched run: the pasts are gathered from their blocks
//      left-padded to the longest, the padding masked out by attention_mask, position_ids explicit;
//   2. then every prompt / recompute chunk, one run each, in scheduled order — an admission may reuse
//      blocks a chunk earlier in the same step computes, so order matters (decodes read only their own,
//      earlier, blocks, so they go first).
// New keys/values are scattered from `present` into the blocks. The scheduler hands the blocks a step
// computes as private partial blocks (promoted after the step), so writes go only to partial blocks;
// full blocks are immutable and may be shared. One token is sampled per entry that caught up,
// with the request's own SamplerState (kept across preemption, dropped by `release`).

import { internal, invalidArgument, toSwitchyardError } from '@switchyard/common';
import type { DecoderSession, DecoderTensor } from './decoder-session.js';
import type { Executor, ExecutorOutput } from './executor.js';
import type { ScheduledSequence, SchedulerOutput } from './llm-scheduler.js';
import { PagedKvCache, type KvDtype } from './paged-kv-cache.js';
import { compileSamplingParams } from './sampling-params.js';
import { createSamplerState, sample, type SamplerState } from './sampling.js';

export interface OnnxExecutorOptions {
  readonly numBlocks: number;
  readonly blockSize: number;
  /** 'auto' (default): the model's KV type; otherwise it must match the model. */
  readonly kvCacheDtype?: 'auto' | 'fp32' | 'fp16';
  /** Tokenizer vocabulary size; the model's logits must be at least this wide. */
  readonly vocabSize?: number;
  /** Seed for requests without one; default: random per request. */
  readonly seed?: number;
}

const GREEDY = compileSamplingParams({ temperature: 0 });
const PAST = /^past_key_values\.(\d+)\.key$/;

interface Group {
  readonly entries: readonly ScheduledSequence[];
  /** New tokens per row (equal for every row of a group). */
  readonly n: number;
}

export class OnnxExecutor implements Executor {
  private readonly samplers = new Map<string, SamplerState>();
  private readonly hasPositionIds: boolean;
  private readonly hasAttentionMask: boolean;

  private constructor(
    private readonly session: DecoderSession,
    readonly kv: PagedKvCache,
    private readonly options: OnnxExecutorOptions,
  ) {
    const inputs = new Set(session.inputMetadata.map((m) => m.name));
    this.hasPositionIds = inputs.has('position_ids');
    this.hasAttentionMask = inputs.has('attention_mask');
  }

  /** Check the session has the decoder signature and size the KV pages from its metadata. */
  static create(session: DecoderSession, options: OnnxExecutorOptions): OnnxExecutor {
    const bad = (why: string): never => {
      throw invalidArgument(`not a decoder in the Optimum with-past signature: ${why}`);
    };
    const inputs = new Map(session.inputMetadata.map((m) => [m.name, m]));
    const outputs = new Set(session.outputMetadata.map((m) => m.name));
    if (!inputs.has('input_ids')) bad("no 'input_ids' input");
    if (!outputs.has('logits')) bad("no 'logits' output");
    const layers = [...inputs.keys()].map((n) => PAST.exec(n)).filter((m) => m !== null).length;
    if (layers === 0) bad("no 'past_key_values.N.key' inputs");
    const first = inputs.get('past_key_values.0.key');
    if (first === undefined) bad("no 'past_key_values.0.key' input");
    const [, heads, , headDim] = first!.shape;
    if (typeof heads !== 'number' || typeof headDim !== 'number') bad('past_key_values.0.key must have fixed num_kv_heads and head_dim dimensions');
    for (let l = 0; l < layers; l++) {
      for (const kind of ['key', 'value']) {
        if (!inputs.has(`past_key_values.${l}.${kind}`)) bad(`missing input past_key_values.${l}.${kind}`);
        if (!outputs.has(`present.${l}.${kind}`)) bad(`missing output present.${l}.${kind}`);
      }
    }
    const modelDtype: KvDtype = first!.type === 'float16' ? 'fp16' : first!.type === 'float32' ? 'fp32' : bad(`unsupported KV type ${first!.type}`);
    const wanted = options.kvCacheDtype ?? 'auto';
    if (wanted !== 'auto' && wanted !== modelDtype) {
      throw invalidArgument(`kv_cache_dtype '${wanted}' does not match the model's KV cache type '${modelDtype}'`);
    }
    const kv = new PagedKvCache({
      numLayers: layers,
      numKvHeads: heads as number,
      headDim: headDim as number,
      numBlocks: options.numBlocks,
      blockSize: options.blockSize,
      dtype: modelDtype,
    });
    return new OnnxExecutor(session, kv, options);
  }

  release(requestId: string): void {
    this.samplers.delete(requestId);
  }

  async execute(output: SchedulerOutput): Promise<ExecutorOutput> {
    const start = performance.now();
    const decodes = output.scheduled.filter((e) => e.numNewTokens === 1);
    const chunks = output.scheduled.filter((e) => e.numNewTokens !== 1);
    const groups: Group[] = [];
    if (decodes.length > 0) groups.push({ entries: decodes, n: 1 });
    for (const e of chunks) groups.push({ entries: [e], n: e.numNewTokens });
    const sampledTokens = new Map<string, number>();
    const logprobs = new Map<string, number>();
    for (const group of groups) {
      const logits = await this.runGroup(group);
      const vocab = logits.dims[2]!;
      const data = logits.data as Float32Array;
      group.entries.forEach((e, b) => {
        if (!e.samples) return;
        const row = data.subarray((b * group.n + group.n - 1) * vocab, (b * group.n + group.n) * vocab);
        const picked = sample(row, this.sampler(e));
        sampledTokens.set(e.requestId, picked.tokenId);
        if (picked.logprob !== null) logprobs.set(e.requestId, picked.logprob);
      });
    }
    return { sampledTokens, logprobs, elapsedMs: performance.now() - start };
  }

  private sampler(e: ScheduledSequence): SamplerState {
    let s = this.samplers.get(e.requestId);
    if (s === undefined) {
      const prompt = e.promptTokenIds;
      const params = e.sampling ?? GREEDY;
      s = this.options.seed === undefined ? createSamplerState(params, prompt) : createSamplerState(params, prompt, this.options.seed);
      this.samplers.set(e.requestId, s);
    }
    return s;
  }

  /** One session.run over `group`; scatters the new KV; returns logits [B, n, V]. */
  private async runGroup(group: Group): Promise<DecoderTensor> {
    const { entries, n } = group;
    const B = entries.length;
    const P = Math.max(...entries.map((e) => e.numComputedTokens));
    const ids = new BigInt64Array(B * n);
    const positions = new BigInt64Array(B * n);
    const mask = new BigInt64Array(B * (P + n));
    entries.forEach((e, b) => {
      const c = e.numComputedTokens;
      for (let i = 0; i < n; i++) {
        ids[b * n + i] = BigInt(e.tokenIds[i]!);
        positions[b * n + i] = BigInt(c + i);
      }
      for (let j = P - c; j < P + n; j++) mask[b * (P + n) + j] = 1n;
    });
    const feeds: Record<string, DecoderTensor> = { input_ids: { type: 'int64', dims: [B, n], data: ids } };
    if (this.hasAttentionMask) feeds['attention_mask'] = { type: 'int64', dims: [B, P + n], data: mask };
    if (this.hasPositionIds) feeds['position_ids'] = { type: 'int64', dims: [B, n], data: positions };
    const rows = entries.map((e) => ({ blocks: e.blocks, length: e.numComputedTokens }));
    for (let l = 0; l < this.kv.numLayers; l++) {
      for (const kind of ['key', 'value'] as const) {
        feeds[`past_key_values.${l}.${kind}`] = this.kv.gather(l, kind, rows, P);
      }
    }
    let out: Record<string, DecoderTensor>;
    try {
      out = await this.session.run(feeds);
    } catch (e) {
      throw internal(`LLM forward pass failed: ${toSwitchyardError(e).message}`, e);
    }
    const logits = out['logits'];
    if (logits === undefined || logits.dims.length !== 3 || logits.dims[0] !== B || logits.dims[1] !== n) {
      throw internal(`LLM forward pass returned logits of shape [${logits?.dims.join(',') ?? ''}], expected [${B},${n},vocab]`);
    }
    if (this.options.vocabSize !== undefined && logits.dims[2]! < this.options.vocabSize) {
      throw internal(`the model's logits are ${logits.dims[2]} wide, the tokenizer has ${this.options.vocabSize} tokens`);
    }
    const writes = entries.map((e) => ({ blocks: e.blocks, from: e.numComputedTokens, count: n }));
    for (let l = 0; l < this.kv.numLayers; l++) {
      for (const kind of ['key', 'value'] as const) {
        const present = out[`present.${l}.${kind}`];
        if (present === undefined) throw internal(`LLM forward pass returned no present.${l}.${kind}`);
        this.kv.scatter(l, kind, present, P, writes);
      }
    }
    return logits;
  }
}
