/**
 * Human-readable log lines for a terminal: the JSON records pino writes, re-rendered one line each as
 * `time LEVEL component message key=value ...`. Pure except `HumanLogStream`, which writes to the
 * stream it is given. Everything a client can influence (model names, request ids, error messages)
 * reaches the terminal with control characters escaped, so a log line cannot move the cursor, set a
 * colour or clear the screen.
 */

export interface HumanLogOptions {
  /** ANSI colours for the level (and dim keys); only on a terminal and when NO_COLOR is unset. */
  color: boolean;
  /** `ISO8601`: full ISO 8601 UTC timestamps; `default`: local `HH:MM:SS.mmm`. */
  timestamps: 'default' | 'ISO8601';
}

const LEVELS: Record<number, { name: string; color: string }> = {
  10: { name: 'TRACE', color: '\x1b[90m' },
  20: { name: 'DEBUG', color: '\x1b[36m' },
  30: { name: 'INFO', color: '\x1b[32m' },
  40: { name: 'WARN', color: '\x1b[33m' },
  50: { name: 'ERROR', color: '\x1b[31m' },
  60: { name: 'FATAL', color: '\x1b[35m' },
};
const RESET = '\x1b[0m';
const DIM = '\x1b[2m';

/** Fields the line shows in its fixed places (or drops: pid is the same on every line). */
const FIXED = new Set(['level', 'time', 'pid', 'hostname', 'msg', 'component']);

// C0, DEL and C1 controls; U+2028/2029 break lines in some terminals.
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f-\u009f\u2028\u2029]/g;

/** `text` with every control character as a `\uXXXX` escape (newlines and tabs included). */
export function escapeControls(text: string): string {
  return text.replace(CONTROL, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

const BARE = /^[\w.:/@+%,=-]+$/u;

/** A value as it appears after `key=`: bare when unambiguous, else JSON (which escapes controls). */
export function formatValue(value: unknown): string {
  if (typeof value === 'string') return BARE.test(value) ? value : escapeControls(JSON.stringify(value));
  if (typeof value === 'number' || typeof value === 'boolean' || value === null) return String(value);
  if (value === undefined) return 'undefined';
  // pino serializes errors as { type, message, stack }: the message is what a reader needs here.
  if (isSerializedError(value)) return formatValue(value.message);
  return escapeControls(JSON.stringify(value) ?? String(value));
}

function isSerializedError(v: unknown): v is { message: string; stack: string } {
  return typeof v === 'object' && v !== null && typeof (v as { message?: unknown }).message === 'string' && typeof (v as { stack?: unknown }).stack === 'string';
}

function pad(n: number, width: number): string {
  return String(n).padStart(width, '0');
}

export function formatTime(time: unknown, timestamps: HumanLogOptions['timestamps']): string {
  const date = typeof time === 'number' ? new Date(time) : typeof time === 'string' ? new Date(time) : undefined;
  if (date === undefined || Number.isNaN(date.getTime())) return '--:--:--.---';
  if (timestamps === 'ISO8601') return date.toISOString();
  return `${pad(date.getHours(), 2)}:${pad(date.getMinutes(), 2)}:${pad(date.getSeconds(), 2)}.${pad(date.getMilliseconds(), 3)}`;
}

/** One pino record (already parsed) as one terminal line, without the newline. */
export function formatLogRecord(record: Record<string, unknown>, options: HumanLogOptions): string {
  const level = LEVELS[typeof record['level'] === 'number' ? record['level'] : 30] ?? { name: String(record['level']).toUpperCase(), color: '' };
  const paint = (code: string, text: string): string => (options.color && code !== '' ? `${code}${text}${RESET}` : text);
  const parts = [formatTime(record['time'], options.timestamps), paint(level.color, level.name.padEnd(5))];
  if (typeof record['component'] === 'string') parts.push(paint(DIM, escapeControls(record['component'])));
  if (typeof record['msg'] === 'string' && record['msg'] !== '') parts.push(escapeControls(record['msg']));
  for (const [key, value] of Object.entries(record)) {
    if (FIXED.has(key)) continue;
    parts.push(`${paint(DIM, `${escapeControls(key)}=`)}${formatValue(value)}`);
  }
  return parts.join(' ');
}

/** One line of pino output (a JSON record) as a terminal line; a line that is not JSON passes through, escaped. */
export function formatLogLine(line: string, options: HumanLogOptions): string {
  let record: unknown;
  try {
    record = JSON.parse(line);
  } catch {
    return escapeControls(line);
  }
  if (typeof record !== 'object' || record === null || Array.isArray(record)) return escapeControls(line);
  return formatLogRecord(record as Record<string, unknown>, options);
}

/**
 * A pino destination that writes human lines to `out` (the process's stdout, a terminal). pino
 * calls `write` with whole records, each ending in a newline, synchronously.
 */
export class HumanLogStream {
  constructor(
    private readonly out: { write(chunk: string): unknown },
    private readonly options: HumanLogOptions,
  ) {}

  write(chunk: string): boolean {
    let text = '';
    for (const line of chunk.split('\n')) if (line !== '') text += `${formatLogLine(line, this.options)}\n`;
    this.out.write(text);
    return true;
  }
}
