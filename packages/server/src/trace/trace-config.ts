/**
 * The start-up trace configuration (tritonserver's `--trace-config`), validated by the app that
 * parses the flags, and what it means for the trace settings the doors report.
 *
 * Mode `triton` writes Triton's JSON trace file; mode `opentelemetry` exports spans over OTLP/HTTP
 * (JSON encoding) through a bounded batch span processor. Neither can be changed at run time; level,
 * rate, count and log frequency can, per model, through the trace settings endpoints.
 */
import type { TraceSettings } from '../settings.js';

export type TraceMode = 'triton' | 'opentelemetry';
/** `[]` is OFF; else some of TIMESTAMPS, TENSORS in that order. */
export type TraceLevels = ReadonlyArray<'TIMESTAMPS' | 'TENSORS'>;

export interface OtelTraceConfig {
  /** OTLP/HTTP traces endpoint; a URL without a scheme is http:// (as opentelemetry-cpp's curl client takes it). */
  url: string;
  /** Resource attributes; `service.name` defaults to `triton-inference-server`. */
  resource: Readonly<Record<string, string>>;
  /** Most ended spans waiting for export; more are dropped and counted. */
  bspMaxQueueSize: number;
  /** Milliseconds between exports when no full batch is waiting. */
  bspScheduleDelayMs: number;
  /** Most spans per export request (at most `bspMaxQueueSize`). */
  bspMaxExportBatchSize: number;
}

export interface TraceConfig {
  mode: TraceMode;
  level: TraceLevels;
  /** Every `rate`-th request is traced; 0 traces none (in opentelemetry mode a propagated context still is). */
  rate: number;
  /** Traces left to collect; -1 = no limit. */
  count: number;
  /** Triton mode: traces per indexed file (`<file>.<n>`); 0 = one file. */
  logFrequency: number;
  /** Triton mode: the JSON trace file; '' = none (nothing is traced). */
  file: string;
  otel: OtelTraceConfig;
}

export const DEFAULT_OTEL_URL = 'http://localhost:4318/v1/traces';
export const DEFAULT_OTEL_SERVICE_NAME = 'triton-inference-server';
export const DEFAULT_BSP_MAX_QUEUE_SIZE = 2048;
export const DEFAULT_BSP_SCHEDULE_DELAY_MS = 5000;
export const DEFAULT_BSP_MAX_EXPORT_BATCH_SIZE = 512;
/** An OTLP export that has not answered by then is abandoned (opentelemetry-cpp's default, 10 s). */
export const OTLP_EXPORT_TIMEOUT_MS = 10_000;

export const DEFAULT_TRACE_CONFIG: Readonly<TraceConfig> = Object.freeze({
  mode: 'triton',
  level: [],
  rate: 1000,
  count: -1,
  logFrequency: 0,
  file: '',
  otel: {
    url: DEFAULT_OTEL_URL,
    resource: { 'service.name': DEFAULT_OTEL_SERVICE_NAME },
    bspMaxQueueSize: DEFAULT_BSP_MAX_QUEUE_SIZE,
    bspScheduleDelayMs: DEFAULT_BSP_SCHEDULE_DELAY_MS,
    bspMaxExportBatchSize: DEFAULT_BSP_MAX_EXPORT_BATCH_SIZE,
  },
});

/**
 * The settings the doors report at start: Triton's keys, values as strings. Opentelemetry mode
 * reports its exporter settings instead of `log_frequency` and `trace_file` (tritonserver's
 * HandleTrace lists the mode's own config after `trace_mode`).
 */
export function initialTraceSettings(config: TraceConfig): TraceSettings {
  const common: TraceSettings = {
    trace_level: config.level.length === 0 ? ['OFF'] : [...config.level],
    trace_rate: String(config.rate),
    trace_count: String(config.count),
    log_frequency: String(config.logFrequency),
    trace_file: config.file,
    trace_mode: config.mode,
  };
  if (config.mode === 'triton') return common;
  return {
    ...common,
    url: config.otel.url,
    bsp_max_queue_size: String(config.otel.bspMaxQueueSize),
    bsp_schedule_delay: String(config.otel.bspScheduleDelayMs),
    bsp_max_export_batch_size: String(config.otel.bspMaxExportBatchSize),
  };
}
