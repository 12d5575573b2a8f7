/**
 * The OpenAI chat output parsing flags both apps share, by vLLM's names: `--enable-auto-tool-choice`,
 * `--tool-call-parser`, `--reasoning-parser`. Each app spreads `OPENAI_PARSING_FLAGS` into its flag
 * table and `OPENAI_PARSING_DEFAULTS` into its defaults, checks them with `outputParsing(options)`
 * among its cross-flag rules and hands the result to the HTTP door. The check is the door's own
 * (`compileOutputParsing` in @switchyard/server); a refusal here is a `UsageError`.
 */
import { REASONING_PARSER_NAMES, TOOL_CALL_PARSER_NAMES, compileOutputParsing } from '@switchyard/server';
import { type FlagTable, UsageError } from './flags.js';

export interface OpenAiParsingOptions {
  /** `tool_choice: "auto"` parses tool calls with `--tool-call-parser` (which it needs). */
  enableAutoToolChoice: boolean;
  /** The tool-call parser of models whose config sets no parsing parameter. */
  toolCallParser?: string;
  /** The reasoning parser of models whose config sets no parsing parameter. */
  reasoningParser?: string;
}

export const OPENAI_PARSING_DEFAULTS: Readonly<OpenAiParsingOptions> = { enableAutoToolChoice: false };

export const OPENAI_PARSING_FLAGS: FlagTable<OpenAiParsingOptions> = {
  'enable-auto-tool-choice': {
    kind: 'bool',
    key: 'enableAutoToolChoice',
    help: 'OpenAI chat: parse tool calls when tool_choice is "auto" (the default with tools), for models whose config sets no parsing parameter; needs --tool-call-parser (default false).',
  },
  'tool-call-parser': {
    kind: 'string',
    key: 'toolCallParser',
    help: `OpenAI chat: the tool-call format of models whose config sets no parsing parameter: ${TOOL_CALL_PARSER_NAMES.join(', ')} (default none).`,
  },
  'reasoning-parser': {
    kind: 'string',
    key: 'reasoningParser',
    help: `OpenAI chat: split <think>...</think> into reasoning_content for models whose config sets no parsing parameter: ${REASONING_PARSER_NAMES.join(', ')} (default none).`,
  },
};

/** The flags in the door's terms; unknown names, or auto tool choice without a parser, are a UsageError. */
export function outputParsing(o: Readonly<OpenAiParsingOptions>): ReturnType<typeof compileOutputParsing> {
  try {
    return compileOutputParsing(o);
  } catch (e) {
    throw new UsageError((e as Error).message);
  }
}
