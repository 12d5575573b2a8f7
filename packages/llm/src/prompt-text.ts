/**
 * The synchronous core of prompt preprocessing: a chat request's messages → the rendered prompt text,
 * and a prompt text → token ids. The one implementation both places run: the caller's event loop for
 * small prompts, and the preprocessing threads (`worker/preprocess.mjs` imports this file's compiled
 * form), so a prompt gets the same text, the same ids and the same errors wherever it is done.
 * Pure: no IO, no state.
 */
import type { ChatMessage, ChatTemplate } from './chat-template.js';
import { refuseOverlongPromptText } from './context-length.js';
import type { Tokenizer } from './tokenizer/tokenizer.js';

/** What rendering a chat prompt reads besides the messages. */
export interface ChatRenderOptions {
  /** Extra template variables (vLLM's chat_template_kwargs). */
  readonly templateKwargs?: Readonly<Record<string, unknown>> | undefined;
  /** The request's tools, given to the template as `tools`. */
  readonly tools?: readonly unknown[] | undefined;
}

/** Messages in the content form the template reads: text parts joined with '\n' unless it iterates over them. */
export function templateMessages(template: ChatTemplate, messages: readonly ChatMessage[]): readonly ChatMessage[] {
  if (template.contentFormat === 'openai') return messages;
  return messages.map((m) => (typeof m.content === 'string' ? m : { ...m, content: m.content.map((p) => p.text).join('\n') }));
}

/**
 * `messages` rendered with `template`, opening the assistant's turn (add_generation_prompt);
 * a template that raises is `invalid_argument` (`ChatTemplate.render`).
 */
export function renderChatPromptText(template: ChatTemplate, messages: readonly ChatMessage[], options: ChatRenderOptions): string {
  const extra: Record<string, unknown> = { ...options.templateKwargs };
  if (options.tools !== undefined) extra['tools'] = options.tools;
  return template.render(templateMessages(template, messages), { add_generation_prompt: true, extra });
}

/**
 * `text`'s token ids, refusing first, without tokenizing, a text whose byte length proves it cannot
 * fit `contextLength` (`refuseOverlongPromptText`).
 */
export function promptTextTokens(tokenizer: Tokenizer, text: string, addSpecialTokens: boolean, contextLength: number): number[] {
  refuseOverlongPromptText(text, contextLength, tokenizer.maxTokenBytes);
  return tokenizer.encode(text, { addSpecialTokens });
}
