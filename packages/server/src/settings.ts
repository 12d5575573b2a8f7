/**
 * The logging and trace settings that both front doors expose: HTTP `GET/POST /v2/logging` and
 * `/v2[/models/{m}]/trace/setting`, gRPC `LogSettings` and `TraceSetting`.
 *
 * One `ServerSettings` object is shared by the HTTP and gRPC front doors, so an update through
 * one protocol is visible through the other. Updates are validated completely before anything is
 * applied (Triton applies field by field and can stop half-way; all-or-nothing is kinder and no
 * client depends on the partial state).
 *
 * Values arrive as plain JS values: the HTTP door passes the parsed JSON body, the gRPC door maps
 * `SettingValue` oneofs to boolean/number/string (log) or string lists (trace). Validation errors
 * are SwitchyardErrors with Triton's messages (`server:src/grpc/grpc_server.cc` LogSettings and
 * TraceSetting, `server:src/http_server.cc` HandleLogging / HandleTrace).
 *
 * The trace settings are what the worker's trace manager (`trace/trace-manager.ts`) samples
 * requests by; it takes trace counts through `takeTraceCount`, so `trace_count` reports the traces
 * left, as Triton's does.
 */
import { internal, invalidArgument, unsupported } from '@switchyard/common';

export interface LogSettings {
  log_file: string;
  log_info: boolean;
  log_warning: boolean;
  log_error: boolean;
  log_verbose_level: number;
  log_format: 'default' | 'ISO8601';
}

/**
 * Trace settings as Triton reports them: every value a string, `trace_level` a list
 * (`['OFF']`, or some of `'TIMESTAMPS'`, `'TENSORS'` in that order).
 */
export type TraceSettings = Record<string, string | string[]>;

export const DEFAULT_LOG_SETTINGS: Readonly<LogSettings> = Object.freeze({
  log_file: '',
  log_info: true,
  log_warning: true,
  log_error: true,
  log_verbose_level: 0,
  log_format: 'default',
});

export const DEFAULT_TRACE_SETTINGS: Readonly<TraceSettings> = Object.freeze({
  trace_level: ['OFF'],
  trace_rate: '1000',
  trace_count: '-1',
  log_frequency: '0',
  trace_file: '',
  trace_mode: 'triton',
});

export const LOG_FILE_UNSUPPORTED_MESSAGE = 'log file location can not be updated through network protocol';
export const TRACE_FILE_UNSUPPORTED_MESSAGE = 'trace file location can not be updated through network protocol';
/** Keys opentelemetry mode does not report (tritonserver's HandleTrace writes them for triton mode only). */
const TRITON_MODE_ONLY = new Set(['log_frequency', 'trace_file']);

/** Keys a client may update; the others are reported but fixed at start-up. */
const TRACE_UPDATABLE = ['trace_level', 'trace_rate', 'trace_count', 'log_frequency'] as const;
type TraceKey = (typeof TRACE_UPDATABLE)[number];

/** Response key order, as Triton writes it. */
const TRACE_ORDER = ['trace_level', 'trace_rate', 'trace_count', 'log_frequency', 'trace_file', 'trace_mode'];

const UINT32_MAX = 4294967295;
const INT32_MAX = 2147483647;
const INT32_MIN = -2147483648;
const MIN_TRACE_COUNT = -1;

export class ServerSettings {
  #log: LogSettings;
  readonly #listeners: Array<(s: LogSettings) => void> = [];
  /** Start-up trace settings: what clearing a global setting returns to. */
  readonly #traceInitial: TraceSettings;
  #traceGlobal: TraceSettings;
  /** Per-model overrides; a missing key falls back to the global setting. */
  readonly #traceModels = new Map<string, Partial<Record<TraceKey, string | string[]>>>();
  readonly #traceListeners: Array<() => void> = [];

  constructor(initial?: Partial<LogSettings>, initialTrace?: Partial<TraceSettings>) {
    this.#log = { ...DEFAULT_LOG_SETTINGS, ...stripUndefined(initial ?? {}) };
    this.#traceInitial = { ...cloneTrace(DEFAULT_TRACE_SETTINGS), ...cloneTrace(stripUndefined(initialTrace ?? {}) as TraceSettings) };
    this.#traceGlobal = cloneTrace(this.#traceInitial);
  }

  logSettings(): LogSettings {
    return { ...this.#log };
  }

  /**
   * Apply a partial update. `null` values are ignored (Triton skips them). A non-null `log_file`
   * is unsupported; a value of the wrong type or an unknown `log_format` is invalid_argument.
   * Unknown keys are ignored. Listeners run after a successful update.
   */
  updateLogSettings(patch: Record<string, unknown>): LogSettings {
    const next: LogSettings = { ...this.#log };
    if (patch.log_file !== undefined && patch.log_file !== null) throw unsupported(LOG_FILE_UNSUPPORTED_MESSAGE);
    for (const key of ['log_info', 'log_warning', 'log_error'] as const) {
      const v = patch[key];
      if (v === undefined || v === null) continue;
      if (typeof v !== 'boolean') throw invalidArgument(`expect boolean for '${key}'`);
      next[key] = v;
    }
    const verbose = patch.log_verbose_level;
    if (verbose !== undefined && verbose !== null) {
      if (typeof verbose !== 'number' || !Number.isInteger(verbose) || verbose < 0 || verbose > UINT32_MAX) {
        throw invalidArgument(`expect int32 for 'log_verbose_level'`);
      }
      next.log_verbose_level = verbose;
    }
    const format = patch.log_format;
    if (format !== undefined && format !== null) {
      if (typeof format !== 'string') throw invalidArgument(`expect string for 'log_format'`);
      if (format !== 'default' && format !== 'ISO8601') {
        throw invalidArgument(`invalid argument for log_format, got: ${format}`);
      }
      next.log_format = format;
    }
    this.#log = next;
    for (const listener of this.#listeners) listener({ ...next });
    return { ...next };
  }

  /** Register a listener called with the new settings after every successful update. */
  onLogSettingsChange(listener: (s: LogSettings) => void): void {
    this.#listeners.push(listener);
  }

  /**
   * The effective trace settings: the global ones, or a model's overrides on top of the global
   * ones. The caller checks that the model exists (Triton: `Request for unknown model : <m>`).
   */
  traceSettings(model?: string): TraceSettings {
    const merged: TraceSettings = cloneTrace(this.#traceGlobal);
    const overrides = model === undefined || model === '' ? undefined : this.#traceModels.get(model);
    if (overrides !== undefined) Object.assign(merged, cloneTrace(overrides as TraceSettings));
    const hide = merged.trace_mode === 'opentelemetry' ? TRITON_MODE_ONLY : undefined;
    const out: TraceSettings = {};
    for (const key of TRACE_ORDER) if (merged[key] !== undefined && hide?.has(key) !== true) out[key] = merged[key];
    for (const [key, value] of Object.entries(merged)) if (!(key in out) && hide?.has(key) !== true) out[key] = value;
    return out;
  }

  /** Register a listener called after every successful trace settings update (the sampler restarts its counting). */
  onTraceSettingsChange(listener: () => void): void {
    this.#traceListeners.push(listener);
  }

  /**
   * One effective trace setting of `model` ('' = global), without copying the others: what the
   * sampler reads on every inference request.
   */
  traceValue(model: string, key: string): string | string[] | undefined {
    const own = model === '' ? undefined : (this.#traceModels.get(model) as Record<string, string | string[]> | undefined);
    return own?.[key] ?? this.#traceGlobal[key];
  }

  /** Whose `key` a model's requests use: the model's own setting (its name) or the global one (''). */
  traceSettingOwner(model: string, key: TraceKey): string {
    return this.#traceModels.get(model)?.[key] !== undefined ? model : '';
  }

  /**
   * Take one trace from `model`'s trace count (the model's own `trace_count` if it set one, else
   * the global one). Returns false when the count is used up (0); -1 never runs out.
   */
  takeTraceCount(model: string): boolean {
    const own = this.#traceModels.get(model);
    const holder: Partial<Record<string, string | string[]>> = own?.trace_count !== undefined ? own : this.#traceGlobal;
    const count = Number(holder.trace_count);
    if (count === 0) return false;
    if (count > 0) holder.trace_count = String(count - 1);
    return true;
  }

  /**
   * Update the global (`model` undefined or '') or one model's trace settings and return the
   * effective settings. `null` (HTTP) or an empty list (gRPC) clears a setting: a model falls
   * back to the global value, the global one to its start-up value. Any `trace_file` is
   * unsupported. Unknown keys are ignored.
   */
  updateTraceSettings(model: string | undefined, patch: Record<string, string | string[] | null>): TraceSettings {
    if ('trace_file' in patch && patch.trace_file !== undefined) throw unsupported(TRACE_FILE_UNSUPPORTED_MESSAGE);
    const set: Partial<Record<TraceKey, string | string[]>> = {};
    const clear: TraceKey[] = [];
    for (const key of TRACE_UPDATABLE) {
      if (!(key in patch)) continue;
      const raw: unknown = patch[key];
      if (raw === undefined) continue;
      const parsed = key === 'trace_level' ? parseLevel(raw) : parseScalar(key, raw);
      if (parsed === 'clear') clear.push(key);
      else if (parsed !== undefined) set[key] = parsed;
    }
    if (model === undefined || model === '') {
      const next = cloneTrace(this.#traceGlobal);
      for (const key of clear) next[key] = cloneValue(this.#traceInitial[key] as string | string[]);
      Object.assign(next, set);
      checkTraceSetting(next);
      this.#traceGlobal = next;
    } else {
      const overrides = { ...this.#traceModels.get(model), ...set };
      for (const key of clear) delete overrides[key];
      checkTraceSetting({ ...cloneTrace(this.#traceGlobal), ...cloneTrace(overrides as TraceSettings) });
      if (Object.keys(overrides).length === 0) this.#traceModels.delete(model);
      else this.#traceModels.set(model, overrides);
    }
    for (const listener of this.#traceListeners) listener();
    return this.traceSettings(model);
  }
}

/**
 * Triton refuses a setting that traces but cannot (`TraceSetting::Valid`); a disabled one may be
 * anything. Opentelemetry mode needs no file, and rate 0 there still traces requests that bring a
 * trace context.
 */
function checkTraceSetting(t: TraceSettings): void {
  const level = t.trace_level;
  if (Array.isArray(level) && level.length === 1 && level[0] === 'OFF') return;
  let reason: string | undefined;
  if (t.trace_mode !== 'opentelemetry' && t.trace_rate === '0') reason = 'sample rate must be non-zero';
  else if (t.trace_mode !== 'opentelemetry' && t.trace_file === '') reason = 'trace file name is not given';
  if (reason !== undefined) throw invalidArgument(`Attempting to set invalid trace setting :${reason}`);
}

/** A trace level list → the normalised list, 'clear', or undefined (no recognised level: no change). */
function parseLevel(raw: unknown): string[] | 'clear' | undefined {
  if (raw === null) return 'clear';
  const list = raw;
  if (!Array.isArray(list)) throw internal('attempt to access JSON non-array as array');
  if (list.length === 0) return 'clear';
  let off = false;
  let timestamps = false;
  let tensors = false;
  for (const level of list) {
    if (typeof level !== 'string') throw internal('attempt to access JSON non-string as string');
    if (level === 'OFF') {
      if (list.length !== 1) throw invalidArgument("Expect only one trace level 'OFF' is specified");
      off = true;
    } else if (level === 'TIMESTAMPS') {
      timestamps = true;
    } else if (level === 'TENSORS') {
      tensors = true;
    }
  }
  if (off) return ['OFF'];
  if (!timestamps && !tensors) return undefined;
  const out: string[] = [];
  if (timestamps) out.push('TIMESTAMPS');
  if (tensors) out.push('TENSORS');
  return out;
}

/** trace_rate / trace_count / log_frequency: a decimal string (C++ `std::stoi` rules), or a one-element list. */
function parseScalar(key: TraceKey, raw: unknown): string | 'clear' {
  if (raw === null) return 'clear';
  let text: unknown = raw;
  if (Array.isArray(raw)) {
    if (raw.length === 0) return 'clear';
    if (raw.length > 1) throw invalidArgument(`expect only 1 value for '${key}'`);
    text = raw[0];
  }
  if (typeof text !== 'string') throw internal('attempt to access JSON non-string as string');
  const m = /^\s*([+-]?\d+)/.exec(text);
  if (m === null) throw invalidArgument(`Unable to parse '${key}', got: ${text}`);
  const value = Number(m[1]);
  const isCount = key === 'trace_count';
  if (value < INT32_MIN || value > INT32_MAX) {
    const range = isCount ? `[ ${MIN_TRACE_COUNT}, ${INT32_MAX} ]` : `[ 0, ${UINT32_MAX} ]`;
    throw invalidArgument(`Unable to parse '${key}', value is out of range ${range}, got: ${text}`);
  }
  if (isCount) {
    if (value < MIN_TRACE_COUNT) {
      throw invalidArgument(`Unable to parse '${key}'. Expecting value >= ${MIN_TRACE_COUNT}, got: ${text}`);
    }
    return String(value);
  }
  // rate and log_frequency are uint32 in Triton: a negative int wraps around.
  return String(value >>> 0);
}

function cloneValue(v: string | string[]): string | string[] {
  return Array.isArray(v) ? [...v] : v;
}

function cloneTrace(t: Readonly<TraceSettings>): TraceSettings {
  const out: TraceSettings = {};
  for (const [k, v] of Object.entries(t)) out[k] = cloneValue(v);
  return out;
}

function stripUndefined<T extends object>(o: T): Partial<T> {
  const out: Partial<T> = {};
  for (const [k, v] of Object.entries(o)) if (v !== undefined) (out as Record<string, unknown>)[k] = v;
  return out;
}
