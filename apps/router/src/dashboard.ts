/**
 * The router's live dashboard on its HTTP port, read-only:
 *
 *   GET /dashboard         the page (dashboard-page.ts: one static HTML document, inline CSS and JS,
 *                          hand-drawn SVG charts, nothing fetched from elsewhere)
 *   GET /dashboard/events  server-sent events: `snapshot` (a DashboardSnapshot as JSON) at once, then
 *                          whenever something changed (checked every PUSH_CHECK_MS) and at least every
 *                          REFRESH_MS while clients are connected (loads and charts move on their own)
 *
 * Bounded: SseHub's client cap and per-client buffer (a client too far behind is dropped); the
 * snapshot is built once per push for every client, only while someone watches. Both routes are in
 * the `statistics` API group (`--http-restricted-api statistics:...` refuses them like the stats
 * routes; a browser cannot send the header, so a restricted router shows no dashboard). Nothing on
 * them is a secret: no URL, token or credential, only ids, model names and figures.
 *
 * Lifecycle: `close()` before the HTTP door's: it ends the streams, which the door's drain would
 * otherwise wait for.
 */
import type { DashboardFeed } from '@switchyard/cluster';
import { type HttpAppRoute, SseHub } from '@switchyard/server';
import { DASHBOARD_PAGE } from './dashboard-page.js';

/** How often the stream checks for changes while clients are connected. */
export const PUSH_CHECK_MS = 250;
/** A snapshot goes out at least this often while clients are connected. */
export const REFRESH_MS = 2_000;

export interface RouterDashboardOptions {
  readonly feed: Pick<DashboardFeed, 'snapshot' | 'version'>;
  /** Event-stream clients at once; default 16 (SseHub). */
  readonly maxClients?: number;
  /** Bytes one client may leave unsent before it is dropped; default 1 MiB (SseHub). */
  readonly maxBufferedBytes?: number;
}

export interface RouterDashboard {
  readonly routes: readonly HttpAppRoute[];
  /** Connected event-stream clients. */
  clients(): number;
  close(): void;
}

export function createRouterDashboard(o: RouterDashboardOptions): RouterDashboard {
  let timer: NodeJS.Timeout | undefined;
  let sentVersion = -1;
  let sentAt = 0;
  const push = (force: boolean): void => {
    const version = o.feed.version;
    const now = Date.now();
    if (!force && version === sentVersion && now - sentAt < REFRESH_MS) return;
    sentVersion = version;
    sentAt = now;
    hub.send('snapshot', JSON.stringify(o.feed.snapshot()));
  };
  const hub = new SseHub({
    ...(o.maxClients !== undefined ? { maxClients: o.maxClients } : {}),
    ...(o.maxBufferedBytes !== undefined ? { maxBufferedBytes: o.maxBufferedBytes } : {}),
    onClients: (n) => {
      if (n > 0 && timer === undefined) {
        timer = setInterval(() => push(false), PUSH_CHECK_MS);
        timer.unref();
      } else if (n === 0 && timer !== undefined) {
        clearInterval(timer);
        timer = undefined;
      }
    },
  });
  const page = Buffer.from(DASHBOARD_PAGE, 'utf8');
  const routes: HttpAppRoute[] = [
    {
      path: '/dashboard',
      group: 'statistics',
      handle: (req, res) => {
        res.writeHead(200, {
          'Content-Type': 'text/html; charset=utf-8',
          'Content-Length': page.length,
          'Cache-Control': 'no-store',
          'X-Content-Type-Options': 'nosniff',
          // the page loads nothing from anywhere; its own inline script and style only, events from this origin
          'Content-Security-Policy': "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
          'Referrer-Policy': 'no-referrer',
        });
        res.end(req.method === 'HEAD' ? undefined : page);
      },
    },
    {
      path: '/dashboard/events',
      group: 'statistics',
      handle: (req, res) => {
        if (req.method === 'HEAD') {
          res.writeHead(200, { 'Content-Type': 'text/event-stream; charset=utf-8', 'Cache-Control': 'no-store' });
          res.end();
          return;
        }
        hub.accept(req, res, { event: 'snapshot', data: JSON.stringify(o.feed.snapshot()) });
      },
    },
  ];
  return {
    routes,
    clients: () => hub.size,
    close: () => {
      if (timer !== undefined) clearInterval(timer);
      timer = undefined;
      hub.close();
    },
  };
}
