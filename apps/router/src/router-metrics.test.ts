import type { RouterStats } from '@switchyard/cluster';
import { describe, expect, it } from 'vitest';
import { renderRouterMetrics } from './router-metrics.js';

const STATS: RouterStats = {
  routerId: 'r1',
  mode: 'kv',
  requests: 7,
  errors: 2,
  byModel: [
    { model: 'add_sub', endpoint: 'infer', requests: 2, errors: {} },
    { model: 'mock_llm', endpoint: 'generate', requests: 5, errors: { invalid_argument: 1, unavailable: 1 } },
  ],
  decisionsByMode: { kv: 5, 'round-robin': 0, random: 0, 'least-loaded': 0 },
  workers: [
    { worker: 'bbbb/mock_llm', decisions: 1, prefixHitRate: 0, loadTs: 1000 },
    { worker: 'aaaa/mock_llm', decisions: 3, prefixHitRate: 0.5, loadTs: 1000 },
    { worker: 'bbbb/tiny_llm', decisions: 1, prefixHitRate: 0, loadTs: null },
    { worker: 'cccc/mock_llm', decisions: 0, prefixHitRate: 0.25, loadTs: 900 },
  ],
  migrations: { new_request: 0, ongoing_request: 1 },
  instanceRemovalAborts: 0,
  stallProbeAborts: 0,
  tableFallbacks: 0,
  kvEvents: { batches: 9, applied: 42, gaps: 1, resyncs: 3, resyncFailures: 0, subscriptionFailures: 0, invalid: 0 },
  approximateModels: ['tiny_llm'],
  timeToFirstToken: { bounds: [0.01, 0.1], counts: [1, 3], sum: 0.125, count: 4 },
  disagg: [{ model: 'mock_llm', paths: { remote: 3, local: 2, fallback: 1 }, localReasons: { prefill_failed: 1, short_prompt: 1 } }],
  kvTransferSeconds: { bounds: [0.001, 0.01], counts: [1, 2], sum: 0.0075, count: 3 },
};

describe('renderRouterMetrics', () => {
  it('renders every family from the stats and the served models', () => {
    const text = renderRouterMetrics(STATS, [
      { name: 'tiny_llm', workers: 1 },
      { name: 'mock_llm', workers: 3 },
    ]);
    expect(text).toBe(`# HELP switchyard_router_requests_total Requests the router accepted, by model and endpoint (generate: OpenAI; infer: KServe HTTP/gRPC).
# TYPE switchyard_router_requests_total counter
switchyard_router_requests_total{endpoint="infer",model="add_sub"} 2
switchyard_router_requests_total{endpoint="generate",model="mock_llm"} 5
# HELP switchyard_router_request_errors_total Requests that ended in an error, after migrations, by model, endpoint and error code.
# TYPE switchyard_router_request_errors_total counter
switchyard_router_request_errors_total{code="invalid_argument",endpoint="generate",model="mock_llm"} 1
switchyard_router_request_errors_total{code="unavailable",endpoint="generate",model="mock_llm"} 1
# HELP switchyard_router_routing_decisions_total Routing decisions per worker (a migrated request decides again; a remote prefill is a decision for its prefill worker).
# TYPE switchyard_router_routing_decisions_total counter
switchyard_router_routing_decisions_total{mode="kv",model="mock_llm",worker="aaaa"} 3
switchyard_router_routing_decisions_total{mode="kv",model="mock_llm",worker="bbbb"} 1
switchyard_router_routing_decisions_total{mode="kv",model="tiny_llm",worker="bbbb"} 1
# HELP switchyard_router_time_to_first_token_seconds Time from an LLM request reaching the router to its first token, in seconds.
# TYPE switchyard_router_time_to_first_token_seconds histogram
switchyard_router_time_to_first_token_seconds_bucket{le="0.01"} 1
switchyard_router_time_to_first_token_seconds_bucket{le="0.1"} 3
switchyard_router_time_to_first_token_seconds_bucket{le="+Inf"} 4
switchyard_router_time_to_first_token_seconds_sum 0.125
switchyard_router_time_to_first_token_seconds_count 4
# HELP switchyard_router_migrations_total Requests moved to another worker: new_request (no worker took it), ongoing_request (its worker failed midway).
# TYPE switchyard_router_migrations_total counter
switchyard_router_migrations_total{type="new_request"} 0
switchyard_router_migrations_total{type="ongoing_request"} 1
# HELP switchyard_router_instance_removal_aborts_total In-flight requests aborted because their worker left discovery and its health probe failed.
# TYPE switchyard_router_instance_removal_aborts_total counter
switchyard_router_instance_removal_aborts_total 0
# HELP switchyard_router_stall_probe_aborts_total In-flight requests aborted because they went silent and their worker failed its health probe.
# TYPE switchyard_router_stall_probe_aborts_total counter
switchyard_router_stall_probe_aborts_total 0
# HELP switchyard_router_routing_table_fallbacks_total LLM routing decisions taken round-robin because the routing table (Redis) was unavailable.
# TYPE switchyard_router_routing_table_fallbacks_total counter
switchyard_router_routing_table_fallbacks_total 0
# HELP switchyard_router_kv_event_batches_total KV event batches received from workers.
# TYPE switchyard_router_kv_event_batches_total counter
switchyard_router_kv_event_batches_total 9
# HELP switchyard_router_kv_events_applied_total KV cache events applied to the routing table.
# TYPE switchyard_router_kv_events_applied_total counter
switchyard_router_kv_events_applied_total 42
# HELP switchyard_router_kv_event_gaps_total Gaps found in a worker's KV event ids (events lost or the table flushed).
# TYPE switchyard_router_kv_event_gaps_total counter
switchyard_router_kv_event_gaps_total 1
# HELP switchyard_router_kv_resyncs_total Workers resynchronised from a KV snapshot.
# TYPE switchyard_router_kv_resyncs_total counter
switchyard_router_kv_resyncs_total 3
# HELP switchyard_router_kv_resync_failures_total KV snapshot resyncs that failed (retried on the next batch).
# TYPE switchyard_router_kv_resync_failures_total counter
switchyard_router_kv_resync_failures_total 0
# HELP switchyard_router_event_subscription_failures_total KV event and load subscriptions that failed and were started again.
# TYPE switchyard_router_event_subscription_failures_total counter
switchyard_router_event_subscription_failures_total 0
# HELP switchyard_router_kv_events_invalid_total KV event messages that could not be decoded (dropped).
# TYPE switchyard_router_kv_events_invalid_total counter
switchyard_router_kv_events_invalid_total 0
# HELP switchyard_router_approximate_mode 1 when a model is routed without KV events (cache overlap is guessed from past routing decisions).
# TYPE switchyard_router_approximate_mode gauge
switchyard_router_approximate_mode{model="mock_llm"} 0
switchyard_router_approximate_mode{model="tiny_llm"} 1
# HELP switchyard_router_worker_prefix_cache_hit_rate Each worker's prefix cache hit rate from its last load report: prompt tokens served from cache / looked up.
# TYPE switchyard_router_worker_prefix_cache_hit_rate gauge
switchyard_router_worker_prefix_cache_hit_rate{model="mock_llm",worker="aaaa"} 0.5
switchyard_router_worker_prefix_cache_hit_rate{model="mock_llm",worker="bbbb"} 0
switchyard_router_worker_prefix_cache_hit_rate{model="mock_llm",worker="cccc"} 0.25
# HELP switchyard_router_workers Worker instances serving each model.
# TYPE switchyard_router_workers gauge
switchyard_router_workers{model="mock_llm"} 3
switchyard_router_workers{model="tiny_llm"} 1
# HELP switchyard_router_disagg_requests_total Requests of disaggregated models by prefill path: remote (prefill worker, KV imported by the decode worker), local (decode worker prefilled), fallback (prefilled remotely but the KV did not reach the decode worker, which prefilled again).
# TYPE switchyard_router_disagg_requests_total counter
switchyard_router_disagg_requests_total{model="mock_llm",path="remote"} 3
switchyard_router_disagg_requests_total{model="mock_llm",path="local"} 2
switchyard_router_disagg_requests_total{model="mock_llm",path="fallback"} 1
# HELP switchyard_router_disagg_local_total Requests of disaggregated models prefilled locally, by reason.
# TYPE switchyard_router_disagg_local_total counter
switchyard_router_disagg_local_total{model="mock_llm",reason="prefill_failed"} 1
switchyard_router_disagg_local_total{model="mock_llm",reason="short_prompt"} 1
# HELP switchyard_router_kv_transfer_seconds Time decode workers took to pull and import a request's KV blocks from a prefill worker, in seconds.
# TYPE switchyard_router_kv_transfer_seconds histogram
switchyard_router_kv_transfer_seconds_bucket{le="0.001"} 1
switchyard_router_kv_transfer_seconds_bucket{le="0.01"} 2
switchyard_router_kv_transfer_seconds_bucket{le="+Inf"} 3
switchyard_router_kv_transfer_seconds_sum 0.0075
switchyard_router_kv_transfer_seconds_count 3
`);
  });

  it('still reports a model routed approximately when it is no longer served, and leaves per-model families out when there are none', () => {
    const idle: RouterStats = { ...STATS, workers: [], approximateModels: ['gone_llm'], disagg: [], kvTransferSeconds: { bounds: [0.001], counts: [0], sum: 0, count: 0 } };
    const text = renderRouterMetrics(idle, []);
    expect(text).not.toContain('switchyard_router_disagg');
    expect(text).not.toContain('switchyard_router_kv_transfer_seconds');
    expect(text).toContain('switchyard_router_approximate_mode{model="gone_llm"} 1\n');
    expect(text).not.toContain('switchyard_router_workers');
    expect(text).not.toContain('switchyard_router_routing_decisions_total');
    expect(text).not.toContain('switchyard_router_worker_prefix_cache_hit_rate');
    // no call-home figures (--call-home=false): no call-home families
    expect(text).not.toContain('switchyard_router_call_home');
  });

  it('renders the call-home listener figures when the router offers call-home', () => {
    const text = renderRouterMetrics(STATS, [], [], { connections: 3, frames: 1234, requests: 56 });
    expect(text).toContain(
      '# HELP switchyard_router_call_home_connections Worker processes connected to this router to stream responses back (call-home); the others answer over NATS.\n' +
        '# TYPE switchyard_router_call_home_connections gauge\nswitchyard_router_call_home_connections 3\n',
    );
    expect(text).toContain('# TYPE switchyard_router_call_home_frames_total counter\nswitchyard_router_call_home_frames_total 1234\n');
    expect(text).toContain('# TYPE switchyard_router_call_home_requests_total counter\nswitchyard_router_call_home_requests_total 56\n');
  });
});
