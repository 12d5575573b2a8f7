import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import * as net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { SseHub } from './sse-hub.js';

let server: http.Server | undefined;

afterEach(async () => {
  server?.closeAllConnections();
  await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
  server = undefined;
});

async function serve(hub: SseHub, first?: { event: string; data: string }): Promise<string> {
  server = http.createServer((req, res) => hub.accept(req, res, first));
  await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
}

/** Reads an event stream until `count` events arrived; returns them. */
async function readEvents(res: Response, count: number, stop: (e: { event: string }) => boolean = () => false): Promise<{ event: string; data: string }[]> {
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let text = '';
  const events: { event: string; data: string }[] = [];
  while (events.length < count) {
    const { value, done } = await reader.read();
    if (done) break;
    text += decoder.decode(value, { stream: true });
    let end: number;
    while ((end = text.indexOf('\n\n')) !== -1) {
      const block = text.slice(0, end);
      text = text.slice(end + 2);
      const event = /^event: (.*)$/m.exec(block)?.[1];
      const data = /^data: (.*)$/m.exec(block)?.[1];
      if (event !== undefined && data !== undefined) events.push({ event, data });
    }
    if (events.length > 0 && stop(events.at(-1)!)) break;
  }
  await reader.cancel();
  return events;
}

const until = async (cond: () => boolean, ms = 5000): Promise<void> => {
  const deadline = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 10));
  }
};

describe('SseHub', () => {
  it('streams the first event to a new client, then every broadcast', async () => {
    const hub = new SseHub();
    const url = await serve(hub, { event: 'snapshot', data: '{"n":0}' });
    const res = await fetch(url);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('text/event-stream; charset=utf-8');
    expect(res.headers.get('cache-control')).toBe('no-store');
    await until(() => hub.size === 1);
    hub.send('snapshot', '{"n":1}');
    hub.send('other', '"x"');
    expect(await readEvents(res, 3)).toEqual([
      { event: 'snapshot', data: '{"n":0}' },
      { event: 'snapshot', data: '{"n":1}' },
      { event: 'other', data: '"x"' },
    ]);
    await until(() => hub.size === 0);
    hub.close();
  });

  it('answers 503 past maxClients, and after close; close ends the open streams', async () => {
    const counts: number[] = [];
    const hub = new SseHub({ maxClients: 2, onClients: (n) => counts.push(n) });
    const url = await serve(hub);
    const a = await fetch(url);
    const b = await fetch(url);
    const c = await fetch(url);
    expect([a.status, b.status, c.status]).toEqual([200, 200, 503]);
    expect(c.headers.get('retry-after')).toBe('5');
    expect(((await c.json()) as { error: string }).error).toBe('too many event stream clients (at most 2)');
    expect(hub.size).toBe(2);
    hub.close();
    expect(hub.size).toBe(0);
    // the streams end (the body reads to its end)
    await a.text();
    await b.text();
    const d = await fetch(url);
    expect(d.status).toBe(503);
    expect(((await d.json()) as { error: string }).error).toBe('the event stream is closing');
    expect(counts.at(-1)).toBe(0);
  });

  it('drops a client that does not read once maxBufferedBytes are waiting, and keeps serving the others', async () => {
    const hub = new SseHub({ maxBufferedBytes: 64 * 1024 });
    const url = new URL(await serve(hub));
    // a client that sends its request and never reads a byte of the answer
    const stalled = net.connect(Number(url.port), url.hostname);
    stalled.write(`GET / HTTP/1.1\r\nHost: ${url.host}\r\n\r\n`);
    stalled.pause();
    await until(() => hub.size === 1);
    const reader = await fetch(url);
    await until(() => hub.size === 2);
    const chunk = JSON.stringify('x'.repeat(32 * 1024));
    // far more than the socket buffers hold: the stalled client's backlog passes the bound
    for (let i = 0; i < 400 && hub.dropped === 0; i++) {
      hub.send('big', chunk);
      await new Promise((r) => setImmediate(r));
    }
    expect(hub.dropped).toBe(1);
    expect(hub.size).toBe(1);
    hub.send('small', '1');
    const events = await readEvents(reader, Infinity, (e) => e.event === 'small');
    expect(events.at(-1)).toEqual({ event: 'small', data: '1' });
    stalled.destroy();
    hub.close();
  });

  it('refuses an event with a line break, which would end its frame early, and options out of range', () => {
    const hub = new SseHub();
    expect(() => hub.send('x', 'a\nb')).toThrow(RangeError);
    expect(() => hub.send('x\r', 'a')).toThrow(RangeError);
    expect(() => new SseHub({ maxClients: 0 })).toThrow(RangeError);
    expect(() => new SseHub({ maxBufferedBytes: 0 })).toThrow(RangeError);
  });
});
