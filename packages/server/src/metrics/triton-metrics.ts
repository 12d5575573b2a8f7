/**
 * Triton's Prometheus metric families (core/src/metrics.cc: names, HELP texts, types, order),
 * filled at scrape time by prom-client collect callbacks.
 *
 * Every value is derived from what the engine reports at that moment: per-model counters from
 * its cumulative statistics, gauges from its snapshot, CPU figures from /proc, GPU figures from the
 * engine's GPU probe (nvidia-smi; Triton reads DCGM). Nothing is
 * counted here, so nothing can be counted twice, and a model that is no longer loaded simply
 * has no samples (its families disappear when no model is loaded, as in prometheus-cpp).
 *
 * Order follows prometheus-cpp's registry: all counter families in registration order, then
 * all gauge families.
 */
import type { GpuSample, InferenceEngine, ModelMetricsSnapshot } from '@switchyard/engine';
import { Counter, Gauge, Registry } from 'prom-client';
import type { CpuMetricsSource, CpuSample } from './cpu-stats.js';
import { llmMetricFamilies } from './llm-metrics.js';
import { renderPrometheusText } from './prometheus-text.js';

type Snapshot = ModelMetricsSnapshot;

const FAILURE_REASONS = ['REJECTED', 'CANCELED', 'BACKEND', 'OTHER'] as const;

const us = (ns: number): number => Math.floor(ns / 1000);

/** Per-model counter families after the two request counters, in Triton's order. */
const MODEL_COUNTERS: readonly [name: string, help: string, value: (s: Snapshot) => number][] = [
  ['nv_inference_count', 'Number of inferences performed (does not include cached requests)', (s) => s.statistics.inference_count],
  ['nv_inference_exec_count', 'Number of model executions performed (does not include cached requests)', (s) => s.statistics.execution_count],
  [
    'nv_inference_request_duration_us',
    'Cumulative inference request duration in microseconds (includes cached requests)',
    (s) => us(s.statistics.inference_stats.success.ns),
  ],
  [
    'nv_inference_queue_duration_us',
    'Cumulative inference queuing duration in microseconds (includes cached requests)',
    (s) => us(s.statistics.inference_stats.queue.ns),
  ],
  [
    'nv_inference_compute_input_duration_us',
    'Cumulative compute input duration in microseconds (does not include cached requests)',
    (s) => us(s.statistics.inference_stats.compute_input.ns),
  ],
  [
    'nv_inference_compute_infer_duration_us',
    'Cumulative compute inference duration in microseconds (does not include cached requests)',
    (s) => us(s.statistics.inference_stats.compute_infer.ns),
  ],
  [
    'nv_inference_compute_output_duration_us',
    'Cumulative inference compute output duration in microseconds (does not include cached requests)',
    (s) => us(s.statistics.inference_stats.compute_output.ns),
  ],
];

/**
 * Per-model response-cache counters (metrics.cc registers them right after the compute counters),
 * shown only for versions that use the cache, as MetricModelReporter creates them only then.
 * Triton has no server-wide cache families since caches became plugins (23.03).
 */
const CACHE_COUNTERS: readonly [name: string, help: string, value: (s: Snapshot) => number][] = [
  ['nv_cache_num_hits_per_model', 'Number of cache hits per model', (s) => s.statistics.inference_stats.cache_hit.count],
  ['nv_cache_hit_duration_per_model', 'Total cache hit duration per model, in microseconds', (s) => us(s.statistics.inference_stats.cache_hit.ns)],
  ['nv_cache_num_misses_per_model', 'Number of cache misses per model', (s) => s.statistics.inference_stats.cache_miss.count],
  [
    'nv_cache_miss_duration_per_model',
    'Total cache miss (insert+lookup) duration per model, in microseconds',
    (s) => us(s.statistics.inference_stats.cache_miss.ns),
  ],
];

const MODEL_GAUGES: readonly [name: string, help: string, value: (s: Snapshot) => number][] = [
  ['nv_inference_pending_request_count', 'Instantaneous number of pending requests awaiting execution per-model.', (s) => s.pendingRequests],
  ['nv_model_load_duration_secs', 'Model load time in seconds', (s) => s.loadDurationSecs],
];

const CPU_GAUGES: readonly [name: string, help: string, value: (c: CpuSample) => number][] = [
  ['nv_cpu_utilization', 'CPU utilization rate [0.0 - 1.0]', (c) => c.utilization],
  ['nv_cpu_memory_total_bytes', 'CPU total memory (RAM), in bytes', (c) => c.memoryTotalBytes],
  ['nv_cpu_memory_used_bytes', 'CPU used memory (RAM), in bytes', (c) => c.memoryUsedBytes],
];

/** Per-GPU gauges (metrics.cc, TRITON_ENABLE_METRICS_GPU), labelled `gpu_uuid`. */
const GPU_GAUGES: readonly [name: string, help: string, value: (g: GpuSample) => number][] = [
  ['nv_gpu_utilization', 'GPU utilization rate [0.0 - 1.0)', (g) => g.utilization],
  ['nv_gpu_memory_total_bytes', 'GPU total memory, in bytes', (g) => g.memoryTotalBytes],
  ['nv_gpu_memory_used_bytes', 'GPU used memory, in bytes', (g) => g.memoryUsedBytes],
  ['nv_gpu_power_usage', 'GPU power usage in watts', (g) => g.powerUsageWatts],
  ['nv_gpu_power_limit', 'GPU power management limit in watts', (g) => g.powerLimitWatts],
];

/** Where the metrics door gets GPU figures: the engine's `GpuProbe`. */
export interface GpuMetricsSource {
  /** One sample per GPU; [] when there is none. Bounded in time. */
  sample(): Promise<GpuSample[]>;
}

const labelsOf = (s: Snapshot): { model: string; version: string } => ({ model: s.statistics.name, version: s.statistics.version });

/** tritonserver's `--metrics-config` settings this server honours. */
export interface MetricsSettings {
  /** `counter_latencies`: the per-model `*_duration_us` counters (default true). */
  readonly counterLatencies: boolean;
}

export const DEFAULT_METRICS_SETTINGS: MetricsSettings = { counterLatencies: true };

/** The latency counters `counter_latencies=false` leaves out (Triton's: request, queue and the three compute phases). */
const isLatencyCounter = (name: string): boolean => name.endsWith('_duration_us');

export interface TritonMetricsOptions {
  engine: Pick<InferenceEngine, 'metricsSnapshot' | 'llmEndpoints'>;
  /** Host CPU/memory figures; null leaves the nv_cpu_* families out (Triton's --allow-cpu-metrics=false). */
  cpu: CpuMetricsSource | null;
  /** GPU figures; null (or a source with no GPU) leaves the nv_gpu_* and nv_energy_consumption families out. */
  gpu?: GpuMetricsSource | null;
  /** Default DEFAULT_METRICS_SETTINGS. */
  settings?: MetricsSettings;
}

export class TritonMetrics {
  readonly registry = new Registry();
  readonly #engine: Pick<InferenceEngine, 'metricsSnapshot' | 'llmEndpoints'>;
  readonly #cpuSource: CpuMetricsSource | null;
  /** Taken once per scrape, before the collect callbacks run. */
  #models: Snapshot[] = [];
  #cpu: CpuSample | undefined;
  readonly #gpuSource: GpuMetricsSource | null;
  #gpus: GpuSample[] = [];

  constructor(options: TritonMetricsOptions) {
    this.#engine = options.engine;
    this.#cpuSource = options.cpu;
    this.#gpuSource = options.gpu ?? null;
    const self = this;
    const perModelCounter = (name: string, help: string, value: (s: Snapshot) => number, only: (s: Snapshot) => boolean = () => true): void => {
      new Counter({
        name,
        help,
        labelNames: ['model', 'version'],
        registers: [this.registry],
        collect() {
          this.reset();
          for (const s of self.#models) if (only(s)) this.inc(labelsOf(s), value(s));
        },
      });
    };
    perModelCounter('nv_inference_request_success', 'Number of successful inference requests, all batch sizes', (s) => s.statistics.inference_stats.success.count);
    new Counter({
      name: 'nv_inference_request_failure',
      help: 'Number of failed inference requests, all batch sizes',
      labelNames: ['model', 'reason', 'version'],
      registers: [this.registry],
      collect() {
        this.reset();
        for (const s of self.#models) {
          for (const reason of FAILURE_REASONS) this.inc({ model: s.statistics.name, reason, version: s.statistics.version }, s.failures[reason] ?? 0);
        }
      },
    });
    const settings = options.settings ?? DEFAULT_METRICS_SETTINGS;
    for (const [name, help, value] of MODEL_COUNTERS) if (settings.counterLatencies || !isLatencyCounter(name)) perModelCounter(name, help, value);
    for (const [name, help, value] of CACHE_COUNTERS) perModelCounter(name, help, value, (s) => s.responseCacheEnabled === true);
    const perGpu = this.#gpuSource !== null;
    if (perGpu) {
      new Counter({
        name: 'nv_energy_consumption',
        help: 'GPU energy consumption in joules since the Triton Server started',
        labelNames: ['gpu_uuid'],
        registers: [this.registry],
        collect() {
          this.reset();
          for (const g of self.#gpus) this.inc({ gpu_uuid: g.uuid }, g.energyJoules);
        },
      });
    }
    for (const [name, help, value] of MODEL_GAUGES) {
      new Gauge({
        name,
        help,
        labelNames: ['model', 'version'],
        registers: [this.registry],
        collect() {
          this.reset();
          for (const s of self.#models) this.set(labelsOf(s), value(s));
        },
      });
    }
    if (perGpu) {
      for (const [name, help, value] of GPU_GAUGES) {
        new Gauge({
          name,
          help,
          labelNames: ['gpu_uuid'],
          registers: [this.registry],
          collect() {
            this.reset();
            for (const g of self.#gpus) this.set({ gpu_uuid: g.uuid }, value(g));
          },
        });
      }
    }
    if (this.#cpuSource !== null) {
      for (const [name, help, value] of CPU_GAUGES) {
        new Gauge({
          name,
          help,
          registers: [this.registry],
          collect() {
            if (self.#cpu !== undefined) this.set(value(self.#cpu));
          },
        });
      }
    }
  }

  /** One scrape: snapshot the engine and host, run the collectors, render Triton's text format. */
  async render(): Promise<string> {
    // The GPU figures (an nvidia-smi run, bounded) are awaited first, so the snapshot below is taken
    // and collected without waiting in between.
    const gpus = (await this.#gpuSource?.sample().catch(() => [])) ?? [];
    this.#models = this.#engine.metricsSnapshot();
    this.#cpu = this.#cpuSource?.sample();
    this.#gpus = gpus;
    try {
      // LLM engines' vllm:* families follow Triton's (llm-metrics.ts).
      const llm = llmMetricFamilies(this.#engine.llmEndpoints?.() ?? []);
      return renderPrometheusText([...(await this.registry.getMetricsAsJSON()), ...llm]);
    } finally {
      this.#models = [];
      this.#gpus = [];
    }
  }
}
