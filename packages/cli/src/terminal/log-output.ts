/**
 * Where log lines go and in which form. JSON lines (pino's, unchanged) unless the destination is a
 * terminal, or `--log-format human` forces human lines; `--log-format json` forces JSON lines on a
 * terminal too. `default` and `ISO8601` keep tritonserver's meaning (the timestamp form) and leave
 * the choice to the destination. A log file (`--log-file`) always takes JSON lines.
 */

/**
 * `--log-format`: tritonserver's `default` (epoch-millisecond timestamps; local `HH:MM:SS.mmm` in
 * human lines) and `ISO8601`, plus `json` (JSON lines even on a terminal) and `human` (human lines
 * even off a terminal).
 */
export type LogFormat = 'default' | 'ISO8601' | 'json' | 'human';

export const LOG_FORMATS: readonly LogFormat[] = ['default', 'ISO8601', 'json', 'human'];

export const LOG_FORMAT_HELP =
  'Log line form: default (JSON lines with epoch-ms timestamps, human lines on a terminal), ISO8601 (the same with ISO 8601 timestamps), json (JSON lines even on a terminal), human (human lines even off a terminal).';

export interface LogOutput {
  /** Human lines (and the start-up tables) instead of JSON lines. */
  human: boolean;
  /** ANSI colours in human lines: only on a terminal, and never when NO_COLOR is set. */
  color: boolean;
  /** The timestamp form. */
  timestamps: 'default' | 'ISO8601';
}

export interface LogOutputInput {
  format: LogFormat;
  /** Whether the destination is a terminal (process.stdout.isTTY; false for a log file). */
  isTerminal: boolean;
  /** NO_COLOR is set to a non-empty value (https://no-color.org). */
  noColor: boolean;
}

export function logOutputOf({ format, isTerminal, noColor }: LogOutputInput): LogOutput {
  const human = format === 'human' || (isTerminal && format !== 'json');
  return { human, color: human && isTerminal && !noColor, timestamps: format === 'ISO8601' ? 'ISO8601' : 'default' };
}

/** The timestamp form alone, for Triton's `log_format` setting (`/v2/logging`), which knows only these two. */
export function timestampFormat(format: LogFormat): 'default' | 'ISO8601' {
  return format === 'ISO8601' ? 'ISO8601' : 'default';
}
