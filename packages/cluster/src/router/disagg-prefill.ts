/**
 * DisaggregatedPrefill: the prefill half of a disaggregated generation (ARCHITECTURE.md flow 5), for
 * one LLM; RoutedLlmEndpoint runs the decode half. Per request:
 *
 * 1. `plan` — after the decode worker was chosen (and reserved): undefined when the model is not
 *    served disaggregated (no instance has the role prefill or decode: plain aggregated serving, nothing
 *    counted); else the conditional-disaggregation decision (disagg-policy.ts) over the usable prefill
 *    workers and their queued prefill tokens. A model with decode workers but no usable prefill worker
 *    is served aggregated: logged once (again after prefill workers came back and left again).
 * 2. `prefill` — on 'remote': a prefill-only `generate` (the caller's sampling, `max_tokens` kept: the
 *    prefill engine stops after one token) to a prefill worker chosen KV-aware among the non-saturated
 *    ones, under its own reservation (released when the prefill ends), sent under the caller's request
 *    id as envelope id (the decode attempt uses it too, so the worker-side engine ids agree). Its final
 *    output is the first token and the transfer handle, handed on only when it names that instance and
 *    the transfer address on its card (`handleProblem`; else the decode worker prefills again, keeping
 *    the token). A failure — no responders, the stream dies or
 *    stalls dead, an error frame, a final output that is not one token, `prefillTimeoutMs` passed — is
 *    logged and retried once on another prefill worker, then reported 'failed' (the caller prefills
 *    locally; the client sees no error). A caller abort aborts the prefill request ('aborted').
 * 3. `imported` — the decode worker's import report (first output of the attempt with the handle) →
 *    'remote' or 'fallback'.
 *
 * QUEUED PREFILL TOKENS. A prefill worker's queue is the routing table's pending prefill tokens for it
 * (`RoutingTable.loads`: the uncached prompt tokens of requests reserved on it and not yet past their
 * first token), not the workers' load samples: the table is what every router replica writes in the
 * same atomic step as its decisions, so it already counts requests routed a moment ago by any replica,
 * and it is in tokens, the unit of prefill work; load samples are up to a sampling interval old and
 * count requests, not tokens. The table is read only when the other conditions already say remote.
 * An unreachable table (Redis down) counts every queue as empty (logged at most every 5 s): routing
 * goes on round-robin without it anyway (LlmWorkerChooser).
 */
import { randomUUID } from 'node:crypto';
import { type CancelSignal, type Logger, SwitchyardError } from '@switchyard/common';
import type { RoutingTable, RouteDecision, WorkerId } from '@switchyard/kv-router';
import { type InstanceId, type RequestPlane, NoRespondersError, StreamIncompleteError, endpointAddress, instanceAddress } from '@switchyard/runtime';
import { GENERATE_ENDPOINT, type LlmCardMetadata, type WireGenerateOutput, type WireKvImportReport, type WireKvTransferHandle } from '../protocols.js';
import { decodeWireGenerateOutput, generateRequestToWire, toJson } from '../wire-codec.js';
import { DEFAULT_DISAGG_MAX_PREFILL_QUEUE_TOKENS, DEFAULT_DISAGG_MIN_REMOTE_TOKENS, type DisaggDecision, type DisaggThresholds, decideDisagg } from './disagg-policy.js';
import type { HealthProber } from './health-prober.js';
import { InstanceGoneReason, type InstanceTracker } from './instance-tracker.js';
import { LlmWorkerChooser, instanceOf, settlementFailed, workerId } from './llm-worker-chooser.js';
import { type ModelEntry, instancesWithRole, isDisaggregated } from './model-registry.js';
import type { DisaggPath, RouterMode, RouterStatsRecorder } from './router-stats.js';
import { watchStall } from './stall-watch.js';

/** A prefill-only request not finished after this long is abandoned (retried elsewhere, then local). */
export const DEFAULT_PREFILL_TIMEOUT_MS = 10_000;
/** Prefill workers tried per request before the decode worker prefills locally. */
export const PREFILL_ATTEMPTS = 2;

export interface DisaggOptions extends DisaggThresholds {
  /** How long one prefill-only request may take, ms (`--disagg-prefill-timeout-ms`). */
  readonly prefillTimeoutMs: number;
}

export const DEFAULT_DISAGG_OPTIONS: DisaggOptions = {
  minRemoteTokens: DEFAULT_DISAGG_MIN_REMOTE_TOKENS,
  maxPrefillQueueTokens: DEFAULT_DISAGG_MAX_PREFILL_QUEUE_TOKENS,
  prefillTimeoutMs: DEFAULT_PREFILL_TIMEOUT_MS,
};

export interface DisaggregatedPrefillDeps {
  readonly model: string;
  readonly requestPlane: RequestPlane;
  readonly table: RoutingTable;
  readonly tracker: InstanceTracker;
  readonly stats: RouterStatsRecorder;
  readonly prober?: HealthProber;
  readonly routing: { readonly mode: RouterMode; readonly overlapWeight: number; readonly temperature: number; readonly stallProbeMs?: number; readonly approxTtlMs?: number };
  readonly options: DisaggOptions;
  readonly logger: Logger;
  readonly random: () => number;
  readonly now: () => number;
}

/** What the prefill half produced. */
export type PrefillOutcome =
  /**
   * The first token (the prefill finished with 'length'). `handle` absent: the prefill worker gave no
   * transfer handle (it has no transfer plane), so the decode worker prefills again, keeping the token.
   */
  | { readonly kind: 'first'; readonly output: WireGenerateOutput; readonly handle: WireKvTransferHandle | undefined; readonly cachedTokens: number }
  /** The request ended at its first token ('stop': EOS or a stop token id): nothing to decode. */
  | { readonly kind: 'finished'; readonly output: WireGenerateOutput; readonly cachedTokens: number }
  /** Every attempt failed (logged): prefill locally. */
  | { readonly kind: 'failed' }
  /** The caller aborted. */
  | { readonly kind: 'aborted' };

export interface PrefillRequest {
  readonly requestId: string;
  readonly promptTokenIds: readonly number[];
  /** The wire sampling, `max_tokens` the caller's. */
  readonly sampling: { readonly [k: string]: unknown };
}

/** The reason a prefill attempt's controller is aborted with when it runs out of time. */
class PrefillTimeout extends Error {}

export class DisaggregatedPrefill {
  private readonly chooser: LlmWorkerChooser;
  /** Logged that the model has no usable prefill worker; re-armed when it has one again. */
  private warnedNoPrefill = false;
  private lastTableWarn = -Infinity;

  constructor(private readonly deps: DisaggregatedPrefillDeps) {
    this.chooser = new LlmWorkerChooser({
      model: deps.model,
      table: deps.table,
      tracker: deps.tracker,
      stats: deps.stats,
      options: deps.routing,
      logger: deps.logger,
      random: deps.random,
      now: deps.now,
      pool: 'prefill',
    });
  }

  /** See the file comment. `decode`: the decode worker's routing decision for this prompt. */
  async plan(e: ModelEntry, promptTokens: number, decode: RouteDecision, maxTokens: number | null): Promise<DisaggDecision | undefined> {
    if (!isDisaggregated(e)) return undefined;
    const { deps } = this;
    const prefill = instancesWithRole(e, 'prefill').filter((id) => !deps.tracker.isInhibited(id));
    const input = { promptTokens, overlapBlocks: decode.overlapBlocks, blockSize: e.card.kvBlockSize!, maxTokens };
    const zero = prefill.map((id) => ({ worker: workerId(id, deps.model), queuedTokens: 0 }));
    const first = decideDisagg({ ...input, prefillQueues: zero }, deps.options);
    if (first.path === 'local' && first.reason === 'no_prefill_workers') {
      if (!this.warnedNoPrefill) {
        this.warnedNoPrefill = true;
        deps.logger.warn({ model: deps.model }, `router: model '${deps.model}' has decode workers but no usable prefill worker; prefilling on the decode workers (aggregated) until one registers`);
      }
      return first;
    }
    this.warnedNoPrefill = false;
    if (first.path === 'local') return first;
    return decideDisagg({ ...input, prefillQueues: await this.queues(zero) }, deps.options);
  }

  /** Queued prefill tokens of each prefill worker (see the file comment). */
  private async queues(workers: readonly { readonly worker: WorkerId }[]): Promise<{ worker: WorkerId; queuedTokens: number }[]> {
    const { deps } = this;
    let loads: ReadonlyMap<WorkerId, { readonly prefillTokens: number }>;
    try {
      loads = await deps.table.loads(deps.now());
    } catch (err) {
      if (!(err instanceof SwitchyardError && err.code === 'unavailable')) throw err;
      if (deps.now() - this.lastTableWarn > 5000) {
        this.lastTableWarn = deps.now();
        deps.logger.warn({ model: deps.model, err }, 'router: routing table unavailable; prefill queues unknown, counted as empty');
      }
      loads = new Map();
    }
    return workers.map(({ worker }) => ({ worker, queuedTokens: loads.get(worker)?.prefillTokens ?? 0 }));
  }

  /** Run the prefill half on one of `candidates` (a 'remote' plan's prefill workers). Never throws for a worker's failure. */
  async prefill(e: ModelEntry, request: PrefillRequest, candidates: readonly WorkerId[], signal: CancelSignal | undefined): Promise<PrefillOutcome> {
    const allowed = new Set(candidates.map(instanceOf));
    const tried = new Set<InstanceId>();
    for (let attempt = 1; attempt <= PREFILL_ATTEMPTS; attempt++) {
      if (signal?.aborted === true) return { kind: 'aborted' };
      let decision: RouteDecision;
      const reservationId = `${request.requestId}:prefill:${randomUUID()}`;
      try {
        decision = await this.chooser.choose(e, request.promptTokenIds, reservationId, (id) => !allowed.has(id) || tried.has(id));
      } catch (err) {
        this.deps.logger.warn({ model: this.deps.model, requestId: request.requestId, attempt, err }, 'router: no prefill worker left to try; prefilling locally');
        return { kind: 'failed' };
      }
      const instance = instanceOf(decision.worker);
      tried.add(instance);
      const outcome = await this.attempt(e, request, instance, reservationId, signal);
      if (outcome.kind !== 'failed') return outcome;
    }
    return { kind: 'failed' };
  }

  /**
   * The decode worker's report on the first output of an attempt that carried a transfer handle → the
   * request's path: 'remote' (the import's time observed in the KV transfer histogram), or 'fallback'
   * (logged with the worker's reason) when it prefilled locally or sent no report.
   */
  imported(requestId: string, instance: InstanceId, report: WireKvImportReport | undefined): DisaggPath {
    const { stats, logger, model } = this.deps;
    if (report !== undefined && report.fallback === undefined) {
      stats.kvTransfer.observe(report.ms / 1000);
      return 'remote';
    }
    logger.warn(
      { model, requestId, instance, reason: report?.fallback ?? 'no import report on the first output' },
      'router: the decode worker did not use the transferred KV blocks; it prefilled locally',
    );
    return 'fallback';
  }

  /** One prefill-only request to `instance`; its reservation is released whatever happens. */
  private async attempt(e: ModelEntry, request: PrefillRequest, instance: InstanceId, reservationId: string, signal: CancelSignal | undefined): Promise<PrefillOutcome> {
    const { deps } = this;
    const abort = new AbortController();
    const onCallerAbort = (): void => abort.abort(signal?.reason);
    signal?.addEventListener('abort', onCallerAbort, { once: true });
    const timer = setTimeout(() => abort.abort(new PrefillTimeout(`prefill timed out after ${deps.options.prefillTimeoutMs} ms`)), deps.options.prefillTimeoutMs);
    const untrack = deps.tracker.track(instance, deps.model, abort);
    const stall = watchStall({ prober: deps.prober, stallProbeMs: deps.routing.stallProbeMs, tracker: deps.tracker, stats: deps.stats, logger: deps.logger }, instance, abort, request.requestId);
    const wire = generateRequestToWire({ model: deps.model, requestId: request.requestId, promptTokenIds: request.promptTokenIds, sampling: request.sampling, prefillOnly: true });
    const target = instanceAddress(endpointAddress(e.card.namespace, e.card.component, GENERATE_ENDPOINT), instance);
    const tokens: number[] = [];
    const logprobs: number[] = [];
    const topLogprobs: NonNullable<WireGenerateOutput['topLogprobs']>[number][] = [];
    let marked = false;
    let final: WireGenerateOutput | undefined;
    try {
      // Read to the end of the stream, not just to the final output: leaving early would cancel the
      // request on the worker, which may then drop the lease it just handed out.
      for await (const payload of deps.requestPlane.request(target, toJson(wire), { signal: abort.signal, requestId: request.requestId })) {
        stall.frame();
        const out = decodeWireGenerateOutput(payload);
        if (final !== undefined) throw new Error('prefill worker sent an output after its final one');
        tokens.push(...out.tokenIds);
        if (out.logprobs !== undefined) logprobs.push(...out.logprobs);
        if (out.topLogprobs !== undefined) topLogprobs.push(...out.topLogprobs);
        if (tokens.length > 0 && !marked) {
          marked = true;
          void deps.table.markPrefillDone(reservationId).catch(settlementFailed(deps.logger, 'markPrefillDone'));
        }
        if (out.finishReason !== null) final = out;
      }
      if (final === undefined) throw new Error('prefill stream ended without a final output');
      const whole: WireGenerateOutput = { ...final, tokenIds: tokens, ...(logprobs.length > 0 ? { logprobs } : {}), ...(topLogprobs.length > 0 ? { topLogprobs } : {}) };
      const cachedTokens = final.usage?.cachedTokens ?? 0;
      if (final.finishReason === 'stop' && tokens.length <= 1) return { kind: 'finished', output: whole, cachedTokens };
      if (final.finishReason === 'length' && tokens.length === 1) {
        const problem = handleProblem(e, instance, final.kvTransfer);
        if (problem !== undefined) deps.logger.warn({ model: deps.model, requestId: request.requestId, instance }, `router: ${problem}; the decode worker prefills again`);
        return { kind: 'first', output: whole, handle: problem === undefined ? final.kvTransfer : undefined, cachedTokens };
      }
      throw new Error(`prefill worker ended the prefill-only request with ${tokens.length} tokens and finish reason '${final.finishReason}'`);
    } catch (err) {
      if (signal?.aborted === true) return { kind: 'aborted' };
      const reason: unknown = abort.signal.aborted ? abort.signal.reason : undefined;
      const dead = err instanceof NoRespondersError || (err instanceof StreamIncompleteError && !err.local) || (err instanceof SwitchyardError && err.code === 'cancelled');
      // a dead or wedged worker is skipped for a while; one that answered with an error frame is not
      if ((dead || reason instanceof PrefillTimeout) && !(reason instanceof InstanceGoneReason)) deps.tracker.inhibit(instance);
      deps.logger.warn(
        { model: deps.model, requestId: request.requestId, instance, err: reason instanceof PrefillTimeout || reason instanceof InstanceGoneReason ? reason : err },
        'router: prefill attempt failed',
      );
      return { kind: 'failed' };
    } finally {
      clearTimeout(timer);
      stall.stop();
      signal?.removeEventListener('abort', onCallerAbort);
      untrack();
      void deps.table.release(reservationId).catch(settlementFailed(deps.logger, 'release'));
    }
  }
}

/**
 * Why a prefill worker's handle cannot be handed on, else undefined. A handle must name the instance
 * that answered and the transfer address that instance advertises on its card: decode workers dial
 * that address, so a worker may only ever point them at itself, never at another host.
 */
export function handleProblem(e: ModelEntry, instance: InstanceId, handle: WireKvTransferHandle | undefined): string | undefined {
  if (handle === undefined) return 'the prefill worker sent no KV transfer handle';
  if (handle.instanceId !== instance) return `the prefill worker's KV transfer handle names instance ${handle.instanceId}, not its own`;
  const advertised = (e.decoded.get(instance) as LlmCardMetadata | undefined)?.kvTransfer?.address;
  if (advertised === undefined) return 'the prefill worker sent a KV transfer handle but advertises no transfer address';
  if (handle.address !== advertised) return `the prefill worker's KV transfer handle names address ${handle.address}, not the one on its card (${advertised})`;
  return undefined;
}
