/**
 * The worker's `<name>,<setting>=<value>` flags in the engine's and the doors' terms:
 * `--backend-config`, `--metrics-config`, and the header-forward patterns. Each function is pure,
 * runs once at parse time (so a bad value is a usage error, exit 2) and again when the worker is
 * built; tritonserver's messages where it has them.
 */
import { UsageError } from '@switchyard/cli';
import { compileBackendConfig, type BackendCommandLine, type BackendSettings } from '@switchyard/engine';
import { compileHeaderForwardPattern, type HeaderForwardPattern, type MetricsSettings } from '@switchyard/server';
import type { WorkerOptions } from './options.js';

/**
 * `--backend-config` as tritonserver reads it: `<backend>,<setting>=<value>`, or `<setting>=<value>`
 * for every backend; a setting given twice keeps the last value. Then the engine's check of the
 * backends it has (`compileBackendConfig`: known settings and their values; other backends'
 * settings are kept for a logged note).
 */
export function backendCommandLine(o: Pick<WorkerOptions, 'backendConfig'>): BackendCommandLine {
  const map: Record<string, Record<string, string>> = {};
  for (const arg of o.backendConfig) {
    const comma = arg.indexOf(',');
    const eq = arg.indexOf('=', comma + 1);
    if (comma === 0) throw new UsageError(`No backend specified. --backend-config option format is <backend name>,<setting>=<value> or <setting>=<value>. Got ${arg}`);
    const malformed = new UsageError(`--backend-config option format is '<backend name>,<setting>=<value>'. Got ${arg}`);
    if (eq < 0) throw malformed;
    // as tritonserver splits it: the backend name ends at the first ',', the setting at the first '=' after it
    const name = comma > 0 ? arg.slice(0, comma) : '';
    const setting = arg.slice(comma + 1, eq);
    const value = arg.slice(eq + 1);
    if (setting === '' || value === '') throw malformed;
    (map[name] ??= Object.create(null) as Record<string, string>)[setting] = value;
  }
  return map;
}

export function backendSettings(o: Pick<WorkerOptions, 'backendConfig'>): BackendSettings {
  try {
    return compileBackendConfig(backendCommandLine(o));
  } catch (e) {
    if (e instanceof UsageError) throw e;
    throw new UsageError(`--backend-config: ${(e as Error).message}`);
  }
}

const BOOL_TRUE = new Set(['true', '1', 'on', 'yes']);
const BOOL_FALSE = new Set(['false', '0', 'off', 'no']);

function boolSetting(setting: string, value: string): boolean {
  const v = value.toLowerCase();
  if (BOOL_TRUE.has(v)) return true;
  if (BOOL_FALSE.has(v)) return false;
  throw new UsageError(`--metrics-config ${setting} expects true or false, got '${value}'`);
}

/** `0.5:0.05,0.9:0.01`: quantile:allowed error pairs, each in (0, 1). */
const QUANTILES = /^(\d*\.?\d+:\d*\.?\d+)(,\d*\.?\d+:\d*\.?\d+)*$/;

/**
 * `--metrics-config <setting>=<value>` (repeatable; the last value of a setting wins). The settings
 * tritonserver has: `counter_latencies` (the `*_duration_us` counters, default true),
 * `summary_latencies` and `histogram_latencies` (latency summaries / histograms, default false: this
 * worker has neither, so true is refused), `summary_quantiles` (checked; they shape the summaries).
 * Any other setting is refused.
 */
export function metricsSettings(o: Pick<WorkerOptions, 'metricsConfig'>): MetricsSettings {
  let counterLatencies = true;
  for (const arg of o.metricsConfig) {
    const eq = arg.indexOf('=');
    const setting = arg.slice(0, eq);
    const value = arg.slice(eq + 1);
    if (eq <= 0 || value === '' || setting.includes(',')) throw new UsageError(`--metrics-config option format is <setting>=<value>. Got ${arg}`);
    switch (setting) {
      case 'counter_latencies':
        counterLatencies = boolSetting(setting, value);
        break;
      case 'summary_latencies':
      case 'histogram_latencies':
        if (boolSetting(setting, value)) throw new UsageError(`--metrics-config ${setting}=true is not supported by this worker: it reports latencies as counters only`);
        break;
      case 'summary_quantiles':
        if (!QUANTILES.test(value) || value.split(/[,:]/).some((x) => !(Number(x) > 0 && Number(x) < 1))) {
          throw new UsageError(`--metrics-config summary_quantiles expects <quantile>:<error>[,...] with each number in (0, 1), got '${value}'`);
        }
        break;
      default:
        throw new UsageError(`unknown --metrics-config setting '${setting}': expected counter_latencies, summary_latencies, histogram_latencies or summary_quantiles`);
    }
  }
  return { counterLatencies };
}

/** The two forward patterns compiled (the doors' `compileHeaderForwardPattern`); a bad pattern is a UsageError. */
export function headerForwardPatterns(o: Pick<WorkerOptions, 'httpHeaderForwardPattern' | 'grpcHeaderForwardPattern'>): { http?: HeaderForwardPattern; grpc?: HeaderForwardPattern } {
  const compile = (flag: string, pattern: string | undefined): HeaderForwardPattern | undefined => {
    if (pattern === undefined) return undefined;
    try {
      return compileHeaderForwardPattern(pattern);
    } catch (e) {
      throw new UsageError(`flag '--${flag}': ${(e as Error).message}`);
    }
  };
  const http = compile('http-header-forward-pattern', o.httpHeaderForwardPattern);
  const grpc = compile('grpc-header-forward-pattern', o.grpcHeaderForwardPattern);
  return { ...(http !== undefined ? { http } : {}), ...(grpc !== undefined ? { grpc } : {}) };
}
