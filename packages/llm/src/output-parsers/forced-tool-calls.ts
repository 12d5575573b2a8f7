/**
 * The output of a forced tool choice, read into tool-call events (`parser-events.ts`). Guided
 * decoding (`guided/tool-choice.ts`) made the output follow vLLM's schema, so no model format and no
 * tool-call parser is involved:
 *
 * - `NamedFunctionParser` (`tool_choice: {type: "function", function: {name}}`): the whole output is
 *   the arguments of that one call, sent as generated (vLLM: `arguments` is the output text). The call
 *   starts with the first delta, so a reply always holds exactly one call.
 * - `RequiredCallsParser` (`tool_choice: "required"`): the output is `[{"name": ..., "parameters":
 *   {...}}, ...]`; each element is a call, its name sent once complete and its `parameters` as
 *   arguments while they arrive, in Python's `json.dumps` layout (vLLM's non-streaming reply
 *   re-serialises them so; `json-call-scanner.ts`). Text that breaks the shape (impossible under the
 *   constraint) ends the reading: calls already started keep what they got, the rest is dropped.
 */
import { emit, type ParserEvent, type StreamParser } from './parser-events.js';
import { JsonCall } from './tool-call-parsers.js';

export class NamedFunctionParser implements StreamParser {
  private started = false;

  constructor(private readonly name: string) {}

  push(text: string): ParserEvent[] {
    const out: ParserEvent[] = [];
    this.start(out);
    emit(out, { type: 'tool_args', index: 0, text });
    return out;
  }

  finish(): ParserEvent[] {
    const out: ParserEvent[] = [];
    this.start(out);
    return out;
  }

  private start(out: ParserEvent[]): void {
    if (this.started) return;
    this.started = true;
    out.push({ type: 'tool_call', index: 0, name: this.name });
  }
}

const isWs = (c: string): boolean => c === ' ' || c === '\n' || c === '\t' || c === '\r';

export class RequiredCallsParser implements StreamParser {
  calls = 0;
  /** open: before `[`; item: before a call (or `]`); call: inside one; after: before `,` or `]`; done: the list closed (or broke). */
  private mode: 'open' | 'item' | 'call' | 'after' | 'done' = 'open';
  private call: JsonCall | undefined;

  push(text: string): ParserEvent[] {
    return this.mode === 'done' ? [] : this.run(text);
  }

  /** A call still open at the end keeps what was sent (the output was cut by max_tokens). */
  finish(): ParserEvent[] {
    this.mode = 'done';
    return [];
  }

  private run(buf: string): ParserEvent[] {
    const out: ParserEvent[] = [];
    let i = 0;
    while (i < buf.length && this.mode !== 'done') {
      if (this.mode === 'call') {
        const call = this.call as JsonCall;
        i += call.feed(buf.slice(i), out);
        if (call.scanner.done) this.mode = 'after';
        else if (call.scanner.failed) this.mode = 'done';
        continue;
      }
      const c = buf[i] as string;
      i++;
      if (isWs(c)) continue;
      if (this.mode === 'open') this.mode = c === '[' ? 'item' : 'done';
      else if (this.mode === 'item') {
        if (c === '{') {
          this.call = new JsonCall(this);
          this.mode = 'call';
          i--; // the scanner reads the object from its brace
        } else this.mode = 'done'; // `]` closes the list; anything else breaks it
      } else if (this.mode === 'after') this.mode = c === ',' ? 'item' : 'done';
    }
    return out;
  }
}
