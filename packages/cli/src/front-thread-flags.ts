/**
 * `--http-thread-count` and `--grpc-infer-thread-count`, tritonserver's names, both apps share: front
 * threads on the HTTP and gRPC ports (`threads` of the doors in @switchyard/server). Each app spreads
 * `FRONT_THREAD_FLAGS` into its flag table and `FRONT_THREAD_DEFAULTS` into its defaults, and hands
 * `httpThreads` / `grpcThreads` to the doors: where a door cannot have threads (a Node.js that cannot
 * share a port between threads; gRPC response compression) the flag is logged and the door serves
 * every connection on the event loop, so tritonserver command lines keep working.
 */
import { availableParallelism } from 'node:os';
import { reusePortSupported } from '@switchyard/server';
import type { FlagTable } from './flags.js';

export interface FrontThreadOptions {
  /** HTTP front threads sharing the port; 0 = every connection on the event loop. */
  httpThreadCount: number;
  /** gRPC front threads sharing the port (tritonserver's range, 2 to 128, when given); 0 = none. */
  grpcInferThreadCount: number;
}

export const FRONT_THREAD_DEFAULTS: Readonly<FrontThreadOptions> = { httpThreadCount: 0, grpcInferThreadCount: 0 };

export const FRONT_THREAD_FLAGS: FlagTable<FrontThreadOptions> = {
  'http-thread-count': {
    kind: 'int',
    key: 'httpThreadCount',
    min: 0,
    max: 128,
    help: `Threads that accept HTTP connections on the HTTP port and parse, decode and encode infer requests, whose models run on the main thread; other requests go on to the main thread (default ${FRONT_THREAD_DEFAULTS.httpThreadCount}: every connection on the event loop). Needs Node.js 22.12 or later; on older ones the flag is logged and ignored.`,
  },
  'grpc-infer-thread-count': {
    kind: 'int',
    key: 'grpcInferThreadCount',
    min: 2,
    max: 128,
    help: 'Threads (2-128) that accept gRPC connections on the gRPC port and decode and encode ModelInfer calls, whose models run on the main thread; other calls go on to the main thread (not given: every connection on the event loop). Needs Node.js 22.12 or later and no --grpc-infer-response-compression-level; otherwise the flag is logged and ignored.',
  },
};

type Warn = { warn(fields: object, msg: string): void };

/** `--http-thread-count`, or 0 (with a warning) on a Node.js that cannot share a port between threads. */
export function httpThreads(options: FrontThreadOptions, logger: Warn, nodeVersion: string = process.versions.node, cpus?: number): number {
  return threadsOr0('--http-thread-count', options.httpThreadCount, logger, nodeVersion, cpus);
}

/**
 * `--grpc-infer-thread-count`, or 0 (with a warning) on a Node.js that cannot share a port between
 * threads, or with response compression (the threads send responses as they are).
 */
export function grpcThreads(options: FrontThreadOptions & { grpcInferResponseCompressionLevel?: string }, logger: Warn, nodeVersion: string = process.versions.node, cpus?: number): number {
  const level = options.grpcInferResponseCompressionLevel;
  if (options.grpcInferThreadCount > 0 && level !== undefined && level !== 'none') {
    logger.warn({ flag: '--grpc-infer-thread-count' }, `--grpc-infer-thread-count is not used with --grpc-infer-response-compression-level=${level}: every gRPC connection is served on the event loop`);
    return 0;
  }
  return threadsOr0('--grpc-infer-thread-count', options.grpcInferThreadCount, logger, nodeVersion, cpus);
}

/**
 * The threads a door gets for `count`: 0 where Node.js cannot share a port between threads, and at
 * most one per CPU. Each thread is an event loop with its own JavaScript heap (tens of MB): unlike
 * tritonserver's thread pools, more threads than CPUs only cost memory, so a command line asking for
 * more (tritonserver's qa scripts pass 16) gets one per CPU, and says so.
 */
function threadsOr0(flag: string, count: number, logger: Warn, nodeVersion: string, cpus: number = availableParallelism()): number {
  if (count === 0) return 0;
  if (!reusePortSupported(nodeVersion)) {
    logger.warn({ flag }, `${flag} needs Node.js 22.12 or later (this is v${nodeVersion}): every connection of its door is served on the event loop`);
    return 0;
  }
  if (count <= cpus) return count;
  logger.warn({ flag, cpus }, `${flag}=${count}: ${cpus} threads, one per CPU (more would only cost memory: each thread is an event loop with its own heap)`);
  return cpus;
}
