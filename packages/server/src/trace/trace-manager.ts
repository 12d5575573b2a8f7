/**
 * Which requests are traced and where their traces go (tritonserver's TraceManager).
 *
 * The front doors ask `sample(model, traceparent)` for each inference request. The model's
 * effective trace settings (`ServerSettings`, per model over global) decide: level OFF traces
 * nothing; otherwise every `trace_rate`-th request of the setting is traced while `trace_count`
 * lasts (each trace takes one; -1 never runs out). In opentelemetry mode a request that brings a
 * valid W3C `traceparent` is always traced (rate and count aside), as Triton's context propagation.
 * Rate counters restart whenever the settings change (Triton replaces its setting objects).
 *
 * An ended trace goes to the Triton JSON file (`triton-trace-file.ts`) or, as spans, to the OTLP
 * batch exporter (`otlp-exporter.ts`). Write and export failures are logged (at most once per
 * 10 s) and counted, never thrown at a request.
 */
import type { Logger } from '@switchyard/common';
import type { ServerSettings } from '../settings.js';
import { OtlpBatchExporter, type ExporterStats } from './otlp-exporter.js';
import { RequestTrace } from './request-trace.js';
import type { TraceConfig, TraceLevels, TraceMode } from './trace-config.js';
import { traceSpans } from './trace-spans.js';
import type { TraceParent } from './traceparent.js';
import { TritonTraceFile, tritonTraceEntries } from './triton-trace-file.js';

const WARN_EVERY_MS = 10_000;
/**
 * Most characters of tensor text all unfinished traces hold together: with TENSORS level on busy
 * traffic, tensor data past it is left empty rather than growing with the number of requests.
 */
export const MAX_TENSOR_CHARS_IN_FLIGHT = 256 * 1024 * 1024;

/** How a sampled trace is written (triton mode), fixed at sampling time. */
interface TraceDestination {
  /** Traces per indexed file; 0 = the main file unless `counted`. */
  logFrequency: number;
  /** Took one of a limited `trace_count`: goes to the indexed file that count fills. */
  counted: boolean;
  /** Whose setting the indexed file belongs to: the model's own (its name) or the global one (''). */
  owner: string;
}

export class TraceManager {
  readonly mode: TraceMode;
  readonly #settings: ServerSettings;
  readonly #logger: Logger;
  readonly #file: TritonTraceFile | undefined;
  readonly #exporter: OtlpBatchExporter | undefined;
  /** Requests seen per rate owner (a model with its own trace_rate, or '' for the global one). */
  #rateCounters = new Map<string, number>();
  #nextTraceId = 1;
  /** Per count owner: counted traces not yet written, and whether the count ran out. */
  readonly #counted = new Map<string, { open: number; exhausted: boolean }>();
  #fileErrors = 0;
  #lastWarnMs = 0;
  readonly #destinations = new WeakMap<RequestTrace, TraceDestination>();
  /** Tensor text held by traces not yet ended, process-wide (TENSORS level). */
  readonly #tensorChars = { held: 0, max: MAX_TENSOR_CHARS_IN_FLIGHT };

  constructor(config: TraceConfig, settings: ServerSettings, logger: Logger) {
    this.mode = config.mode;
    this.#settings = settings;
    this.#logger = logger;
    if (config.mode === 'triton' && config.file !== '') this.#file = new TritonTraceFile(config.file);
    if (config.mode === 'opentelemetry') this.#exporter = new OtlpBatchExporter(config.otel, logger);
    // Triton replaces its setting objects on an update: sampling restarts, and the indexed file the
    // old setting was filling is finished (its traces stay there; new ones start the next index).
    settings.onTraceSettingsChange(() => {
      this.#rateCounters = new Map();
      this.#file?.closeIndexed();
    });
  }

  /** Whether `sample` may trace a request to `model` under the settings now (its trace level is not OFF). */
  mayTrace(model: string): boolean {
    return traceLevels(this.#settings.traceValue(model, 'trace_level')).length > 0;
  }

  /**
   * A trace for a request to `model` if this one is sampled, else undefined. `traceparent`: the
   * request's W3C header (HTTP header or gRPC metadata), used in opentelemetry mode.
   */
  sample(model: string, parent?: TraceParent): RequestTrace | undefined {
    const value = (key: string) => this.#settings.traceValue(model, key);
    const all = traceLevels(value('trace_level'));
    if (all.length === 0) return undefined;
    // Opentelemetry mode has no tensor level (tritonserver logs it as unsupported and records none).
    const levels = this.mode === 'opentelemetry' ? all.filter((l) => l === 'TIMESTAMPS') : all;
    if (this.mode === 'opentelemetry' && parent !== undefined) return this.#newTrace(levels, { logFrequency: 0, counted: false, owner: '' }, parent);
    if (this.mode === 'triton' && (this.#file === undefined || value('trace_file') === '')) return undefined;
    const rate = Number(value('trace_rate'));
    const count = value('trace_count');
    if (!(rate > 0) || count === '0') return undefined;
    const rateOwner = this.#settings.traceSettingOwner(model, 'trace_rate');
    const seen = (this.#rateCounters.get(rateOwner) ?? 0) + 1;
    this.#rateCounters.set(rateOwner, seen % rate);
    if (seen % rate !== 0) return undefined;
    const limited = count !== '-1';
    if (!this.#settings.takeTraceCount(model)) return undefined;
    const logFrequency = Number(value('log_frequency') ?? 0);
    // the indexed file this trace may go to belongs to the setting that decides it
    const owner = this.#settings.traceSettingOwner(model, logFrequency > 0 ? 'log_frequency' : 'trace_count');
    if (limited) {
      const state = this.#counted.get(owner) ?? { open: 0, exhausted: false };
      state.open++;
      if (value('trace_count') === '0') state.exhausted = true;
      this.#counted.set(owner, state);
    }
    return this.#newTrace(levels, { logFrequency, counted: limited, owner }, undefined);
  }

  exporterStats(): ExporterStats | undefined {
    return this.#exporter?.stats();
  }

  /** Flush what is pending (spans to the collector, files closed). */
  async close(): Promise<void> {
    await this.#exporter?.close();
    this.#file?.close();
  }

  #newTrace(levels: TraceLevels, destination: TraceDestination, parent: TraceParent | undefined): RequestTrace {
    const trace = new RequestTrace({
      levels,
      tensorChars: this.#tensorChars,
      nextId: () => this.#nextTraceId++,
      ...(parent !== undefined ? { parent } : {}),
      onEnd: (t) => this.#ended(t),
    });
    this.#destinations.set(trace, destination);
    return trace;
  }

  #ended(trace: RequestTrace): void {
    if (this.#exporter !== undefined) {
      this.#exporter.add(traceSpans(trace, process.hrtime.bigint()));
      return;
    }
    const destination = this.#destinations.get(trace);
    if (this.#file === undefined || destination === undefined) return;
    const entries = tritonTraceEntries(trace);
    try {
      if (destination.logFrequency > 0) {
        if (this.#file.appendIndexed(entries, destination.owner) >= destination.logFrequency) this.#file.closeIndexed(destination.owner);
      } else if (destination.counted) {
        this.#file.appendIndexed(entries, destination.owner);
      } else {
        this.#file.appendMain(entries);
      }
    } catch (err) {
      this.#fileErrors++;
      const nowMs = Date.now();
      if (nowMs - this.#lastWarnMs >= WARN_EVERY_MS) {
        this.#lastWarnMs = nowMs;
        this.#logger.error({ err, file: this.#file.path, failures: this.#fileErrors }, 'failed writing trace file');
      }
    }
    const state = destination.counted ? this.#counted.get(destination.owner) : undefined;
    if (state !== undefined && --state.open === 0 && state.exhausted) {
      this.#counted.delete(destination.owner);
      this.#file.closeIndexed(destination.owner);
    }
  }
}

/** A `trace_level` setting as levels; [] for OFF. */
function traceLevels(level: string | string[] | undefined): TraceLevels {
  const list = Array.isArray(level) ? level : [];
  const out: Array<'TIMESTAMPS' | 'TENSORS'> = [];
  if (list.includes('TIMESTAMPS')) out.push('TIMESTAMPS');
  if (list.includes('TENSORS')) out.push('TENSORS');
  return out;
}
