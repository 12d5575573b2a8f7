/**
 * OpenTelemetry's batch span processor with an OTLP/HTTP exporter (JSON encoding,
 * `POST <url>` with `Content-Type: application/json`), as tritonserver's opentelemetry mode
 * configures it (`bsp_max_queue_size`, `bsp_schedule_delay`, `bsp_max_export_batch_size`).
 *
 * Bounded whatever the collector does: at most `bspMaxQueueSize` spans wait, and one export (at
 * most `bspMaxExportBatchSize` spans) is in flight, abandoned after `OTLP_EXPORT_TIMEOUT_MS`.
 * A span that finds the queue full is dropped, as is a batch the collector refuses or never
 * answers; both are counted (`stats().dropped`) and logged at most once per `WARN_EVERY_MS`.
 * Nothing is retried. The response body is never read.
 */
import type { Logger } from '@switchyard/common';
import { OTLP_EXPORT_TIMEOUT_MS, type OtelTraceConfig } from './trace-config.js';
import type { OtlpSpan } from './trace-spans.js';

/** Name of the instrumentation scope the spans are reported under. */
export const TRACER_SCOPE = 'triton-server';
const WARN_EVERY_MS = 10_000;
/** At shutdown, how long queued spans may take to reach the collector. */
export const SHUTDOWN_FLUSH_MS = 3000;

export interface ExporterStats {
  /** Spans the collector accepted. */
  exported: number;
  /** Spans lost: queue full, collector unreachable, refusing or too slow. */
  dropped: number;
  /** Spans waiting now. */
  queued: number;
}

export class OtlpBatchExporter {
  readonly #config: OtelTraceConfig;
  readonly #url: string;
  readonly #logger: Logger;
  readonly #resource: Array<{ key: string; value: { stringValue: string } }>;
  #queue: OtlpSpan[] = [];
  #exporting: Promise<void> | undefined;
  #timer: NodeJS.Timeout | undefined;
  #exported = 0;
  #dropped = 0;
  #lastWarnMs = 0;
  #closed = false;

  constructor(config: OtelTraceConfig, logger: Logger) {
    this.#config = config;
    this.#url = otlpUrl(config.url);
    this.#logger = logger;
    this.#resource = Object.entries(config.resource).map(([key, value]) => ({ key, value: { stringValue: value } }));
  }

  stats(): ExporterStats {
    return { exported: this.#exported, dropped: this.#dropped, queued: this.#queue.length };
  }

  /** Queue ended spans for export; past the queue's size they are dropped. */
  add(spans: readonly OtlpSpan[]): void {
    let dropped = 0;
    for (const span of spans) {
      if (this.#closed || this.#queue.length >= this.#config.bspMaxQueueSize) dropped++;
      else this.#queue.push(span);
    }
    if (dropped > 0) this.#drop(dropped, 'BatchSpanProcessor queue is full - dropping span.');
    this.#schedule();
  }

  /** Export what is queued (for up to `deadlineMs`), then stop; later spans are dropped. */
  async close(deadlineMs = SHUTDOWN_FLUSH_MS): Promise<void> {
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
    const until = Date.now() + deadlineMs;
    while ((this.#queue.length > 0 || this.#exporting !== undefined) && Date.now() < until) {
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise<void>((resolve) => (timer = setTimeout(resolve, Math.max(0, until - Date.now()))));
      await Promise.race([this.#exporting ?? this.#exportBatch(), late]);
      clearTimeout(timer);
    }
    this.#closed = true;
    if (this.#queue.length > 0) this.#drop(this.#queue.splice(0).length, 'spans left unexported at shutdown');
  }

  #schedule(): void {
    if (this.#closed || this.#exporting !== undefined || this.#queue.length === 0) return;
    if (this.#queue.length >= this.#config.bspMaxExportBatchSize) {
      if (this.#timer !== undefined) clearTimeout(this.#timer);
      this.#timer = undefined;
      void this.#exportBatch();
      return;
    }
    if (this.#timer !== undefined) return;
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      void this.#exportBatch();
    }, this.#config.bspScheduleDelayMs);
    this.#timer.unref();
  }

  #exportBatch(): Promise<void> {
    if (this.#exporting !== undefined) return this.#exporting;
    const batch = this.#queue.splice(0, this.#config.bspMaxExportBatchSize);
    if (batch.length === 0) return Promise.resolve();
    this.#exporting = this.#post(batch).finally(() => {
      this.#exporting = undefined;
      this.#schedule();
    });
    return this.#exporting;
  }

  async #post(batch: OtlpSpan[]): Promise<void> {
    const body = JSON.stringify({
      resourceSpans: [{ resource: { attributes: this.#resource }, scopeSpans: [{ scope: { name: TRACER_SCOPE }, spans: batch }] }],
    });
    try {
      const res = await fetch(this.#url, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body,
        signal: AbortSignal.timeout(OTLP_EXPORT_TIMEOUT_MS),
      });
      await res.body?.cancel().catch(() => {});
      if (res.status < 200 || res.status >= 300) {
        this.#drop(batch.length, `OTLP collector answered HTTP ${res.status}`);
        return;
      }
      this.#exported += batch.length;
    } catch (err) {
      this.#drop(batch.length, `OTLP export failed: ${err instanceof Error ? err.message : String(err)}`);
    }
  }

  #drop(count: number, reason: string): void {
    this.#dropped += count;
    const nowMs = Date.now();
    if (nowMs - this.#lastWarnMs < WARN_EVERY_MS) return;
    this.#lastWarnMs = nowMs;
    this.#logger.warn({ url: this.#url, dropped: count, droppedTotal: this.#dropped }, reason);
  }
}

/**
 * The exporter's URL: tritonserver passes `url` to opentelemetry-cpp's curl client, which takes
 * `host:port/path` as http. Throws TypeError for anything that is not an http(s) URL.
 */
export function otlpUrl(url: string): string {
  const withScheme = /^[A-Za-z][A-Za-z0-9+.-]*:\/\//.test(url) ? url : `http://${url}`;
  const parsed = new URL(withScheme);
  if ((parsed.protocol !== 'http:' && parsed.protocol !== 'https:') || parsed.hostname === '') {
    throw new TypeError(`expected an http:// or https:// URL, got '${url}'`);
  }
  return parsed.toString();
}
