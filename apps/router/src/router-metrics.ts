/**
 * The router's own Prometheus families (`switchyard_router_*`, after Dynamo's frontend and router
 * families), rendered from the router core's stats (`RouterStats`, cumulative since start) and the
 * models it serves now, at every scrape. The metrics door appends them after the engine's families
 * (the `vllm:*` families of the cluster's LLM endpoints).
 *
 * Nothing is counted here: every value is read from the snapshot, so a scrape never changes state.
 * Families without samples are left out, as prometheus-cpp does (`renderPrometheusText`).
 *
 * | family | type | labels |
 * |---|---|---|
 * | `switchyard_router_requests_total` | counter | model, endpoint (`generate`: OpenAI; `infer`: KServe) |
 * | `switchyard_router_request_errors_total` | counter | model, endpoint, code (after migrations) |
 * | `switchyard_router_routing_decisions_total` | counter | model, mode, worker |
 * | `switchyard_router_time_to_first_token_seconds` | histogram | (router-wide, LLM requests) |
 * | `switchyard_router_migrations_total` | counter | type (`new_request`, `ongoing_request`) |
 * | `switchyard_router_instance_removal_aborts_total` | counter | |
 * | `switchyard_router_kv_event_batches_total` | counter | |
 * | `switchyard_router_kv_events_applied_total` | counter | |
 * | `switchyard_router_kv_event_gaps_total` | counter | |
 * | `switchyard_router_kv_resyncs_total` | counter | |
 * | `switchyard_router_kv_resync_failures_total` | counter | |
 * | `switchyard_router_kv_events_invalid_total` | counter | |
 * | `switchyard_router_approximate_mode` | gauge | model (1: routed without KV events, cache overlap guessed) |
 * | `switchyard_router_worker_prefix_cache_hit_rate` | gauge | model, worker (instance id) |
 * | `switchyard_router_workers` | gauge | model |
 * | `switchyard_router_held_requests` | gauge | model (requests waiting for a worker to start, scale to zero; every known model, 0 included) |
 * | `switchyard_router_disagg_requests_total` | counter | model, path (`remote`, `local`, `fallback`; disaggregated models only) |
 * | `switchyard_router_disagg_local_total` | counter | model, reason (why `local`: `no_prefill_workers`, `single_token`, `short_prompt`, `prefill_saturated`, `prefill_failed`) |
 * | `switchyard_router_kv_transfer_seconds` | histogram | (router-wide: decode workers' successful KV imports, from their `kvImport.ms`) |
 * | `switchyard_router_call_home_connections` | gauge | (workers connected to stream responses back; only with `--call-home`) |
 * | `switchyard_router_call_home_frames_total` | counter | (response frames and heartbeats that came that way) |
 * | `switchyard_router_call_home_requests_total` | counter | (requests sent down those connections instead of NATS) |
 *
 * `worker` is the worker process's instance id; the core's worker ids are `<instanceId>/<model>`.
 */
import type { RouterStats } from '@switchyard/cluster';
import { renderPrometheusText } from '@switchyard/server/internal';

type Family = Parameters<typeof renderPrometheusText>[0][number];
type Labels = Record<string, string>;
interface Sample {
  readonly labels: Labels;
  readonly value: number;
  readonly metricName?: string;
}

/** A model the router serves now, with the number of worker instances serving it. */
export interface ServedModel {
  readonly name: string;
  readonly workers: number;
}

const P = 'switchyard_router_';

function family(name: string, help: string, type: 'counter' | 'gauge' | 'histogram', values: Sample[]): Family {
  return { name, help, type, aggregator: 'sum', values } as unknown as Family;
}


/** Splits the core's `<instanceId>/<model>` worker id (a model name may itself hold '/'). */
function splitWorker(id: string): { instance: string; model: string } {
  const slash = id.indexOf('/');
  return slash === -1 ? { instance: id, model: '' } : { instance: id.slice(0, slash), model: id.slice(slash + 1) };
}

const compare = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

/**
 * The router's families in Prometheus text. `models`: what the router serves now (any order);
 * `held`: requests waiting for a worker per known model (`RouterCore.heldByModel()`).
 */
/** The call-home listener's figures (`--call-home`). */
export interface CallHomeFigures {
  readonly connections: number;
  readonly frames: number;
  readonly requests: number;
}

export function renderRouterMetrics(stats: RouterStats, models: readonly ServedModel[], held: readonly (readonly [string, number])[] = [], callHome?: CallHomeFigures): string {
  const served = [...models].sort((a, b) => compare(a.name, b.name));
  const approximate = new Set(stats.approximateModels);
  const workers = [...stats.workers].map((w) => ({ ...w, ...splitWorker(w.worker) })).sort((a, b) => compare(a.model, b.model) || compare(a.instance, b.instance));
  const h = stats.timeToFirstToken;
  const ttft = `${P}time_to_first_token_seconds`;
  const kt = stats.kvTransferSeconds;
  const kvTransfer = `${P}kv_transfer_seconds`;
  const counter = (name: string, help: string, value: number): Family => family(`${P}${name}`, help, 'counter', [{ labels: {}, value }]);
  return renderPrometheusText([
    family(
      `${P}requests_total`,
      'Requests the router accepted, by model and endpoint (generate: OpenAI; infer: KServe HTTP/gRPC).',
      'counter',
      stats.byModel.map((m) => ({ labels: { model: m.model, endpoint: m.endpoint }, value: m.requests })),
    ),
    family(
      `${P}request_errors_total`,
      'Requests that ended in an error, after migrations, by model, endpoint and error code.',
      'counter',
      stats.byModel.flatMap((m) => Object.entries(m.errors).map(([code, value]) => ({ labels: { model: m.model, endpoint: m.endpoint, code }, value }))),
    ),
    family(
      `${P}routing_decisions_total`,
      'Routing decisions per worker (a migrated request decides again; a remote prefill is a decision for its prefill worker).',
      'counter',
      workers.filter((w) => w.decisions > 0).map((w) => ({ labels: { model: w.model, mode: stats.mode, worker: w.instance }, value: w.decisions })),
    ),
    family(`${P}time_to_first_token_seconds`, 'Time from an LLM request reaching the router to its first token, in seconds.', 'histogram', [
      ...h.bounds.map((le, i) => ({ labels: { le: String(le) }, value: h.counts[i] ?? 0, metricName: `${ttft}_bucket` })),
      { labels: { le: '+Inf' }, value: h.count, metricName: `${ttft}_bucket` },
      { labels: {}, value: h.sum, metricName: `${ttft}_sum` },
      { labels: {}, value: h.count, metricName: `${ttft}_count` },
    ]),
    family(
      `${P}migrations_total`,
      'Requests moved to another worker: new_request (no worker took it), ongoing_request (its worker failed midway).',
      'counter',
      Object.entries(stats.migrations).sort(([a], [b]) => compare(a, b)).map(([type, value]) => ({ labels: { type }, value })),
    ),
    counter('instance_removal_aborts_total', 'In-flight requests aborted because their worker left discovery and its health probe failed.', stats.instanceRemovalAborts),
    counter('stall_probe_aborts_total', 'In-flight requests aborted because they went silent and their worker failed its health probe.', stats.stallProbeAborts),
    counter('routing_table_fallbacks_total', 'LLM routing decisions taken round-robin because the routing table (Redis) was unavailable.', stats.tableFallbacks),
    counter('kv_event_batches_total', 'KV event batches received from workers.', stats.kvEvents.batches),
    counter('kv_events_applied_total', 'KV cache events applied to the routing table.', stats.kvEvents.applied),
    counter('kv_event_gaps_total', "Gaps found in a worker's KV event ids (events lost or the table flushed).", stats.kvEvents.gaps),
    counter('kv_resyncs_total', 'Workers resynchronised from a KV snapshot.', stats.kvEvents.resyncs),
    counter('kv_resync_failures_total', 'KV snapshot resyncs that failed (retried on the next batch).', stats.kvEvents.resyncFailures),
    counter('event_subscription_failures_total', 'KV event and load subscriptions that failed and were started again.', stats.kvEvents.subscriptionFailures),
    counter('kv_events_invalid_total', 'KV event messages that could not be decoded (dropped).', stats.kvEvents.invalid),
    family(
      `${P}approximate_mode`,
      '1 when a model is routed without KV events (cache overlap is guessed from past routing decisions).',
      'gauge',
      [...new Set([...served.map((m) => m.name), ...approximate])].sort(compare).map((model) => ({ labels: { model }, value: approximate.has(model) ? 1 : 0 })),
    ),
    family(
      `${P}worker_prefix_cache_hit_rate`,
      "Each worker's prefix cache hit rate from its last load report: prompt tokens served from cache / looked up.",
      'gauge',
      workers.filter((w) => w.loadTs !== null).map((w) => ({ labels: { model: w.model, worker: w.instance }, value: w.prefixHitRate })),
    ),
    family(`${P}workers`, 'Worker instances serving each model.', 'gauge', served.map((m) => ({ labels: { model: m.name }, value: m.workers }))),
    family(
      `${P}held_requests`,
      'Requests held waiting for a worker of their model to start (scale to zero, --queue-timeout-secs), per known model.',
      'gauge',
      [...held].sort(([a], [b]) => compare(a, b)).map(([model, value]) => ({ labels: { model }, value })),
    ),
    family(
      `${P}disagg_requests_total`,
      'Requests of disaggregated models by prefill path: remote (prefill worker, KV imported by the decode worker), local (decode worker prefilled), fallback (prefilled remotely but the KV did not reach the decode worker, which prefilled again).',
      'counter',
      stats.disagg.flatMap((m) => (['remote', 'local', 'fallback'] as const).map((path) => ({ labels: { model: m.model, path }, value: m.paths[path] }))),
    ),
    family(
      `${P}disagg_local_total`,
      'Requests of disaggregated models prefilled locally, by reason.',
      'counter',
      stats.disagg.flatMap((m) => Object.entries(m.localReasons).map(([reason, value]) => ({ labels: { model: m.model, reason }, value: value ?? 0 }))),
    ),
    family(
      kvTransfer,
      "Time decode workers took to pull and import a request's KV blocks from a prefill worker, in seconds.",
      'histogram',
      stats.disagg.length === 0 && kt.count === 0
        ? []
        : [
            ...kt.bounds.map((le, i) => ({ labels: { le: String(le) }, value: kt.counts[i] ?? 0, metricName: `${kvTransfer}_bucket` })),
            { labels: { le: '+Inf' }, value: kt.count, metricName: `${kvTransfer}_bucket` },
            { labels: {}, value: kt.sum, metricName: `${kvTransfer}_sum` },
            { labels: {}, value: kt.count, metricName: `${kvTransfer}_count` },
          ],
    ),
    family(`${P}call_home_connections`, 'Worker processes connected to this router to stream responses back (call-home); the others answer over NATS.', 'gauge', callHome === undefined ? [] : [{ labels: {}, value: callHome.connections }]),
    family(`${P}call_home_frames_total`, 'Response frames and heartbeats that came back over call-home connections.', 'counter', callHome === undefined ? [] : [{ labels: {}, value: callHome.frames }]),
    family(`${P}call_home_requests_total`, 'Requests sent down call-home connections instead of through NATS.', 'counter', callHome === undefined ? [] : [{ labels: {}, value: callHome.requests }]),
  ]);
}
