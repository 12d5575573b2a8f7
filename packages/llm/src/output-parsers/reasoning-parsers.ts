/**
 * Reasoning parsers (vLLM's `--reasoning-parser`), streaming: text deltas in, `reasoning` and
 * `content` events out, split at `</think>`, as vLLM's `deepseek_r1` and `qwen3` parsers (and its
 * serving layer's `prompt_is_reasoning_end`) decide:
 *
 * - An output that starts (after whitespace) with `<think>` reasons until `</think>` (Qwen3 up to
 *   2507 writes `<think>` itself).
 * - Otherwise, when thinking is off, the output is all content: the prompt already closed the
 *   reasoning (its last think marker is `</think>`: Qwen3's `enable_thinking: false` writes
 *   `<think>\n\n</think>\n\n` into the prompt), or, for `qwen3`, the request's
 *   `chat_template_kwargs` say `enable_thinking: false`.
 * - Otherwise the template opened the reasoning in the prompt (DeepSeek R1, Qwen3.5): the output is
 *   reasoning until `</think>`; a `<think>` the model writes before it is dropped.
 *
 * An output without `</think>` is all reasoning (cut short while thinking). The text after
 * `</think>` is content exactly as written (vLLM keeps its leading newlines too).
 */
import { LeadingSpace, emit, findMarker, type ParserEvent, type StreamParser } from './parser-events.js';

export const THINK_START = '<think>';
export const THINK_END = '</think>';

/** What a reasoning parser may know of the request: the rendered prompt and the template's extra variables. */
export interface ReasoningContext {
  readonly promptText?: string;
  readonly templateKwargs?: Readonly<Record<string, unknown>>;
}

/** The prompt closed the reasoning: its last think marker is `</think>`. */
export function promptEndsReasoning(promptText: string): boolean {
  const end = promptText.lastIndexOf(THINK_END);
  return end !== -1 && end > promptText.lastIndexOf(THINK_START);
}

export class ThinkReasoningParser implements StreamParser {
  /** While deciding ('start'): the text after the leading whitespace; later: the text not yet settled. */
  private buf = '';
  private readonly lead = new LeadingSpace();
  private mode: 'start' | 'reasoning' | 'content' = 'start';
  private startSeen = false;

  /** `thinkingOff`: the prompt or the request turned thinking off (an output opening `<think>` still reasons). */
  constructor(private readonly thinkingOff: boolean) {}

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
        this.startSeen = true;
        this.mode = 'reasoning';
      } else if (!final && THINK_START.startsWith(this.buf)) {
        return out; // '' or a piece of the marker: undecided
      } else {
        this.buf = this.lead.space + this.buf;
        this.mode = this.thinkingOff ? 'content' : 'reasoning';
      }
    }
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

export const REASONING_PARSERS: Readonly<Record<string, (context: ReasoningContext) => StreamParser>> = Object.freeze({
  deepseek_r1: (c: ReasoningContext) => new ThinkReasoningParser(promptEndsReasoning(c.promptText ?? '')),
  qwen3: (c: ReasoningContext) => new ThinkReasoningParser(c.templateKwargs?.['enable_thinking'] === false || promptEndsReasoning(c.promptText ?? '')),
});
