/**
 * The worker's own Prometheus families (`switchyard_worker_*`), appended after the engine's (Triton's
 * `nv_*` and the LLMs' `vllm:*`) on the metrics port, in cluster mode, where the worker has a KV
 * transfer plane. Rendered from what the plane and the engines report at every scrape: nothing is
 * counted here.
 *
 * | family | type | labels |
 * |---|---|---|
 * | `switchyard_worker_kv_transfer_bytes_total` | counter | direction (`out`: KV blocks served to decode workers; `in`: pulled from prefill workers) |
 * | `switchyard_worker_kv_pinned_blocks` | gauge | (KV blocks pinned by leases for decode workers and by imports in progress, over every LLM) |
 *
 * With `--trace-config mode=opentelemetry` (any mode of running), the span exporter's counters:
 *
 * | family | type | labels |
 * |---|---|---|
 * | `switchyard_worker_trace_spans_total` | counter | outcome (`exported`: accepted by the collector; `dropped`: queue full, collector down, refusing or too slow) |
 * | `switchyard_worker_trace_spans_queued` | gauge | (spans waiting for export, at most `bsp_max_queue_size`) |
 */
import type { ExporterStats } from '@switchyard/server';
import type { KvTransferCounters } from '@switchyard/runtime';
import { renderPrometheusText } from '@switchyard/server/internal';

type Family = Parameters<typeof renderPrometheusText>[0][number];

const P = 'switchyard_worker_';

function family(name: string, help: string, type: 'counter' | 'gauge', values: { labels: Record<string, string>; value: number }[]): Family {
  return { name, help, type, aggregator: 'sum', values } as unknown as Family;
}

export interface WorkerMetricsSample {
  /** The KV transfer plane's byte counters. */
  readonly kvTransfer: KvTransferCounters;
  /** KV blocks pinned over every LLM engine (`pinnedKvBlocks`). */
  readonly pinnedBlocks: number;
}

/** The span exporter's families in Prometheus text. */
export function renderTraceMetrics(stats: ExporterStats): string {
  return renderPrometheusText([
    family(`${P}trace_spans_total`, 'OpenTelemetry spans by outcome: exported = accepted by the collector, dropped = queue full or export failed.', 'counter', [
      { labels: { outcome: 'exported' }, value: stats.exported },
      { labels: { outcome: 'dropped' }, value: stats.dropped },
    ]),
    family(`${P}trace_spans_queued`, 'OpenTelemetry spans waiting for export.', 'gauge', [{ labels: {}, value: stats.queued }]),
  ]);
}

/** The worker's families in Prometheus text. */
export function renderWorkerMetrics(sample: WorkerMetricsSample): string {
  return renderPrometheusText([
    family(`${P}kv_transfer_bytes_total`, 'KV cache bytes moved between workers: out = served to decode workers, in = pulled from prefill workers.', 'counter', [
      { labels: { direction: 'out' }, value: sample.kvTransfer.bytesOut },
      { labels: { direction: 'in' }, value: sample.kvTransfer.bytesIn },
    ]),
    family(`${P}kv_pinned_blocks`, 'KV blocks pinned for KV transfer: held for decode workers to pull (until released or the lease TTL) and imports in progress.', 'gauge', [
      { labels: {}, value: sample.pinnedBlocks },
    ]),
  ]);
}
