/**
 * LlmWorkerChooser: the routing decision of one LLM, shared by every path that sends it a generation
 * (the OpenAI door's RoutedLlmEndpoint and ClusterEngine's KServe `text_input` requests), so both
 * paths inform and benefit from the same cache-aware choice and the same round-robin cursor.
 *
 * Pools (disaggregation, ARCHITECTURE.md flow 5): a chooser serves one pool of the model's instances.
 * The `decode` pool (default) is every aggregated and decode instance: whole requests go there, so a
 * prefill-role instance is never chosen for one. The `prefill` pool is the prefill-role instances, for
 * the prefill-only half of disaggregated requests (disagg-prefill.ts); it has its own cursors.
 *
 * One call: candidates (in the pool, serving, not excluded by the caller, not inhibited unless all are) → per router mode
 * (`kv`; `round-robin` / `random` chosen locally, then reserved on that one worker; `least-loaded` =
 * scoring `load`; approximate mode when the card says `kvEvents: false`, warned once and counted) →
 * RoutingTable.selectAndReserve (one atomic step). Routing table unavailable → round-robin without it,
 * nothing reserved (a pool of one: its worker). Every decision is counted in the router stats, once the
 * table answered. `begin` also names the worker before the answer when the pool holds one.
 */
import { type Logger, SwitchyardError, unavailable } from '@switchyard/common';
import { DEFAULT_APPROX_TTL_MS, type RouteDecision, type RoutingTable, type WorkerId } from '@switchyard/kv-router';
import { hashTokenBlocks } from '@switchyard/llm';
import type { InstanceId } from '@switchyard/runtime';
import type { InstanceTracker } from './instance-tracker.js';
import { type ModelEntry, instanceRole, onlyPrefillWorkers } from './model-registry.js';
import type { RouterMode, RouterStatsRecorder } from './router-stats.js';

/**
 * The catch of a markPrefillDone / release nobody waits for. `unavailable` means the table could not
 * reach its storage and keeps the settlement to apply once it answers (RoutingTable): logged at debug,
 * since every request of an outage would log one and the outage is logged where it is seen; anything
 * else is a warning.
 */
export function settlementFailed(logger: Logger, what: 'markPrefillDone' | 'release'): (err: unknown) => void {
  return (err) => {
    if (err instanceof SwitchyardError && err.code === 'unavailable') logger.debug({ err }, `router: ${what} not applied yet (routing table unreachable); kept and sent again once it answers`);
    else logger.warn({ err }, `router: ${what} failed`);
  };
}

/** `<instanceId>/<model>`: a worker in the routing table. */
export function workerId(instanceId: string, model: string): WorkerId {
  return `${instanceId}/${model}`;
}

/** The instance of a routing-table worker id (`<instanceId>/<model>`). */
export function instanceOf(worker: WorkerId): InstanceId {
  return worker.slice(0, worker.indexOf('/')) as InstanceId;
}

export interface LlmWorkerChooserDeps {
  readonly model: string;
  readonly table: RoutingTable;
  readonly tracker: InstanceTracker;
  readonly stats: RouterStatsRecorder;
  readonly options: {
    readonly mode: RouterMode;
    readonly overlapWeight: number;
    readonly temperature: number;
    /** Approximate mode: how long a routed prompt is assumed cached (default DEFAULT_APPROX_TTL_MS). */
    readonly approxTtlMs?: number;
  };
  readonly logger: Logger;
  /** Uniform [0, 1). */
  readonly random: () => number;
  /** Epoch ms. */
  readonly now: () => number;
  /** Which instances this chooser picks from (see the file comment); default 'decode'. */
  readonly pool?: 'decode' | 'prefill';
}

export class LlmWorkerChooser {
  private rrCursor = 0;
  private fallbackCursor = 0;
  private lastFallbackWarn = -Infinity;
  private warnedApproximate = false;

  constructor(private readonly deps: LlmWorkerChooserDeps) {}

  /**
   * Pick a worker of `e` for a prompt of `tokens` per router mode and reserve the request's load on it
   * under `reservationId` (the caller marks prefill done and releases it). `exclude` drops instances
   * the caller cannot use (already tried, wrong version). Throws `unavailable` when no candidate is left.
   */
  async choose(e: ModelEntry, tokens: readonly number[], reservationId: string, exclude?: (id: InstanceId) => boolean): Promise<RouteDecision> {
    return this.begin(e, tokens, reservationId, exclude).decision;
  }

  /**
   * `choose`, split: `decision` is the table's answer, and `known` is the worker it will name when the
   * pool the table picks from holds one worker (round-robin and random modes always; `kv` and
   * `least-loaded` when one worker serves the model), else undefined. The table then only matches and
   * reserves (one atomic step, as always), so a caller may send the request to `known` without waiting
   * for it: the table's call is made once the caller's synchronous work (its send) is done, in a
   * microtask; without `known` it is made before this returns. Throws `unavailable` at once when no
   * candidate is left.
   */
  begin(e: ModelEntry, tokens: readonly number[], reservationId: string, exclude?: (id: InstanceId) => boolean): { readonly known: WorkerId | undefined; readonly decision: Promise<RouteDecision> } {
    const { deps } = this;
    const model = deps.model;
    const prefillPool = deps.pool === 'prefill';
    const inPool = [...e.instances.keys()].filter((id) => (instanceRole(e, id) === 'prefill') === prefillPool);
    if (inPool.length === 0 && !prefillPool) throw onlyPrefillWorkers(e);
    const usable = inPool.filter((id) => !(exclude?.(id) ?? false));
    const candidates = deps.tracker
      .preferUninhibited(usable)
      .sort()
      .map((id) => workerId(id, model));
    if (candidates.length === 0) {
      throw unavailable(`no ${prefillPool ? 'prefill ' : ''}worker available for model '${model}' (${inPool.length} registered, none usable)`);
    }
    const blockSize = e.card.kvBlockSize!;
    const approximate = e.llm!.kvEvents === false;
    if (approximate && !this.warnedApproximate) {
      this.warnedApproximate = true;
      deps.stats.approximateModels.add(model);
      deps.logger.warn(
        { model },
        `router: model '${model}' publishes no KV events (kvEvents: false) — KV routing runs in APPROXIMATE mode, guessing cache contents from its own decisions`,
      );
    }
    const mode = deps.options.mode;
    let pool = candidates;
    if (mode === 'round-robin') pool = [candidates[this.rrCursor++ % candidates.length]!];
    else if (mode === 'random') pool = [candidates[Math.floor(deps.random() * candidates.length) % candidates.length]!];
    const random = deps.random();
    const now = deps.now();
    const call = (): Promise<RouteDecision> =>
      deps.table.selectAndReserve({
        requestId: reservationId,
        blockHashes: hashTokenBlocks(tokens, blockSize).sequenceHashes,
        promptTokens: tokens.length,
        blockSize,
        candidates: pool,
        overlapWeight: deps.options.overlapWeight,
        scoring: mode === 'least-loaded' ? 'load' : 'kv',
        temperature: deps.options.temperature,
        random,
        now,
        ...(approximate ? { approximate: { ttlMs: deps.options.approxTtlMs ?? DEFAULT_APPROX_TTL_MS } } : {}),
      });
    const known = pool.length === 1 ? pool[0] : undefined;
    // A known worker's request leaves first: hashing the prompt and the table's call (a socket write
    // that wakes Redis) wait for the caller's synchronous work, its send, to end (a microtask).
    const reserve = known === undefined ? call() : Promise.resolve().then(call);
    return { known, decision: this.decided(reserve, candidates, pool, prefillPool, tokens.length) };
  }

  /** The table's answer counted in the stats; without the table, round-robin over `candidates` (the one worker of a pool of one). */
  private async decided(reserve: Promise<RouteDecision>, candidates: readonly WorkerId[], pool: readonly WorkerId[], prefillPool: boolean, promptTokens: number): Promise<RouteDecision> {
    const { deps } = this;
    const model = deps.model;
    const mode = deps.options.mode;
    let decision: RouteDecision;
    let fallback = false;
    try {
      decision = await reserve;
    } catch (err) {
      // The routing table (Redis) is unreachable: route without it rather than fail the request.
      // Round-robin over the live candidates, no cache overlap known, nothing reserved (the release
      // and markPrefillDone calls that follow fail and are only logged). KV events missed meanwhile
      // show up as an event-id gap once the table is back, and the worker is resynced from a snapshot.
      if (!(err instanceof SwitchyardError && err.code === 'unavailable')) throw err;
      deps.stats.tableFallbacks++;
      fallback = true;
      if (deps.now() - this.lastFallbackWarn > 5000) {
        this.lastFallbackWarn = deps.now();
        deps.logger.warn({ model, err }, 'router: routing table unavailable; routing round-robin without it');
      }
      // a pool of one was announced as `known`: the request may be on its way there already
      const worker = pool.length === 1 ? pool[0]! : candidates[this.fallbackCursor++ % candidates.length]!;
      decision = { worker, overlapBlocks: 0, scores: [] };
    }
    deps.stats.decided(mode, decision.worker, {
      model,
      pool: prefillPool ? 'prefill' : 'decode',
      overlapBlocks: decision.overlapBlocks,
      cost: decision.scores.find((s) => s.worker === decision.worker)?.cost ?? null,
      candidates: pool.length,
      promptTokens,
      fallback,
    });
    return decision;
  }
}
