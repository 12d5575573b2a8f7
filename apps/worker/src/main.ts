/**
 * `switchyard worker`: parse flags, start the worker, drain on SIGTERM/SIGINT and exit 0.
 * Exit codes: 0 clean stop, 1 start-up failure (a log file that cannot be opened, a port in use, a
 * model that failed to load under --exit-on-error), 2 bad usage. Losing the cluster lease is logged,
 * not fatal: the worker keeps serving and registers again when etcd answers.
 * Log lines are JSON on stdout, human ones when stdout is a terminal (`--log-format json` / `human`
 * force either); with human lines the worker prints its model table once started, as tritonserver
 * does, and a model load still running says so every 10 s (load-progress.ts). A `--log-file`
 * always takes JSON lines.
 */
import { logOutputOf, modelStatusTable, parseCommandLine, stopOnSignals } from '@switchyard/cli';
import { readWorkerEnvironment } from './environment.js';
import { LoadProgress } from './load-progress.js';
import { LogFileError, createLogger, openLogFile } from './logger.js';
import { helpText, inertFlagNotes, parseWorkerArgs } from './options.js';
import { startWorker, type RunningWorker } from './worker.js';

export async function main(argv: readonly string[]): Promise<void> {
  const options = parseCommandLine('worker', argv, parseWorkerArgs, helpText);
  if (options === undefined) return;

  let destination;
  try {
    destination = options.logFile === undefined ? undefined : openLogFile(options.logFile);
  } catch (err) {
    if (!(err instanceof LogFileError)) throw err;
    process.stderr.write(`switchyard worker: ${err.message}\n`);
    process.exitCode = 1;
    return;
  }
  // A log file takes JSON lines whatever the format says; human lines are for people at stdout.
  const output = destination === undefined ? logOutputOf({ format: options.logFormat, isTerminal: process.stdout.isTTY === true, noColor: readWorkerEnvironment().noColor }) : undefined;
  const logger = createLogger({
    output,
    verbose: options.logVerbose,
    format: options.logFormat,
    info: options.logInfo,
    warning: options.logWarning,
    error: options.logError,
    ...(destination !== undefined ? { destination } : {}),
  });
  for (const { flag, reason } of inertFlagNotes(options)) logger.info({ flag }, `${flag} is accepted for tritonserver command lines and has no effect here: ${reason}`);
  // With human lines, a model load still running says so every 10 s (JSON lines stay as they are).
  const loadProgress = output?.human === true ? new LoadProgress(logger.child({ component: 'engine' })) : undefined;
  let worker: RunningWorker;
  try {
    worker = await startWorker(options, logger, loadProgress !== undefined ? { onLoadStep: loadProgress.onLoadStep } : {});
  } catch (err) {
    loadProgress?.close();
    logger.error({ err }, 'worker failed to start');
    process.exitCode = 1;
    logger.flush();
    return;
  }
  const running = worker;

  stopOnSignals(logger, () => {
    loadProgress?.close();
    return running.close();
  });
  if (output?.human === true) process.stdout.write(modelStatusTable(await running.engine.repositoryIndex(false)));
}
