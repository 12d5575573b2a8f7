import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client, Metadata, type ServiceError, credentials } from '@grpc/grpc-js';
import { accessPolicy } from '../access-control.js';
import { createGrpcServer, type GrpcFrontDoor } from '../grpc/grpc-server.js';
import { createTestClient, type TestClient } from '../grpc/grpc-test-client.js';
import { compileHeaderForwardPattern } from '../header-forward.js';
import { ServerSettings } from '../settings.js';
import { SharedMemoryManager } from '../shared-memory.js';
import { FakeEngine } from '../test-support/fake-engine.js';
import { i32, range } from '../test-support/simple-requests.js';
import { reusePortSupported } from './front-host.js';

const simple = (extra: object = {}) => ({
  model_name: 'simple',
  id: 'g1',
  inputs: [
    { name: 'INPUT0', datatype: 'INT32', shape: [1, 16] },
    { name: 'INPUT1', datatype: 'INT32', shape: [1, 16] },
  ],
  raw_input_contents: [i32(range(16, (i) => i)), i32(range(16, () => 2))],
  ...extra,
});

const modelOf = (m: unknown) => (m as { infer_response?: { model_name?: string } }).infer_response?.model_name ?? '';

/** A call's outcome as a client sees it: the response, or the status code and details. */
const outcome = (p: Promise<unknown>) =>
  p.then(
    (response) => ({ response }),
    (e: ServiceError) => ({ code: e.code, details: e.details }),
  );

describe.skipIf(!reusePortSupported())('gRPC front threads (--grpc-infer-thread-count)', () => {
  const engine = new FakeEngine();
  const doors: GrpcFrontDoor[] = [];
  let direct: TestClient;
  let threaded: TestClient;
  let directPort = 0;
  let threadedPort = 0;
  const door = async (threads: number) => {
    const d = createGrpcServer({
      engine,
      shm: new SharedMemoryManager({ enabled: false }),
      settings: new ServerSettings(),
      port: 0,
      host: '127.0.0.1',
      shutdownTimeoutMs: 2000,
      headerForwardPattern: compileHeaderForwardPattern('^x-tenant$'),
      threads,
    });
    doors.push(d);
    const port = await d.listen();
    return { port, client: createTestClient(port) };
  };

  beforeAll(async () => {
    ({ port: directPort, client: direct } = await door(0));
    ({ port: threadedPort, client: threaded } = await door(2));
  });
  afterAll(async () => {
    direct.close();
    threaded.close();
    await Promise.all(doors.map((d) => d.close()));
  });

  /** The same call through both doors, answered alike. */
  async function same(method: string, request: object = {}) {
    const a = await outcome(direct.call(method, request));
    const b = await outcome(threaded.call(method, request));
    expect(b).toEqual(a);
    return b;
  }

  it('serves ModelInfer on the threads with the same answer as the event loop', async () => {
    const before = engine.configReads;
    const r = (await same('ModelInfer', simple())) as { response: { raw_output_contents: Buffer[]; id: string } };
    expect(r.response.id).toBe('g1');
    await same('ModelInfer', simple({ model_version: '1', outputs: [{ name: 'OUTPUT1' }] }));
    const direct2 = engine.configReads - before;
    for (let i = 0; i < 5; i++) await threaded.call('ModelInfer', simple());
    // the event loop's handler looks the model up per call; a thread answers from its state
    expect(engine.configReads - before).toBe(direct2);
    expect(direct2).toBe(2);
  });

  it('answers ModelInfer errors as the event loop does, its own and the engine\'s', async () => {
    const fp32 = (model: string, extra: object = {}) => ({ model_name: model, inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1] }], raw_input_contents: [Buffer.alloc(4)], ...extra });
    const outcomes = [];
    for (const request of [
      simple({ model_name: 'nope' }),
      simple({ model_version: '7' }),
      simple({ model_version: 'x' }),
      simple({ raw_input_contents: [i32([1])] }),
      { model_name: 'repeat', inputs: [{ name: 'IN', datatype: 'INT32', shape: [1] }], raw_input_contents: [i32([1])] },
      fp32('busy'),
      fp32('fail'),
      fp32('identity', { outputs: [{ name: 'OUTPUT0', parameters: { classification: { int64_param: '1' } } }] }),
    ]) {
      outcomes.push(await same('ModelInfer', request));
    }
    expect(outcomes.slice(0, -1).every((o) => 'code' in o)).toBe(true);
  });

  it('answers every other call as the event loop does: relayed calls, health and streams', async () => {
    await same('ServerMetadata');
    await same('ModelMetadata', { name: 'simple' });
    await same('ModelConfig', { name: 'simple' });
    await same('ModelReady', { name: 'nope' });
    await same('RepositoryIndex', { ready: true });
    await same('SystemSharedMemoryStatus', {});
    expect(await threaded.health()).toEqual(await direct.health());
    const stream = async (client: TestClient) => {
      const s = client.stream();
      const got: unknown[] = [];
      s.on('data', (m) => got.push(m));
      const done = new Promise<void>((resolve) => s.on('end', () => resolve()));
      s.write({ model_name: 'repeat', id: 'st', inputs: [{ name: 'IN', datatype: 'INT32', shape: [3] }], raw_input_contents: [i32([4, 5, 6])] });
      s.write({ model_name: 'nope', id: 'bad', inputs: [] });
      s.end();
      await done;
      return got;
    };
    // a decoupled model's responses may come before or after a later request's error (both doors
    // interleave them as they come): the same messages, each model's in its order
    const byModel = (got: unknown[]) => [...got].sort((x, y) => modelOf(x).localeCompare(modelOf(y)));
    const [a, b] = [await stream(direct), await stream(threaded)];
    expect(byModel(b)).toEqual(byModel(a));
    expect(b.length).toBe(4);
  });

  it('serves a pipelined stream past its window and in-flight cap, in order, errors in place', async () => {
    const run = async (client: TestClient) => {
      const s = client.stream();
      const got: unknown[] = [];
      s.on('data', (m) => got.push(m));
      const done = new Promise<void>((resolve, reject) => {
        s.on('end', () => resolve());
        s.on('error', reject);
      });
      for (let i = 0; i < 300; i++) s.write(i % 50 === 7 ? { model_name: 'nope', id: `n${i}`, inputs: [] } : simple({ id: `s${i}` }));
      s.end();
      await done;
      return got;
    };
    const [a, b] = [await run(direct), await run(threaded)];
    expect(b).toEqual(a);
    expect(b.length).toBe(300);
    expect(b.map((m) => (m as { infer_response?: { id?: string } }).infer_response?.id)).toEqual(Array.from({ length: 300 }, (_, i) => (i % 50 === 7 ? `n${i}` : `s${i}`)));
  });

  it('ends a stream whose message cannot be parsed with the status the event loop sends', async () => {
    const raw = async (port: number) => {
      const client = new Client(`127.0.0.1:${port}`, credentials.createInsecure());
      try {
        const call = client.makeBidiStreamRequest('/inference.GRPCInferenceService/ModelStreamInfer', (b: Buffer) => b, (b: Buffer) => b);
        const ended = new Promise<{ code: number; details: string }>((resolve) => call.on('status', (st: { code: number; details: string }) => resolve({ code: st.code, details: st.details })));
        call.on('error', () => undefined);
        call.on('data', () => undefined);
        // a varint field with no value: protobuf cannot parse it
        call.write(Buffer.from([0x08]));
        call.end();
        return await ended;
      } finally {
        client.close();
      }
    };
    const [a, b] = [await raw(directPort), await raw(threadedPort)];
    expect(b).toEqual(a);
    expect(a.code).toBe(13);
  });

  it('forwards matching stream metadata and cancels the engine requests of a stream the client cancels', async () => {
    const aborted = engine.abortedRequests;
    const md = new Metadata();
    md.set('x-tenant', 'streamer');
    const s = threaded.stream(md);
    s.on('error', () => undefined);
    s.write({ model_name: 'slow', id: 'gone-stream', inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1] }], raw_input_contents: [Buffer.alloc(4)] });
    await expect.poll(() => engine.signals.has('gone-stream')).toBe(true);
    expect(engine.lastCall('submit')?.[0]?.parameters).toMatchObject({ 'x-tenant': 'streamer' });
    s.cancel();
    await expect.poll(() => engine.abortedRequests).toBe(aborted + 1);
  });

  it('forwards matching metadata as request parameters', async () => {
    const md = new Metadata();
    md.set('x-tenant', 'acme');
    await threaded.call('ModelInfer', simple({ id: 'fwd' }), md);
    const sent = engine.lastCall('submit')?.[0];
    expect(sent?.id).toBe('fwd');
    expect(sent?.parameters).toMatchObject({ 'x-tenant': 'acme' });
  });

  it('cancels the engine request of a client that cancels', async () => {
    const aborted = engine.abortedRequests;
    const call = threaded.start('ModelInfer', { model_name: 'slow', id: 'gone', inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1] }], raw_input_contents: [Buffer.alloc(4)] });
    await expect.poll(() => engine.signals.has('gone')).toBe(true);
    call.cancel();
    await expect(call.result).rejects.toMatchObject({ code: 1 });
    await expect.poll(() => engine.abortedRequests).toBe(aborted + 1);
  });
});

describe.each(reusePortSupported() ? [0, 2] : [0])('closing a gRPC door (%i front threads)', (threads) => {
  it('finishes the requests in flight, ends every stream with UNAVAILABLE once its requests are answered, and closes', async () => {
    const engine = new FakeEngine();
    const door = createGrpcServer({ engine, shm: new SharedMemoryManager({ enabled: false }), settings: new ServerSettings(), port: 0, host: '127.0.0.1', shutdownTimeoutMs: 10_000, threads });
    const client = createTestClient(await door.listen());
    try {
      const delayed = (id: string) => simple({ id, parameters: { delay_ms: { int64_param: 300 } } });
      const unaryCall = outcome(client.call('ModelInfer', delayed('u')));
      const open = (first?: object) => {
        const s = client.stream();
        const got: string[] = [];
        s.on('data', (m: { infer_response?: { id?: string } }) => got.push(m.infer_response?.id ?? ''));
        const ended = new Promise<{ code: number; details: string }>((resolve) => {
          s.on('error', (e: ServiceError) => resolve({ code: e.code, details: e.details }));
          s.on('end', () => resolve({ code: 0, details: '' }));
        });
        if (first !== undefined) s.write(first);
        return { got, ended };
      };
      const busy = open(delayed('s'));
      const idle = open();
      await expect.poll(() => engine.calls.filter((c) => c.method === 'submit').length).toBe(2);
      const started = Date.now();
      await door.close();
      // well before the shutdown timeout: nothing waited for it
      expect(Date.now() - started).toBeLessThan(5000);
      expect(await unaryCall).toMatchObject({ response: { id: 'u' } });
      expect(await busy.ended).toEqual({ code: 14, details: 'the server is shutting down' });
      expect(busy.got).toEqual(['s']);
      expect(await idle.ended).toEqual({ code: 14, details: 'the server is shutting down' });
    } finally {
      client.close();
      await door.close();
    }
  });
});

describe.skipIf(!reusePortSupported())('gRPC front threads: restricted protocols', () => {
  it('refuse a call without the key before any handler, as the event loop does', async () => {
    const access = accessPolicy({ httpRestrictedApi: [], grpcRestrictedProtocol: ['inference:infer-key=s3cret'] });
    const engine = new FakeEngine();
    const doors = [0, 2].map((threads) =>
      createGrpcServer({ engine, shm: new SharedMemoryManager({ enabled: false }), settings: new ServerSettings(), port: 0, host: '127.0.0.1', restrictions: access.grpc, threads }),
    );
    const clients = await Promise.all(doors.map(async (d) => createTestClient(await d.listen())));
    try {
      const [a, b] = await Promise.all(clients.map((c) => outcome(c.call('ModelInfer', simple()))));
      expect(b).toEqual(a);
      expect(a).toMatchObject({ code: 14 });
      expect(engine.calls.some((c) => c.method === 'submit')).toBe(false);
    } finally {
      for (const c of clients) c.close();
      await Promise.all(doors.map((d) => d.close()));
    }
  });
});
