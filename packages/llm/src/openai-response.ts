/**
 * Building OpenAI response bodies and stream chunks (types in `openai-protocol.ts`) from what an
 * `OutputProcessor` reported. Pure: the caller supplies the id, the `created` second and the model
 * name (`ResponseHead`), the transport and the timing.
 *
 * One assembler per request (`ChatAssembler` or `CompletionAssembler`). Feed it every processed
 * output with `add`, which also returns the stream chunks to send now (a non-streaming caller ignores
 * them); after the sequence ended, `usageChunk` (streaming with `include_usage`) or `response`
 * (non-streaming) finishes. A stream, as OpenAI and vLLM send it: chat's first chunk carries
 * `delta.role`; text chunks follow (empty deltas are not sent); the last choice chunk carries
 * `finish_reason`; with `include_usage` every chunk has `usage: null` and one more chunk with no
 * choices carries the usage; the caller then writes `[DONE]`.
 */
import type {
  ChatCompletion,
  ChatCompletionChunk,
  ChatLogprobs,
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
  /** Report logprobs of the chosen tokens. */
  readonly logprobs: boolean;
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
  private readonly tokens: ProcessedToken[] = [];
  private end: ChoiceEnd | null = null;

  constructor(private readonly options: AssemblerOptions) {}

  add(p: ProcessedOutput): ChatCompletionChunk[] {
    const first = !this.started;
    this.started = true;
    this.content += p.text;
    this.tokens.push(...p.tokens);
    const end = choiceEnd(p);
    if (end !== null) this.end = end;
    const { head, includeUsage, logprobs, tokenText } = this.options;
    const lp = logprobs && p.tokens.length > 0 ? chatLogprobs(p.tokens, tokenText) : null;
    const chunks: ChatCompletionChunk[] = [];
    if (first) chunks.push(chatChunk(head, { text: '', first: true }, includeUsage));
    if (p.text !== '' || end !== null || lp !== null) chunks.push(chatChunk(head, { text: p.text, end, logprobs: lp }, includeUsage));
    return chunks;
  }

  usageChunk(usage: OpenAiUsage): ChatCompletionChunk {
    const { head } = this.options;
    return { id: head.id, object: 'chat.completion.chunk', created: head.created, model: head.model, choices: [], usage };
  }

  /** The non-streaming body; call after the sequence ended. */
  response(usage: OpenAiUsage): ChatCompletion {
    const { head, logprobs, tokenText } = this.options;
    const end = this.end ?? { finishReason: 'stop', stopReason: null };
    return {
      id: head.id,
      object: 'chat.completion',
      created: head.created,
      model: head.model,
      choices: [
        {
          index: 0,
          message: { role: 'assistant', content: this.content },
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
    return [completionChunk(head, { text, end, logprobs: lp }, includeUsage)];
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
          index: 0,
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

const encoder = new TextEncoder();

function chatLogprobs(tokens: readonly ProcessedToken[], tokenText: TokenText): ChatLogprobs {
  return {
    content: tokens.map((t) => {
      const token = tokenText(t.id);
      return { token, logprob: t.logprob ?? 0, bytes: [...encoder.encode(token)], top_logprobs: [] };
    }),
  };
}

/** `offset`: where the first token's text starts in the choice's text (after an echoed prompt and earlier chunks). */
function completionLogprobs(tokens: readonly ProcessedToken[], tokenText: TokenText, offset: number): CompletionLogprobs {
  const out: CompletionLogprobs = { tokens: [], token_logprobs: [], top_logprobs: [], text_offset: [] };
  let at = offset;
  for (const t of tokens) {
    const token = tokenText(t.id);
    const logprob = t.logprob ?? 0;
    out.tokens.push(token);
    out.token_logprobs.push(logprob);
    out.top_logprobs.push({ [token]: logprob });
    out.text_offset.push(at);
    at += token.length;
  }
  return out;
}

/**
 * One chat chunk with one choice. `delta.role` when `first`; `content` when there is text or it is
 * the first chunk (OpenAI sends `content: ""` with the role); `{}` otherwise. `includeUsage` adds
 * `usage: null`.
 */
function chatChunk(
  head: ResponseHead,
  piece: { text: string; first?: boolean; end?: ChoiceEnd | null; logprobs?: ChatLogprobs | null },
  includeUsage: boolean,
): ChatCompletionChunk {
  const delta: { role?: 'assistant'; content?: string } = {};
  if (piece.first === true) delta.role = 'assistant';
  if (piece.text !== '' || piece.first === true) delta.content = piece.text;
  const chunk: ChatCompletionChunk = {
    id: head.id,
    object: 'chat.completion.chunk',
    created: head.created,
    model: head.model,
    choices: [
      {
        index: 0,
        delta,
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
        index: 0,
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
