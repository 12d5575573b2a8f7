/**
 * The frontend's first step (vLLM's input processor, Dynamo's preprocessor): an OpenAI request's
 * messages or prompt → the prompt token ids the engine takes. The endpoint's tokenizer and chat
 * template do the work, on the prompt preprocessing threads (`PreprocessPool`) unless the request is small.
 *
 * Length against the context is decided by the engine, which refuses a prompt that does not fit
 * (`invalid_argument`). Here only a text whose byte length already proves it cannot fit is refused,
 * before it is tokenized (`refuseOverlongPromptText`), and rendering and tokenizing run on the
 * preprocessing threads: on the loop they capped a router's request rate, and megabytes held it for seconds.
 */
import { invalidArgument } from '@switchyard/common';
import type { ChatMessage } from './chat-template.js';
import { promptTooLongError, refuseOverlongPromptText } from './context-length.js';
import type { LlmEndpoint } from './llm-endpoint.js';
import { InvalidParamError, type CompletionPrompt } from './openai-protocol.js';
import { sharedPreprocessPool } from './preprocess-pool.js';

export { templateMessages } from './prompt-text.js';

/** The parts of an endpoint preprocessing reads. */
export type PreprocessorEndpoint = Pick<LlmEndpoint, 'card' | 'tokenizer' | 'chatTemplate'>;

export interface PreprocessedPrompt {
  readonly promptTokenIds: readonly number[];
  /** The prompt as text: the rendered chat template, the completions prompt, or decoded prompt ids. */
  readonly promptText: string;
}

export interface ChatPromptOptions {
  /** Extra template variables (vLLM's chat_template_kwargs). */
  readonly templateKwargs?: Readonly<Record<string, unknown>>;
  /** The request's tools, given to the template as `tools` (a list of `{type: 'function', function}`), as transformers does. */
  readonly tools?: readonly unknown[] | undefined;
  /** Run the tokenizer's post processor; default false (chat templates write BOS themselves). */
  readonly addSpecialTokens?: boolean;
}

/**
 * Render `messages` with the model's chat template, opening the assistant's turn
 * (add_generation_prompt), and tokenize: one call of the shared `PreprocessPool` (on a thread unless
 * the request is small). A model without a chat template, or a template that raises (roles must
 * alternate, ...), is `invalid_argument`; so is a rendered text whose length proves it cannot fit.
 */
export async function chatPrompt(endpoint: PreprocessorEndpoint, messages: readonly ChatMessage[], options: ChatPromptOptions = {}): Promise<PreprocessedPrompt> {
  const template = endpoint.chatTemplate;
  if (template === undefined) {
    throw invalidArgument(`model '${endpoint.card.name}' has no chat template, so it cannot serve chat completions; use /v1/completions`);
  }
  const { text, ids } = await sharedPreprocessPool().chatPrompt(endpoint.tokenizer, template, {
    messages,
    tools: options.tools,
    templateKwargs: options.templateKwargs,
    addSpecialTokens: options.addSpecialTokens ?? false,
    contextLength: endpoint.card.contextLength,
  });
  if (ids.length === 0) throw new InvalidParamError('messages', 'the rendered chat prompt is empty');
  return { promptTokenIds: ids, promptText: text };
}

/**
 * A completions prompt → token ids. Text is tokenized (`addSpecialTokens` default true, as vLLM);
 * token ids are checked against the vocabulary and passed through.
 */
export async function completionPrompt(endpoint: PreprocessorEndpoint, prompt: CompletionPrompt, addSpecialTokens = true): Promise<PreprocessedPrompt> {
  const { tokenizer } = endpoint;
  if ('text' in prompt) {
    const promptTokenIds = await textPromptTokens(endpoint, prompt.text, addSpecialTokens);
    if (promptTokenIds.length === 0) throw new InvalidParamError('prompt', 'prompt must not be empty');
    return { promptTokenIds, promptText: prompt.text };
  }
  const ids = prompt.tokenIds;
  // Counted already: refuse before checking and decoding millions of ids on the event loop.
  if (ids.length >= endpoint.card.contextLength) throw promptTooLongError(endpoint.card.contextLength, ids.length);
  const bad = ids.find((id) => id < 0 || id >= tokenizer.vocabSize);
  if (bad !== undefined) {
    throw new InvalidParamError('prompt', `token id ${bad} is out of the vocabulary (0..${tokenizer.vocabSize - 1})`);
  }
  return { promptTokenIds: ids, promptText: tokenizer.decode(ids) };
}

/**
 * A prompt text → token ids, refusing first, without tokenizing, a text whose byte length proves it
 * cannot fit the model's context (vLLM's message, "at least N input tokens"); long texts are
 * tokenized on the shared `PreprocessPool`'s threads. Every path that tokenizes a client's
 * prompt goes through here: OpenAI chat and completions, KServe generate on the worker, KV routing
 * on the router. A refusal rejects the promise (never a synchronous throw).
 */
export async function textPromptTokens(endpoint: PreprocessorEndpoint, text: string, addSpecialTokens: boolean): Promise<number[]> {
  refuseOverlongPromptText(text, endpoint.card.contextLength, endpoint.tokenizer.maxTokenBytes);
  return sharedPreprocessPool().encode(endpoint.tokenizer, text, addSpecialTokens);
}
