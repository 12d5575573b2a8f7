// @switchyard/cli: what the apps' command lines share (flags → options, the JSON logger).
export { UsageError, flagGroupHelpLines, flagHelpLines, mergeFlagGroups, parseFlags } from './flags.js';
export type { FlagGroup, FlagKind, FlagSpec, FlagTable } from './flags.js';
export { LogFileError, createLogger, levelFor, openLogFile } from './json-logger.js';
export type { LogFormat, LogLevelSettings, LoggerOptions } from './json-logger.js';
export { stopOnSignals } from './signals.js';
export type { SignalLogger } from './signals.js';
export { parseCommandLine } from './command-line.js';
export { DOOR_LIMIT_DEFAULTS, DOOR_LIMIT_FLAGS, doorLimits } from './door-flags.js';
export type { DoorLimitOptions, DoorLimits } from './door-flags.js';
export { ACCESS_FLAGS, accessFlagDefaults, accessPolicy } from './access-flags.js';
export type { AccessFlagOptions } from './access-flags.js';
export { OPENAI_PARSING_DEFAULTS, OPENAI_PARSING_FLAGS, outputParsing } from './openai-flags.js';
export type { OpenAiParsingOptions } from './openai-flags.js';
