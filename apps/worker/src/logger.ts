/**
 * The worker's logger is the apps' shared one (@switchyard/cli json-logger.ts): JSON lines on
 * stdout, `--log-format` / `--log-verbose`, `levelFor` for `/v2/logging` at run time.
 */
export { LogFileError, createLogger, levelFor, openLogFile } from '@switchyard/cli';
export type { LogLevelSettings } from '@switchyard/cli';
