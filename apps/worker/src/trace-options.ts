/**
 * The tracing flags, tritonserver's "Tracing" group: `--trace-config [<mode>,]<setting>=<value>`
 * (repeatable) and the deprecated `--trace-file`, `--trace-level`, `--trace-rate`, `--trace-count`,
 * `--trace-log-frequency`, which tritonserver still accepts (with a warning; a `--trace-config`
 * value wins over its deprecated twin). `traceConfigOf` compiles them into the server's
 * `TraceConfig`, with tritonserver's messages where it has them
 * (`server:src/command_line_parser.cc` ParseTraceConfigOption, ParseTraceLevelOption,
 * ParseTraceModeOption, PostProcessTraceArgs).
 *
 * Stricter than tritonserver, on purpose: an unknown setting, a count below -1 or an unusable
 * OTLP URL is a usage error instead of being ignored.
 */
import { UsageError, type FlagTable } from '@switchyard/cli';
import { DEFAULT_TRACE_CONFIG, otlpUrl, type TraceConfig, type TraceMode } from '@switchyard/server';

export interface TraceFlagOptions {
  /** `--trace-config` values as given. */
  traceConfig: string[];
  /** Deprecated flags as given (undefined / empty when absent). */
  traceFile?: string;
  traceLevel: string[];
  traceRate?: string;
  traceCount?: string;
  traceLogFrequency?: string;
}

export const TRACE_FLAG_DEFAULTS = (): Pick<TraceFlagOptions, 'traceConfig' | 'traceLevel'> => ({ traceConfig: [], traceLevel: [] });

export const TRACE_FLAGS: FlagTable<TraceFlagOptions> = {
  'trace-config': {
    kind: 'strings',
    key: 'traceConfig',
    help:
      "Tracing, '[<mode>,]<setting>=<value>', repeatable: level=OFF|TIMESTAMPS|TENSORS, rate=N, count=N, mode=triton|opentelemetry; " +
      "'triton,file=PATH', 'triton,log-frequency=N'; 'opentelemetry,url=URL', 'opentelemetry,resource=KEY=VALUE', " +
      "'opentelemetry,bsp_max_queue_size=N', 'opentelemetry,bsp_schedule_delay=MS', 'opentelemetry,bsp_max_export_batch_size=N' (default: level OFF, rate 1000, count -1, mode triton).",
  },
  'trace-file': { kind: 'string', key: 'traceFile', help: 'Deprecated: --trace-config triton,file=PATH.' },
  'trace-level': { kind: 'strings', key: 'traceLevel', help: 'Deprecated: --trace-config level=OFF|TIMESTAMPS|TENSORS (repeatable).' },
  'trace-rate': { kind: 'string', key: 'traceRate', help: 'Deprecated: --trace-config rate=N.' },
  'trace-count': { kind: 'string', key: 'traceCount', help: 'Deprecated: --trace-config count=N.' },
  'trace-log-frequency': { kind: 'string', key: 'traceLogFrequency', help: 'Deprecated: --trace-config triton,log-frequency=N.' },
};

/** Largest `bsp_max_queue_size`: the spans a dead collector can make the worker hold. */
export const MAX_BSP_QUEUE_SIZE = 65_536;
/** Longest `bsp_schedule_delay`, ms (a day). */
export const MAX_BSP_SCHEDULE_DELAY_MS = 86_400_000;

const GLOBAL_SETTINGS = new Set(['level', 'rate', 'count', 'mode']);
const MODE_SETTINGS: Record<TraceMode, ReadonlySet<string>> = {
  triton: new Set(['file', 'log-frequency']),
  opentelemetry: new Set(['url', 'resource', 'bsp_max_queue_size', 'bsp_schedule_delay', 'bsp_max_export_batch_size']),
};
const INT32_MIN = -2147483648;
const INT32_MAX = 2147483647;

interface TraceSetting {
  /** '' for a global setting. */
  mode: '' | TraceMode;
  setting: string;
  value: string;
  arg: string;
}

/** The compiled trace configuration and the warnings tritonserver prints for the deprecated flags. */
export function traceConfigOf(o: TraceFlagOptions): { config: TraceConfig; warnings: string[] } {
  const warnings: string[] = [];
  const settings = o.traceConfig.map(parseTraceConfigArg);
  for (const s of settings) {
    const known = s.mode === '' ? GLOBAL_SETTINGS : MODE_SETTINGS[s.mode];
    if (!known.has(s.setting)) {
      const where = s.mode === '' ? 'global' : `'${s.mode}'`;
      throw new UsageError(`Bad option: "--trace-config ${s.arg}".\nunknown ${where} trace setting '${s.setting}'; known: ${[...known].join(', ')}`);
    }
  }
  const global = (name: string) => settings.filter((s) => s.mode === '' && s.setting === name);
  const last = <T>(list: T[]): T | undefined => list[list.length - 1];

  let levels = new Set<'TIMESTAMPS' | 'TENSORS'>();
  let disabled = false;
  const addLevel = (flag: string, value: string) => {
    const level = parseTraceLevel(flag, value);
    if (level === 'OFF') disabled = true;
    else levels.add(level);
  };
  if (o.traceLevel.length > 0) warnings.push(deprecated('trace-level', 'level=<OFF|TIMESTAMPS|TENSORS>'));
  for (const v of o.traceLevel) addLevel('--trace-level', v);
  if (global('level').length > 0 && o.traceLevel.length > 0) warnings.push("Overriding deprecated '--trace-level' in favor of provided level in --trace-config!");
  for (const s of global('level')) addLevel(`--trace-config ${s.setting}`, s.value);
  if (disabled) levels = new Set();

  let rate = DEFAULT_TRACE_CONFIG.rate;
  if (o.traceRate !== undefined) {
    warnings.push(deprecated('trace-rate', 'rate=<rate value>'));
    rate = parseInt32('--trace-rate', o.traceRate) >>> 0;
  }
  const rateSetting = last(global('rate'));
  if (rateSetting !== undefined) {
    if (o.traceRate !== undefined) warnings.push("Overriding deprecated '--trace-rate' in favor of provided rate value in --trace-config!");
    rate = parseInt32('--trace-config rate', rateSetting.value) >>> 0;
  }

  let count = DEFAULT_TRACE_CONFIG.count;
  if (o.traceCount !== undefined) {
    warnings.push(deprecated('trace-count', 'count=<count value>'));
    count = parseCount('--trace-count', o.traceCount);
  }
  const countSetting = last(global('count'));
  if (countSetting !== undefined) {
    if (o.traceCount !== undefined) warnings.push("Overriding deprecated '--trace-count' in favor of provided count in --trace-config!");
    count = parseCount('--trace-config count', countSetting.value);
  }

  let mode: TraceMode = DEFAULT_TRACE_CONFIG.mode;
  for (const s of global('mode')) mode = parseTraceMode(s.value);

  const config: TraceConfig = { ...DEFAULT_TRACE_CONFIG, otel: { ...DEFAULT_TRACE_CONFIG.otel, resource: { ...DEFAULT_TRACE_CONFIG.otel.resource } }, level: (['TIMESTAMPS', 'TENSORS'] as const).filter((l) => levels.has(l)), rate, count, mode };
  if (o.traceFile !== undefined) warnings.push(deprecated('trace-file', 'triton,file=<filepath>'));
  if (o.traceLogFrequency !== undefined) warnings.push(deprecated('trace-log-frequency', 'triton,log-frequency=<log frequency value>'));
  if (mode === 'triton') {
    if (o.traceFile !== undefined) config.file = o.traceFile;
    if (o.traceLogFrequency !== undefined) config.logFrequency = parseInt32('--trace-log-frequency', o.traceLogFrequency) >>> 0;
    for (const s of settings.filter((x) => x.mode === 'triton')) {
      if (s.setting === 'file') config.file = s.value;
      else config.logFrequency = parseInt32(`--trace-config triton,${s.setting}`, s.value) >>> 0;
    }
  } else {
    if (o.traceFile !== undefined) warnings.push("'--trace-file' is deprecated and will be ignored with opentelemetry tracing mode.");
    if (o.traceLogFrequency !== undefined) warnings.push("'--trace-log-frequency' is deprecated and will be ignored with opentelemetry tracing mode.");
    applyOtelSettings(config, settings.filter((x) => x.mode === 'opentelemetry'));
  }
  if (mode === 'opentelemetry' && config.level.includes('TENSORS')) {
    warnings.push('Tensor level tracing is not supported by the mode: OPENTELEMETRY; only TIMESTAMPS are traced');
  }
  if (mode === 'triton' && config.level.length > 0 && config.file === '') {
    warnings.push("trace level is set but no trace file is given (--trace-config triton,file=<path>): no request is traced until one is");
  }
  return { config, warnings };
}

/** `[<mode>,]<setting>=<value>` (ParseTraceConfigOption). */
function parseTraceConfigArg(arg: string): TraceSetting {
  const comma = arg.indexOf(',');
  if (comma === 0) {
    throw new UsageError(`Bad option: "--trace-config".\nNo trace mode specified. --trace-config option format is <trace mode>,<setting>=<value> or <setting>=<value>. Got ${arg}`);
  }
  const eq = arg.indexOf('=', comma + 1);
  const format = () => new UsageError(`Bad option: "--trace-config".\n--trace-config option format is '<trace mode>,<setting>=<value>'. Got ${arg}`);
  const mode: '' | TraceMode = comma > 0 ? parseTraceMode(arg.slice(0, comma)) : '';
  if (eq < 0) throw format();
  const setting = arg.slice(comma + 1, eq);
  const value = arg.slice(eq + 1);
  if (setting === '' || value === '') throw format();
  return { mode, setting, value, arg };
}

function parseTraceMode(value: string): TraceMode {
  const v = value.toLowerCase();
  if (v === 'triton' || v === 'opentelemetry') return v;
  throw new UsageError(`Bad option: "--trace-config".\ninvalid value for trace mode option: ${value}. Available options are "triton" and "opentelemetry"`);
}

function parseTraceLevel(flag: string, value: string): 'OFF' | 'TIMESTAMPS' | 'TENSORS' {
  const v = value.toLowerCase();
  if (v === 'false' || v === 'off') return 'OFF';
  if (['true', 'on', 'min', 'max', 'timestamps'].includes(v)) return 'TIMESTAMPS';
  if (v === 'tensors') return 'TENSORS';
  throw new UsageError(`Bad option: "${flag}".\ninvalid value for trace level option: ${value}`);
}

/** `std::stoi`: optional space and sign, digits, anything after ignored; int32 range. */
function parseInt32(flag: string, value: string): number {
  const m = /^\s*([+-]?\d+)/.exec(value);
  if (m === null) throw new UsageError(`Bad option: "${flag}".\nInvalid option value. Got ${value}`);
  const n = Number(m[1]);
  if (n < INT32_MIN || n > INT32_MAX) throw new UsageError(`Bad option: "${flag}".\nProvided option value is out of bound. Got ${value}`);
  return n;
}

function parseCount(flag: string, value: string): number {
  const n = parseInt32(flag, value);
  if (n < -1) throw new UsageError(`Bad option: "${flag}".\ntrace count must be -1 (no limit) or more, got ${value}`);
  return n;
}

function parseBounded(s: TraceSetting, min: number, max: number): number {
  const flag = `--trace-config opentelemetry,${s.setting}`;
  if (!/^\d+$/.test(s.value)) throw new UsageError(`Bad option: "${flag}".\nInvalid option value. Got ${s.value}`);
  const n = Number(s.value);
  if (n < min || n > max) throw new UsageError(`Bad option: "${flag}".\nexpected an integer from ${min} to ${max}, got ${s.value}`);
  return n;
}

function applyOtelSettings(config: TraceConfig, settings: TraceSetting[]): void {
  const otel = config.otel as { -readonly [K in keyof TraceConfig['otel']]: TraceConfig['otel'][K] };
  const resource: Record<string, string> = { ...otel.resource };
  for (const s of settings) {
    switch (s.setting) {
      case 'url':
        try {
          otlpUrl(s.value);
        } catch (e) {
          throw new UsageError(`Bad option: "--trace-config opentelemetry,url".\n${(e as Error).message}`);
        }
        otel.url = s.value;
        break;
      case 'resource': {
        const eq = s.value.indexOf('=');
        if (eq <= 0) throw new UsageError(`Bad option: "--trace-config opentelemetry,resource".\nexpected <key>=<value>, got ${s.value}`);
        resource[s.value.slice(0, eq)] = s.value.slice(eq + 1);
        break;
      }
      case 'bsp_max_queue_size':
        otel.bspMaxQueueSize = parseBounded(s, 1, MAX_BSP_QUEUE_SIZE);
        break;
      case 'bsp_schedule_delay':
        otel.bspScheduleDelayMs = parseBounded(s, 0, MAX_BSP_SCHEDULE_DELAY_MS);
        break;
      case 'bsp_max_export_batch_size':
        otel.bspMaxExportBatchSize = parseBounded(s, 1, MAX_BSP_QUEUE_SIZE);
        break;
    }
  }
  otel.resource = resource;
  if (otel.bspMaxExportBatchSize > otel.bspMaxQueueSize) {
    throw new UsageError(
      `Bad option: "--trace-config opentelemetry,bsp_max_export_batch_size".\nmust be at most bsp_max_queue_size (${otel.bspMaxQueueSize}), got ${otel.bspMaxExportBatchSize}`,
    );
  }
}

function deprecated(flag: string, replacement: string): string {
  return `'--${flag}' has been deprecated and will be removed in future releases. Please use '--trace-config ${replacement} instead.`;
}
