/**
 * Reasoning parsers (vLLM's `--reasoning-parser`), streaming: text deltas in, `reasoning` and
 * `content` events out. Both split at `</think>`:
 *
 * - `deepseek_r1`: the output is reasoning until `</think>` (DeepSeek R1's template opens `<think>`
 *   in the prompt, so the model usually writes only the end); a `<think>` the model writes itself
 *   before it is dropped. An output without `</think>` is all reasoning, as in vLLM.
 * - `qwen3`: reasoning only when the output starts (after whitespace) with `<think>`, up to
 *   `</think>`; any other output is all content (Qwen3 with `enable_thinking: false`). An output cut
 *   before `</think>` stays reasoning: vLLM's streaming result (its non-streaming one would call it
 *   content, which no stream can match without holding everything back).
 *
 * The text after `</think>` is content exactly as written (vLLM keeps its leading newlines too).
 */
import { LeadingSpace, emit, findMarker, type ParserEvent, type StreamParser } from './parser-events.js';

export const THINK_START = '<think>';
export const THINK_END = '</think>';

export class DeepSeekR1ReasoningParser implements StreamParser {
  private buf = '';
  private mode: 'reasoning' | 'content' = 'reasoning';
  private startSeen = false;

  push(text: string): ParserEvent[] {
    this.buf += text;
    return this.run(false);
  }
  finish(): ParserEvent[] {
    return this.run(true);
  }

  private run(final: boolean): ParserEvent[] {
    const out: ParserEvent[] = [];
    while (this.mode === 'reasoning') {
      const end = findMarker(this.buf, THINK_END);
      const start = this.startSeen ? { index: -1, hold: 0 } : findMarker(this.buf, THINK_START);
      if (start.index !== -1 && (end.index === -1 || start.index < end.index)) {
        emit(out, { type: 'reasoning', text: this.buf.slice(0, start.index) });
        this.buf = this.buf.slice(start.index + THINK_START.length);
        this.startSeen = true;
        continue;
      }
      if (end.index !== -1) {
        emit(out, { type: 'reasoning', text: this.buf.slice(0, end.index) });
        this.buf = this.buf.slice(end.index + THINK_END.length);
        this.mode = 'content';
        break;
      }
      const keep = final ? 0 : Math.max(end.hold, start.hold);
      emit(out, { type: 'reasoning', text: this.buf.slice(0, this.buf.length - keep) });
      this.buf = this.buf.slice(this.buf.length - keep);
      return out;
    }
    emit(out, { type: 'content', text: this.buf });
    this.buf = '';
    return out;
  }
}

export class Qwen3ReasoningParser implements StreamParser {
  /** After the leading whitespace while undecided ('start'), else the text not yet settled. */
  private buf = '';
  private readonly lead = new LeadingSpace();
  private mode: 'start' | 'reasoning' | 'content' = 'start';

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
      if (this.buf.startsWith(THINK_START)) {
        this.buf = this.buf.slice(THINK_START.length);
        this.mode = 'reasoning';
      } else if (!final && THINK_START.startsWith(this.buf)) {
        return out; // '' or a piece of the marker: undecided
      } else {
        this.buf = this.lead.space + this.buf;
        this.mode = 'content';
      }
    }
    if (this.mode === 'reasoning') {
      const end = findMarker(this.buf, THINK_END);
      if (end.index === -1) {
        const keep = final ? 0 : end.hold;
        emit(out, { type: 'reasoning', text: this.buf.slice(0, this.buf.length - keep) });
        this.buf = this.buf.slice(this.buf.length - keep);
        return out;
      }
      emit(out, { type: 'reasoning', text: this.buf.slice(0, end.index) });
      this.buf = this.buf.slice(end.index + THINK_END.length);
      this.mode = 'content';
    }
    emit(out, { type: 'content', text: this.buf });
    this.buf = '';
    return out;
  }
}

export const REASONING_PARSERS: Readonly<Record<string, () => StreamParser>> = Object.freeze({
  deepseek_r1: () => new DeepSeekR1ReasoningParser(),
  qwen3: () => new Qwen3ReasoningParser(),
});
