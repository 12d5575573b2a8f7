import { describe, expect, it } from 'vitest';
import { renderTraceMetrics, renderWorkerMetrics } from './worker-metrics.js';

describe('renderTraceMetrics', () => {
  it('renders the span outcomes and the queue', () => {
    const text = renderTraceMetrics({ exported: 5, dropped: 7, queued: 2 });
    expect(text).toContain('# TYPE switchyard_worker_trace_spans_total counter\n');
    expect(text).toContain('switchyard_worker_trace_spans_total{outcome="exported"} 5\n');
    expect(text).toContain('switchyard_worker_trace_spans_total{outcome="dropped"} 7\n');
    expect(text).toContain('switchyard_worker_trace_spans_queued 2\n');
  });
});

describe('renderWorkerMetrics', () => {
  it('renders the transfer byte counters by direction and the pinned-blocks gauge', () => {
    expect(renderWorkerMetrics({ kvTransfer: { bytesOut: 4096, bytesIn: 12 }, pinnedBlocks: 3 }))
      .toBe(`# HELP switchyard_worker_kv_transfer_bytes_total KV cache bytes moved between workers: out = served to decode workers, in = pulled from prefill workers.
# TYPE switchyard_worker_kv_transfer_bytes_total counter
switchyard_worker_kv_transfer_bytes_total{direction="out"} 4096
switchyard_worker_kv_transfer_bytes_total{direction="in"} 12
# HELP switchyard_worker_kv_pinned_blocks KV blocks pinned for KV transfer: held for decode workers to pull (until released or the lease TTL) and imports in progress.
# TYPE switchyard_worker_kv_pinned_blocks gauge
switchyard_worker_kv_pinned_blocks 3
`);
  });

  it('shows zeros rather than leaving the families out', () => {
    const text = renderWorkerMetrics({ kvTransfer: { bytesOut: 0, bytesIn: 0 }, pinnedBlocks: 0 });
    expect(text).toContain('switchyard_worker_kv_transfer_bytes_total{direction="in"} 0\n');
    expect(text).toContain('switchyard_worker_kv_pinned_blocks 0\n');
  });
});
