// LlmEngine: the serving loop around EngineCore (vLLM's AsyncLLM + EngineCore busy loop, Dynamo's
// mocker engine). It owns one KvBlockManager, LlmScheduler and Executor, turns `generate` calls into
// scheduler requests, runs steps back to back while any request is unfinished, and streams each
// request's tokens to its own async iterator.
//
// Concurrency: everything runs on the caller's event loop. Steps never overlap; between two steps the
// loop yields (setImmediate), so sockets, new `generate` calls and aborts get in. An abort that arrives
// during a step is applied right after it (the scheduler only changes between steps). The executor may
// compute elsewhere (a worker thread) — the loop just awaits it.
//
// Failure: an executor error fails the requests of that step with the error (their blocks are freed) and
// the loop goes on with the others; a scheduler invariant error is a bug and fails every request.
//
// KV transfer (kv-transfer.ts, kv-exchange.ts): when the executor supports it, `kvTransfer` leases a
// prefill-only request's prompt blocks on its final output and imports another engine's blocks for a
// request that continues there (`outputTokenIds` + `kvImport`, released when that request ends).

import { cancelled, describeValue, internal, invalidArgument, toSwitchyardError, type CancelSignal, type SwitchyardError } from '@switchyard/common';
import { promptTooLongError, requestTooLongError } from './context-length.js';
import { EngineCore, type ForwardPassSink } from './engine-core.js';
import type { Executor } from './executor.js';
import { E2E_BUCKETS_S, Histogram, ITL_BUCKETS_S, TTFT_BUCKETS_S } from './histogram.js';
import { KvBlockManager, type BlockRef } from './kv-block-manager.js';
import type { KvEventSink, KvSnapshot } from './kv-events.js';
import { DEFAULT_KV_TRANSFER_TTL_MS, KvExchange, type BlockImport } from './kv-exchange.js';
import type { KvTransferLease, LlmKvTransfer } from './kv-transfer.js';
import type { GenerateOutput, GenerateRequest, LlmEngineMetrics } from './llm-endpoint.js';
import { LlmScheduler, type LlmSchedulerOptions } from './llm-scheduler.js';
import type { LlmSequence } from './llm-sequence.js';
import type { FinishReason } from './stop-checker.js';
import { systemClock, type Clock } from './timing-model.js';

export interface LlmEngineOptions {
  /** Tokens per KV block. */
  readonly blockSize: number;
  /** KV blocks the executor holds (vLLM's num_gpu_blocks). */
  readonly numBlocks: number;
  /** Default true. */
  readonly enablePrefixCaching?: boolean;
  readonly scheduler?: LlmSchedulerOptions;
  /** Longest prompt + completion (vLLM's max_model_len). */
  readonly maxModelLen: number;
  /** The model's end-of-sequence ids (a request's `ignore_eos` turns them off). */
  readonly eosTokenIds?: readonly number[];
  /**
   * Token ids the model takes (its embedding rows); prompt and prior output ids at or beyond it are
   * refused with invalid_argument, so one request cannot fail a step that others share. Absent: not checked.
   */
  readonly vocabSize?: number;
  /** Built for the same numBlocks / blockSize. */
  readonly executor: Executor;
  /** Default systemClock; must be the clock a SimulatedExecutor sleeps on. */
  readonly clock?: Clock;
  /** Every KV event of the block manager, in id order (the worker publishes them to the cluster). */
  readonly onKvEvent?: KvEventSink;
  /** Every scheduled step's figures (the worker publishes them for planners); must not throw. */
  readonly onForwardPass?: ForwardPassSink;
  /** How long a prefill-only request's lease keeps its blocks pinned, ms on `clock`; default 30 000. */
  readonly kvTransferTtlMs?: number;
}

/** What an output says about its tokens' probabilities (GenerateOutput's fields of that name). */
type TokenScores = Pick<GenerateOutput, 'logprobs' | 'topLogprobs'>;

/** Per-request state between `generate` and the final output. */
interface Stream {
  readonly request: GenerateRequest;
  readonly sequence: LlmSequence;
  readonly stopTokenIds: ReadonlySet<number>;
  readonly arrival: number;
  queue: GenerateOutput[];
  error: SwitchyardError | undefined;
  done: boolean;
  wake: (() => void) | undefined;
  firstTokenAt: number | undefined;
  lastTokenAt: number | undefined;
  cachedTokens: number | undefined;
  completionTokens: number;
  abortRequested: boolean;
  detach: (() => void) | undefined;
  /** The request's own import (released when the stream ends). */
  kvImport: { release(): void } | undefined;
}

export class LlmEngine {
  readonly kv: KvBlockManager;
  readonly scheduler: LlmScheduler;
  readonly core: EngineCore;
  readonly maxModelLen: number;
  /** KV transfer; undefined when the executor cannot move blocks. */
  readonly kvTransfer: LlmKvTransfer | undefined;
  private readonly exchange: KvExchange | undefined;
  private readonly eos: readonly number[];
  private readonly vocabSize: number;
  private readonly clock: Clock;
  private readonly onForwardPass: ForwardPassSink | undefined;
  private readonly streams = new Map<string, Stream>();
  private loop: Promise<void> | undefined;
  private stopped = false;
  // Cumulative metrics.
  private readonly ttft = new Histogram(TTFT_BUCKETS_S);
  private readonly itl = new Histogram(ITL_BUCKETS_S);
  private readonly e2e = new Histogram(E2E_BUCKETS_S);
  private promptTokens = 0;
  /** The executor honours sampling.guided_decoding. */
  private readonly guidedDecoding: boolean;
  private generationTokens = 0;
  private prefixQueries = 0;
  private prefixHits = 0;
  private preemptions = 0;
  private readonly finished: Record<FinishReason, number> = { stop: 0, length: 0, abort: 0 };

  constructor(options: LlmEngineOptions) {
    if (!Number.isSafeInteger(options.maxModelLen) || options.maxModelLen < 2) {
      throw invalidArgument(`max_model_len must be an integer >= 2, got ${options.maxModelLen}`);
    }
    this.kv = new KvBlockManager({
      numBlocks: options.numBlocks,
      blockSize: options.blockSize,
      enablePrefixCaching: options.enablePrefixCaching ?? true,
      onEvent: options.onKvEvent,
    });
    this.scheduler = new LlmScheduler(this.kv, options.scheduler);
    this.clock = options.clock ?? systemClock;
    this.onForwardPass = options.onForwardPass;
    this.core = new EngineCore(this.scheduler, options.executor, this.clock);
    this.maxModelLen = options.maxModelLen;
    this.eos = [...(options.eosTokenIds ?? [])];
    this.vocabSize = options.vocabSize ?? Infinity;
    this.guidedDecoding = options.executor.guidedDecoding === true;
    const layout = options.executor.kvLayout?.();
    this.exchange =
      layout === undefined
        ? undefined
        : new KvExchange({
            kv: this.kv,
            executor: options.executor,
            layout,
            clock: this.clock,
            ttlMs: options.kvTransferTtlMs ?? DEFAULT_KV_TRANSFER_TTL_MS,
            maxPromptTokens: this.maxModelLen,
          });
    this.kvTransfer = this.exchange;
  }

  /** See LlmEndpoint.generate. */
  generate(request: GenerateRequest, signal?: CancelSignal): AsyncIterable<GenerateOutput> {
    let stream: Stream | undefined;
    let early: SwitchyardError | undefined;
    try {
      stream = this.admit(request);
    } catch (e) {
      early = toSwitchyardError(e);
    }
    if (stream !== undefined && signal !== undefined) {
      const s = stream;
      const onAbort = (): void => this.abort(s);
      if (signal.aborted) onAbort();
      else {
        signal.addEventListener('abort', onAbort, { once: true });
        s.detach = () => signal.removeEventListener('abort', onAbort);
      }
    }
    return { [Symbol.asyncIterator]: () => (stream === undefined ? failing(early!) : this.iterate(stream)) };
  }

  /** Every block the engine holds, for KV-event consumers that lost events. */
  snapshot(): KvSnapshot {
    return this.kv.snapshot();
  }

  metrics(): LlmEngineMetrics {
    const kv = this.kv.stats();
    return {
      numRunning: this.scheduler.numRunning,
      numWaiting: this.scheduler.numWaiting,
      kvUsage: kv.usage,
      kvActiveBlocks: kv.active,
      kvTotalBlocks: kv.numBlocks,
      prefixCacheQueries: this.prefixQueries,
      prefixCacheHits: this.prefixHits,
      promptTokens: this.promptTokens,
      generationTokens: this.generationTokens,
      numPreemptions: this.preemptions,
      requestsFinished: { ...this.finished },
      timeToFirstToken: this.ttft.snapshot(),
      interTokenLatency: this.itl.snapshot(),
      e2eRequestLatency: this.e2e.snapshot(),
    };
  }

  /** Requests not yet finished (queued or running). */
  get numUnfinished(): number {
    return this.streams.size;
  }

  /** Refuse new requests, abort every open one, wait for the loop to stop, release every lease and import. */
  async shutdown(): Promise<void> {
    this.stopped = true;
    for (const s of this.streams.values()) this.abort(s);
    await this.loop;
    this.exchange?.close();
  }

  private admit(request: GenerateRequest): Stream {
    const imp = request.kvImport;
    const own = imp !== undefined && this.exchange?.owns(imp) === true && !imp.inUse ? imp : undefined;
    try {
      return this.admitChecked(request, own);
    } catch (e) {
      // A refused request ends here: the import it brought is released, as when it finishes.
      own?.release();
      throw e;
    }
  }

  private admitChecked(request: GenerateRequest, imp: BlockImport | undefined): Stream {
    if (this.stopped) throw cancelled('the LLM engine is shutting down');
    const { requestId, promptTokenIds, sampling } = request;
    if (this.streams.has(requestId)) throw invalidArgument(`duplicate request id '${requestId}'`);
    const n = promptTokenIds.length;
    if (n === 0) throw invalidArgument('the prompt is empty: at least one token is required');
    for (const t of promptTokenIds) {
      if (!Number.isSafeInteger(t) || t < 0) throw invalidArgument(`prompt token ids must be non-negative integers, got ${describeValue(t)}`);
      if (t >= this.vocabSize) throw invalidArgument(`prompt token id ${t} is out of the model's vocabulary (0..${this.vocabSize - 1})`);
    }
    const limit = this.maxModelLen;
    if (n >= limit) {
      throw promptTooLongError(limit, n);
    }
    const maxTokens = sampling.max_tokens ?? Math.min(limit - n, sampling.default_max_tokens ?? Infinity);
    if (n + maxTokens > limit) {
      throw requestTooLongError(limit, n, maxTokens);
    }
    const prior = request.outputTokenIds ?? [];
    if (!Array.isArray(prior)) throw invalidArgument('outputTokenIds must be an array of token ids');
    for (const t of prior) {
      if (!Number.isSafeInteger(t) || t < 0) throw invalidArgument(`output token ids must be non-negative integers, got ${describeValue(t)}`);
      if (t >= this.vocabSize) throw invalidArgument(`output token id ${t} is out of the model's vocabulary (0..${this.vocabSize - 1})`);
    }
    if (prior.length >= maxTokens) {
      throw invalidArgument(`max_tokens ${maxTokens} includes the ${prior.length} output tokens already generated: nothing is left to generate`);
    }
    if (request.prefillOnly === true && (prior.length > 0 || request.kvImport !== undefined)) {
      throw invalidArgument('a prefill-only request takes neither outputTokenIds nor kvImport');
    }
    if (request.kvImport !== undefined && imp === undefined) {
      throw invalidArgument('kvImport is not a live import of this engine, or is already handed to another request');
    }
    const stopTokenIds = new Set(sampling.stop_token_ids);
    const eosTokenIds = [...new Set([...(sampling.ignore_eos ? [] : this.eos), ...stopTokenIds])];
    if (sampling.guided_decoding !== null && sampling.guided_decoding !== undefined) {
      const what = 'guided decoding (response_format, or a tool_choice that forces a call)';
      if (!this.guidedDecoding) throw invalidArgument(`${what} is not supported by this model's engine: it needs a model that samples from logits`);
      // A complete document must be able to end; without an end id it could only run on.
      if (eosTokenIds.length === 0) throw invalidArgument(`${what} needs an end-of-sequence token, and this model has none`);
    }
    const now = this.clock.now();
    const sequence = this.scheduler.addRequest(
      { requestId, promptTokenIds, outputTokenIds: prior, maxTokens, eosTokenIds, prefillOnly: request.prefillOnly, sampling, arrivalTime: now },
      now,
    );
    const stream: Stream = {
      request,
      sequence,
      stopTokenIds,
      arrival: now,
      queue: [],
      error: undefined,
      done: false,
      wake: undefined,
      firstTokenAt: undefined,
      lastTokenAt: undefined,
      cachedTokens: undefined,
      completionTokens: prior.length,
      abortRequested: false,
      detach: undefined,
      kvImport: imp,
    };
    if (imp !== undefined) imp.inUse = true;
    this.streams.set(requestId, stream);
    this.promptTokens += n;
    this.loop ??= this.run().finally(() => {
      this.loop = undefined;
      // A request admitted while the loop was finishing its last iteration.
      if (this.scheduler.hasUnfinished() && !this.stopped) this.loop = this.run();
    });
    return stream;
  }

  private async *iterate(stream: Stream): AsyncGenerator<GenerateOutput> {
    try {
      for (;;) {
        const next = stream.queue.shift();
        if (next !== undefined) {
          yield next;
          if (next.finishReason !== null) return;
          continue;
        }
        if (stream.error !== undefined) throw stream.error;
        if (stream.done) return;
        await new Promise<void>((resolve) => (stream.wake = resolve));
        stream.wake = undefined;
      }
    } finally {
      // The consumer stopped early (break / return): treat it as a client going away.
      if (!stream.done) this.abort(stream);
    }
  }

  /** Abort now if between steps, else right after the current step. */
  private abort(stream: Stream): void {
    if (stream.done) return;
    stream.abortRequested = true;
    if (!this.core.isStepping) this.applyAborts();
  }

  private applyAborts(): void {
    for (const s of [...this.streams.values()]) {
      if (!s.abortRequested || s.done) continue;
      this.core.abort(s.request.requestId);
      this.finishStream(s, 'abort', null);
    }
  }

  private async run(): Promise<void> {
    // Start on the next turn of the event loop, so requests arriving in the same tick share a step.
    await new Promise<void>((resolve) => setImmediate(resolve));
    while (this.scheduler.hasUnfinished()) {
      let result;
      try {
        result = await this.core.step();
      } catch (e) {
        this.failStep(toSwitchyardError(e));
        continue;
      }
      if (result.forwardPass !== undefined) this.onForwardPass?.(result.forwardPass);
      for (const o of result.outputs) {
        const lp = result.logprobs?.get(o.requestId);
        const top = result.topLogprobs?.get(o.requestId);
        const lease = o.pinnedBlocks === undefined ? undefined : this.lease(o.requestId, o.pinnedBlocks, result.seeds?.get(o.requestId));
        const scores: TokenScores = { ...(lp === undefined ? {} : { logprobs: [lp] }), ...(top === undefined ? {} : { topLogprobs: [top] }) };
        this.deliver(o.requestId, o.newTokenIds, o.finishReason, scores, lease);
      }
      this.exchange?.expire();
      this.applyAborts();
      if (result.numScheduled === 0 && this.scheduler.hasUnfinished()) {
        // Nothing could run although requests wait: a scheduler bug. Fail them rather than spin.
        this.failAll(internal('LLM scheduler made no progress with requests waiting'));
        return;
      }
      await new Promise<void>((resolve) => setImmediate(resolve));
    }
  }

  /**
   * A prefill-only request finished with 'length' and the scheduler pinned its prompt blocks: they go
   * under a lease, in this same synchronous turn. No lease (pins dropped at once) when the engine cannot
   * transfer KV, or the request's consumer already went away.
   */
  private lease(requestId: string, pinned: readonly BlockRef[], seed: number | undefined): KvTransferLease | undefined {
    const s = this.streams.get(requestId);
    if (this.exchange === undefined || s === undefined || s.done || s.abortRequested) {
      this.scheduler.freePinned(pinned);
      return undefined;
    }
    return this.exchange.grant(pinned, seed ?? s.request.sampling.seed ?? 0);
  }

  private deliver(requestId: string, tokenIds: readonly number[], reason: FinishReason | null, scores: TokenScores = {}, lease?: KvTransferLease): void {
    const s = this.streams.get(requestId);
    if (s === undefined || s.done) return;
    const now = this.clock.now();
    if (s.firstTokenAt === undefined) {
      s.firstTokenAt = now;
      s.cachedTokens = Math.min(s.sequence.numCachedTokens, s.sequence.promptLength);
      this.prefixQueries += s.sequence.promptLength;
      this.prefixHits += s.cachedTokens;
      this.ttft.observe((now - s.arrival) / 1000);
    } else if (s.lastTokenAt !== undefined) {
      this.itl.observe((now - s.lastTokenAt) / 1000);
    }
    s.lastTokenAt = now;
    s.completionTokens += tokenIds.length;
    this.generationTokens += tokenIds.length;
    if (reason === null) {
      this.push(s, { tokenIds, finishReason: null, stopReason: null, ...scores });
      return;
    }
    const last = tokenIds[tokenIds.length - 1];
    const stopReason = reason === 'stop' && last !== undefined && s.stopTokenIds.has(last) ? last : null;
    this.finishStream(s, reason, stopReason, tokenIds, scores, lease);
  }

  private finishStream(
    s: Stream,
    reason: FinishReason,
    stopReason: number | null,
    tokenIds: readonly number[] = [],
    scores: TokenScores = {},
    lease?: KvTransferLease,
  ): void {
    s.done = true;
    s.detach?.();
    s.kvImport?.release();
    this.streams.delete(s.request.requestId);
    this.finished[reason]++;
    this.preemptions += s.sequence.numPreemptions;
    this.e2e.observe((this.clock.now() - s.arrival) / 1000);
    this.push(s, {
      tokenIds,
      finishReason: reason,
      stopReason,
      ...scores,
      usage: { promptTokens: s.sequence.promptLength, completionTokens: s.completionTokens, cachedTokens: s.cachedTokens ?? 0 },
      ...(lease === undefined ? {} : { kvTransfer: lease }),
    });
  }

  private push(s: Stream, output: GenerateOutput): void {
    s.queue.push(output);
    s.wake?.();
  }

  /** The executor failed a step: its requests fail with the error, the others go on. */
  private failStep(error: SwitchyardError): void {
    for (const id of this.core.discardFailedStep()) {
      const s = this.streams.get(id);
      if (s !== undefined) this.failStream(s, error);
    }
  }

  private failAll(error: SwitchyardError): void {
    for (const s of [...this.streams.values()]) {
      this.core.abort(s.request.requestId);
      this.failStream(s, error);
    }
  }

  private failStream(s: Stream, error: SwitchyardError): void {
    s.done = true;
    s.detach?.();
    s.kvImport?.release();
    this.streams.delete(s.request.requestId);
    s.error = error;
    s.wake?.();
  }
}

async function* failing(error: SwitchyardError): AsyncGenerator<GenerateOutput> {
  throw error;
}
