/**
 * Building OpenAI response bodies and stream chunks (types in `openai-protocol.ts`) from what an
 * `OutputProcessor` reported. Pure: the caller supplies the id, the `created` second and the model
 * name (`ResponseHead`), the transport and the timing.
 *
 * One assembler per choice (`ChatAssembler` or `CompletionAssembler`; a request with `n` > 1 or a
 * batch of prompts has several, each with its `index`, and `withChoices` joins their bodies). Feed it every processed
 * output with `add`, which also returns the stream chunks to send now (a non-streaming caller ignores
 * them); after the sequence ended, `usageChunk` (streaming with `include_usage`) or `response`
 * (non-streaming) finishes. A stream, as OpenAI and vLLM send it: chat's first chunk carries
 * `delta.role`; text chunks follow (empty deltas are not sent); the last choice chunk carries
 * `finish_reason`; with `include_usage` every chunk has `usage: null` and one more chunk with no
 * choices carries the usage; the caller then writes `[DONE]`.
 */
import type { ParserEvent, StreamParser } from './output-parsers/parser-events.js';
import type {
  ChatCompletion,
  ChatCompletionChunk,
  ChatLogprobs,
  ChatToolCall,
  ChatTokenLogprob,
  Completion,
  CompletionChunk,
  CompletionLogprobs,
  OpenAiFinishReason,
  OpenAiModel,
  OpenAiUsage,
} from './openai-protocol.js';
import type { LlmModelCard } from './llm-endpoint.js';
import type { ProcessedOutput, ProcessedToken } from './output-processor.js';
import type { FinishReason } from './stop-checker.js';

/** What every body of one response shares. */
export interface ResponseHead {
  /** `chatcmpl-…` or `cmpl-…`. */
  readonly id: string;
  /** Seconds since the epoch. */
  readonly created: number;
  /** The model name as the client named it. */
  readonly model: string;
}

export interface AssemblerOptions {
  readonly head: ResponseHead;
  /** Add `usage: null` to every chunk (the request's `stream_options.include_usage`). */
  readonly includeUsage: boolean;
  /** Report logprobs of the chosen tokens (and the alternatives the engine reported with them). */
  readonly logprobs: boolean;
  /** The choice's `index` in every body and chunk; default 0. */
  readonly index?: number;
  /** Text of one token for logprobs: the tokenizer's decode of that id alone. */
  readonly tokenText: TokenText;
}

/** Text of one token id (a piece of a UTF-8 character shows as U+FFFD). */
export type TokenText = (tokenId: number) => string;

/** What a choice ended with. */
interface ChoiceEnd {
  readonly finishReason: OpenAiFinishReason;
  readonly stopReason: string | number | null;
}

/**
 * How a chat choice's text is parsed (reasoning, tool calls), and what the request's `tool_choice`
 * forced. Absent: the text is all content.
 */
export interface ChatParsing {
  /** The choice's parser (`chatOutputParser`, or a forced choice's); fed every text delta, finished with the choice. */
  readonly parser: StreamParser;
  /** A new tool call id (vLLM's `chatcmpl-tool-<32 hex>`, Mistral's 9 letters and digits); the caller's, so assembling stays pure. */
  readonly toolCallId: () => string;
  /**
   * A tool choice guided decoding forced (`output-parsers/forced-tool-calls.ts` reads it), answered
   * as vLLM answers it: `content` is '' (not null); `finish_reason` is the engine's for a named
   * function ('stop' or 'length'), and 'tool_calls' for 'required' when the output ended on its
   * own with a call ('length' when max_tokens cut it). Absent: 'tool_calls' whenever the parser
   * found a call.
   */
  readonly forced?: 'required' | 'named';
}

/**
 * OpenAI has no 'abort' finish reason; a caller that lets an engine abort reach a connected client
 * reports 'stop' (the text so far is all there is).
 */
function choiceEnd(p: Pick<ProcessedOutput, 'finishReason' | 'stopReason'>): ChoiceEnd | null {
  const reason: FinishReason | null = p.finishReason;
  if (reason === null) return null;
  return { finishReason: reason === 'length' ? 'length' : 'stop', stopReason: p.stopReason };
}

export class ChatAssembler {
  private started = false;
  private content = '';
  private reasoning = '';
  private readonly calls: ChatToolCall[] = [];
  /** The parser's call index → the index the client sees (argument pieces of a call never started are dropped). */
  private readonly callIndex = new Map<number, number>();
  private readonly tokens: ProcessedToken[] = [];
  private end: ChoiceEnd | null = null;

  constructor(
    private readonly options: AssemblerOptions,
    private readonly parsing?: ChatParsing,
  ) {}

  add(p: ProcessedOutput): ChatCompletionChunk[] {
    const first = !this.started;
    this.started = true;
    this.tokens.push(...p.tokens);
    const end = choiceEnd(p);
    const deltas = this.parse(p.text, end !== null);
    const finish = end === null ? null : this.finish(end);
    if (finish !== null) this.end = finish;
    const { head, includeUsage, logprobs, tokenText } = this.options;
    const lp = logprobs && p.tokens.length > 0 ? chatLogprobs(p.tokens, tokenText) : null;
    const chunks: ChatCompletionChunk[] = [];
    const index = this.options.index ?? 0;
    if (first) chunks.push(chatChunk(head, index, { delta: { role: 'assistant', content: '' } }, includeUsage));
    // The last chunk of this output carries its logprobs and the finish reason (an empty delta if need be).
    if (deltas.length === 0 && (finish !== null || lp !== null)) deltas.push({});
    deltas.forEach((delta, i) => {
      const last = i === deltas.length - 1;
      chunks.push(chatChunk(head, index, { delta, end: last ? finish : null, logprobs: last ? lp : null }, includeUsage));
    });
    return chunks;
  }

  /** The choice's finish reason from the engine's (see ChatParsing.forced). */
  private finish(end: ChoiceEnd): ChoiceEnd {
    const forced = this.parsing?.forced;
    if (forced === 'named') return end;
    const called = this.calls.length > 0 && (forced === undefined || end.finishReason === 'stop');
    return called ? { finishReason: 'tool_calls', stopReason: end.stopReason } : end;
  }

  /**
   * Run `text` through the parser (if any) into this output's deltas, and keep the totals. A tool
   * call's first delta (index, id, type, name, `arguments: ''`) is a chunk of its own, as OpenAI
   * streams it; its argument pieces follow in the next.
   */
  private parse(text: string, final: boolean): Array<ChatCompletionChunk['choices'][number]['delta']> {
    const parsing = this.parsing;
    const events: ParserEvent[] = parsing === undefined ? [{ type: 'content', text }] : parsing.parser.push(text);
    if (parsing !== undefined && final) events.push(...parsing.parser.finish());
    type Delta = ChatCompletionChunk['choices'][number]['delta'];
    const deltas: Delta[] = [];
    let delta: Delta = {};
    const close = (): void => {
      if (Object.keys(delta).length > 0) deltas.push(delta);
      delta = {};
    };
    for (const e of events) {
      if (e.type === 'content') {
        if (e.text === '') continue;
        this.content += e.text;
        delta.content = (delta.content ?? '') + e.text;
      } else if (e.type === 'reasoning') {
        if (e.text === '') continue;
        this.reasoning += e.text;
        delta.reasoning_content = (delta.reasoning_content ?? '') + e.text;
      } else if (e.type === 'tool_call') {
        const id = (parsing as ChatParsing).toolCallId();
        const index = this.calls.length;
        this.callIndex.set(e.index, index);
        this.calls.push({ id, type: 'function', function: { name: e.name, arguments: '' } });
        close();
        delta.tool_calls = [{ index, id, type: 'function', function: { name: e.name, arguments: '' } }];
        close();
      } else {
        const index = this.callIndex.get(e.index);
        if (index === undefined || e.text === '') continue;
        (this.calls[index] as ChatToolCall).function.arguments += e.text;
        const calls = (delta.tool_calls ??= []);
        const last = calls[calls.length - 1];
        if (last !== undefined && last.index === index) last.function.arguments += e.text;
        else calls.push({ index, function: { arguments: e.text } });
      }
    }
    close();
    return deltas;
  }

  usageChunk(usage: OpenAiUsage): ChatCompletionChunk {
    const { head } = this.options;
    return { id: head.id, object: 'chat.completion.chunk', created: head.created, model: head.model, choices: [], usage };
  }

  /** The non-streaming body; call after the sequence ended. */
  response(usage: OpenAiUsage): ChatCompletion {
    const { head, logprobs, tokenText } = this.options;
    const end = this.end ?? { finishReason: 'stop', stopReason: null };
    const message: ChatCompletion['choices'][number]['message'] = { role: 'assistant', content: this.content };
    // vLLM: no content beside tool calls or reasoning is null, not ''; but '' under a forced tool choice.
    if (this.content === '' && this.parsing?.forced === undefined && (this.calls.length > 0 || this.reasoning !== '')) message.content = null;
    if (this.reasoning !== '') message.reasoning_content = this.reasoning;
    if (this.calls.length > 0) message.tool_calls = this.calls;
    return {
      id: head.id,
      object: 'chat.completion',
      created: head.created,
      model: head.model,
      choices: [
        {
          index: this.options.index ?? 0,
          message,
          logprobs: logprobs ? chatLogprobs(this.tokens, tokenText) : null,
          finish_reason: end.finishReason,
          stop_reason: end.stopReason,
        },
      ],
      usage,
    };
  }
}

export class CompletionAssembler {
  private started = false;
  private text: string;
  private readonly tokens: ProcessedToken[] = [];
  /** Where the next token's text starts in the choice text (for `text_offset`). */
  private offset: number;
  private end: ChoiceEnd | null = null;

  /** `echo`: the prompt text, sent before the completion (the request's `echo`); '' for none. */
  constructor(
    private readonly options: AssemblerOptions,
    private readonly echo = '',
  ) {
    this.text = echo;
    this.offset = echo.length;
  }

  add(p: ProcessedOutput): CompletionChunk[] {
    const first = !this.started;
    this.started = true;
    this.text += p.text;
    this.tokens.push(...p.tokens);
    const end = choiceEnd(p);
    if (end !== null) this.end = end;
    const { head, includeUsage, logprobs, tokenText } = this.options;
    let lp: CompletionLogprobs | null = null;
    if (logprobs && p.tokens.length > 0) {
      lp = completionLogprobs(p.tokens, tokenText, this.offset);
      this.offset = nextOffset(lp);
    }
    const text = first ? this.echo + p.text : p.text;
    if (text === '' && end === null && lp === null) return [];
    return [completionChunk(head, this.options.index ?? 0, { text, end, logprobs: lp }, includeUsage)];
  }

  usageChunk(usage: OpenAiUsage): CompletionChunk {
    const { head } = this.options;
    return { id: head.id, object: 'text_completion', created: head.created, model: head.model, choices: [], usage };
  }

  response(usage: OpenAiUsage): Completion {
    const { head, logprobs, tokenText } = this.options;
    const end = this.end ?? { finishReason: 'stop', stopReason: null };
    return {
      id: head.id,
      object: 'text_completion',
      created: head.created,
      model: head.model,
      choices: [
        {
          index: this.options.index ?? 0,
          text: this.text,
          logprobs: logprobs ? completionLogprobs(this.tokens, tokenText, this.echo.length) : null,
          finish_reason: end.finishReason,
          stop_reason: end.stopReason,
        },
      ],
      usage,
    };
  }
}

function nextOffset(lp: CompletionLogprobs): number {
  const n = lp.tokens.length;
  return n === 0 ? 0 : (lp.text_offset[n - 1] as number) + (lp.tokens[n - 1] as string).length;
}

/** The served model as `/v1/models` lists it. */
export function openAiModel(card: LlmModelCard): OpenAiModel {
  return { id: card.name, object: 'model', created: card.created, owned_by: 'switchyard', max_model_len: card.contextLength };
}

export function openAiUsage(promptTokens: number, completionTokens: number, cachedTokens: number): OpenAiUsage {
  return {
    prompt_tokens: promptTokens,
    completion_tokens: completionTokens,
    total_tokens: promptTokens + completionTokens,
    prompt_tokens_details: { cached_tokens: cachedTokens },
  };
}

/**
 * One body for several choices (`n` > 1, a batch of prompts): the first body with the choices of
 * every body, in the order given (each assembler's own `index`).
 */
export function withChoices<T extends { choices: unknown[] }>(bodies: readonly T[]): T {
  const first = bodies[0];
  if (first === undefined) throw new Error('withChoices: no bodies');
  return { ...first, choices: bodies.flatMap((b) => b.choices) };
}

const encoder = new TextEncoder();

/** Lowest logprob reported: -Infinity is not JSON (vLLM clamps the same way). */
const MIN_LOGPROB = -9999;
const reported = (logprob: number | undefined): number => Math.max(logprob ?? 0, MIN_LOGPROB);

function chatTokenLogprob(token: string, logprob: number | undefined): ChatTokenLogprob {
  return { token, logprob: reported(logprob), bytes: [...encoder.encode(token)] };
}

function chatLogprobs(tokens: readonly ProcessedToken[], tokenText: TokenText): ChatLogprobs {
  return {
    content: tokens.map((t) => {
      const top = t.top === undefined ? [] : t.top.tokenIds.map((id, i) => chatTokenLogprob(tokenText(id), t.top?.logprobs[i]));
      return { ...chatTokenLogprob(tokenText(t.id), t.logprob), top_logprobs: top };
    }),
  };
}

/** `offset`: where the first token's text starts in the choice's text (after an echoed prompt and earlier chunks). */
function completionLogprobs(tokens: readonly ProcessedToken[], tokenText: TokenText, offset: number): CompletionLogprobs {
  const out: CompletionLogprobs = { tokens: [], token_logprobs: [], top_logprobs: [], text_offset: [] };
  let at = offset;
  for (const t of tokens) {
    const token = tokenText(t.id);
    const logprob = reported(t.logprob);
    out.tokens.push(token);
    out.token_logprobs.push(logprob);
    // The chosen token, then the alternatives (vLLM's order; a text seen twice keeps its first entry).
    const top: Record<string, number> = { [token]: logprob };
    t.top?.tokenIds.forEach((id, i) => {
      const text = tokenText(id);
      if (!Object.hasOwn(top, text)) top[text] = reported(t.top?.logprobs[i]);
    });
    out.top_logprobs.push(top);
    out.text_offset.push(at);
    at += token.length;
  }
  return out;
}

/** One chat chunk with one choice; `includeUsage` adds `usage: null`. */
function chatChunk(
  head: ResponseHead,
  index: number,
  piece: { delta: ChatCompletionChunk['choices'][number]['delta']; end?: ChoiceEnd | null; logprobs?: ChatLogprobs | null },
  includeUsage: boolean,
): ChatCompletionChunk {
  const chunk: ChatCompletionChunk = {
    id: head.id,
    object: 'chat.completion.chunk',
    created: head.created,
    model: head.model,
    choices: [
      {
        index,
        delta: piece.delta,
        logprobs: piece.logprobs ?? null,
        finish_reason: piece.end?.finishReason ?? null,
        stop_reason: piece.end?.stopReason ?? null,
      },
    ],
  };
  if (includeUsage) chunk.usage = null;
  return chunk;
}

function completionChunk(
  head: ResponseHead,
  index: number,
  piece: { text: string; end?: ChoiceEnd | null; logprobs?: CompletionLogprobs | null },
  includeUsage: boolean,
): CompletionChunk {
  const chunk: CompletionChunk = {
    id: head.id,
    object: 'text_completion',
    created: head.created,
    model: head.model,
    choices: [
      {
        index,
        text: piece.text,
        logprobs: piece.logprobs ?? null,
        finish_reason: piece.end?.finishReason ?? null,
        stop_reason: piece.end?.stopReason ?? null,
      },
    ],
  };
  if (includeUsage) chunk.usage = null;
  return chunk;
}
