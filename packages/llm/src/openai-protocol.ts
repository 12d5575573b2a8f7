/**
 * The OpenAI HTTP protocol as Switchyard speaks it (`/v1/chat/completions`, `/v1/completions`,
 * `/v1/models`): wire types with OpenAI's exact JSON field names, and the decode edge that turns a
 * request body (`unknown` JSON) into a validated request. Pure: no IO, no clock, no randomness — ids
 * and timestamps are the caller's.
 *
 * Decoding follows OpenAI and vLLM: unknown fields are ignored; `null` means "absent"; vLLM's extra
 * sampling fields (`top_k`, `min_p`, `repetition_penalty`, `stop_token_ids`, `ignore_eos`,
 * `min_tokens`, `skip_special_tokens`, `spaces_between_special_tokens`) are accepted, and OpenAI's
 * `logit_bias`; `response_format` becomes `guided_decoding` (`guided/response-format.ts`), and so does a
 * forced `tool_choice` ('required', a named function: `guided/tool-choice.ts`), which wins. A model's own defaults (its generation config) are applied once the model is known:
 * `samplingFor`. Every refusal is an `InvalidParamError` (code `invalid_argument`) whose `param` names the
 * field the client sent, so a front door can fill OpenAI's `error.param`.
 *
 * Response bodies are built with `openai-response.ts`.
 */
import { isUtf8 } from 'node:buffer';
import { describeValue, SwitchyardError, invalidArgument, isSwitchyardError } from '@switchyard/common';
import type { ChatMessage } from './chat-template.js';
import { compileJsonSchema, type GuidedDecoding } from './guided/json-schema.js';
import { parseResponseFormat } from './guided/response-format.js';
import { toolChoiceSchema, toolParameters } from './guided/tool-choice.js';
import {
  MAX_TOP_LOGPROBS,
  checkLogitBiasIds,
  compileSamplingParams,
  type CompiledSamplingParams,
  type SamplingDefaults,
  type SamplingParams,
} from './sampling-params.js';

// ---------------------------------------------------------------------------------------------------
// Requests (what clients send; only the fields Switchyard reads)

/** One part of a message's content array. Only `text` parts are accepted (the models served take text only). */
export interface ChatContentPart {
  type: string;
  text?: string;
}

/** A tool call of an assistant message (request history) or of a response's message. */
export interface ChatToolCall {
  id: string;
  type: 'function';
  /** `arguments` is JSON text. */
  function: { name: string; arguments: string };
}

/** A function the model may call (`tools[]`), given to the chat template as sent. */
export interface ChatTool {
  type: 'function';
  function: { name: string; description?: string; parameters?: Record<string, unknown>; strict?: boolean };
}

export interface ChatCompletionMessageParam {
  role: string;
  /**
   * A string or text parts (given to the template as parts when it iterates over them, else joined
   * with '\n', as vLLM does); `null` for an assistant turn without text.
   */
  content: string | ChatContentPart[] | null;
  name?: string;
  /** Assistant turns: the calls it made (their `arguments` reach the template parsed, as vLLM gives them). */
  tool_calls?: ChatToolCall[];
  /** Tool turns: the call this message answers. */
  tool_call_id?: string;
  /** Assistant turns (vLLM): the reasoning, for templates that render it again (`reasoning` is taken too). */
  reasoning_content?: string | null;
}

/** Sampling fields both endpoints accept (OpenAI names plus vLLM's extras). */
export interface OpenAiSamplingFields {
  temperature?: number | null;
  top_p?: number | null;
  /** vLLM. */
  top_k?: number | null;
  /** vLLM. */
  min_p?: number | null;
  seed?: number | null;
  stop?: string | string[] | null;
  /** vLLM. */
  stop_token_ids?: number[] | null;
  /** vLLM. */
  ignore_eos?: boolean | null;
  frequency_penalty?: number | null;
  presence_penalty?: number | null;
  /** vLLM. */
  repetition_penalty?: number | null;
  /** Token id (decimal string) → bias, clamped to [-100, 100]. */
  logit_bias?: Record<string, number> | null;
  /** vLLM. */
  min_tokens?: number | null;
  /** vLLM; default true. */
  skip_special_tokens?: boolean | null;
  /** vLLM; default true. */
  spaces_between_special_tokens?: boolean | null;
  /** Choices per prompt, 1..MAX_N (OpenAI's range); default 1. */
  n?: number | null;
  stream?: boolean | null;
  /** Only allowed with `stream: true`. */
  stream_options?: { include_usage?: boolean | null } | null;
  /** Accepted and ignored. */
  user?: string;
  /** Structured output: `text`, `json_object` or `json_schema` (guided decoding, `guided/response-format.ts`). */
  response_format?: { type: string; json_schema?: { name: string; schema?: unknown; strict?: boolean | null; description?: string } } | null;
  /**
   * vLLM: run the tokenizer's post processor (BOS/EOS) on the prompt. Default false for chat (the
   * template writes them), true for completions.
   */
  add_special_tokens?: boolean | null;
}

export interface ChatCompletionRequest extends OpenAiSamplingFields {
  /** Optional as in vLLM: absent means the worker's only LLM. */
  model?: string;
  messages: ChatCompletionMessageParam[];
  /** Preferred over `max_tokens` when both are present. Absent: up to the context length. */
  max_completion_tokens?: number | null;
  max_tokens?: number | null;
  logprobs?: boolean | null;
  /** Alternatives per position, 0..MAX_TOP_LOGPROBS; > 0 requires `logprobs: true` (vLLM). */
  top_logprobs?: number | null;
  /** vLLM: extra variables for the chat template (`enable_thinking`, ...). */
  chat_template_kwargs?: Record<string, unknown> | null;
  /** Functions the model may call; the chat template gets them as `tools`. */
  tools?: ChatTool[] | null;
  /** Default 'auto' with tools, 'none' without. */
  tool_choice?: 'none' | 'auto' | 'required' | { type: 'function'; function: { name: string } } | null;
}

export interface CompletionRequest extends OpenAiSamplingFields {
  model?: string;
  /** Text, token ids, or a list of either (a batch: `n` choices per prompt, indexed prompt-major as in vLLM). */
  prompt: string | string[] | number[] | number[][];
  /** Default 16, as in OpenAI and vLLM. */
  max_tokens?: number | null;
  /** The chosen token's logprob and this many alternatives per position, 0..MAX_TOP_LOGPROBS (vLLM's limit). */
  logprobs?: number | null;
  /** Prepend the prompt text to the completion. Not with `logprobs`. */
  echo?: boolean | null;
  /** Only 1 (or absent), as vLLM V1, which dropped best_of. */
  best_of?: number | null;
}

// ---------------------------------------------------------------------------------------------------
// Responses

export type OpenAiFinishReason = 'stop' | 'length' | 'tool_calls';

export interface OpenAiUsage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  prompt_tokens_details: { cached_tokens: number };
}

/** One token with its logprob (clamped to >= -9999, as vLLM: -Infinity is not JSON) and UTF-8 bytes. */
export interface ChatTokenLogprob {
  token: string;
  logprob: number;
  bytes: number[];
}

/** Chat `logprobs`: one entry per generated token; `top_logprobs` the request's `top_logprobs` most likely, best first. */
export interface ChatLogprobs {
  content: Array<ChatTokenLogprob & { top_logprobs: ChatTokenLogprob[] }>;
}

/** Completions `logprobs` (legacy shape); `top_logprobs` holds the chosen token and the alternatives. */
export interface CompletionLogprobs {
  tokens: string[];
  token_logprobs: number[];
  top_logprobs: Array<Record<string, number>>;
  /** Character offset of each token in the choice's text (echoed prompt included). */
  text_offset: number[];
}

export interface ChatCompletion {
  id: string;
  object: 'chat.completion';
  created: number;
  model: string;
  system_fingerprint?: string;
  choices: Array<{
    index: number;
    /**
     * `content` is null when the choice holds only tool calls or reasoning; `reasoning_content` (vLLM)
     * and `tool_calls` are present only when the output had them.
     */
    message: { role: 'assistant'; content: string | null; reasoning_content?: string; tool_calls?: ChatToolCall[] };
    logprobs: ChatLogprobs | null;
    finish_reason: OpenAiFinishReason;
    /** vLLM: the stop string or stop token id that ended the choice, else null. */
    stop_reason: string | number | null;
  }>;
  usage: OpenAiUsage;
}

export interface ChatCompletionChunk {
  id: string;
  object: 'chat.completion.chunk';
  created: number;
  model: string;
  system_fingerprint?: string;
  /** Empty only in the final usage chunk. */
  choices: Array<{
    index: number;
    /**
     * `role` only in the first chunk; `{}` in a final chunk without text. A tool call streams as
     * OpenAI's: its first delta has `index`, `id`, `type` and `function.name` (with `arguments: ''`),
     * later ones `index` and the next piece of `function.arguments`.
     */
    delta: { role?: 'assistant'; content?: string; reasoning_content?: string; tool_calls?: ChatToolCallDelta[] };
    logprobs: ChatLogprobs | null;
    finish_reason: OpenAiFinishReason | null;
    stop_reason?: string | number | null;
  }>;
  /** Present only when the request set `stream_options.include_usage`: null except in the last chunk. */
  usage?: OpenAiUsage | null;
}

/** One entry of a chunk's `delta.tool_calls`. */
export interface ChatToolCallDelta {
  index: number;
  id?: string;
  type?: 'function';
  function: { name?: string; arguments: string };
}

export interface Completion {
  id: string;
  object: 'text_completion';
  created: number;
  model: string;
  system_fingerprint?: string;
  choices: Array<{
    index: number;
    text: string;
    logprobs: CompletionLogprobs | null;
    finish_reason: OpenAiFinishReason;
    stop_reason: string | number | null;
  }>;
  usage: OpenAiUsage;
}

/** A streamed completion: the same object as the response, one delta of text per chunk. */
export interface CompletionChunk {
  id: string;
  object: 'text_completion';
  created: number;
  model: string;
  system_fingerprint?: string;
  choices: Array<{
    index: number;
    text: string;
    logprobs: CompletionLogprobs | null;
    finish_reason: OpenAiFinishReason | null;
    stop_reason?: string | number | null;
  }>;
  usage?: OpenAiUsage | null;
}

export interface OpenAiModel {
  id: string;
  object: 'model';
  /** Seconds since the epoch (the model's load time). */
  created: number;
  owned_by: string;
  /** vLLM: the context length. */
  max_model_len?: number;
}

export interface OpenAiModelList {
  object: 'list';
  data: OpenAiModel[];
}

/**
 * OpenAI's error body. `type` is `invalid_request_error` for client errors and `server_error` for
 * server errors; `code` is a machine-readable reason (`model_not_found`) or null.
 */
export interface OpenAiErrorBody {
  error: { message: string; type: string; param: string | null; code: string | null };
}

// ---------------------------------------------------------------------------------------------------
// Validated requests

/** A refused request field; `param` is the field's name as the client sent it (`temperature`, `messages[1].content`). */
export class InvalidParamError extends SwitchyardError {
  constructor(
    readonly param: string,
    message: string,
    cause?: unknown,
  ) {
    super('invalid_argument', message, { cause });
  }
}

/** The `param` of an `InvalidParamError`, else null. */
export function errorParam(e: unknown): string | null {
  return e instanceof InvalidParamError ? e.param : null;
}

/** What both endpoints share after validation. */
export interface ParsedOpenAiRequest {
  /** undefined: the client named none (the door picks the only LLM). */
  readonly model: string | undefined;
  readonly stream: boolean;
  /** `stream_options.include_usage`: a final chunk with `usage` and no choices. */
  readonly includeUsage: boolean;
  /**
   * Validated, `max_tokens` resolved from the endpoint's fields and defaults, but without the model's
   * own defaults: a generation uses `samplingFor(request, card.samplingDefaults, vocabSize)`.
   */
  readonly sampling: CompiledSamplingParams;
  /** The request's sampling fields as validated into `sampling` (what `samplingFor` compiles again). */
  readonly samplingFields: SamplingParams;
  readonly addSpecialTokens: boolean;
  /** Choices per prompt (`n`), 1..MAX_N. */
  readonly n: number;
}

/** `tool_choice` after validation: a named function is `{ name }`. */
export type ToolChoice = 'none' | 'auto' | 'required' | { readonly name: string };

export interface ParsedChatRequest extends ParsedOpenAiRequest {
  readonly messages: readonly ChatMessage[];
  /** The request's tools as sent (validated), for the template; undefined when none were sent. */
  readonly tools: readonly ChatTool[] | undefined;
  /** 'auto' when tools were sent without a choice, 'none' without tools (OpenAI's defaults). */
  readonly toolChoice: ToolChoice;
  /** Report the chosen tokens' logprobs. */
  readonly logprobs: boolean;
  readonly chatTemplateKwargs: Readonly<Record<string, unknown>>;
}

/** A completions prompt, normalised: text to tokenize, or token ids as given. */
export type CompletionPrompt = { readonly text: string } | { readonly tokenIds: readonly number[] };

export interface ParsedCompletionRequest extends ParsedOpenAiRequest {
  /** One or more (a batch); choice `p * n + i` is the i-th choice of prompt p. */
  readonly prompts: readonly CompletionPrompt[];
  /** `logprobs` as sent: null = none; k = the chosen tokens' logprobs and k alternatives. */
  readonly logprobs: number | null;
  readonly echo: boolean;
}

/** Most choices per prompt (OpenAI's range for `n`). */
export const MAX_N = 128;
/** Most choices one request may ask for (prompts × n): each is an engine request. */
export const MAX_CHOICES = 1024;

/** OpenAI's (and vLLM's) default `max_tokens` for `/v1/completions`. */
export const DEFAULT_COMPLETION_MAX_TOKENS = 16;

/**
 * Deepest nesting of arrays and objects an OpenAI request body may have. The body's values reach
 * code that recurses into them (the chat template gets `chat_template_kwargs`, tools and message
 * parts; `JSON.stringify`), which would otherwise end in "Maximum call stack size exceeded". Real
 * requests (JSON schemas of tools and response formats included) stay far below.
 */
export const MAX_JSON_BODY_DEPTH = 128;

/**
 * Where `text` (JSON, not yet parsed) first opens an array or object deeper than `limit`, as a
 * UTF-16 index; -1 when it never does. Brackets inside strings do not count; malformed text is
 * scanned all the same (`JSON.parse` reports its own errors).
 */
export function jsonNestingOverflow(text: string, limit: number = MAX_JSON_BODY_DEPTH): number {
  let depth = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x22 /* " */) {
      for (i++; i < text.length; i++) {
        const d = text.charCodeAt(i);
        if (d === 0x5c /* \ */) i++;
        else if (d === 0x22) break;
      }
    } else if (c === 0x5b /* [ */ || c === 0x7b /* { */) {
      if (++depth > limit) return i;
    } else if (c === 0x5d /* ] */ || c === 0x7d /* } */) {
      depth--;
    }
  }
  return -1;
}

/**
 * Parse a request body's bytes as JSON; bytes that are not UTF-8, malformed JSON, or JSON nested
 * deeper than MAX_JSON_BODY_DEPTH are `invalid_argument` (OpenAI answers 400).
 */
export function decodeJsonBody(body: string | Uint8Array): unknown {
  // JSON is UTF-8; decoding other bytes with U+FFFD would hand the model a prompt the client never sent.
  if (typeof body !== 'string' && !isUtf8(body)) throw invalidArgument('the request body is not valid JSON: it is not valid UTF-8');
  const text = typeof body === 'string' ? body : new TextDecoder('utf-8').decode(body);
  const tooDeep = jsonNestingOverflow(text);
  if (tooDeep !== -1) {
    throw invalidArgument(`the request body is nested deeper than ${MAX_JSON_BODY_DEPTH} arrays or objects (at position ${tooDeep})`);
  }
  try {
    return JSON.parse(text) as unknown;
  } catch (e) {
    throw invalidArgument(`the request body is not valid JSON: ${(e as Error).message}`, e);
  }
}

export function parseChatCompletionRequest(body: unknown): ParsedChatRequest {
  const o = object(body);
  const messages = parseMessages(o.messages);
  // max_completion_tokens wins over the deprecated max_tokens (OpenAI, vLLM).
  const maxField = present(o.max_completion_tokens) ? 'max_completion_tokens' : 'max_tokens';
  const logprobs = optional(o, 'logprobs', isBoolean, 'a boolean') ?? false;
  const top = optional(o, 'top_logprobs', isInteger, 'an integer') ?? 0;
  if (top < 0 || top > MAX_TOP_LOGPROBS) throw new InvalidParamError('top_logprobs', `top_logprobs must be an integer in [0, ${MAX_TOP_LOGPROBS}], got ${top}`);
  // vLLM's wording.
  if (top > 0 && !logprobs) throw new InvalidParamError('top_logprobs', 'when using `top_logprobs`, `logprobs` must be set to true.');
  const kwargs = optional(o, 'chat_template_kwargs', isPlainObject, 'an object') ?? {};
  const { tools, toolChoice } = parseTools(o);
  const forced = toolChoiceGuidedDecoding(tools, toolChoice);
  return {
    ...common(o, { field: maxField, dflt: null }, { logprobs, top }, false, forced),
    messages,
    tools,
    toolChoice,
    logprobs,
    chatTemplateKwargs: kwargs,
  };
}

export function parseCompletionRequest(body: unknown): ParsedCompletionRequest {
  const o = object(body);
  const prompts = parsePrompts(o.prompt);
  const logprobs = optional(o, 'logprobs', isInteger, 'an integer') ?? null;
  if (logprobs !== null && (logprobs < 0 || logprobs > MAX_TOP_LOGPROBS)) {
    throw new InvalidParamError('logprobs', `logprobs must be an integer in [0, ${MAX_TOP_LOGPROBS}], got ${logprobs}`);
  }
  const echo = optional(o, 'echo', isBoolean, 'a boolean') ?? false;
  if (echo && logprobs !== null) throw new InvalidParamError('echo', 'echo with logprobs is not supported (prompt logprobs are not computed)');
  const bestOf = optional(o, 'best_of', isInteger, 'an integer');
  if (bestOf !== undefined && bestOf < 1) throw new InvalidParamError('best_of', `best_of must be at least 1, got ${bestOf}`);
  // vLLM V1's refusal, word for word: it dropped best_of (n choices are n independent samples).
  if (bestOf !== undefined && bestOf > 1) throw new InvalidParamError('best_of', 'vLLM V1 does not yet support best_of.');
  const c = common(o, { field: 'max_tokens', dflt: DEFAULT_COMPLETION_MAX_TOKENS }, { logprobs: logprobs !== null, top: logprobs ?? 0 }, true);
  if (prompts.length * c.n > MAX_CHOICES) {
    throw new InvalidParamError(prompts.length > 1 ? 'prompt' : 'n', `a request may ask for at most ${MAX_CHOICES} choices (prompts × n), got ${prompts.length * c.n}`);
  }
  return {
    ...c,
    prompts,
    logprobs,
    echo,
  };
}

// ---------------------------------------------------------------------------------------------------
// Decoding helpers

type Json = Record<string, unknown>;

function object(body: unknown): Json {
  if (!isPlainObject(body)) throw invalidArgument('the request body must be a JSON object');
  return body;
}

const present = (v: unknown): boolean => v !== undefined && v !== null;
const isBoolean = (v: unknown): v is boolean => typeof v === 'boolean';
const isInteger = (v: unknown): v is number => typeof v === 'number' && Number.isSafeInteger(v);
const isString = (v: unknown): v is string => typeof v === 'string';
function isPlainObject(v: unknown): v is Json {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** `o[key]` when present and of the right type; undefined when absent or null. */
function optional<T>(o: Json, key: string, ok: (v: unknown) => v is T, what: string): T | undefined {
  const v = o[key];
  if (!present(v)) return undefined;
  if (!ok(v)) throw new InvalidParamError(key, `${key} must be ${what}, got ${describeValue(v)}`);
  return v;
}

/** The fields both endpoints read: model, streaming, n, and the sampling parameters. */
function common(
  o: Json,
  maxTokens: { field: string; dflt: number | null },
  logprobs: { logprobs: boolean; top: number },
  addSpecialDefault: boolean,
  forced: GuidedDecoding | null = null,
): ParsedOpenAiRequest {
  const model = optional(o, 'model', isString, 'a string');
  if (model === '') throw new InvalidParamError('model', 'model must not be empty');
  const stream = optional(o, 'stream', isBoolean, 'a boolean') ?? false;
  const options = optional(o, 'stream_options', isPlainObject, 'an object');
  if (options !== undefined && !stream) throw new InvalidParamError('stream_options', 'stream_options is only allowed when stream is true');
  const usage = options?.include_usage;
  if (present(usage) && !isBoolean(usage)) throw new InvalidParamError('stream_options.include_usage', 'stream_options.include_usage must be a boolean');
  const includeUsage = usage === true;
  const n = optional(o, 'n', isInteger, 'an integer') ?? 1;
  if (n < 1 || n > MAX_N) throw new InvalidParamError('n', `n must be an integer in [1, ${MAX_N}], got ${n}`);
  const addSpecialTokens = optional(o, 'add_special_tokens', isBoolean, 'a boolean') ?? addSpecialDefault;
  return { model, stream, includeUsage, ...sampling(o, maxTokens, logprobs, forced), addSpecialTokens, n };
}

/** Request fields passed to `compileSamplingParams` under the same name. */
const SAMPLING_FIELDS = [
  'temperature',
  'top_p',
  'top_k',
  'min_p',
  'seed',
  'stop',
  'stop_token_ids',
  'ignore_eos',
  'frequency_penalty',
  'presence_penalty',
  'repetition_penalty',
  'logit_bias',
  'min_tokens',
  'skip_special_tokens',
  'spaces_between_special_tokens',
] as const;

/**
 * The sampling a generation runs with: the request's fields over the model's `defaults` (its
 * generation config), logit_bias ids checked against the tokenizer's `vocabSize` (`InvalidParamError`
 * naming `logit_bias`).
 */
export function samplingFor(request: ParsedOpenAiRequest, defaults: SamplingDefaults | undefined, vocabSize: number): CompiledSamplingParams {
  const sampling = defaults === undefined ? request.sampling : compileSamplingParams(request.samplingFields, defaults);
  try {
    checkLogitBiasIds(sampling, vocabSize);
  } catch (e) {
    throw new InvalidParamError('logit_bias', (e as Error).message, e);
  }
  return sampling;
}

/**
 * Compile the sampling fields with `compileSamplingParams`, the one validator. It names the bad field
 * only in its message, so on failure each field is compiled alone to find which one (fields are
 * validated independently) and the error is re-thrown with that field's client name as `param`.
 */
function sampling(
  o: Json,
  maxTokens: { field: string; dflt: number | null },
  logprobs: { logprobs: boolean; top: number },
  forced: GuidedDecoding | null,
): { sampling: CompiledSamplingParams; samplingFields: SamplingParams } {
  // The limit may arrive as max_completion_tokens: checked here so the message names that field.
  const max = optional(o, maxTokens.field, isInteger, 'an integer >= 1');
  if (max !== undefined && max < 1) throw new InvalidParamError(maxTokens.field, `${maxTokens.field} must be an integer >= 1, got ${max}`);
  const params: Record<string, unknown> = { logprobs: logprobs.logprobs, top_logprobs: logprobs.top, max_tokens: max ?? maxTokens.dflt };
  for (const key of SAMPLING_FIELDS) params[key] = o[key];
  try {
    params['guided_decoding'] = parseResponseFormat(o['response_format']);
  } catch (e) {
    throw new InvalidParamError('response_format', (e as Error).message, e);
  }
  // A forced tool choice's schema wins over response_format's (vLLM sets it last).
  if (forced !== null) params['guided_decoding'] = forced;
  try {
    return { sampling: compileSamplingParams(params as SamplingParams), samplingFields: params as SamplingParams };
  } catch (e) {
    if (!isSwitchyardError(e)) throw e;
    for (const key of SAMPLING_FIELDS) {
      try {
        compileSamplingParams({ [key]: o[key] } as SamplingParams);
      } catch (single) {
        throw new InvalidParamError(key, (single as Error).message, single);
      }
    }
    // Every field is fine alone: the checks across fields are response_format without ignore_eos, min_tokens <= max_tokens.
    if (params['guided_decoding'] !== null && o['ignore_eos'] === true) throw new InvalidParamError(forced !== null ? 'tool_choice' : 'response_format', e.message, e);
    if (present(o['min_tokens'])) throw new InvalidParamError('min_tokens', e.message, e);
    throw e;
  }
}

const TEXT_PART = 'text';

function parseMessages(value: unknown): ChatMessage[] {
  if (!Array.isArray(value) || value.length === 0) throw new InvalidParamError('messages', 'messages must be a non-empty list');
  return value.map((m: unknown, i): ChatMessage => {
    const at = `messages[${i}]`;
    if (!isPlainObject(m)) throw new InvalidParamError(at, `${at} must be an object`);
    if (!isString(m.role) || m.role === '') throw new InvalidParamError(`${at}.role`, `${at}.role must be a non-empty string`);
    const message: { role: string; content: ChatMessage['content']; name?: string; tool_calls?: unknown[]; tool_call_id?: string; reasoning_content?: string } = {
      role: m.role,
      content: messageContent(m.content, `${at}.content`),
    };
    if (isString(m.name)) message.name = m.name;
    if (present(m.tool_calls)) {
      const calls = historyToolCalls(m.tool_calls, `${at}.tool_calls`);
      if (calls.length > 0) message.tool_calls = calls;
    }
    // An assistant turn's reasoning, for templates that render it again (Qwen3 during tool use), as vLLM passes it.
    const reasoning = present(m.reasoning_content) ? m.reasoning_content : m.reasoning;
    if (present(reasoning)) {
      if (!isString(reasoning)) throw new InvalidParamError(`${at}.reasoning_content`, `${at}.reasoning_content must be a string`);
      message.reasoning_content = reasoning;
    }
    if (present(m.tool_call_id)) {
      if (!isString(m.tool_call_id)) throw new InvalidParamError(`${at}.tool_call_id`, `${at}.tool_call_id must be a string`);
      message.tool_call_id = m.tool_call_id;
    }
    return message;
  });
}

/**
 * A message's content: a string, or its text parts as `{type: 'text', text}` (the preprocessor joins
 * them for templates that expect a string). Any other part type is refused, naming it.
 */
function messageContent(content: unknown, at: string): ChatMessage['content'] {
  if (!present(content)) return '';
  if (isString(content)) return content;
  if (!Array.isArray(content)) throw new InvalidParamError(at, `${at} must be a string or a list of content parts`);
  return content.map((part: unknown, j) => {
    const pat = `${at}[${j}]`;
    if (!isPlainObject(part)) throw new InvalidParamError(pat, `${pat} must be an object`);
    if (part.type !== TEXT_PART) {
      throw new InvalidParamError(`${pat}.type`, `${pat}.type ${describeValue(part.type)} is not supported: the model takes text only, so only 'text' parts are`);
    }
    if (!isString(part.text)) throw new InvalidParamError(`${pat}.text`, `${pat}.text must be a string`);
    return { type: TEXT_PART, text: part.text };
  });
}

/**
 * An assistant message's `tool_calls`, for the template: `function.arguments` JSON text is parsed
 * into its value, as vLLM does before rendering (Hugging Face templates expect a mapping); arguments
 * already given as an object pass unchanged.
 */
function historyToolCalls(value: unknown, at: string): unknown[] {
  if (!Array.isArray(value)) throw new InvalidParamError(at, `${at} must be a list`);
  return value.map((call: unknown, j) => {
    const cat = `${at}[${j}]`;
    if (!isPlainObject(call)) throw new InvalidParamError(cat, `${cat} must be an object`);
    const fn = call.function;
    if (!isPlainObject(fn)) throw new InvalidParamError(`${cat}.function`, `${cat}.function must be an object`);
    if (!isString(fn.name)) throw new InvalidParamError(`${cat}.function.name`, `${cat}.function.name must be a string`);
    let args: unknown = fn.arguments ?? {};
    if (isString(args)) {
      try {
        args = JSON.parse(args) as unknown;
      } catch (e) {
        throw new InvalidParamError(`${cat}.function.arguments`, `${cat}.function.arguments is not valid JSON: ${(e as Error).message}`, e);
      }
    }
    const out: Record<string, unknown> = { ...call, type: call.type ?? 'function', function: { ...fn, arguments: args } };
    if (present(call.id) && !isString(call.id)) throw new InvalidParamError(`${cat}.id`, `${cat}.id must be a string`);
    return out;
  });
}

/**
 * `tools` and `tool_choice`, checked as vLLM checks them (its messages): tool_choice defaults to
 * 'auto' with tools and 'none' without; a choice other than 'none' needs tools; 'required' with an
 * empty list behaves as 'none' (OpenAI); a named function must be one of the tools.
 */
function parseTools(o: Json): { tools: ChatTool[] | undefined; toolChoice: ToolChoice } {
  let tools: ChatTool[] | undefined;
  if (present(o.tools)) {
    if (!Array.isArray(o.tools)) throw new InvalidParamError('tools', 'tools must be a list');
    tools = o.tools.map((t: unknown, i) => {
      const at = `tools[${i}]`;
      if (!isPlainObject(t)) throw new InvalidParamError(at, `${at} must be an object`);
      if (t.type !== 'function') throw new InvalidParamError(`${at}.type`, `${at}.type must be 'function', got ${describeValue(t.type)}`);
      const fn = t.function;
      if (!isPlainObject(fn)) throw new InvalidParamError(`${at}.function`, `${at}.function must be an object`);
      if (!isString(fn.name) || fn.name === '') throw new InvalidParamError(`${at}.function.name`, `${at}.function.name must be a non-empty string`);
      if (present(fn.description) && !isString(fn.description)) throw new InvalidParamError(`${at}.function.description`, `${at}.function.description must be a string`);
      if (present(fn.parameters) && !isPlainObject(fn.parameters)) throw new InvalidParamError(`${at}.function.parameters`, `${at}.function.parameters must be an object`);
      return t as unknown as ChatTool;
    });
  }
  const choice = o.tool_choice;
  if (!present(choice)) return { tools, toolChoice: tools !== undefined && tools.length > 0 ? 'auto' : 'none' };
  if (choice === 'none') return { tools, toolChoice: 'none' };
  if (tools === undefined) throw new InvalidParamError('tool_choice', 'When using `tool_choice`, `tools` must be set.');
  if (choice === 'auto') return { tools, toolChoice: 'auto' };
  if (choice === 'required') return tools.length === 0 ? { tools: undefined, toolChoice: 'none' } : { tools, toolChoice: 'required' };
  const usage = 'Correct usage: `{"type": "function", "function": {"name": "my_function"}}`';
  if (!isPlainObject(choice)) {
    throw new InvalidParamError('tool_choice', `Invalid value for \`tool_choice\`: ${describeValue(choice)}! Only named tools, "none", "auto" or "required" are supported.`);
  }
  const fn = choice.function;
  if (!isPlainObject(fn)) throw new InvalidParamError('tool_choice', `Invalid value for \`function\`: \`${describeValue(fn)}\` in \`tool_choice\`! ${usage}`);
  if (!isString(fn.name) || fn.name === '') throw new InvalidParamError('tool_choice', `Invalid \`name\` in \`function\`: \`${describeValue(fn.name)}\` in \`tool_choice\`! ${usage}`);
  const name = fn.name;
  if (!tools.some((t) => t.function.name === name)) throw new InvalidParamError('tool_choice', 'The tool specified in `tool_choice` does not match any of the specified `tools`');
  return { tools, toolChoice: { name } };
}

/**
 * A forced tool choice ('required', a named function) as guided decoding (`guided/tool-choice.ts`,
 * vLLM's schemas), or null for 'auto' / 'none'. When the schema does not compile, each tool the
 * choice may call is compiled on its own to name the one at fault, as response_format's refusals
 * name theirs (`tools[0].function.parameters: pattern is not supported (at #/properties/id)`, param
 * the same path); a refusal no single tool causes (bounds over the union of them) names `tool_choice`.
 * The whole schema is compiled once on the way in: a request pays for the tools' own compiles only
 * when it is refused.
 */
function toolChoiceGuidedDecoding(tools: readonly ChatTool[] | undefined, choice: ToolChoice): GuidedDecoding | null {
  if (tools === undefined || choice === 'none' || choice === 'auto') return null;
  let schema: Record<string, unknown> | null;
  try {
    schema = toolChoiceSchema(tools, choice);
    if (schema === null) return null;
    compileJsonSchema(schema, choice === 'required' ? "the schema of tool_choice 'required'" : `the schema of tool_choice '${choice.name}'`);
  } catch (e) {
    if (!isSwitchyardError(e)) throw e;
    const named = choice === 'required' ? -1 : tools.findIndex((t) => t.function.name === choice.name);
    tools.forEach((tool, i) => {
      if (named !== -1 && i !== named) return;
      const where = `tools[${i}].function.parameters`;
      try {
        compileJsonSchema(toolParameters(tool), where);
      } catch (own) {
        if (!isSwitchyardError(own)) throw own;
        throw new InvalidParamError(where, own.message, own);
      }
    });
    throw new InvalidParamError('tool_choice', e.message, e);
  }
  return { kind: 'json_schema', schema };
}

const PROMPT_SHAPE = 'prompt must be a string, a list of token ids, or a non-empty list of strings or of token id lists';

function parsePrompts(value: unknown): CompletionPrompt[] {
  if (isString(value)) return [{ text: value }];
  if (!Array.isArray(value) || value.length === 0) throw new InvalidParamError('prompt', PROMPT_SHAPE);
  if (value.every(isInteger)) return [{ tokenIds: value }];
  if (value.every(isString)) return value.map((text) => ({ text }));
  if (value.every((p) => Array.isArray(p) && p.length > 0 && p.every(isInteger))) return (value as number[][]).map((tokenIds) => ({ tokenIds }));
  throw new InvalidParamError('prompt', PROMPT_SHAPE);
}
