/**
 * The OpenAI door's chat output parsing flags, as vLLM's server takes them: `--enable-auto-tool-choice`,
 * `--tool-call-parser NAME`, `--reasoning-parser NAME`. `compileOutputParsing` is the one check
 * (known names; auto tool choice needs a parser, vLLM's rule and message); the apps' command line
 * turns its refusal into a usage error. A model's own config parameters win over these
 * (`resolveOutputParsing`).
 */
import { invalidArgument } from '@switchyard/common';
import { REASONING_PARSERS, TOOL_CALL_PARSERS, checkParserName, type OutputParsingConfig } from '@switchyard/llm';

export const TOOL_CALL_PARSER_NAMES: readonly string[] = Object.keys(TOOL_CALL_PARSERS);
export const REASONING_PARSER_NAMES: readonly string[] = Object.keys(REASONING_PARSERS);

export interface OutputParsingFlags {
  readonly enableAutoToolChoice: boolean;
  readonly toolCallParser?: string | undefined;
  readonly reasoningParser?: string | undefined;
}

export function compileOutputParsing(flags: OutputParsingFlags): OutputParsingConfig {
  if (flags.enableAutoToolChoice && flags.toolCallParser === undefined) throw invalidArgument('--enable-auto-tool-choice requires --tool-call-parser');
  if (flags.toolCallParser !== undefined) checkParserName('tool call', flags.toolCallParser, '--tool-call-parser');
  if (flags.reasoningParser !== undefined) checkParserName('reasoning', flags.reasoningParser, '--reasoning-parser');
  return {
    enableAutoToolChoice: flags.enableAutoToolChoice,
    ...(flags.toolCallParser === undefined ? {} : { toolCallParser: flags.toolCallParser }),
    ...(flags.reasoningParser === undefined ? {} : { reasoningParser: flags.reasoningParser }),
  };
}
