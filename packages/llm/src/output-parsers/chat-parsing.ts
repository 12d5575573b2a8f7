/**
 * `chatParsingFor`: which parsers a chat request's output goes through, from the model's settings
 * (`OutputParsingConfig`, its config.pbtxt parameters, on the card) or else the front door's flags
 * (vLLM's `--enable-auto-tool-choice`, `--tool-call-parser`, `--reasoning-parser`), and the
 * request's `tools` / `tool_choice`, decided as vLLM's serving_chat decides:
 *
 * - `tool_choice: 'none'` (or no tools): no tool-call parsing; the reasoning parser still runs.
 * - `'auto'` (the default with tools): needs auto tool choice enabled and a parser, else 400 with
 *   vLLM's message; calls found → `tool_calls`, finish_reason 'tool_calls'.
 * - `'required'` / a named function: guided decoding forces the call (the request's sampling carries
 *   the schema, `guided/tool-choice.ts`), so the output is read as that schema's JSON
 *   (`forced-tool-calls.ts`), with no tool-call parser and none needed. A model whose own config
 *   names a reasoning parser reasons freely first (its engine applies the constraint after
 *   `</think>`, `guided/reasoning-gate.ts`): its reasoning parser splits the output and the calls are
 *   read from the content after the reasoning. Otherwise (no parser, or only the door's, which the
 *   engine does not know) the constraint holds from the first token and nothing is reasoning. Ids
 *   follow the configured tool-call parser's style (Mistral's 9 characters), else vLLM's.
 */
import { InvalidParamError, type ToolChoice } from '../openai-protocol.js';
import type { ChatParsing } from '../openai-response.js';
import { ChatOutputParser, chatOutputParser, checkParserName, reasoningParserFor } from './chat-output-parser.js';
import { NamedFunctionParser, RequiredCallsParser } from './forced-tool-calls.js';
import type { StreamParser } from './parser-events.js';
import type { ReasoningContext } from './reasoning-parsers.js';
import { TOOL_CALL_PARSERS, type ToolCallIdStyle } from './tool-call-parsers.js';

/** Output parsing settings of a model or of a front door; every field optional. */
export interface OutputParsingConfig {
  /** A `TOOL_CALL_PARSERS` name. */
  readonly toolCallParser?: string;
  /** tool_choice 'auto' parses tool calls (needs `toolCallParser`). */
  readonly enableAutoToolChoice?: boolean;
  /** A `REASONING_PARSERS` name. */
  readonly reasoningParser?: string;
}

/**
 * A model that sets any of its parsing settings is parsed by its settings alone (auto tool choice on
 * when it names a tool-call parser without saying otherwise); a model that sets none, by the door's
 * flags. Mixing the two would give a model a parser meant for others (a door's reasoning parser
 * turning a tool-calling model's whole output into reasoning).
 */
export function resolveOutputParsing(model: OutputParsingConfig | undefined, door: OutputParsingConfig | undefined): OutputParsingConfig {
  const own = model !== undefined && (model.toolCallParser !== undefined || model.reasoningParser !== undefined || model.enableAutoToolChoice !== undefined);
  const chosen = own ? model : (door ?? {});
  const enableAutoToolChoice = chosen.enableAutoToolChoice ?? (own && chosen.toolCallParser !== undefined);
  return {
    ...(chosen.toolCallParser === undefined ? {} : { toolCallParser: chosen.toolCallParser }),
    ...(chosen.reasoningParser === undefined ? {} : { reasoningParser: chosen.reasoningParser }),
    enableAutoToolChoice,
  };
}

/** A config's parser names checked (`invalid_argument` naming `where` and the known names). */
export function checkOutputParsing(config: OutputParsingConfig, where: string): OutputParsingConfig {
  if (config.toolCallParser !== undefined) checkParserName('tool call', config.toolCallParser, where);
  if (config.reasoningParser !== undefined) checkParserName('reasoning', config.reasoningParser, where);
  return config;
}

export interface ChatParsingPlan {
  /**
   * The choice's parsing once the prompt is rendered (reasoning parsers read it: a prompt that closed
   * `</think>` turned thinking off); undefined: the output is all content.
   */
  readonly parsing: ((context: ReasoningContext) => ChatParsing) | undefined;
  /** Keep special tokens in the text (a parser reads them). */
  readonly skipSpecialTokens: boolean;
}

/**
 * Refuses (InvalidParamError, param `tool_choice`) a tool choice the settings cannot honour ('auto'
 * without auto tool choice). `toolCallId` makes a new id in the given style (randomness is the caller's).
 * `model`: the model's own settings (its card's), whose reasoning parser is the one its engine's
 * guided decoding waits for; a forced tool choice reads its calls after that parser's reasoning.
 */
export function chatParsingFor(
  config: OutputParsingConfig,
  request: { readonly toolChoice: ToolChoice },
  toolCallId: (style: ToolCallIdStyle) => string,
  model?: OutputParsingConfig,
): ChatParsingPlan {
  const choice = request.toolChoice;
  if (choice === 'required' || typeof choice === 'object') {
    const style = (config.toolCallParser === undefined ? undefined : TOOL_CALL_PARSERS[config.toolCallParser])?.idStyle ?? 'vllm';
    const reasoningParser = model?.reasoningParser;
    const forcedParser = (): StreamParser => (choice === 'required' ? new RequiredCallsParser() : new NamedFunctionParser(choice.name));
    return {
      parsing: (context) => ({
        parser: reasoningParser === undefined ? forcedParser() : new ChatOutputParser(reasoningParserFor(reasoningParser, context), forcedParser()),
        toolCallId: () => toolCallId(style),
        forced: choice === 'required' ? 'required' : 'named',
      }),
      skipSpecialTokens: true,
    };
  }
  let toolCallParser: string | undefined;
  if (choice === 'auto') {
    if (config.enableAutoToolChoice !== true || config.toolCallParser === undefined) {
      throw new InvalidParamError('tool_choice', '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set');
    }
    toolCallParser = config.toolCallParser;
  }
  const reasoningParser = config.reasoningParser;
  if (toolCallParser === undefined && reasoningParser === undefined) return { parsing: undefined, skipSpecialTokens: true };
  const spec = toolCallParser === undefined ? undefined : TOOL_CALL_PARSERS[toolCallParser];
  const style = spec?.idStyle ?? 'vllm';
  return {
    parsing: (context) => ({
      parser: chatOutputParser({ toolCallParser, reasoningParser }, context),
      toolCallId: () => toolCallId(style),
    }),
    skipSpecialTokens: spec?.skipSpecialTokens ?? true,
  };
}
