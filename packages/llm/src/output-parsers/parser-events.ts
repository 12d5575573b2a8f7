/**
 * What the output parsers emit, and the small text helpers they share. A parser is fed the text
 * deltas of one choice, in order (`push`), then `finish` once; each call returns the events it can
 * settle now. Events are never taken back, and text that may still become part of a marker is held
 * until it is settled, so any split of the same text into deltas yields the same events once merged.
 */

/** One settled piece of a choice's output. Tool calls are numbered from 0 in the order they start. */
export type ParserEvent =
  | { readonly type: 'content'; readonly text: string }
  | { readonly type: 'reasoning'; readonly text: string }
  /** A tool call starts: its function's name is known. Argument pieces of this index follow. */
  | { readonly type: 'tool_call'; readonly index: number; readonly name: string }
  /** The next piece of a started call's `function.arguments` (JSON text). */
  | { readonly type: 'tool_args'; readonly index: number; readonly text: string };

/** A streaming parser of one choice. Not reusable; `finish` ends it. */
export interface StreamParser {
  push(text: string): ParserEvent[];
  finish(): ParserEvent[];
}

/**
 * Where `marker` starts in `text` (-1 if absent), and how many trailing characters must be held back
 * because they are a proper prefix of `marker` (0 when the marker was found).
 */
export function findMarker(text: string, marker: string, from = 0): { index: number; hold: number } {
  const index = text.indexOf(marker, from);
  if (index !== -1) return { index, hold: 0 };
  const max = Math.min(marker.length - 1, text.length - from);
  for (let n = max; n > 0; n--) {
    if (marker.startsWith(text.slice(text.length - n))) return { index: -1, hold: n };
  }
  return { index: -1, hold: 0 };
}

/** Push `event` onto `out`, merging it into the previous event of the same text kind. */
export function emit(out: ParserEvent[], event: ParserEvent): void {
  if ((event.type === 'content' || event.type === 'reasoning' || event.type === 'tool_args') && event.text === '') return;
  const last = out[out.length - 1];
  if (last !== undefined && last.type === event.type) {
    if (last.type === 'content' || last.type === 'reasoning') {
      out[out.length - 1] = { type: last.type, text: last.text + (event as { text: string }).text };
      return;
    }
    if (last.type === 'tool_args' && event.type === 'tool_args' && last.index === event.index) {
      out[out.length - 1] = { type: 'tool_args', index: last.index, text: last.text + event.text };
      return;
    }
  }
  out.push(event);
}

/** The events of a whole output, merged: what a non-streaming response holds. */
export interface ParsedOutput {
  readonly content: string;
  readonly reasoning: string;
  readonly toolCalls: Array<{ name: string; arguments: string }>;
}

export function collectEvents(events: readonly ParserEvent[]): ParsedOutput {
  let content = '';
  let reasoning = '';
  const toolCalls: Array<{ name: string; arguments: string }> = [];
  for (const e of events) {
    if (e.type === 'content') content += e.text;
    else if (e.type === 'reasoning') reasoning += e.text;
    else if (e.type === 'tool_call') toolCalls[e.index] = { name: e.name, arguments: '' };
    else (toolCalls[e.index] as { arguments: string }).arguments += e.text;
  }
  return { content, reasoning, toolCalls };
}

/**
 * Leading whitespace held apart while a parser waits to see how an output starts: appended, never
 * read until the decision (reading a string built by appending flattens it, which done per delta
 * would cost quadratic time on a long run of whitespace). `push` returns the text after the
 * whitespace, once there is some.
 */
export class LeadingSpace {
  space = '';
  private done = false;

  push(text: string): string {
    if (this.done) return text;
    const m = /^\s*/.exec(text) as RegExpExecArray;
    this.space += m[0];
    if (m[0].length === text.length) return '';
    this.done = true;
    return text.slice(m[0].length);
  }
}
