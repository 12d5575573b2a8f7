/**
 * `switchyard router`: parse flags, start the router, drain on SIGTERM/SIGINT and exit 0.
 * Exit codes: 0 clean stop, 1 start-up failure, 2 bad usage.
 * Log lines are JSON on stdout, human ones when stdout is a terminal (`--log-format json` / `human`
 * force either); with human lines the router prints the models and workers discovery shows once started.
 */
import { createLogger, discoveredModelsTable, logOutputOf, parseCommandLine, stopOnSignals } from '@switchyard/cli';
import { readRouterEnvironment } from './environment.js';
import { helpText, parseRouterArgs } from './options.js';
import { startRouter, type RunningRouter } from './router.js';

export async function main(argv: readonly string[]): Promise<void> {
  const options = parseCommandLine('router', argv, parseRouterArgs, helpText);
  if (options === undefined) return;

  const output = logOutputOf({ format: options.logFormat, isTerminal: process.stdout.isTTY === true, noColor: readRouterEnvironment().noColor });
  const logger = createLogger({ verbose: options.logVerbose, format: options.logFormat, output });
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
  if (output.human) process.stdout.write(discoveredModelsTable(router.models()));
}
