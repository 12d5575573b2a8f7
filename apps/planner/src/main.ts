/**
 * `switchyard planner`: parse flags (and read `--profile`), start the planner, stop on
 * SIGTERM/SIGINT (the leader's lease is revoked, so a waiting planner takes over at once) and exit 0.
 * Exit codes: 0 clean stop, 1 start-up failure (etcd unreachable, metrics port taken), 2 bad usage.
 * `switchyard planner profile ...` is the profiler (`profile-command.ts`).
 */
import { createLogger, logOutputOf, parseCommandLine, stopOnSignals } from '@switchyard/cli';
import { readPlannerEnvironment } from './environment.js';
import { helpText, parseCommandLineOptions } from './options.js';
import { startPlanner, type RunningPlanner } from './planner.js';

export async function main(argv: readonly string[]): Promise<void> {
  if (argv[0] === 'profile') {
    // Loaded only when profiling: it brings the engine's LLM settings with it.
    const { profileMain } = await import('./profile-command.js');
    return profileMain(argv.slice(1));
  }
  const options = parseCommandLine('planner', argv, parseCommandLineOptions, helpText);
  if (options === undefined || options.config === undefined) return;

  const output = logOutputOf({ format: options.logFormat, isTerminal: process.stdout.isTTY === true, noColor: readPlannerEnvironment().noColor });
  const logger = createLogger({ verbose: options.logVerbose, format: options.logFormat, output });
  let planner: RunningPlanner;
  try {
    planner = await startPlanner({ ...options, config: options.config }, logger);
  } catch (err) {
    logger.error({ err }, 'planner failed to start');
    logger.flush();
    // A connection half-made to etcd may hold the event loop open.
    process.exit(1);
  }

  stopOnSignals(logger, () => planner.close());
}
