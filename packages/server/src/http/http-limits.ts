/**
 * The limits of every node:http door (KServe/OpenAI, metrics): how long a client may take to send
 * a request and how many connections may be open. node:http enforces them itself: a request whose
 * headers, or whole request with its body, take longer than `headerTimeoutMs` / `requestTimeoutMs`
 * is answered 408 (with a JSON error body, as every request node:http refuses: `http-client-error.ts`)
 * and its connection closed; a connection beyond `maxConnections` is closed as
 * soon as it is accepted, while the others are served.
 */
import * as http from 'node:http';
import type { Logger } from '@switchyard/common';
import { answerClientErrors } from './http-client-error.js';

export interface HttpLimits {
  /** Longest wait for a request's headers (default DEFAULT_HTTP_HEADER_TIMEOUT_MS); 0 = none. At most requestTimeoutMs. */
  headerTimeoutMs?: number;
  /** Longest wait for a whole request, headers and body (default DEFAULT_HTTP_REQUEST_TIMEOUT_MS); 0 = none. */
  requestTimeoutMs?: number;
  /** Most open connections (default DEFAULT_HTTP_MAX_CONNECTIONS); 0 = no limit. */
  maxConnections?: number;
}

/** How long a client may take to send a request's headers. */
export const DEFAULT_HTTP_HEADER_TIMEOUT_MS = 30_000;
/**
 * How long a client may take to send a whole request, body included: a 64 MiB body needs about
 * 4.5 Mbit/s. Responses (streams too) are not limited.
 */
export const DEFAULT_HTTP_REQUEST_TIMEOUT_MS = 120_000;
/** Most connections at once; HTTP/1.1 clients open one per concurrent request. */
export const DEFAULT_HTTP_MAX_CONNECTIONS = 4096;

function integerOption(name: string, value: number, min: number): number {
  if (!Number.isSafeInteger(value) || value < min) throw new RangeError(`${name} must be an integer >= ${min}, got ${value}`);
  return value;
}

/** A node:http server enforcing `limits` (validated: a bad value is the caller's bug, a RangeError). */
export function createLimitedHttpServer(limits: HttpLimits, handler: http.RequestListener, logger: Logger): http.Server {
  const headersTimeout = integerOption('headerTimeoutMs', limits.headerTimeoutMs ?? DEFAULT_HTTP_HEADER_TIMEOUT_MS, 0);
  const requestTimeout = integerOption('requestTimeoutMs', limits.requestTimeoutMs ?? DEFAULT_HTTP_REQUEST_TIMEOUT_MS, 0);
  const maxConnections = integerOption('maxConnections', limits.maxConnections ?? DEFAULT_HTTP_MAX_CONNECTIONS, 0);
  if (headersTimeout > 0 && requestTimeout > 0 && headersTimeout > requestTimeout) {
    throw new RangeError(`headerTimeoutMs (${headersTimeout}) must not exceed requestTimeoutMs (${requestTimeout})`);
  }
  const timeouts = [headersTimeout, requestTimeout].filter((t) => t > 0);
  const server = http.createServer({
    headersTimeout,
    requestTimeout,
    // node checks both timeouts on this period (30 s by default): a quarter of the shortest one
    ...(timeouts.length > 0 ? { connectionsCheckingInterval: Math.max(100, Math.min(30_000, Math.floor(Math.min(...timeouts) / 4))) } : {}),
  });
  // 408 / 431 / parse errors answered with a JSON body (`http-client-error.ts`).
  server.on('request', answerClientErrors(server, handler, logger));
  if (maxConnections > 0) server.maxConnections = maxConnections;
  server.on('drop', (d?: { remoteAddress?: string }) => logger.debug({ remoteAddress: d?.remoteAddress, maxConnections }, 'HTTP connection refused: connection limit reached'));
  return server;
}
