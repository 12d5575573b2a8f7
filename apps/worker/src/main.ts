/**
 * `switchyard worker`: parse flags, start the worker, drain on SIGTERM/SIGINT and exit 0.
 * Exit codes: 0 clean stop, 1 start-up failure, 2 bad usage. Losing the cluster lease is logged, not
 * fatal: the worker keeps serving and registers again when etcd answers.
 */
import { parseCommandLine, stopOnSignals } from '@switchyard/cli';
import { createLogger } from './logger.js';
import { helpText, parseWorkerArgs } from './options.js';
import { startWorker, type RunningWorker } from './worker.js';

export async function main(argv: readonly string[]): Promise<void> {
  const options = parseCommandLine('worker', argv, parseWorkerArgs, helpText);
  if (options === undefined) return;

  const logger = createLogger({ verbose: options.logVerbose, format: options.logFormat });
  let worker: RunningWorker;
  try {
    worker = await startWorker(options, logger);
  } catch (err) {
    logger.error({ err }, 'worker failed to start');
    process.exitCode = 1;
    logger.flush();
    return;
  }
  const running = worker;

  stopOnSignals(logger, () => running.close());
}
