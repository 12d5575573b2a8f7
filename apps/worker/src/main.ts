/**
 * `switchyard worker`: parse flags, start the worker, drain on SIGTERM/SIGINT and exit 0.
 * Exit codes: 0 clean stop, 1 start-up failure, 2 bad usage.
 */
import { createLogger } from './logger.js';
import { UsageError, helpText, parseWorkerArgs, type WorkerOptions } from './options.js';
import { startWorker } from './worker.js';

export async function main(argv: readonly string[]): Promise<void> {
  let options: WorkerOptions;
  try {
    options = parseWorkerArgs(argv);
  } catch (err) {
    if (err instanceof UsageError) {
      process.stderr.write(`switchyard worker: ${err.message}\n\n${helpText()}`);
      process.exit(2);
    }
    throw err;
  }
  if (options.help) {
    process.stdout.write(helpText());
    return;
  }

  const logger = createLogger({ verbose: options.logVerbose, format: options.logFormat });
  let worker;
  try {
    worker = await startWorker(options, logger);
  } catch (err) {
    logger.error({ err }, 'worker failed to start');
    process.exitCode = 1;
    logger.flush();
    return;
  }

  let signals = 0;
  const stop = (signal: NodeJS.Signals): void => {
    signals++;
    if (signals > 1) {
      logger.warn({ signal }, 'second signal: exiting without waiting');
      process.exit(1);
    }
    logger.info({ signal }, 'shutting down');
    worker.close().then(
      () => {
        logger.flush();
        process.exit(0);
      },
      (err: unknown) => {
        logger.error({ err }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}
