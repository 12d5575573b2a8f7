/**
 * The planner's metrics door: `GET /metrics` (or `/metrics/`) answers `render()` as Prometheus text;
 * any other method is 405 and any other path 404 (JSON error bodies, as the worker's metrics door).
 * The server enforces the HTTP doors' default limits (header and request timeouts, connection cap).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Logger } from '@switchyard/common';
import { createLimitedHttpServer, isMetricsPath } from '@switchyard/server/internal';

export interface MetricsDoor {
  /** Bind and serve; resolves with the bound port. */
  listen(): Promise<number>;
  /** Stop accepting and close idle connections; resolves once closed. Idempotent. */
  close(): Promise<void>;
}

function send(res: ServerResponse, status: number, contentType: string, body: string): void {
  res.writeHead(status, { 'Content-Type': contentType, 'Content-Length': Buffer.byteLength(body) });
  res.end(body);
}

export function createMetricsDoor(options: { port: number; host: string; render: () => string; logger: Logger }): MetricsDoor {
  const { logger } = options;
  const server = createLimitedHttpServer(
    {},
    (req: IncomingMessage, res: ServerResponse) => {
      if (req.method !== 'GET') return send(res, 405, 'application/json', JSON.stringify({ error: 'Method Not Allowed' }));
      const path = (req.url ?? '').split('?', 1)[0] ?? '';
      if (!isMetricsPath(path)) return send(res, 404, 'application/json', JSON.stringify({ error: 'Not Found' }));
      let text: string;
      try {
        text = options.render();
      } catch (err) {
        logger.error({ err }, 'metrics scrape failed');
        return send(res, 500, 'application/json', JSON.stringify({ error: err instanceof Error ? err.message : String(err) }));
      }
      send(res, 200, 'text/plain; charset=utf-8', text);
    },
    logger,
  );
  return {
    listen: () =>
      new Promise<number>((resolve, reject) => {
        server.once('error', reject);
        server.listen(options.port, options.host, () => {
          server.off('error', reject);
          resolve((server.address() as AddressInfo).port);
        });
      }),
    close: () =>
      new Promise<void>((resolve) => {
        if (!server.listening) return resolve();
        server.close(() => resolve());
        server.closeIdleConnections();
      }),
  };
}
