/**
 * RouterStats: what one router replica counted since it started, read by the app's metrics endpoint
 * (`RouterCore.stats()`). Cumulative; nothing is reset (except `figures`, the planners' per-period
 * request figures, which their publisher takes every second). `RouterStatsRecorder` is the mutable side the
 * router's parts write into (single event loop, no locking); it also feeds the dashboard's bounded
 * recent history (`dashboard`, dashboard-state.ts): decisions with their overlap and cost, request
 * arrivals, TTFT, ITL, disaggregation paths.
 */
import { Histogram, TTFT_BUCKETS_S, type HistogramSnapshot } from '@switchyard/llm';
import type { WorkerId } from '@switchyard/kv-router';
import type { LocalReason } from './disagg-policy.js';
import { RequestFiguresRecorder } from './request-figures.js';
import { DashboardState } from './dashboard-state.js';

/**
 * `switchyard_router_kv_transfer_seconds` buckets: a KV import over loopback or a fast link takes a
 * millisecond or so, a long prompt over a slow link seconds.
 */
export const KV_TRANSFER_BUCKETS_S: readonly number[] = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

/**
 * How a request of a disaggregated model was prefilled: `remote` (a prefill worker computed the prompt
 * and the decode worker imported its blocks), `local` (the decode worker prefilled: the policy said so,
 * or the prefill side failed twice), `fallback` (a prefill worker computed the prompt but its blocks
 * did not reach the decode worker — the import refused them, or the decode attempt that carried the
 * handle failed — so the decode worker prefilled again).
 */
export type DisaggPath = 'remote' | 'local' | 'fallback';
/** Why a request went `local`: the policy's reason, or `prefill_failed` (two prefill workers failed). */
export type DisaggLocalReason = LocalReason | 'prefill_failed';

export interface DisaggModelStats {
  readonly model: string;
  readonly paths: Readonly<Record<DisaggPath, number>>;
  /** The `local` requests by reason. */
  readonly localReasons: Readonly<Partial<Record<DisaggLocalReason, number>>>;
}

/** How the router picks a worker for an LLM request (`--router-mode`). */
export type RouterMode = 'kv' | 'round-robin' | 'random' | 'least-loaded';

/** Dynamo's `migration_type` label: the request reached nobody / the stream died midway. */
export type MigrationKind = 'new_request' | 'ongoing_request';

export interface KvEventStats {
  /** KV event batches received from the event plane (after decoding). */
  readonly batches: number;
  /** Events the indexer applied (redelivered ones it skipped are not counted). */
  readonly applied: number;
  /** Gaps in a worker's event ids (each one triggers a resync). */
  readonly gaps: number;
  /** Snapshot resyncs done (first sight of a worker, after a gap, after a failed apply). */
  readonly resyncs: number;
  /** Resyncs that failed (the worker did not answer its snapshot); retried on its next batch. */
  readonly resyncFailures: number;
  /** KV event or load subscriptions that failed and were started again. */
  readonly subscriptionFailures: number;
  /** Messages that could not be decoded (acked and dropped). */
  readonly invalid: number;
}

export interface WorkerStats {
  /** `<instanceId>/<model>`. */
  readonly worker: WorkerId;
  readonly decisions: number;
  /** From the worker's latest WireLoad: prefix-cache hits / queries (0 when it has not queried yet). */
  readonly prefixHitRate: number;
  /** Epoch ms (worker clock) of that load sample; null when none was received. */
  readonly loadTs: number | null;
}

/** Requests of one model, by how they came in. */
export interface ModelRequestStats {
  readonly model: string;
  /** `generate` (LLM: OpenAI door) or `infer` (KServe, tensor or LLM). */
  readonly endpoint: 'generate' | 'infer';
  readonly requests: number;
  /** Requests that ended in an error (after migrations), by error code (invalid_argument, unavailable, ...). */
  readonly errors: Readonly<Record<string, number>>;
}

export interface RouterStats {
  readonly routerId: string;
  readonly mode: RouterMode;
  /** Requests accepted by `generate` / `submit` (LLM and tensor). */
  readonly requests: number;
  /** Requests that ended in an error (after migrations). */
  readonly errors: number;
  /** The same, per model and endpoint, errors by code; sorted by model then endpoint. */
  readonly byModel: readonly ModelRequestStats[];
  /** LLM routing decisions per mode (a migrated request decides again; a remote prefill is a decision for its prefill worker). */
  readonly decisionsByMode: Readonly<Record<RouterMode, number>>;
  readonly workers: readonly WorkerStats[];
  readonly migrations: Readonly<Record<MigrationKind, number>>;
  /** In-flight requests aborted because their instance left discovery. */
  readonly instanceRemovalAborts: number;
  /** In-flight requests aborted because they went silent and the health probe found their instance dead. */
  readonly stallProbeAborts: number;
  /** LLM routing decisions taken without the routing table because it was unavailable (round-robin). */
  readonly tableFallbacks: number;
  readonly kvEvents: KvEventStats;
  /** Models routed in approximate mode (their cards say kvEvents: false), sorted. */
  readonly approximateModels: readonly string[];
  /** Router-measured time to first token of LLM requests, seconds. */
  readonly timeToFirstToken: HistogramSnapshot;
  /** Requests of disaggregated models by prefill path, per model (sorted). */
  readonly disagg: readonly DisaggModelStats[];
  /** Decode workers' KV imports that succeeded (their `kvImport.ms`), seconds. */
  readonly kvTransferSeconds: HistogramSnapshot;
}

/** What a routing decision adds to the dashboard beyond the counted mode and worker. */
export interface DecisionDetail {
  readonly model: string;
  readonly pool: 'decode' | 'prefill';
  readonly overlapBlocks: number;
  /** The chosen worker's cost; null when the routing table was not asked (its fallback). */
  readonly cost: number | null;
  readonly candidates: number;
  readonly promptTokens: number;
  readonly fallback: boolean;
}

export class RouterStatsRecorder {
  /** Recent history for the dashboard (bounded). */
  readonly dashboard: DashboardState;
  /** Epoch ms, for the dashboard's timestamps. */
  private readonly now: () => number;

  constructor(options: { dashboard?: DashboardState; now?: () => number } = {}) {
    this.dashboard = options.dashboard ?? new DashboardState();
    this.now = options.now ?? Date.now;
  }

  requests = 0;
  errors = 0;
  private readonly perModel = new Map<string, { model: string; endpoint: 'generate' | 'infer'; requests: number; errors: Map<string, number> }>();
  instanceRemovalAborts = 0;
  stallProbeAborts = 0;
  tableFallbacks = 0;
  readonly decisionsByMode: Record<RouterMode, number> = { kv: 0, 'round-robin': 0, random: 0, 'least-loaded': 0 };
  readonly decisionsByWorker = new Map<WorkerId, number>();
  readonly migrations: Record<MigrationKind, number> = { new_request: 0, ongoing_request: 0 };
  readonly kvEvents = { batches: 0, applied: 0, gaps: 0, resyncs: 0, resyncFailures: 0, subscriptionFailures: 0, invalid: 0 };
  readonly approximateModels = new Set<string>();
  readonly ttft = new Histogram(TTFT_BUCKETS_S);
  readonly kvTransfer = new Histogram(KV_TRANSFER_BUCKETS_S);
  /** Per-model figures of the current period for planners (not cumulative: the publisher takes them each second). */
  readonly figures = new RequestFiguresRecorder();
  private readonly disaggByModel = new Map<string, { paths: Record<DisaggPath, number>; localReasons: Map<DisaggLocalReason, number> }>();

  /** A request of a disaggregated model took `path` (`reason` for `local`). Once per request. */
  disaggPath(model: string, path: DisaggPath, reason?: DisaggLocalReason): void {
    let m = this.disaggByModel.get(model);
    if (m === undefined) {
      m = { paths: { remote: 0, local: 0, fallback: 0 }, localReasons: new Map() };
      this.disaggByModel.set(model, m);
    }
    m.paths[path]++;
    this.dashboard.disaggPath(model, path);
    if (path === 'local' && reason !== undefined) m.localReasons.set(reason, (m.localReasons.get(reason) ?? 0) + 1);
  }

  /** A request of `model` was accepted. */
  request(model: string, endpoint: 'generate' | 'infer'): void {
    this.requests++;
    this.modelEntry(model, endpoint).requests++;
  }

  /** A request of `model` ended with an error of class `code`. */
  error(model: string, endpoint: 'generate' | 'infer', code: string): void {
    this.errors++;
    const e = this.modelEntry(model, endpoint).errors;
    e.set(code, (e.get(code) ?? 0) + 1);
  }

  private modelEntry(model: string, endpoint: 'generate' | 'infer') {
    const key = `${endpoint}\n${model}`;
    let m = this.perModel.get(key);
    if (m === undefined) {
      m = { model, endpoint, requests: 0, errors: new Map() };
      this.perModel.set(key, m);
    }
    return m;
  }

  decided(mode: RouterMode, worker: WorkerId, detail?: DecisionDetail): void {
    this.decisionsByMode[mode]++;
    this.decisionsByWorker.set(worker, (this.decisionsByWorker.get(worker) ?? 0) + 1);
    if (detail !== undefined) this.dashboard.decided({ ts: this.now(), mode, instanceId: worker.slice(0, worker.indexOf('/')), ...detail });
  }

  /** A request of `model` with a `promptTokens`-token prompt arrived (once per request): planners' figures and the dashboard. */
  arrived(model: string, promptTokens: number): void {
    this.figures.arrived(model, promptTokens);
    this.dashboard.arrived(this.now());
  }

  /** A request's first token reached the router `ms` after it arrived. */
  firstToken(model: string, ms: number): void {
    this.ttft.observe(ms / 1000);
    this.figures.firstToken(model, ms);
    this.dashboard.firstToken(this.now(), ms);
  }

  /** `count` further tokens arrived together, `gapMs` after the previous ones. */
  laterTokens(model: string, gapMs: number, count: number): void {
    this.figures.laterTokens(model, gapMs, count);
    this.dashboard.laterTokens(this.now(), gapMs, count);
  }

  snapshot(
    routerId: string,
    mode: RouterMode,
    loads: ReadonlyMap<WorkerId, { readonly ts: number; readonly prefixCacheQueries: number; readonly prefixCacheHits: number }>,
  ): RouterStats {
    const ids = new Set<WorkerId>([...this.decisionsByWorker.keys(), ...loads.keys()]);
    const workers = [...ids].sort().map((worker): WorkerStats => {
      const load = loads.get(worker);
      return {
        worker,
        decisions: this.decisionsByWorker.get(worker) ?? 0,
        prefixHitRate: load !== undefined && load.prefixCacheQueries > 0 ? load.prefixCacheHits / load.prefixCacheQueries : 0,
        loadTs: load?.ts ?? null,
      };
    });
    return {
      routerId,
      mode,
      requests: this.requests,
      errors: this.errors,
      byModel: [...this.perModel.values()]
        .map((m) => ({ model: m.model, endpoint: m.endpoint, requests: m.requests, errors: Object.fromEntries([...m.errors].sort(([a], [b]) => (a < b ? -1 : 1))) }))
        .sort((a, b) => (a.model < b.model ? -1 : a.model > b.model ? 1 : a.endpoint < b.endpoint ? -1 : a.endpoint > b.endpoint ? 1 : 0)),
      decisionsByMode: { ...this.decisionsByMode },
      workers,
      migrations: { ...this.migrations },
      instanceRemovalAborts: this.instanceRemovalAborts,
      stallProbeAborts: this.stallProbeAborts,
      tableFallbacks: this.tableFallbacks,
      kvEvents: { ...this.kvEvents },
      approximateModels: [...this.approximateModels].sort(),
      timeToFirstToken: this.ttft.snapshot(),
      disagg: [...this.disaggByModel]
        .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
        .map(([model, m]) => ({ model, paths: { ...m.paths }, localReasons: Object.fromEntries([...m.localReasons].sort(([a], [b]) => (a < b ? -1 : 1))) })),
      kvTransferSeconds: this.kvTransfer.snapshot(),
    };
  }
}
