/**
 * `--http-thread-count`, tritonserver's name, both apps share: HTTP front threads on the HTTP port
 * (`HttpServerOptions.threads` in @switchyard/server). Each app spreads `HTTP_THREAD_FLAGS` into its
 * flag table and `HTTP_THREAD_DEFAULTS` into its defaults, and hands `httpThreads(options, logger)`
 * to the HTTP door: on a Node.js that cannot share a port between threads the flag is logged and
 * the door serves every connection on the event loop, so tritonserver command lines keep working.
 */
import { reusePortSupported } from '@switchyard/server';
import type { FlagTable } from './flags.js';

export interface HttpThreadOptions {
  /** HTTP front threads sharing the port; 0 = every connection on the event loop. */
  httpThreadCount: number;
}

export const HTTP_THREAD_DEFAULTS: Readonly<HttpThreadOptions> = { httpThreadCount: 0 };

export const HTTP_THREAD_FLAGS: FlagTable<HttpThreadOptions> = {
  'http-thread-count': {
    kind: 'int',
    key: 'httpThreadCount',
    min: 0,
    max: 128,
    help: `Threads that accept HTTP connections on the HTTP port and parse, decode and encode infer requests, whose models run on the main thread; other requests go on to the main thread (default ${HTTP_THREAD_DEFAULTS.httpThreadCount}: every connection on the event loop). Needs Node.js 22.12 or later; on older ones the flag is logged and ignored.`,
  },
};

/** `--http-thread-count`, or 0 (with a warning) on a Node.js that cannot share a port between threads. */
export function httpThreads(options: HttpThreadOptions, logger: { warn(fields: object, msg: string): void }, nodeVersion: string = process.versions.node): number {
  if (options.httpThreadCount === 0 || reusePortSupported(nodeVersion)) return options.httpThreadCount;
  logger.warn({ flag: '--http-thread-count' }, `--http-thread-count needs Node.js 22.12 or later (this is v${nodeVersion}): every HTTP connection is served on the event loop`);
  return 0;
}
