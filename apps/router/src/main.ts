/**
 * `switchyard router`: parse flags, start the router, drain on SIGTERM/SIGINT and exit 0.
 * Exit codes: 0 clean stop, 1 start-up failure, 2 bad usage.
 */
import { createLogger, parseCommandLine, stopOnSignals } from '@switchyard/cli';
import { helpText, parseRouterArgs } from './options.js';
import { startRouter, type RunningRouter } from './router.js';

export async function main(argv: readonly string[]): Promise<void> {
  const options = parseCommandLine('router', argv, parseRouterArgs, helpText);
  if (options === undefined) return;

  const logger = createLogger({ verbose: options.logVerbose, format: options.logFormat });
  let router: RunningRouter;
  try {
    router = await startRouter(options, logger);
  } catch (err) {
    logger.error({ err }, 'router failed to start');
    logger.flush();
    // Connections half-made to etcd / NATS / Redis may hold the event loop open.
    process.exit(1);
  }

  stopOnSignals(logger, () => router.close());
}
