/**
 * RoutedLlmEndpoint: one LLM served by the cluster, as the OpenAI door sees it (the LlmEndpoint
 * contract). Each generation: hash the prompt's blocks → choose a worker per router mode and reserve the
 * request's load on it (RoutingTable.selectAndReserve, one atomic step) → send `generate` over the
 * request plane → stream the worker's outputs back. When the pool the table chooses from holds one
 * worker (round-robin and random modes, or one worker serving the model) the choice is known before
 * the table answers: `generate` goes out at once and the table matches and reserves behind it (its call
 * made once the send is done), so the decision's round trip is not part of the time to first token
 * (measured on the 2-core VM: the hop 329 µs shorter at c=1 and 492 µs at c=8, paired medians of 10 and
 * 6 rounds, CPU per request unchanged). A disaggregated model's first attempt still waits,
 * since the plan needs the answer's overlap. A table that cannot decide (anything but `unavailable`,
 * which routes without it) fails the request as it did when the request waited for it.
 *
 * DISAGGREGATION (ARCHITECTURE.md flow 5). When the model has prefill- or decode-role instances, the
 * decode worker is chosen first, over the aggregated and decode instances (prefill-role instances never
 * take a whole request), KV-aware with its own overlap, and reserved as above. Then DisaggregatedPrefill
 * (disagg-prefill.ts) decides remote or local (disagg-policy.ts). Remote: a prefill-only request to a
 * prefill worker; its first token is yielded to the caller at once; the decode request follows with
 * the transfer handle, `outputTokenIds = [first]`, the caller's sampling with the handle's seed and the
 * caller's `max_tokens` (it counts the first token). The decode worker pulls the blocks it lacks and
 * streams only new tokens; its first output reports the import (`kvImport`, counted 'remote', or
 * 'fallback' when it prefilled again). The prefill side failing (twice) means a local prefill on the
 * same decode worker, and the client sees no error. Usage reports the prefill worker's cached tokens.
 * A caller abort during the prefill aborts the prefill request; during decode, the decode request
 * (whose worker releases the lease; the lease TTL covers a router that died).
 *
 * MIGRATION (Dynamo's migration operator, dynamo-design.md §1.5). An attempt fails retriably when the
 * request reached nobody (NoRespondersError), the stream stopped without its final marker
 * (StreamIncompleteError), the worker stopped its endpoint without drain (a `cancelled` error frame
 * the caller did not ask for: lease lost, forced shutdown), or the instance left discovery while the
 * stream was open (the router aborts such streams at once; Dynamo PR #13095). Then the router inhibits the instance locally,
 * releases the reservation and re-sends to another worker with the prompt unchanged and
 * `outputTokenIds` = the tokens generated so far (the prefill worker's first token included), with the
 * caller's `max_tokens` (which counts them). The caller sees one stream: every token exactly once, in
 * order; the final usage reports the original prompt, every completion token, and the cached tokens of
 * the first attempt (the prefill worker's figure for a remote prefill, else the worker's figure when
 * that attempt finished, else the router's overlap estimate for it). A transfer handle is sent once:
 * a migrated attempt prefills prompt + tokens so far itself (the lease it leaves unused expires).
 *
 * What a migrated request keeps: the new worker's engine continues exactly where the failed one was —
 * the tokens so far count as output, so frequency / presence / repetition penalties see them as
 * output, and a seeded sampler (temperature > 0) skips the draws they took — so greedy AND seeded
 * output are the same as without the failure. (For the mocker, whose tokens are a function of the
 * request id and position, every attempt is sent under the caller's request id as the envelope id, so
 * the worker's engine id `<id>#<id>` is the same on each attempt; a failed instance is inhibited, so two
 * attempts never meet on one engine.) A worker that does not know `outputTokenIds` would refuse such a
 * request: every worker of a cluster runs this version.
 *
 * `migrationLimit` (default 3, Dynamo's is 0 = off): a worker death is the common case migration exists
 * for, and re-sending costs one prefill of prompt + completion so far; 3 covers a rolling restart of a
 * few workers without letting a poisoned request walk the whole pool.
 *
 * Non-retriable worker errors (error frames: invalid_argument for a prompt too long, internal, …) pass
 * through unchanged. Caller abort (the door's signal) ends the stream with an output whose finishReason
 * is 'abort', as the engine's own endpoint does.
 */
import { randomUUID } from 'node:crypto';
import { type CancelSignal, type Logger, SwitchyardError, internal, invalidArgument, toSwitchyardError, unavailable } from '@switchyard/common';
import type { RouteDecision, RoutingTable, WorkerId } from '@switchyard/kv-router';
import {
  E2E_BUCKETS_S,
  Histogram,
  ITL_BUCKETS_S,
  TTFT_BUCKETS_S,
  type ChatTemplate,
  type CompiledSamplingParams,
  type FinishReason,
  type GenerateOutput,
  type GenerateRequest,
  type LlmEndpoint,
  type LlmEngineMetrics,
  type LlmModelCard,
  type GenerationConfigMode,
  type SamplingDefaults,
  type Tokenizer,
} from '@switchyard/llm';
import {
  type InstanceId,
  type RequestPlane,
  NoRespondersError,
  StreamIncompleteError,
  endpointAddress,
  instanceAddress,
  isRetriable,
} from '@switchyard/runtime';
import { GENERATE_ENDPOINT, type WireGenerateOutput, type WireKvTransferHandle, type WireLoad } from '../protocols.js';
import { decodeWireGenerateOutput, generateRequestToWire, toJson } from '../wire-codec.js';
import { DEFAULT_DISAGG_OPTIONS, type DisaggOptions, DisaggregatedPrefill } from './disagg-prefill.js';
import type { HealthProber } from './health-prober.js';
import { watchStall } from './stall-watch.js';
import { InstanceGoneReason, type InstanceTracker } from './instance-tracker.js';
import { LlmWorkerChooser, instanceOf, settlementFailed, workerId } from './llm-worker-chooser.js';
import { type ModelEntry, type ModelRegistry, isDisaggregated } from './model-registry.js';
import type { DisaggLocalReason, DisaggPath, RouterMode, RouterStatsRecorder } from './router-stats.js';

export const DEFAULT_MIGRATION_LIMIT = 3;
/** A generate stream with no frame for this long probes its instance (HealthProber); dead → migrate. */
export const DEFAULT_STALL_PROBE_MS = 2000;

/** The routing knobs every endpoint of one router shares (compiled by router-core's options). */
export interface LlmRoutingOptions {
  readonly mode: RouterMode;
  readonly overlapWeight: number;
  readonly temperature: number;
  readonly migrationLimit: number;
  /** No frame for this long → probe the instance; dead → abort the attempt and migrate. 0 or absent = off. */
  readonly stallProbeMs?: number;
  /** Approximate mode: how long a routed prompt is assumed cached (default DEFAULT_APPROX_TTL_MS). */
  readonly approxTtlMs?: number;
  /** Conditional disaggregation thresholds and the prefill timeout; default DEFAULT_DISAGG_OPTIONS. */
  readonly disagg?: DisaggOptions;
  /** `vllm`: the workers' published sampling defaults are not applied (their end ids still are); default `auto`. */
  readonly generationConfig?: GenerationConfigMode;
}

export interface RoutedLlmEndpointDeps {
  readonly model: string;
  readonly registry: ModelRegistry;
  readonly requestPlane: RequestPlane;
  readonly table: RoutingTable;
  readonly tracker: InstanceTracker;
  readonly stats: RouterStatsRecorder;
  /** The latest load sample of a worker (`<instanceId>/<model>`), if any. */
  readonly loadOf: (worker: WorkerId) => WireLoad | undefined;
  /** Probes a silent stream's instance (`options.stallProbeMs`); without it no stall probe runs. */
  readonly prober?: HealthProber;
  readonly options: LlmRoutingOptions;
  readonly logger: Logger;
  /** Uniform [0, 1); default Math.random. */
  readonly random?: () => number;
  /** Epoch ms; default Date.now. */
  readonly now?: () => number;
}

export { workerId } from './llm-worker-chooser.js';

export class RoutedLlmEndpoint implements LlmEndpoint {
  private lastEntry: ModelEntry;
  private readonly chooser: LlmWorkerChooser;
  private readonly disagg: DisaggregatedPrefill;
  private readonly random: () => number;
  private readonly now: () => number;
  // router-measured metrics
  private readonly ttft = new Histogram(TTFT_BUCKETS_S);
  private readonly itl = new Histogram(ITL_BUCKETS_S);
  private readonly e2e = new Histogram(E2E_BUCKETS_S);
  private promptTokens = 0;
  private generationTokens = 0;
  private readonly finished: Record<FinishReason, number> = { stop: 0, length: 0, abort: 0 };

  /** `entry` must be the registry's entry of an LLM with its text tools built. */
  constructor(
    private readonly deps: RoutedLlmEndpointDeps,
    entry: ModelEntry,
  ) {
    if (entry.kind !== 'llm' || entry.text === undefined || entry.llm === undefined) throw internal(`'${entry.name}' is not a routable LLM`);
    this.lastEntry = entry;
    this.random = deps.random ?? Math.random;
    this.now = deps.now ?? Date.now;
    this.chooser = new LlmWorkerChooser({
      model: deps.model,
      table: deps.table,
      tracker: deps.tracker,
      stats: deps.stats,
      options: deps.options,
      logger: deps.logger,
      random: this.random,
      now: this.now,
    });
    this.disagg = new DisaggregatedPrefill({
      model: deps.model,
      requestPlane: deps.requestPlane,
      table: deps.table,
      tracker: deps.tracker,
      stats: deps.stats,
      ...(deps.prober !== undefined ? { prober: deps.prober } : {}),
      routing: deps.options,
      options: deps.options.disagg ?? DEFAULT_DISAGG_OPTIONS,
      logger: deps.logger,
      random: this.random,
      now: this.now,
    });
  }

  /** The registry's current entry, or the last one seen when every instance is gone. */
  private entry(): ModelEntry {
    const e = this.deps.registry.model(this.deps.model);
    if (e !== undefined && e.kind === 'llm' && e.text !== undefined) this.lastEntry = e;
    return this.lastEntry;
  }

  get card(): LlmModelCard {
    const e = this.entry();
    const llm = e.llm!;
    return {
      name: e.name,
      kind: llm.engine,
      blockSize: e.card.kvBlockSize!,
      contextLength: e.card.contextLength!,
      totalKvBlocks: llm.totalKvBlocks,
      eosTokenIds: llm.eosTokenIds,
      ...(llm.vocabSize === undefined ? {} : { vocabSize: llm.vocabSize }),
      ...samplingDefaultsOf(llm.samplingDefaults, this.deps.options.generationConfig),
      created: llm.created,
      ...(llm.outputParsing === undefined ? {} : { outputParsing: llm.outputParsing }),
    };
  }
  get tokenizer(): Tokenizer {
    return this.entry().text!.tokenizer;
  }
  get chatTemplate(): ChatTemplate | undefined {
    return this.entry().text!.chatTemplate;
  }

  /**
   * `counted`: false when the caller counts the request and its errors in the router stats itself
   * (ClusterEngine's KServe `infer` path, counted as `infer`); default true (`generate`).
   */
  generate(request: GenerateRequest, signal?: CancelSignal, counted = true): AsyncIterable<GenerateOutput> {
    return { [Symbol.asyncIterator]: () => this.run(request, signal, counted) };
  }

  private async *run(request: GenerateRequest, signal: CancelSignal | undefined, counted: boolean): AsyncGenerator<GenerateOutput> {
    const { deps } = this;
    const stats = deps.stats;
    const model = this.card.name;
    if (counted) stats.request(model, 'generate');
    const prompt = request.promptTokenIds;
    if (prompt.length === 0) {
      if (counted) stats.error(model, 'generate', 'invalid_argument');
      throw invalidArgument('the prompt is empty: at least one token is required');
    }
    const started = this.now();
    stats.arrived(model, prompt.length);
    const maxTokens = request.sampling.max_tokens;
    /** The caller's sampling; after a remote prefill, with the seed the first token was sampled with. */
    let sampling: CompiledSamplingParams = request.sampling;
    const generated: number[] = [];
    /** The prompt's cached tokens as a worker or the prefill worker reported them. */
    let cachedTokens: number | undefined;
    /** Else the first attempt's decision's estimate (its overlap). */
    let overlapEstimate: number | undefined;
    const cached = (): number => cachedTokens ?? overlapEstimate ?? 0;
    /** The prefill worker's cached tokens are the request's (a remote prefill ran). */
    let cachedFixed = false;
    let attempt = 0;
    let lastTokenAt: number | undefined;
    /** Disaggregation decided (on the first attempt only). */
    let planned = false;
    /** How a disaggregated model's request was prefilled, as known so far; recorded once, when the request ends. */
    let path: { path: DisaggPath; reason?: DisaggLocalReason } | undefined;
    /** A transfer handle for the next decode attempt (used once). */
    let handle: WireKvTransferHandle | undefined;
    this.promptTokens += prompt.length;
    const tokensOut = (tokenIds: readonly number[]): void => {
      if (tokenIds.length === 0) return;
      const t = this.now();
      if (lastTokenAt === undefined) {
        this.ttft.observe((t - started) / 1000);
        stats.firstToken(model, t - started);
      } else {
        this.itl.observe((t - lastTokenAt) / 1000);
        stats.laterTokens(model, t - lastTokenAt, tokenIds.length);
      }
      lastTokenAt = t;
      generated.push(...tokenIds);
      this.generationTokens += tokenIds.length;
    };
    try {
      for (;;) {
        const remaining = maxTokens === null ? null : maxTokens - generated.length;
        if (remaining !== null && remaining <= 0) {
          // The stream died right after its last token: nothing left to generate.
          yield this.finish('length', null, prompt.length, generated.length, cached(), started);
          return;
        }
        const e = this.entry();
        const tokens = generated.length === 0 ? prompt : [...prompt, ...generated];
        const reservationId = `${request.requestId}:${randomUUID()}`;
        // When the decision's pool holds one worker the request goes there without waiting for the
        // table's answer (the table matches and reserves, atomically, behind it: its call leaves right
        // after the send), unless disaggregation is to be planned on the answer's overlap.
        const pending = this.chooser.begin(e, tokens, reservationId);
        const planNow = !planned && request.prefillOnly !== true && isDisaggregated(e);
        const decision = pending.known === undefined || planNow ? await pending.decision : undefined;
        const instance = instanceOf(decision?.worker ?? pending.known!);
        const firstAttempt = attempt === 0;
        const estimate = (d: RouteDecision): void => {
          if (firstAttempt) overlapEstimate = Math.min(d.overlapBlocks * e.card.kvBlockSize!, prompt.length);
        };
        /** The table's failure to decide (the request was sent without its answer): the attempt's error. */
        let decisionFailed: { readonly err: unknown } | undefined;
        const attemptAbort = new AbortController();
        if (decision !== undefined) estimate(decision);
        else {
          pending.decision.then(estimate, (err: unknown) => {
            decisionFailed = { err };
            attemptAbort.abort(err);
          });
        }
        const onCallerAbort = (): void => attemptAbort.abort(signal?.reason);
        signal?.addEventListener('abort', onCallerAbort, { once: true });
        const untrack = deps.tracker.track(instance, deps.model, attemptAbort);
        let prefillMarked = false;
        let stall: ReturnType<typeof watchStall> | undefined;
        /** This attempt carries a transfer handle whose import report has not arrived yet. */
        let awaitingImport = false;
        try {
          if (!planned && request.prefillOnly !== true) {
            planned = true;
            const plan = decision === undefined ? undefined : await this.disagg.plan(e, prompt.length, decision, maxTokens);
            if (plan?.path === 'local') path = { path: 'local', reason: plan.reason };
            else if (plan !== undefined) {
              // This decode worker will not prefill the prompt: its reserved prefill is another worker's work.
              prefillMarked = true;
              void deps.table.markPrefillDone(reservationId).catch(settlementFailed(deps.logger, 'markPrefillDone'));
              const pre = await this.disagg.prefill(e, { requestId: request.requestId, promptTokenIds: prompt, sampling: wireSampling(sampling, maxTokens) }, plan.prefillWorkers, signal);
              path = { path: 'remote' };
              if (pre.kind === 'aborted') {
                yield this.finish('abort', null, prompt.length, generated.length, cached(), started);
                return;
              }
              if (pre.kind === 'failed') path = { path: 'local', reason: 'prefill_failed' };
              else {
                cachedTokens = Math.min(pre.cachedTokens, prompt.length);
                cachedFixed = true;
                tokensOut(pre.output.tokenIds);
                const logprobs = tokenScores(pre.output);
                if (pre.kind === 'finished') {
                  const fin = this.finish(pre.output.finishReason!, pre.output.stopReason, prompt.length, generated.length, cached(), started);
                  yield { ...fin, tokenIds: pre.output.tokenIds, ...logprobs };
                  return;
                }
                if (pre.handle === undefined) path = { path: 'fallback' };
                else {
                  handle = pre.handle;
                  sampling = { ...sampling, seed: pre.handle.seed };
                }
                // the first token reaches the caller now, before the decode request is sent
                yield { tokenIds: pre.output.tokenIds, finishReason: null, stopReason: null, ...logprobs };
              }
            }
          }
          const wire = generateRequestToWire({
            model: deps.model,
            requestId: request.requestId,
            promptTokenIds: prompt,
            sampling: wireSampling(sampling, maxTokens),
            ...(request.prefillOnly === true ? { prefillOnly: true } : {}),
            outputTokenIds: generated,
            ...(handle !== undefined ? { kvTransfer: handle } : {}),
          });
          awaitingImport = handle !== undefined;
          handle = undefined;
          const target = instanceAddress(endpointAddress(e.card.namespace, e.card.component, GENERATE_ENDPOINT), instance);
          stall = watchStall({ prober: deps.prober, stallProbeMs: deps.options.stallProbeMs, tracker: deps.tracker, stats, logger: deps.logger }, instance, attemptAbort, request.requestId);
          for await (const payload of deps.requestPlane.request(target, toJson(wire), { signal: attemptAbort.signal, requestId: request.requestId })) {
            stall.frame();
            const out = decodeWireGenerateOutput(payload);
            if (awaitingImport) {
              awaitingImport = false;
              path = { path: this.disagg.imported(request.requestId, instance, out.kvImport) };
            }
            if (out.tokenIds.length > 0 && !prefillMarked) {
              prefillMarked = true;
              void deps.table.markPrefillDone(reservationId).catch(settlementFailed(deps.logger, 'markPrefillDone'));
            }
            tokensOut(out.tokenIds);
            if (out.finishReason === null) {
              yield { tokenIds: out.tokenIds, finishReason: null, stopReason: null, ...tokenScores(out) };
              continue;
            }
            if (attempt === 0 && !cachedFixed && out.usage !== undefined) cachedTokens = out.usage.cachedTokens;
            const fin = this.finish(out.finishReason, out.stopReason, prompt.length, generated.length, cached(), started);
            yield { ...fin, tokenIds: out.tokenIds, ...tokenScores(out) };
            return;
          }
          throw internal(`worker ${instance} ended generation of '${request.requestId}' without a finish reason`);
        } catch (err) {
          if (decisionFailed !== undefined) throw decisionFailed.err;
          if (signal?.aborted) {
            yield this.finish('abort', null, prompt.length, generated.length, cached(), started);
            return;
          }
          if (awaitingImport) {
            // the blocks never reached a decode worker: whoever continues prefills prompt + tokens itself
            path = { path: 'fallback' };
            deps.logger.warn({ model, requestId: request.requestId, instance, err }, 'router: the decode attempt with the KV transfer handle failed before its first output');
          }
          const gone = attemptAbort.signal.aborted && attemptAbort.signal.reason instanceof InstanceGoneReason;
          // The caller did not cancel, so a `cancelled` error frame means the worker stopped its
          // endpoint without drain (lease lost, forced shutdown): as good as dead for this request.
          const workerStopped = err instanceof SwitchyardError && err.code === 'cancelled';
          if (!gone && !workerStopped && !isRetriable(err)) throw err;
          // a stream cut by this router's own NATS outage says nothing against the instance
          if (!gone && !(err instanceof StreamIncompleteError && err.local)) deps.tracker.inhibit(instance);
          if (attempt >= deps.options.migrationLimit) {
            // what cannot be moved is unavailable (503 / UNAVAILABLE), never the worker's `cancelled`
            if (gone) throw unavailable(`instance ${instance} left the cluster during the request (migration limit ${deps.options.migrationLimit} reached)`, err);
            if (workerStopped) throw unavailable(`instance ${instance} stopped serving during the request (migration limit ${deps.options.migrationLimit} reached)`, err);
            throw err;
          }
          attempt++;
          const kind = err instanceof NoRespondersError ? 'new_request' : 'ongoing_request';
          stats.migrations[kind]++;
          deps.logger.warn({ requestId: request.requestId, instance, attempt, generated: generated.length, kind, err }, 'router: migrating request to another worker');
        } finally {
          stall?.stop();
          signal?.removeEventListener('abort', onCallerAbort);
          untrack();
          void deps.table.release(reservationId).catch(settlementFailed(deps.logger, 'release'));
        }
      }
    } catch (err) {
      if (counted) stats.error(model, 'generate', toSwitchyardError(err).code);
      throw err;
    } finally {
      // once per request, however it ended (a caller that stopped iterating included)
      if (path !== undefined) stats.disaggPath(model, path.path, path.reason);
    }
  }

  /** The final output of a generation, with its usage; records the end-of-request metrics. */
  private finish(reason: FinishReason, stopReason: number | null, promptTokens: number, completionTokens: number, cachedTokens: number, started: number): GenerateOutput {
    this.finished[reason]++;
    this.e2e.observe((this.now() - started) / 1000);
    if (reason !== 'abort') this.deps.stats.figures.finished(this.deps.model, completionTokens);
    return { tokenIds: [], finishReason: reason, stopReason, usage: { promptTokens, completionTokens, cachedTokens } };
  }

  /**
   * Pick a worker per router mode and reserve the request's load on it (the chooser shared with
   * ClusterEngine's KServe path for this model; see LlmWorkerChooser). The caller marks prefill done
   * and releases `reservationId`.
   */
  chooseWorker(tokens: readonly number[], reservationId: string, exclude?: (id: InstanceId) => boolean): Promise<RouteDecision> {
    return this.chooser.choose(this.entry(), tokens, reservationId, exclude);
  }

  /**
   * Engine metrics of the model across the cluster: running/waiting/KV/prefix-cache figures are the sum
   * of the serving workers' latest load samples; token counts, finish reasons and latency histograms
   * are measured here, by this router (numPreemptions stays 0: workers do not report it).
   */
  metrics(): LlmEngineMetrics {
    let numRunning = 0;
    let numWaiting = 0;
    let kvActiveBlocks = 0;
    let kvTotalBlocks = 0;
    let prefixCacheQueries = 0;
    let prefixCacheHits = 0;
    const e = this.deps.registry.model(this.deps.model);
    for (const id of e?.instances.keys() ?? []) {
      const load = this.deps.loadOf(workerId(id, this.deps.model));
      if (load === undefined) continue;
      numRunning += load.numRunning;
      numWaiting += load.numWaiting;
      kvActiveBlocks += load.kvActiveBlocks;
      kvTotalBlocks += load.kvTotalBlocks;
      prefixCacheQueries += load.prefixCacheQueries;
      prefixCacheHits += load.prefixCacheHits;
    }
    return {
      numRunning,
      numWaiting,
      kvUsage: kvTotalBlocks > 0 ? kvActiveBlocks / kvTotalBlocks : 0,
      kvActiveBlocks,
      kvTotalBlocks,
      prefixCacheQueries,
      prefixCacheHits,
      promptTokens: this.promptTokens,
      generationTokens: this.generationTokens,
      numPreemptions: 0,
      requestsFinished: { ...this.finished },
      timeToFirstToken: this.ttft.snapshot(),
      interTokenLatency: this.itl.snapshot(),
      e2eRequestLatency: this.e2e.snapshot(),
    };
  }
}

/** The wire's sampling: the user-level parameters minus `stop` strings (applied by the door on text). */
function wireSampling(s: CompiledSamplingParams, maxTokens: number | null): { readonly [k: string]: unknown } {
  const { stop: _stop, ...rest } = s;
  return { ...rest, max_tokens: maxTokens };
}

/** The card's samplingDefaults as this router applies them: in mode `vllm` only the end ids. */
function samplingDefaultsOf(defaults: SamplingDefaults | undefined, mode: GenerationConfigMode | undefined): { samplingDefaults?: SamplingDefaults } {
  if (defaults === undefined) return {};
  if (mode !== 'vllm') return { samplingDefaults: defaults };
  return defaults.eos_token_ids === undefined ? {} : { samplingDefaults: { eos_token_ids: defaults.eos_token_ids } };
}

/** The probability fields of a worker's output, as the caller gets them. */
function tokenScores(out: WireGenerateOutput): Pick<GenerateOutput, 'logprobs' | 'topLogprobs'> {
  return { ...(out.logprobs !== undefined ? { logprobs: out.logprobs } : {}), ...(out.topLogprobs !== undefined ? { topLogprobs: out.topLogprobs } : {}) };
}
