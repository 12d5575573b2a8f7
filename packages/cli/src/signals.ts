/**
 * How an app stops: the first SIGTERM / SIGINT starts a graceful shutdown (`close`, then exit 0, or 1
 * if it fails); a second signal exits 1 at once without waiting.
 */
/** The part of the apps' logger (json-logger.ts) this needs. */
export interface SignalLogger {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
  flush?(): void;
}

export function stopOnSignals(logger: SignalLogger, close: () => Promise<void>): void {
  let signals = 0;
  const stop = (signal: NodeJS.Signals): void => {
    signals++;
    if (signals > 1) {
      logger.warn({ signal }, 'second signal: exiting without waiting');
      process.exit(1);
    }
    logger.info({ signal }, 'shutting down');
    close().then(
      () => {
        logger.flush?.();
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
