/**
 * The apps' pino logger: JSON lines on stdout (packages never build a logger; they take the
 * `Logger` interface of @switchyard/common, which this satisfies). `--log-format` picks the
 * timestamp form and `--log-verbose` the level; `levelFor` maps Triton's log settings (the worker's
 * `/v2/logging`) to a pino level at run time.
 */
import { pino, type Logger as PinoLogger, type LevelWithSilent } from 'pino';

/** `--log-format`: epoch milliseconds (`default`) or ISO 8601 timestamps. */
export type LogFormat = 'default' | 'ISO8601';

export interface LogLevelSettings {
  log_info: boolean;
  log_warning: boolean;
  log_error: boolean;
  log_verbose_level: number;
}

export function createLogger(options: { verbose: number; format: LogFormat; destination?: NodeJS.WritableStream }): PinoLogger {
  return pino(
    {
      base: { pid: process.pid },
      level: levelFor({ log_info: true, log_warning: true, log_error: true, log_verbose_level: options.verbose }),
      timestamp: options.format === 'ISO8601' ? pino.stdTimeFunctions.isoTime : pino.stdTimeFunctions.epochTime,
    },
    options.destination ?? process.stdout,
  );
}

/** The most verbose level the settings allow. Verbose levels win over the info/warning/error switches. */
export function levelFor(s: LogLevelSettings): LevelWithSilent {
  if (s.log_verbose_level >= 2) return 'trace';
  if (s.log_verbose_level === 1) return 'debug';
  if (s.log_info) return 'info';
  if (s.log_warning) return 'warn';
  if (s.log_error) return 'error';
  return 'silent';
}
