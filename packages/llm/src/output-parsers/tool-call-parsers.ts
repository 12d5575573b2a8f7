/**
 * Tool-call parsers (vLLM's `--tool-call-parser`), streaming: text deltas in, content and tool-call
 * events out (`parser-events.ts`). Each follows its vLLM namesake's format and non-streaming result:
 *
 * - `hermes` (Qwen 2.5 / 3, Hermes): `<tool_call>{"name": ..., "arguments": {...}}</tool_call>`, any
 *   number of them; content is the text before the first call (text between and after calls is
 *   dropped).
 * - `llama3_json` (Llama 3.1 / 3.2 JSON): the output starts (after whitespace) with `<|python_tag|>`
 *   or `{`; then JSON objects `{"name": ..., "parameters" | "arguments": {...}}` separated by `;`. No
 *   content. Any other output is content.
 * - `mistral`: `[TOOL_CALLS]` then a JSON list of `{"name", "arguments"}` objects, or (v11 tokenizers
 *   and later) `[TOOL_CALLS]name{...}` / `[TOOL_CALLS]name[ARGS]{...}` per call; content is the text
 *   before the first marker; call ids are Mistral's 9 letters and digits. `[TOOL_CALLS]` is a special token: this parser needs special tokens kept in
 *   the text (vLLM's adjust_request sets skip_special_tokens false), `skipSpecialTokens: false`.
 * - `pythonic` (Llama 3.2 / 4, ToolACE): the whole output is `[f(a=1), g(b="x")]`. The list is held
 *   until the output ends, then parsed (`python-calls.ts`); it is content when it does not parse.
 *
 * A call whose JSON turns out not to be a call before its name is known (not an object, a name that
 * is not a string) is given back as content, markers included, as vLLM does for the whole output;
 * once the name was sent the call stands, even if its JSON ends badly (vLLM's streaming parsers
 * cannot take sent deltas back either). A call cut by the end of the output keeps what was sent.
 */
import { JsonCallScanner } from './json-call-scanner.js';
import { LeadingSpace, emit, findMarker, type ParserEvent, type StreamParser } from './parser-events.js';
import { parsePythonCalls } from './python-calls.js';

/** One JSON call in progress: sends its name when known, then its argument pieces. */
export class JsonCall {
  readonly scanner = new JsonCallScanner();
  index: number | undefined;

  constructor(private readonly owner: { calls: number }) {}

  get named(): boolean {
    return this.index !== undefined;
  }

  /** Feed text; returns how many characters the call used. Emits what became known. */
  feed(text: string, out: ParserEvent[], untilArgumentsEnd = false): number {
    const used = this.scanner.feed(text, untilArgumentsEnd);
    const s = this.scanner;
    if (this.index === undefined && s.name !== undefined && !s.failed) {
      this.index = this.owner.calls++;
      emit(out, { type: 'tool_call', index: this.index, name: s.name });
    }
    if (this.index !== undefined) {
      // Pieces laid out before the name was known wait in the scanner until now.
      emit(out, { type: 'tool_args', index: this.index, text: s.takeArgs() });
      if (s.done && s.argsLength === 0) emit(out, { type: 'tool_args', index: this.index, text: '{}' });
    }
    return used;
  }
}

const HERMES_START = '<tool_call>';
const HERMES_END = '</tool_call>';

export class HermesToolParser implements StreamParser {
  calls = 0;
  private buf = '';
  private mode: 'text' | 'call' | 'after' = 'text';
  private call: JsonCall | undefined;
  /** The current call's text from its start marker, given back as content if it is no call. */
  private callText = '';

  push(text: string): ParserEvent[] {
    this.buf += text;
    return this.run(false);
  }
  finish(): ParserEvent[] {
    return this.run(true);
  }

  private content(out: ParserEvent[], text: string): void {
    if (this.calls === 0) emit(out, { type: 'content', text });
  }

  private run(final: boolean): ParserEvent[] {
    const out: ParserEvent[] = [];
    for (;;) {
      if (this.mode === 'text') {
        const { index, hold } = findMarker(this.buf, HERMES_START);
        if (index === -1) {
          const keep = final ? 0 : hold;
          this.content(out, this.buf.slice(0, this.buf.length - keep));
          this.buf = this.buf.slice(this.buf.length - keep);
          return out;
        }
        this.content(out, this.buf.slice(0, index));
        this.buf = this.buf.slice(index + HERMES_START.length);
        this.mode = 'call';
        this.call = new JsonCall(this);
        this.callText = HERMES_START;
      } else if (this.mode === 'call') {
        const call = this.call as JsonCall;
        const used = call.feed(this.buf, out);
        this.callText += this.buf.slice(0, used);
        this.buf = this.buf.slice(used);
        if (call.scanner.failed && !call.named) {
          // Not a call: its text is content, and scanning for markers goes on after it.
          this.content(out, this.callText);
          this.mode = 'text';
        } else if (call.scanner.done || call.scanner.failed) {
          this.mode = 'after';
        } else {
          if (final && !call.named) this.content(out, this.callText);
          return out;
        }
      } else {
        const { index, hold } = findMarker(this.buf, HERMES_END);
        if (index === -1) {
          // Text after a call that is not its end marker: dropped, but a new call may start in it.
          const start = findMarker(this.buf, HERMES_START);
          if (start.index !== -1) {
            this.buf = this.buf.slice(start.index);
            this.mode = 'text';
            continue;
          }
          this.buf = final ? '' : this.buf.slice(this.buf.length - Math.max(hold, start.hold));
          return out;
        }
        this.buf = this.buf.slice(index + HERMES_END.length);
        this.mode = 'text';
      }
    }
  }
}

const PYTHON_TAG = '<|python_tag|>';

export class Llama3JsonToolParser implements StreamParser {
  calls = 0;
  private buf = '';
  private readonly lead = new LeadingSpace();
  /** Everything read before the first call was named (content if it is no call). */
  private seen = '';
  private mode: 'start' | 'content' | 'between' | 'call' | 'drop' = 'start';
  private call: JsonCall | undefined;

  push(text: string): ParserEvent[] {
    this.buf += this.mode === 'start' ? this.lead.push(text) : text;
    return this.run(false);
  }
  finish(): ParserEvent[] {
    return this.run(true);
  }

  private run(final: boolean): ParserEvent[] {
    const out: ParserEvent[] = [];
    for (;;) {
      switch (this.mode) {
        case 'start': {
          // this.buf is what follows the leading whitespace (held in this.lead)
          if (this.buf.startsWith(PYTHON_TAG)) {
            this.seen += this.lead.space + PYTHON_TAG;
            this.buf = this.buf.slice(PYTHON_TAG.length);
            this.mode = 'between';
          } else if (this.buf.startsWith('{')) {
            this.seen += this.lead.space;
            this.mode = 'between';
          } else if (!final && PYTHON_TAG.startsWith(this.buf)) {
            return out; // '' or a piece of the tag: undecided
          } else {
            this.buf = this.lead.space + this.buf;
            this.mode = 'content';
          }
          break;
        }
        case 'content':
          emit(out, { type: 'content', text: this.seen + this.buf });
          this.seen = '';
          this.buf = '';
          return out;
        case 'between': {
          const m = /^[\s;]*/.exec(this.buf) as RegExpExecArray;
          if (this.calls === 0) this.seen += m[0];
          this.buf = this.buf.slice(m[0].length);
          if (this.buf === '') {
            if (final && this.calls === 0) this.mode = 'content';
            else return out;
          } else if (this.buf.startsWith('{')) {
            this.call = new JsonCall(this);
            this.mode = 'call';
          } else this.mode = this.calls === 0 ? 'content' : 'drop';
          break;
        }
        case 'call': {
          const call = this.call as JsonCall;
          const used = call.feed(this.buf, out);
          if (!call.named) this.seen += this.buf.slice(0, used);
          this.buf = this.buf.slice(used);
          if (call.scanner.failed && !call.named) this.mode = this.calls === 0 ? 'content' : 'drop';
          else if (call.scanner.done || call.scanner.failed) this.mode = 'between';
          else {
            if (final && !call.named && this.calls === 0) {
              this.mode = 'content';
              break;
            }
            return out;
          }
          break;
        }
        case 'drop':
          this.buf = '';
          return out;
      }
    }
  }
}

const MISTRAL_MARKER = '[TOOL_CALLS]';
/** Mistral's v13 tokenizers put `[ARGS]` between a call's name and its arguments. */
const MISTRAL_ARGS = '[ARGS]';
/** Longest function name read in the `[TOOL_CALLS]name{...}` form before the text is taken for no call. */
const MAX_MISTRAL_NAME = 256;

/**
 * Both of Mistral's formats, as vLLM reads them: `[TOOL_CALLS][{"name": ..., "arguments": {...}}, ...]`
 * (tokenizers before v11) and `[TOOL_CALLS]name{...}` / `[TOOL_CALLS]name[ARGS]{...}`, one marker per
 * call (v11 and later), told apart by what follows the marker.
 */
export class MistralToolParser implements StreamParser {
  calls = 0;
  private buf = '';
  private mode: 'text' | 'open' | 'list' | 'call' | 'name' | 'named' | 'after' = 'text';
  private inList = false;
  private call: JsonCall | undefined;
  private markerSeen = false;

  push(text: string): ParserEvent[] {
    this.buf += text;
    return this.run(false);
  }
  finish(): ParserEvent[] {
    return this.run(true);
  }

  private run(final: boolean): ParserEvent[] {
    const out: ParserEvent[] = [];
    for (;;) {
      if (this.mode === 'text' || this.mode === 'after') {
        const { index, hold } = findMarker(this.buf, MISTRAL_MARKER);
        const keep = index === -1 && !final ? hold : 0;
        const before = index === -1 ? this.buf.slice(0, this.buf.length - keep) : this.buf.slice(0, index);
        if (!this.markerSeen) emit(out, { type: 'content', text: before });
        if (index === -1) {
          this.buf = this.buf.slice(this.buf.length - keep);
          return out;
        }
        this.markerSeen = true;
        this.buf = this.buf.slice(index + MISTRAL_MARKER.length);
        this.mode = 'open';
      } else if (this.mode === 'open') {
        this.buf = this.buf.trimStart();
        if (this.buf === '') return out;
        if (this.buf.startsWith('[')) {
          this.buf = this.buf.slice(1);
          this.inList = true;
          this.mode = 'list';
        } else if (this.buf.startsWith('{')) {
          this.inList = false;
          this.call = new JsonCall(this);
          this.mode = 'call';
        } else this.mode = 'name';
      } else if (this.mode === 'name') {
        // `name{` or `name[ARGS]{`: the name ends where the arguments start
        const brace = this.buf.indexOf('{');
        if (brace === -1) {
          if (this.buf.length > MAX_MISTRAL_NAME || final) this.mode = 'after';
          else return out;
          continue;
        }
        let name = this.buf.slice(0, brace).trim();
        if (name.endsWith(MISTRAL_ARGS)) name = name.slice(0, -MISTRAL_ARGS.length).trimEnd();
        this.buf = this.buf.slice(brace);
        if (!/^[A-Za-z0-9_.-]+$/.test(name)) {
          this.mode = 'after';
          continue;
        }
        this.call = new JsonCall(this);
        // The scanner reads the arguments as the value of a call object it is given the head of.
        this.call.feed(`{"name": ${JSON.stringify(name)}, "arguments": `, out);
        this.mode = 'named';
      } else if (this.mode === 'list') {
        const m = /^[\s,]*/.exec(this.buf) as RegExpExecArray;
        this.buf = this.buf.slice(m[0].length);
        if (this.buf === '') return out;
        if (this.buf.startsWith('{')) {
          this.call = new JsonCall(this);
          this.mode = 'call';
        } else {
          if (this.buf.startsWith(']')) this.buf = this.buf.slice(1);
          this.mode = 'after';
        }
      } else if (this.mode === 'named') {
        const call = this.call as JsonCall;
        const used = call.feed(this.buf, out, true);
        this.buf = this.buf.slice(used);
        if (call.scanner.argsEnded) {
          call.feed('}', out);
          this.mode = 'after';
        } else if (call.scanner.failed) this.mode = 'after';
        else return out;
      } else {
        const call = this.call as JsonCall;
        const used = call.feed(this.buf, out);
        this.buf = this.buf.slice(used);
        if (call.scanner.done || call.scanner.failed) this.mode = this.inList && call.scanner.done ? 'list' : 'after';
        else return out;
      }
    }
  }
}

export class PythonicToolParser implements StreamParser {
  private buf = '';
  private readonly lead = new LeadingSpace();
  private mode: 'start' | 'content' | 'held' = 'start';

  push(text: string): ParserEvent[] {
    this.buf += this.mode === 'start' ? this.lead.push(text) : text;
    return this.run(false);
  }
  finish(): ParserEvent[] {
    return this.run(true);
  }

  private run(final: boolean): ParserEvent[] {
    const out: ParserEvent[] = [];
    if (this.mode === 'start') {
      if (this.buf !== '' || final) {
        this.mode = this.buf.startsWith('[') ? 'held' : 'content';
        this.buf = this.lead.space + this.buf;
      } else return out;
    }
    if (this.mode === 'held' && final) {
      const calls = parsePythonCalls(this.buf);
      if (calls !== undefined) {
        calls.forEach((c, index) => {
          out.push({ type: 'tool_call', index, name: c.name });
          emit(out, { type: 'tool_args', index, text: c.arguments });
        });
        this.buf = '';
        return out;
      }
      this.mode = 'content';
    }
    if (this.mode === 'content' || final) {
      emit(out, { type: 'content', text: this.buf });
      this.buf = '';
    }
    return out;
  }
}

/**
 * The form of the ids a parser's calls get: vLLM's `chatcmpl-tool-` + 32 hex digits, or Mistral's
 * 9 letters and digits (its templates refuse any other id when the call comes back in the history).
 */
export type ToolCallIdStyle = 'vllm' | 'mistral';

/** A tool-call parser by name, and what it needs from detokenisation. */
export interface ToolCallParserSpec {
  readonly create: () => StreamParser;
  /** false: the parser reads special tokens (Mistral's `[TOOL_CALLS]`), so they stay in the text. */
  readonly skipSpecialTokens: boolean;
  readonly idStyle: ToolCallIdStyle;
}

export const TOOL_CALL_PARSERS: Readonly<Record<string, ToolCallParserSpec>> = Object.freeze({
  hermes: { create: () => new HermesToolParser(), skipSpecialTokens: true, idStyle: 'vllm' },
  llama3_json: { create: () => new Llama3JsonToolParser(), skipSpecialTokens: true, idStyle: 'vllm' },
  mistral: { create: () => new MistralToolParser(), skipSpecialTokens: false, idStyle: 'mistral' },
  pythonic: { create: () => new PythonicToolParser(), skipSpecialTokens: true, idStyle: 'vllm' },
});
