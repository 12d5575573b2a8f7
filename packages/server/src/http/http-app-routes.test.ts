import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseRestrictions } from '../access-control.js';
import { ServerSettings } from '../settings.js';
import { SharedMemoryManager } from '../shared-memory.js';
import { FakeEngine } from '../test-support/fake-engine.js';
import { type HttpAppRoute, type HttpFrontDoor, createHttpServer } from './http-server.js';
import { rawRequest } from './http-test-client.js';

describe('HTTP front door: the process own routes (appRoutes)', () => {
  const hits: string[] = [];
  const route = (path: string, group: HttpAppRoute['group']): HttpAppRoute => ({
    path,
    group,
    handle: (req, res) => {
      hits.push(`${req.method} ${path}`);
      res.writeHead(200, { 'Content-Type': 'text/plain' });
      res.end(req.method === 'HEAD' ? undefined : `page ${path}`);
    },
  });
  const doors: HttpFrontDoor[] = [];
  let open: number;
  let restricted: number;

  beforeAll(async () => {
    const make = (restrictions: string[]) =>
      createHttpServer({
        engine: new FakeEngine(),
        shm: new SharedMemoryManager({ enabled: false }),
        settings: new ServerSettings(),
        port: 0,
        host: '127.0.0.1',
        access: { http: parseRestrictions(restrictions, 'http-restricted-api'), grpc: new Map() },
        // '/v2/health/live' is a KServe route: an app route never shadows one
        appRoutes: [route('/dashboard', 'statistics'), route('/v2/health/live', 'statistics')],
      });
    doors.push(make([]), make(['statistics:admin-key=s3cret']));
    [open, restricted] = await Promise.all(doors.map((d) => d.listen())) as [number, number];
  });
  afterAll(async () => {
    await Promise.all(doors.map((d) => d.close()));
  });

  it('serves GET and HEAD on the exact path, the query string ignored', async () => {
    const r = await rawRequest(open, 'GET', '/dashboard?x=1');
    expect([r.status, r.body.toString()]).toEqual([200, 'page /dashboard']);
    expect((await rawRequest(open, 'HEAD', '/dashboard')).status).toBe(200);
    expect((await rawRequest(open, 'GET', '/dashboard/')).status).toBe(404);
    expect((await rawRequest(open, 'GET', '/dashboardx')).status).toBe(404);
  });

  it('405 for other methods, with Allow', async () => {
    const r = await rawRequest(open, 'POST', '/dashboard', { body: '{}' });
    expect(r.status).toBe(405);
    expect(r.headers['allow']).toBe('GET, HEAD');
    expect(r.json()).toEqual({ error: 'Method Not Allowed' });
  });

  it('never shadows a KServe route', async () => {
    hits.length = 0;
    const r = await rawRequest(open, 'GET', '/v2/health/live');
    expect([r.status, r.body.byteLength]).toEqual([200, 0]);
    expect(hits).toEqual([]);
  });

  it("checks the route's group restriction first", async () => {
    hits.length = 0;
    const refused = await rawRequest(restricted, 'GET', '/dashboard');
    expect(refused.status).toBe(403);
    expect(refused.json()).toEqual({ error: "This API is restricted, expecting header 'admin-key'" });
    expect(hits).toEqual([]);
    const ok = await rawRequest(restricted, 'GET', '/dashboard', { headers: { 'admin-key': 's3cret' } });
    expect(ok.status).toBe(200);
  });
});
