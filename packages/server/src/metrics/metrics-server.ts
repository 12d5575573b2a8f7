/**
 * The metrics front door (Triton's port 8002): `GET /metrics` (or `/metrics/`) answers the
 * Prometheus text of `TritonMetrics` (then the `extraMetrics` text, if any) with `Content-Type:
 * text/plain; charset=utf-8`. Any other method is 405 and any other path 404, with Triton's JSON
 * error bodies. The query string is ignored.
 */
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { silentLogger, type Logger } from '@switchyard/common';
import type { InferenceEngine } from '@switchyard/engine';
import { createLimitedHttpServer, type HttpLimits } from '../http/http-limits.js';
import { IntervalCpuSampler, ProcCpuSampler, type CpuMetricsSource } from './cpu-stats.js';
import { TritonMetrics, type GpuMetricsSource, type MetricsSettings } from './triton-metrics.js';

export const DEFAULT_METRICS_PORT = 8002;
export const DEFAULT_METRICS_HOST = '0.0.0.0';

/** The limits (`http-limits.ts`) of the HTTP door apply here too: a scraper is an HTTP client. */
export interface MetricsServerOptions extends HttpLimits {
  engine: InferenceEngine;
  /** 0 picks a free port (listen() returns it). */
  port: number;
  /** Default '0.0.0.0' (Triton's `--metrics-address` default). */
  host?: string;
  /** Host CPU/memory source; default reads /proc. null omits the nv_cpu_* families. */
  cpu?: CpuMetricsSource | null;
  /** GPU figures (the engine's `GpuProbe`); absent or null: no nv_gpu_* families, as on a host without GPUs. */
  gpu?: GpuMetricsSource | null;
  /**
   * `--metrics-interval-ms`: sample the CPU source every this many ms and answer scrapes with the
   * latest sample; undefined samples at each scrape.
   */
  cpuIntervalMs?: number;
  /** `--metrics-config` settings; default DEFAULT_METRICS_SETTINGS. */
  settings?: MetricsSettings;
  /**
   * More families owned by the caller (e.g. the router's own), as Prometheus text appended after the
   * engine's, called once per scrape. It must not repeat a family the engine already renders. A
   * throw fails the scrape with 500.
   */
  extraMetrics?: () => string | Promise<string>;
  logger?: Logger;
}

export interface MetricsFrontDoor {
  /** Bind and start serving; resolves with the bound port. */
  listen(): Promise<number>;
  /** Stop accepting connections and close idle ones; resolves when the server is closed. */
  close(): Promise<void>;
}

const METRICS_PATH = /^\/metrics\/?$/;

/** The path (query string removed) is the one a metrics door serves: `/metrics` or `/metrics/`. */
export function isMetricsPath(path: string): boolean {
  return METRICS_PATH.test(path);
}

function sendJsonError(res: ServerResponse, status: number, message: string): void {
  const body = JSON.stringify({ error: message });
  res.writeHead(status, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) });
  res.end(body);
}

export function createMetricsServer(options: MetricsServerOptions): MetricsFrontDoor {
  const host = options.host ?? DEFAULT_METRICS_HOST;
  const logger = (options.logger ?? silentLogger).child({ component: 'metrics' });
  const source = options.cpu === undefined ? new ProcCpuSampler() : options.cpu;
  const interval = source !== null && options.cpuIntervalMs !== undefined ? new IntervalCpuSampler(source, options.cpuIntervalMs) : undefined;
  const metrics = new TritonMetrics({ engine: options.engine, cpu: interval ?? source, gpu: options.gpu ?? null, ...(options.settings !== undefined ? { settings: options.settings } : {}) });

  const handle = (req: IncomingMessage, res: ServerResponse): void => {
    if (req.method !== 'GET') {
      sendJsonError(res, 405, 'Method Not Allowed');
      return;
    }
    const path = (req.url ?? '').split('?', 1)[0] ?? '';
    if (!isMetricsPath(path)) {
      sendJsonError(res, 404, 'Not Found');
      return;
    }
    const scrape = async (): Promise<string> => {
      const text = await metrics.render();
      if (options.extraMetrics === undefined) return text;
      const extra = await options.extraMetrics();
      return extra === '' || extra.endsWith('\n') ? text + extra : `${text}${extra}\n`;
    };
    scrape().then(
      (text) => {
        res.writeHead(200, { 'Content-Type': 'text/plain; charset=utf-8', 'Content-Length': Buffer.byteLength(text) });
        res.end(text);
      },
      (e: unknown) => {
        logger.error({ err: e }, 'metrics scrape failed');
        sendJsonError(res, 500, e instanceof Error ? e.message : String(e));
      },
    );
  };

  const server: Server = createLimitedHttpServer(options, handle, logger);
  return {
    listen: () =>
      new Promise<number>((resolve, reject) => {
        server.once('error', reject);
        server.listen(options.port, host, () => {
          server.off('error', reject);
          const port = (server.address() as AddressInfo).port;
          logger.info({ port }, 'metrics server listening');
          resolve(port);
        });
      }),
    close: () =>
      new Promise<void>((resolve) => {
        interval?.stop();
        if (!server.listening) {
          resolve();
          return;
        }
        server.close(() => resolve());
        server.closeIdleConnections();
      }),
  };
}
