/**
 * The body of a front thread (`worker/front.mjs` runs it): its link to the main thread
 * (front-link.ts) and one door, HTTP (front-http.ts, `--http-thread-count`) or gRPC (front-grpc.ts,
 * `--grpc-infer-thread-count`). It says `listening`
 * with the bound port (or `failed`), and on `close` stops accepting, finishes its requests in flight
 * and lets the thread exit.
 */
import type { MessagePort } from 'node:worker_threads';
import { type Logger, silentLogger } from '@switchyard/common';
import { httpThreadDoor } from './front-http.js';
import { grpcThreadDoor } from './front-grpc.js';
import type { FrontThreadConfig } from './front-config.js';
import { MainLink } from './front-link.js';
import type { LogLevel, ToMain } from './front-messages.js';

/** Serve as a front thread over `port` (the worker's parent port) until told to close. */
export function runFrontThread(config: FrontThreadConfig, port: MessagePort, logger: Logger = silentLogger): void {
  let closing: Promise<void> | undefined;
  const link = new MainLink(port, () => {
    closing ??= door.close().then(() => link.close());
  });
  const d = config.door;
  const door = d.kind === 'http' ? httpThreadDoor(d.http, link, logger) : grpcThreadDoor(d.grpc, link, logger);
  door.listen().then(
    (bound) => link.post({ t: 'listening', port: bound }),
    (e: unknown) => link.post({ t: 'failed', message: e instanceof Error ? e.message : String(e) }),
  );
}

/**
 * A logger that sends its lines to the main thread's logger (a thread has none of its own). Errors
 * travel as their messages; other fields must be structured-cloneable.
 */
export function portLogger(port: MessagePort, bindings: Record<string, unknown> = {}): Logger {
  const at =
    (level: LogLevel) =>
    (a: object | string, msg?: string): void => {
      const fields: Record<string, unknown> = { ...bindings };
      if (typeof a === 'string') msg = a;
      else for (const [k, v] of Object.entries(a)) fields[k] = v instanceof Error ? v.message : v;
      try {
        port.postMessage({ t: 'log', level, fields, msg } satisfies ToMain);
      } catch {
        // a field that cannot be cloned: the line is dropped, never the request
      }
    };
  return { trace: at('trace'), debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error'), child: (b) => portLogger(port, { ...bindings, ...b }) };
}
