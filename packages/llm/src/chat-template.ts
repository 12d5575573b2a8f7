/**
 * `ChatTemplate`: a typed adapter over @huggingface/jinja, rendering a model's chat template (from
 * tokenizer_config.json's `chat_template`, or a `chat_template.jinja` file) the way transformers'
 * `apply_chat_template(messages, add_generation_prompt=...)` does: the template sees `messages`,
 * `add_generation_prompt`, the special token strings (`bos_token`, `eos_token`, `pad_token`,
 * `unk_token`) and @huggingface/jinja's built-in `raise_exception(msg)`, plus any extra variables the
 * caller passes (`tools`, `enable_thinking`, ...).
 *
 * A template that does not parse is `invalid_argument` at construction (a broken model folder); a
 * template that raises while rendering (e.g. "roles must alternate") is `invalid_argument` at render
 * time (a bad request). The parsed template is immutable; render may be called concurrently.
 */
import { Template } from '@huggingface/jinja';
import { invalidArgument, notFound } from '@switchyard/common';
import { readModelFolder, specialTokenContent, type TokenizerConfigJson } from './tokenizer/tokenizer-files.js';

/** A text part of a message's content, as templates that iterate over content get it. */
export interface ChatTextPart {
  readonly type: 'text';
  readonly text: string;
}

/**
 * One chat message. `content` is text or text parts: `ChatTemplate.contentFormat` says which form
 * the template reads (the preprocessor converts). Other fields (`name`, `tool_calls`,
 * `tool_call_id`, ...) pass through to the template.
 */
export interface ChatMessage {
  readonly role: string;
  readonly content: string | readonly ChatTextPart[];
  readonly [key: string]: unknown;
}

/**
 * How a template reads `message.content` (vLLM's `--chat-template-content-format auto`): 'openai'
 * when it loops over it (Gemma 3, Llama 4, vision templates: the parts as a list of
 * `{type, text}`), else 'string' (parts joined with '\n').
 */
export type ContentFormat = 'string' | 'openai';

export interface RenderOptions {
  /** Append the opening of an assistant turn, so the model continues as the assistant. Default false. */
  add_generation_prompt?: boolean;
  /** Further template variables; they cannot override `messages` or `add_generation_prompt`. */
  extra?: Readonly<Record<string, unknown>>;
}

/** Special token strings given to the template. */
export interface TemplateSpecialTokens {
  readonly bos_token?: string;
  readonly eos_token?: string;
  readonly pad_token?: string;
  readonly unk_token?: string;
}

export class ChatTemplate {
  private readonly template: Template;
  readonly contentFormat: ContentFormat;

  /** `source` is the Jinja text; throws `invalid_argument` when it does not parse. */
  constructor(
    readonly source: string,
    readonly specialTokens: TemplateSpecialTokens = {},
  ) {
    try {
      this.template = new Template(source);
    } catch (e) {
      throw invalidArgument(`chat template does not parse: ${(e as Error).message}`, e);
    }
    this.contentFormat = detectContentFormat(source);
  }

  /**
   * From tokenizer_config.json (and a separate chat_template.jinja, which wins when given). Named
   * templates use 'default'. Returns undefined when the model has no chat template at all.
   */
  static fromTokenizerConfig(config: TokenizerConfigJson, chatTemplateFile?: string): ChatTemplate | undefined {
    const source = chatTemplateFile ?? pickTemplate(config.chat_template);
    if (source === undefined) return undefined;
    const tokens: TemplateSpecialTokens = {};
    for (const key of ['bos_token', 'eos_token', 'pad_token', 'unk_token'] as const) {
      const content = specialTokenContent(config[key]);
      if (content !== undefined) (tokens as Record<string, string>)[key] = content;
    }
    return new ChatTemplate(source, tokens);
  }

  /** From a Hugging Face model folder; `not_found` when it has no chat template. */
  static async fromModelFolder(dir: string): Promise<ChatTemplate> {
    const files = await readModelFolder(dir);
    const template = ChatTemplate.fromTokenizerConfig(files.tokenizerConfig, files.chatTemplateFile);
    if (template === undefined) throw notFound(`model folder '${dir}' has no chat template`);
    return template;
  }

  /** The prompt text for `messages`. */
  render(messages: readonly ChatMessage[], options: RenderOptions = {}): string {
    const context: Record<string, unknown> = { ...this.specialTokens };
    for (const [key, value] of Object.entries(options.extra ?? {})) if (!RESERVED.has(key)) context[key] = value;
    context['messages'] = messages;
    context['add_generation_prompt'] = options.add_generation_prompt ?? false;
    try {
      return this.template.render(context);
    } catch (e) {
      // The template's raise_exception(msg) throws a plain Error(msg): its message is the reason.
      throw invalidArgument(`chat template: ${(e as Error).message}`, e);
    }
  }
}

/** Names the template engine defines itself (redeclaring them fails) or that render sets. */
const RESERVED = new Set(['messages', 'add_generation_prompt', 'raise_exception', 'range', 'strftime_now', 'namespace']);

/**
 * 'openai' when the template has a `for` loop over a message's content (`for x in message['content']`,
 * `message.content`, or a variable that iterates messages); vLLM decides the same on the template's
 * syntax tree. Templates that only print content, or test `content is string`, get a string.
 */
export function detectContentFormat(source: string): ContentFormat {
  return /\{%-?\s*for\s+\w+(?:\s*,\s*\w+)*\s+in\s+\w+(?:\.\w+)*(?:\[\s*['"]content['"]\s*\]|\.content)\s*(?:\||-?%\})/.test(source) ? 'openai' : 'string';
}

function pickTemplate(value: TokenizerConfigJson['chat_template']): string | undefined {
  if (value === undefined) return undefined;
  if (typeof value === 'string') return value;
  if (Array.isArray(value)) {
    const list = value as ReadonlyArray<{ name: string; template: string }>;
    return (list.find((t) => t.name === 'default') ?? list[0])?.template;
  }
  const named = value as Readonly<Record<string, string>>;
  return named['default'] ?? Object.values(named)[0];
}
