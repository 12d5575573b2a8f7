/**
 * The apps' pino logger: JSON lines on stdout, or human lines on a terminal (terminal/log-output.ts
 * decides, terminal/human-log.ts renders); packages never build a logger, they take the `Logger`
 * interface of @switchyard/common, which this satisfies. `--log-format` picks the timestamp form and
 * forces a line form, `--log-verbose` the level; `levelFor` maps Triton's log settings (the worker's
 * `/v2/logging`) to a pino level at run time.
 */
import { constants, fstatSync, openSync, closeSync } from 'node:fs';
import { pino, type DestinationStream, type Logger as PinoLogger, type LevelWithSilent } from 'pino';
import { HumanLogStream } from './terminal/human-log.js';
import type { LogFormat, LogOutput } from './terminal/log-output.js';

export interface LogLevelSettings {
  log_info: boolean;
  log_warning: boolean;
  log_error: boolean;
  log_verbose_level: number;
}

export interface LoggerOptions {
  verbose: number;
  format: LogFormat;
  /** `--log-info` / `--log-warning` / `--log-error` (default true each). */
  info?: boolean;
  warning?: boolean;
  error?: boolean;
  /** Default stdout. */
  destination?: NodeJS.WritableStream | DestinationStream;
  /** The line form (`logOutputOf`); default JSON lines. Human lines go to `destination` re-rendered. */
  output?: LogOutput | undefined;
}

export function createLogger(options: LoggerOptions): PinoLogger {
  const destination = options.destination ?? process.stdout;
  const human = options.output?.human === true ? options.output : undefined;
  return pino(
    {
      base: { pid: process.pid },
      level: levelFor({ log_info: options.info ?? true, log_warning: options.warning ?? true, log_error: options.error ?? true, log_verbose_level: options.verbose }),
      // Human lines format the epoch time themselves.
      timestamp: options.format === 'ISO8601' && human === undefined ? pino.stdTimeFunctions.isoTime : pino.stdTimeFunctions.epochTime,
    },
    human === undefined ? destination : (new HumanLogStream(destination as { write(chunk: string): unknown }, human) as unknown as DestinationStream),
  );
}

/** The log file could not be opened; the message names the path and the reason. */
export class LogFileError extends Error {
  override readonly name = 'LogFileError';
}

/**
 * `--log-file`: a destination appending to `path`, created with mode 0600 when absent (logs may
 * carry model names, addresses and request ids). Refused, with the reason: a path whose last part
 * is a symbolic link (O_NOFOLLOW: in a shared folder another user could point it at a file of
 * ours), anything that is not a regular file (a FIFO would block the server on its first line, a
 * folder cannot take lines), and whatever the OS refuses (missing folder, no permission). Writes
 * are synchronous so the last lines before an exit are in the file.
 */
export function openLogFile(path: string): DestinationStream {
  if (path === '') throw new LogFileError('--log-file needs a file path');
  let fd: number;
  try {
    fd = openSync(path, constants.O_WRONLY | constants.O_APPEND | constants.O_CREAT | constants.O_NOFOLLOW | constants.O_NONBLOCK, 0o600);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    const why = code === 'ELOOP' ? 'it is a symbolic link' : code === 'ENOENT' ? 'its folder does not exist' : code === 'EACCES' ? 'permission denied' : code === 'EISDIR' ? 'it is a folder' : (e as Error).message;
    throw new LogFileError(`cannot open log file '${path}': ${why}`);
  }
  if (!fstatSync(fd).isFile()) {
    closeSync(fd);
    throw new LogFileError(`cannot open log file '${path}': not a regular file`);
  }
  return pino.destination({ dest: fd, sync: true });
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
