import * as http from 'node:http';
import * as zlib from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ServerSettings } from '../settings.js';
import { TraceManager } from '../trace/trace-manager.js';
import { DEFAULT_TRACE_CONFIG, initialTraceSettings } from '../trace/trace-config.js';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { silentLogger } from '@switchyard/common';
import { SharedMemoryManager } from '../shared-memory.js';
import { FakeEngine } from '../test-support/fake-engine.js';
import { i32, range, simpleJson } from '../test-support/simple-requests.js';
import { compileHeaderForwardPattern } from '../header-forward.js';
import { accessPolicy } from '../access-control.js';
import { type HttpFrontDoor, createHttpServer } from '../http/http-server.js';
import { type RawResponse, expectContinueAnswer, rawRequest } from '../http/http-test-client.js';
import { reusePortSupported } from './front-host.js';

const LIMIT = 64 * 1024;

function simpleBinary(outputs: object[]): { body: Buffer; headers: Record<string, string> } {
  const json = Buffer.from(
    JSON.stringify({
      inputs: [
        { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], parameters: { binary_data_size: 64 } },
        { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], parameters: { binary_data_size: 64 } },
      ],
      outputs,
    }),
  );
  return { body: Buffer.concat([json, i32(range(16, (i) => i * 3)), i32(range(16, () => 2))]), headers: { 'Inference-Header-Content-Length': String(json.byteLength) } };
}

/** An infer request declaring `length` bytes with `Expect: 100-continue`: what it is answered before sending any. */
const early = (port: number, length: number) => expectContinueAnswer(port, '/v2/models/simple/infer', { 'Content-Length': String(length) });

/** What a client can tell two answers apart by (Date and connection bookkeeping aside). */
function visible(r: RawResponse): object {
  const h = r.headers;
  return {
    status: r.status,
    contentType: h['content-type'],
    headerLength: h['inference-header-content-length'],
    contentEncoding: h['content-encoding'],
    connection: h['connection'],
    allow: h['allow'],
    body: h['content-encoding'] === 'gzip' ? zlib.gunzipSync(r.body).toString('latin1') : r.body.toString('latin1'),
  };
}

describe.skipIf(!reusePortSupported())('HTTP front threads (--http-thread-count)', () => {
  const engine = new FakeEngine();
  let direct: HttpFrontDoor;
  let threaded: HttpFrontDoor;
  let directPort: number;
  let threadedPort: number;
  const door = (threads: number) =>
    createHttpServer({
      engine,
      shm: new SharedMemoryManager({ enabled: false }),
      settings: new ServerSettings(),
      port: 0,
      host: '127.0.0.1',
      maxInputSize: LIMIT,
      headerForwardPattern: compileHeaderForwardPattern('^x-tenant$'),
      threads,
    });

  beforeAll(async () => {
    direct = door(0);
    threaded = door(2);
    directPort = await direct.listen();
    threadedPort = await threaded.listen();
  });
  afterAll(async () => {
    await threaded.close();
    await direct.close();
  });

  /** The same request to the door without threads and to the one with, answered alike. */
  async function same(method: string, path: string, options: Parameters<typeof rawRequest>[3] = {}): Promise<RawResponse> {
    const a = await rawRequest(directPort, method, path, options);
    const b = await rawRequest(threadedPort, method, path, options);
    expect(visible(b)).toEqual(visible(a));
    return b;
  }

  it('serves infer requests on the threads: JSON and binary, with the same bytes as the event loop', async () => {
    const before = engine.configReads;
    const json = await same('POST', '/v2/models/simple/infer', { body: simpleJson({ outputs: [{ name: 'OUTPUT0' }] }) });
    expect(json.status).toBe(200);
    expect(json.text).toContain('"id":"r1"');
    const bin = simpleBinary([{ name: 'OUTPUT0', parameters: { binary_data: true } }, { name: 'OUTPUT1', parameters: { binary_data: false } }]);
    expect((await same('POST', '/v2/models/simple/infer', bin)).status).toBe(200);
    expect((await same('POST', '/v2/models/simple/versions/1/infer', { body: simpleJson({ parameters: { binary_data_output: true } }) })).status).toBe(200);
    expect((await same('POST', '/v2/models/identity/infer', { body: JSON.stringify({ inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [3], data: [0.1, 1e-7, -2.5] }] }) })).status).toBe(200);
    const direct4 = engine.configReads - before;
    // the event loop's handler reads the model's config once per request; a thread answers from its state
    for (let i = 0; i < 5; i++) expect((await rawRequest(threadedPort, 'POST', '/v2/models/simple/infer', { body: simpleJson() })).status).toBe(200);
    expect(engine.configReads - before).toBe(direct4);
    expect(direct4).toBe(4);
  });

  it('answers infer errors as the event loop does: its own and the engine\'s', async () => {
    const cases: Array<[string, string | Buffer, Record<string, string>?]> = [
      ['/v2/models/nope/infer', simpleJson()],
      ['/v2/models/simple/versions/7/infer', simpleJson()],
      ['/v2/models/simple/versions/99999999999999999999/infer', simpleJson()],
      ['/v2/models/simple/infer', '{"inputs": ['],
      ['/v2/models/simple/infer', simpleJson(), { 'Inference-Header-Content-Length': '999999' }],
      ['/v2/models/simple/infer', JSON.stringify({ inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1, 16], data: [1] }] })],
      ['/v2/models/repeat/infer', JSON.stringify({ inputs: [{ name: 'IN', datatype: 'INT32', shape: [1], data: [1] }] })],
      ['/v2/models/busy/infer', JSON.stringify({ inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1], data: [1] }] })],
      ['/v2/models/fail/infer', JSON.stringify({ inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1], data: [1] }] })],
      ['/v2/models/identity/infer', JSON.stringify({ inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1], data: [1] }], outputs: [{ name: 'OUTPUT0', parameters: { classification: 1 } }] })],
    ];
    const statuses = [];
    for (const [path, body, headers] of cases) statuses.push((await same('POST', path, { body, headers: headers ?? {} })).status);
    expect(statuses.every((s) => s >= 400)).toBe(false); // classification is served (by the main thread)
    expect(statuses.slice(0, -1).every((s) => s >= 400)).toBe(true);
  });

  it('hands every other route to the main thread: control, streams, 404, 405, compression', async () => {
    for (const path of ['/v2/health/live', '/v2/health/ready', '/v2', '/v2/models/simple', '/v2/models/simple/config', '/v2/models/simple/ready', '/v2/models/stats', '/v2/nowhere']) {
      await same('GET', path);
    }
    await same('POST', '/v2/repository/index', { body: '{}' });
    await same('DELETE', '/v2/models/simple/infer');
    await same('GET', '/v2/models/simple/infer');
    const stream = await same('POST', '/v2/models/repeat/generate_stream', { body: '{"IN":[4,5,6]}' });
    expect(stream.text.split('data: ').length).toBe(4);
    // a gzip body goes to the main thread; a gzip answer is compressed on the thread
    await same('POST', '/v2/models/simple/infer', { body: zlib.gzipSync(simpleJson()), headers: { 'Content-Encoding': 'gzip' } });
    const gz = await same('POST', '/v2/models/simple/infer', { body: simpleJson(), headers: { 'Accept-Encoding': 'gzip' } });
    expect(gz.headers['content-encoding']).toBe('gzip');
  });

  it('refuses an oversized body as the event loop does, closing the connection', async () => {
    const big = simpleJson({ pad: 'x'.repeat(LIMIT) });
    const r = await same('POST', '/v2/models/simple/infer', { body: big });
    expect(r.status).toBe(400);
    expect(r.headers['connection']).toBe('close');
    // Expect: 100-continue: refused before the body is sent
    const [a, b] = [await early(directPort, 1 << 30), await early(threadedPort, 1 << 30)];
    expect(b).toEqual(a);
    expect(b.status).toBe(400);
  });

  it('forwards matching headers as request parameters', async () => {
    await rawRequest(threadedPort, 'POST', '/v2/models/simple/infer', { body: simpleJson({ id: 'fwd' }), headers: { 'X-Tenant': 'acme', 'X-Other': 'no' } });
    const sent = engine.lastCall('submit')?.[0];
    expect(sent?.id).toBe('fwd');
    expect(sent?.parameters).toMatchObject({ 'X-Tenant': 'acme' });
    expect(sent?.parameters).not.toHaveProperty('X-Other');
  });

  it('cancels the engine request of a client that goes away', async () => {
    const aborted = engine.abortedRequests;
    await new Promise<void>((resolve) => {
      const req = http.request({ host: '127.0.0.1', port: threadedPort, method: 'POST', path: '/v2/models/slow/infer', agent: false });
      req.on('error', () => resolve());
      req.end(JSON.stringify({ id: 'gone', inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1], data: [1] }] }));
      const wait = setInterval(() => {
        if (engine.signals.has('gone')) {
          clearInterval(wait);
          req.destroy();
        }
      }, 5);
    });
    await expect.poll(() => engine.abortedRequests).toBe(aborted + 1);
    await expect.poll(() => engine.signals.has('gone')).toBe(false);
  });
});

describe.skipIf(!reusePortSupported())('HTTP front threads: restricted APIs', () => {
  it('check the restriction as the event loop does, before the body (Expect) and after', async () => {
    const engine = new FakeEngine();
    const access = accessPolicy({ httpRestrictedApi: ['inference:infer-key=s3cret'], grpcRestrictedProtocol: [] });
    const door = (threads: number) =>
      createHttpServer({ engine, shm: new SharedMemoryManager({ enabled: false }), settings: new ServerSettings(), port: 0, host: '127.0.0.1', access, threads });
    const [a, b] = [door(0), door(2)];
    const ports = [await a.listen(), await b.listen()] as const;
    try {
      for (const [key, status] of [[undefined, 403], ['wrong', 403], ['s3cret', 200]] as const) {
        const headers: Record<string, string> = key === undefined ? {} : { 'infer-key': key };
        const [x, y] = [await rawRequest(ports[0], 'POST', '/v2/models/simple/infer', { body: simpleJson(), headers }), await rawRequest(ports[1], 'POST', '/v2/models/simple/infer', { body: simpleJson(), headers })];
        expect(visible(y)).toEqual(visible(x));
        expect(x.status).toBe(status);
      }
      // refused before the body is asked for
      const [x, y] = [await early(ports[0], 64), await early(ports[1], 64)];
      expect(y).toEqual(x);
      expect(x.status).toBe(403);
    } finally {
      await b.close();
      await a.close();
    }
  });
});

describe.skipIf(!reusePortSupported())('HTTP front threads: tracing', () => {
  it('hand a model to the main thread once its trace level is not OFF, and take it back when it is again', async () => {
    const engine = new FakeEngine();
    const dir = mkdtempSync(join(tmpdir(), 'switchyard-front-trace-'));
    const config = { ...DEFAULT_TRACE_CONFIG, mode: 'triton' as const, file: join(dir, 'trace.json') };
    const settings = new ServerSettings(undefined, initialTraceSettings(config));
    const tracer = new TraceManager(config, settings, silentLogger);
    const door = createHttpServer({ engine, shm: new SharedMemoryManager({ enabled: false }), settings, tracer, port: 0, host: '127.0.0.1', threads: 1 });
    const port = await door.listen();
    // each request the main thread's door handles reads the model's config once; a thread reads none
    const reads = async (): Promise<number> => {
      const before = engine.configReads;
      expect((await rawRequest(port, 'POST', '/v2/models/simple/infer', { body: simpleJson() })).status).toBe(200);
      return engine.configReads - before;
    };
    try {
      expect(await reads()).toBe(0);
      settings.updateTraceSettings('simple', { trace_level: ['TIMESTAMPS'] });
      await expect.poll(reads).toBe(1);
      settings.updateTraceSettings('simple', { trace_level: ['OFF'] });
      await expect.poll(reads).toBe(0);
    } finally {
      await door.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe.skipIf(!reusePortSupported())('HTTP front threads: an engine whose models cannot be listed', () => {
  it('still serves: the threads hand every request to the main thread', async () => {
    const engine = new FakeEngine();
    engine.repositoryIndex = async () => {
      throw new Error('shutting down');
    };
    const door = createHttpServer({ engine, shm: new SharedMemoryManager({ enabled: false }), settings: new ServerSettings(), port: 0, host: '127.0.0.1', threads: 1 });
    const port = await door.listen();
    try {
      const before = engine.configReads;
      expect((await rawRequest(port, 'POST', '/v2/models/simple/infer', { body: simpleJson() })).status).toBe(200);
      expect(engine.configReads - before).toBe(1);
    } finally {
      await door.close();
    }
  });
});

describe.skipIf(!reusePortSupported())('HTTP front threads: closing', () => {
  it('finish the requests in flight, then stop listening', async () => {
    const engine = new FakeEngine();
    const door = createHttpServer({ engine, shm: new SharedMemoryManager({ enabled: false }), settings: new ServerSettings(), port: 0, host: '127.0.0.1', threads: 2 });
    const port = await door.listen();
    // one served by a thread, one relayed to the main thread (generate), both in the engine when the door closes
    const slow = rawRequest(port, 'POST', '/v2/models/simple/infer', { body: simpleJson({ parameters: { delay_ms: 300 } }) });
    const relayed = rawRequest(port, 'POST', '/v2/models/simple/generate', { body: JSON.stringify({ INPUT0: range(16, (i) => i), INPUT1: range(16, () => 1), parameters: { delay_ms: 300 } }) });
    await expect.poll(() => engine.calls.filter((c) => c.method === 'submit').length).toBe(2);
    await door.close();
    expect((await slow).status).toBe(200);
    const r = await relayed;
    expect(r.status).toBe(200);
    expect(r.json()).toMatchObject({ model_name: 'simple', OUTPUT0: range(16, (i) => i + 1) });
    await expect(rawRequest(port, 'GET', '/v2/health/live')).rejects.toThrow(/ECONNREFUSED/);
  });
});

describe('reusePortSupported', () => {
  it('is true from Node.js 22.12 and 23.1 on', () => {
    expect(['20.20.2', '22.11.0', '23.0.0'].map((v) => reusePortSupported(v))).toEqual([false, false, false]);
    expect(['22.12.0', '23.1.0', '24.0.0', '26.10.0'].map((v) => reusePortSupported(v))).toEqual([true, true, true, true]);
  });
});
