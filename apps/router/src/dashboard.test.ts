import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { DashboardState } from '@switchyard/cluster';
import { PUSH_CHECK_MS, createRouterDashboard, type RouterDashboard } from './dashboard.js';

let server: http.Server | undefined;
let dashboard: RouterDashboard | undefined;

afterEach(async () => {
  dashboard?.close();
  server?.closeAllConnections();
  await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
  server = dashboard = undefined;
});

/** A feed over a real DashboardState; `version` moves when the test says so. */
function fakeFeed() {
  const state = new DashboardState();
  const feed = {
    version: 0,
    snapshot: () => state.snapshot(Date.now(), { routerId: 'r', mode: 'kv', namespace: 'ns' }, []),
  };
  return { state, feed };
}

async function serve(d: RouterDashboard): Promise<string> {
  const byPath = new Map(d.routes.map((r) => [r.path, r]));
  server = http.createServer((req, res) => void byPath.get(req.url ?? '')!.handle(req, res));
  await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

async function* events(res: Response): AsyncGenerator<{ event: string; data: unknown }> {
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let text = '';
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      text += decoder.decode(value, { stream: true });
      let end: number;
      while ((end = text.indexOf('\n\n')) !== -1) {
        const block = text.slice(0, end);
        text = text.slice(end + 2);
        const event = /^event: (.*)$/m.exec(block)?.[1];
        const data = /^data: (.*)$/m.exec(block)?.[1];
        if (event !== undefined && data !== undefined) yield { event, data: JSON.parse(data) };
      }
    }
  } finally {
    await reader.cancel();
  }
}

describe('router dashboard edge', () => {
  it('serves the page: self-contained, nothing loaded from elsewhere, a CSP that says so', async () => {
    const { feed } = fakeFeed();
    dashboard = createRouterDashboard({ feed });
    const url = await serve(dashboard);
    const res = await fetch(`${url}/dashboard`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('text/html; charset=utf-8');
    expect(res.headers.get('content-security-policy')).toContain("default-src 'none'");
    expect(res.headers.get('content-security-policy')).toContain("connect-src 'self'");
    const html = await res.text();
    expect(html).toContain('new EventSource("dashboard/events")');
    // no external script, style, image or font: no src/href attributes, no url(), no import
    expect(html).not.toMatch(/\b(src|href)\s*=|url\(|@import|https?:\/\/(?!www\.w3\.org\/2000\/svg)/);
    // server values reach the page as text only
    expect(html).not.toContain('innerHTML');
  });

  it('streams a snapshot at once, then one when the feed changes; close ends the stream', async () => {
    const { state, feed } = fakeFeed();
    dashboard = createRouterDashboard({ feed, maxClients: 1 });
    const url = await serve(dashboard);
    const res = await fetch(`${url}/dashboard/events`);
    expect(res.status).toBe(200);
    const it = events(res);
    const first = (await it.next()).value!;
    expect(first.event).toBe('snapshot');
    expect(first.data).toMatchObject({ routerId: 'r', decisions: [], workers: [] });
    // a second client is over the cap
    expect((await fetch(`${url}/dashboard/events`)).status).toBe(503);
    state.decided({ ts: 1, model: 'm', pool: 'decode', mode: 'kv', instanceId: 'abc', overlapBlocks: 2, cost: 1.5, candidates: 2, promptTokens: 40, fallback: false });
    feed.version = 1;
    const started = Date.now();
    const next = (await it.next()).value!;
    expect(Date.now() - started).toBeLessThan(PUSH_CHECK_MS * 4);
    expect((next.data as { decisions: unknown[] }).decisions).toEqual([expect.objectContaining({ instanceId: 'abc', overlapBlocks: 2, cost: 1.5 })]);
    expect(dashboard.clients()).toBe(1);
    dashboard.close();
    expect((await it.next()).done).toBe(true);
  });
});
