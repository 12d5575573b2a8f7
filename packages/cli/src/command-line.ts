/**
 * The first step of every app's `main`: flags → options, or the process ends as a command line
 * tool should: bad usage prints the message and the help on stderr and exits 2; `--help` prints the
 * help on stdout and yields undefined (the caller returns, exit 0).
 */
import { UsageError } from './flags.js';

export function parseCommandLine<T extends { readonly help: boolean }>(
  command: string,
  argv: readonly string[],
  parse: (argv: readonly string[]) => T,
  helpText: () => string,
): T | undefined {
  let options: T;
  try {
    options = parse(argv);
  } catch (err) {
    if (err instanceof UsageError) {
      process.stderr.write(`switchyard ${command}: ${err.message}\n\n${helpText()}`);
      process.exit(2);
    }
    throw err;
  }
  if (options.help) {
    process.stdout.write(helpText());
    return undefined;
  }
  return options;
}
