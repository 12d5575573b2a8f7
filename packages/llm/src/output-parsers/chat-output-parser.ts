/**
 * `ChatOutputParser`: one choice's output through a reasoning parser, then its content through a
 * tool-call parser (either may be absent), as vLLM's serving_chat chains them: tool calls are looked
 * for only in the content after the reasoning.
 *
 * `chatOutputParser(options)` picks them by name (`TOOL_CALL_PARSERS`, `REASONING_PARSERS`); an
 * unknown name is `invalid_argument` listing the known ones (`checkParserName`, also used where the
 * names are configured, so a bad name fails at load or start, not per request).
 */
import { invalidArgument } from '@switchyard/common';
import { emit, type ParserEvent, type StreamParser } from './parser-events.js';
import { REASONING_PARSERS, type ReasoningContext } from './reasoning-parsers.js';
import { TOOL_CALL_PARSERS } from './tool-call-parsers.js';

export class ChatOutputParser implements StreamParser {
  constructor(
    private readonly reasoning: StreamParser | undefined,
    private readonly tools: StreamParser | undefined,
  ) {}

  push(text: string): ParserEvent[] {
    return this.route(this.reasoning === undefined ? [{ type: 'content', text }] : this.reasoning.push(text), false);
  }

  finish(): ParserEvent[] {
    return this.route(this.reasoning === undefined ? [] : this.reasoning.finish(), true);
  }

  private route(events: readonly ParserEvent[], final: boolean): ParserEvent[] {
    const out: ParserEvent[] = [];
    for (const e of events) {
      if (e.type === 'content' && this.tools !== undefined) for (const t of this.tools.push(e.text)) emit(out, t);
      else emit(out, e);
    }
    if (final && this.tools !== undefined) for (const t of this.tools.finish()) emit(out, t);
    return out;
  }
}

export type ParserKind = 'tool call' | 'reasoning';

/** `name` when it is a known parser of `kind`, else `invalid_argument` naming the known ones. */
export function checkParserName(kind: ParserKind, name: string, where: string): string {
  const known = Object.keys(kind === 'tool call' ? TOOL_CALL_PARSERS : REASONING_PARSERS);
  if (!known.includes(name)) throw invalidArgument(`${where}: unknown ${kind} parser '${name}' (known: ${known.join(', ')})`);
  return name;
}

/** `context`: the request as the reasoning parser may need it (its rendered prompt, its template variables). */
export function chatOutputParser(options: { toolCallParser?: string | undefined; reasoningParser?: string | undefined }, context: ReasoningContext = {}): ChatOutputParser {
  const reasoning = options.reasoningParser === undefined ? undefined : reasoningParserFor(options.reasoningParser, context);
  const tools = options.toolCallParser === undefined ? undefined : TOOL_CALL_PARSERS[checkParserName('tool call', options.toolCallParser, 'tool_call_parser')]!.create();
  return new ChatOutputParser(reasoning, tools);
}

/** The reasoning parser `name` (checked as `chatOutputParser` checks it) for one choice. */
export function reasoningParserFor(name: string, context: ReasoningContext = {}): StreamParser {
  return REASONING_PARSERS[checkParserName('reasoning', name, 'reasoning_parser')]!(context);
}
