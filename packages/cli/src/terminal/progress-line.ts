/**
 * A one-line progress display for long work on a terminal: each `update` rewrites the line in place
 * (carriage return, erase line), at most once per `intervalMs` of wall time; `done` erases it so
 * the output that follows starts clean. Off a terminal it writes nothing (a log or a pipe would
 * fill with redraws). Written to stderr by the callers, so stdout stays the result.
 */
import { escapeControls } from './human-log.js';

export const DEFAULT_PROGRESS_INTERVAL_MS = 200;

export interface ProgressStream {
  isTTY?: boolean;
  columns?: number;
  write(chunk: string): unknown;
}

export class ProgressLine {
  private lastAt = -Infinity;
  private shown = false;

  constructor(
    private readonly out: ProgressStream,
    private readonly intervalMs = DEFAULT_PROGRESS_INTERVAL_MS,
    private readonly now: () => number = () => performance.now(),
  ) {}

  /** Whether anything is drawn at all (the stream is a terminal). */
  get enabled(): boolean {
    return this.out.isTTY === true;
  }

  /** Show `text` (control characters escaped, cut to the terminal's width) unless the last redraw is too recent. */
  update(text: string | (() => string)): void {
    if (!this.enabled) return;
    const t = this.now();
    if (t - this.lastAt < this.intervalMs) return;
    this.lastAt = t;
    let line = escapeControls(typeof text === 'function' ? text() : text);
    const width = this.out.columns;
    if (width !== undefined && width > 1 && line.length >= width) line = line.slice(0, width - 1);
    this.out.write(`\r\x1b[K${line}`);
    this.shown = true;
  }

  /** Erase the line (if one is shown). */
  done(): void {
    if (!this.shown) return;
    this.out.write('\r\x1b[K');
    this.shown = false;
  }
}

/** Seconds as `12.3 s`, `4m05s`, `2h03m`. */
export function formatElapsed(seconds: number): string {
  if (!Number.isFinite(seconds) || seconds < 0) return '?';
  if (seconds < 60) return `${seconds.toFixed(1)} s`;
  const s = Math.floor(seconds);
  if (s < 3600) return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, '0')}s`;
  return `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, '0')}m`;
}
