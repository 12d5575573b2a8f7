import { Metadata, status, type ClientDuplexStream, type ServiceError } from '@grpc/grpc-js';
import { EventEmitter } from 'node:events';
import * as http2 from 'node:http2';
import { silentLogger } from '@switchyard/common';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ServerSettings } from '../settings.js';
import { SharedMemoryManager } from '../shared-memory.js';
import { FakeEngine } from '../test-support/fake-engine.js';
import { createGrpcServer, type GrpcFrontDoor } from './grpc-server.js';
import { createTestClient, type TestClient } from './grpc-test-client.js';
import { loadGrpcProtos } from './protos.js';
import type { GrpcContext } from './grpc-context.js';
import { InFlight } from './in-flight.js';
import { SHUTTING_DOWN, serveModelStream, StreamSessions, type StreamCall } from './stream-infer.js';

type StreamResponse = Record<string, unknown> & {
  error_message: string;
  infer_response: (Record<string, unknown> & { id: string; parameters: Record<string, Record<string, unknown>>; raw_output_contents: Buffer[] }) | null;
};
type Stream = ClientDuplexStream<object, Record<string, unknown>>;

const int32Bytes = (...v: number[]): Buffer => Buffer.from(Int32Array.from(v).buffer);
const readInt32 = (b: Uint8Array | undefined): number[] => Array.from(new Int32Array(Uint8Array.from(b ?? []).buffer));

const simple = (id: string, a: number, delayMs = 0): object => ({
  model_name: 'simple',
  id,
  parameters: delayMs > 0 ? { delay_ms: { int64_param: delayMs } } : {},
  inputs: [
    { name: 'INPUT0', datatype: 'INT32', shape: [1] },
    { name: 'INPUT1', datatype: 'INT32', shape: [1] },
  ],
  raw_input_contents: [int32Bytes(a), int32Bytes(1)],
});

const repeat = (id: string, values: number[], emptyFinal = false): object => ({
  model_name: 'repeat',
  id,
  parameters: emptyFinal ? { triton_enable_empty_final_response: { bool_param: true } } : {},
  inputs: [{ name: 'IN', datatype: 'INT32', shape: [values.length] }],
  raw_input_contents: [int32Bytes(...values)],
});

/** Collect every response until the server ends the stream, and how it ended. */
function collect(stream: Stream): Promise<{ responses: StreamResponse[]; error?: ServiceError }> {
  const responses: StreamResponse[] = [];
  return new Promise((resolve) => {
    stream.on('data', (r: StreamResponse) => responses.push(r));
    stream.on('error', (error: ServiceError) => resolve({ responses, error }));
    stream.on('end', () => resolve({ responses }));
  });
}

const final = (r: StreamResponse): unknown => r.infer_response?.parameters['triton_final_response']?.['bool_param'];

describe('ModelStreamInfer', () => {
  const engine = new FakeEngine();
  let door: GrpcFrontDoor;
  let client: TestClient;

  beforeAll(async () => {
    door = createGrpcServer({ engine, shm: new SharedMemoryManager({ enabled: false }), settings: new ServerSettings(), port: 0, host: '127.0.0.1' });
    client = createTestClient(await door.listen());
  });
  afterAll(async () => {
    client.close();
    await door.close();
  });

  it('answers non-decoupled requests in request order, each marked final', async () => {
    const stream = client.stream();
    const done = collect(stream);
    stream.write(simple('slow', 1, 60));
    stream.write(simple('medium', 2, 20));
    stream.write(simple('fast', 3));
    stream.end();
    const { responses, error } = await done;
    expect(error).toBeUndefined();
    expect(responses.map((r) => r.infer_response?.id)).toEqual(['slow', 'medium', 'fast']);
    expect(responses.map(final)).toEqual([true, true, true]);
    expect(responses.map((r) => r.error_message)).toEqual(['', '', '']);
    expect(readInt32(responses[2]?.infer_response?.raw_output_contents[0])).toEqual([4]);
  });

  it('streams decoupled responses as they come, with the final flag on the last', async () => {
    const stream = client.stream();
    const done = collect(stream);
    stream.write(repeat('rep', [7, 8, 9]));
    stream.end();
    const { responses } = await done;
    expect(responses.map((r) => readInt32(r.infer_response?.raw_output_contents[0]))).toEqual([[7], [8], [9]]);
    expect(responses.map(final)).toEqual([false, false, false]);
  });

  it('sends an empty final response only when asked to', async () => {
    const stream = client.stream();
    const done = collect(stream);
    stream.write(repeat('rep', [1, 2], true));
    stream.end();
    const { responses } = await done;
    expect(responses.map(final)).toEqual([false, false, true]);
    const last = responses[2]?.infer_response;
    expect(last?.id).toBe('rep');
    expect(last?.['model_name']).toBe('repeat');
    expect(last?.['outputs']).toEqual([]);
  });

  it('interleaves decoupled responses with ordered ones', async () => {
    const stream = client.stream();
    const done = collect(stream);
    stream.write(simple('held', 1, 80));
    stream.write(repeat('free', [5], true));
    stream.end();
    const { responses } = await done;
    expect(responses.map((r) => r.infer_response?.id)).toEqual(['free', 'free', 'held']);
  });

  it('reports per-request errors without ending the stream', async () => {
    const stream = client.stream();
    const done = collect(stream);
    stream.write({ model_name: 'nope', id: 'e1' });
    stream.write({ ...simple('e2', 1), model_version: 'v1' });
    stream.write({ model_name: 'simple', id: 'e3', inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1] }] });
    stream.write({ model_name: 'fail', id: 'e4' });
    stream.write(simple('ok', 41));
    stream.end();
    const { responses, error } = await done;
    expect(error).toBeUndefined();
    expect(responses.map((r) => [r.infer_response?.id, r.error_message])).toEqual([
      ['e1', "Request for unknown model: 'nope' is not found"],
      ['e2', "failed to get model version from specified version string 'v1' (details: stol), version should be an integral value > 0"],
      ['e3', "unable to find data for input tensor 'INPUT0' for model 'simple' in request."],
      ['e4', 'backend failed'],
      ['ok', ''],
    ]);
    // Refused before issue: only the id. Failed in the engine: model echoed and final flag set.
    expect(responses[0]?.infer_response?.parameters).toEqual({});
    expect(responses[3]?.infer_response?.['model_name']).toBe('fail');
    expect(final(responses[3] as StreamResponse)).toBe(true);
    expect(readInt32(responses[4]?.infer_response?.raw_output_contents[0])).toEqual([42]);
  });

  it('keeps the stream open until the client half-closes', async () => {
    const stream = client.stream();
    const responses: StreamResponse[] = [];
    let ended = false;
    stream.on('data', (r: StreamResponse) => responses.push(r));
    stream.on('end', () => (ended = true));
    stream.write(simple('a', 1));
    await waitFor(() => responses.length === 1);
    expect(ended).toBe(false);
    stream.write(simple('b', 2));
    await waitFor(() => responses.length === 2);
    stream.end();
    await waitFor(() => ended);
  });

  it('aborts in-flight requests when the client cancels', async () => {
    const stream = client.stream();
    const done = collect(stream);
    stream.write({ model_name: 'slow', id: 'hang' });
    await waitFor(() => engine.signals.has('hang'));
    const signal = engine.signals.get('hang');
    stream.cancel();
    const { error } = await done;
    expect(error?.code).toBe(status.CANCELLED);
    await waitFor(() => signal?.aborted === true);
  });
});

describe('ModelStreamInfer backpressure', () => {
  const engine = new FakeEngine();
  const CAP = 4;
  let door: GrpcFrontDoor;
  let capped: GrpcFrontDoor;
  let port: number;
  let cappedClient: TestClient;

  beforeAll(async () => {
    const common = { engine, shm: new SharedMemoryManager({ enabled: false }), settings: new ServerSettings(), port: 0, host: '127.0.0.1' };
    door = createGrpcServer(common);
    capped = createGrpcServer({ ...common, maxStreamInflight: CAP });
    port = await door.listen();
    cappedClient = createTestClient(await capped.listen());
  });
  afterAll(async () => {
    cappedClient.close();
    await Promise.all([door.close(), capped.close()]);
  });

  const submitted = (prefix: string): number =>
    engine.calls.filter((c) => c.method === 'submit' && (c.args[0] as { id: string }).id.startsWith(prefix)).length;

  /**
   * Resolves with the count once it is above 0 and has not changed for `quietMs` (generous: CI is
   * noisy, and on a loaded machine the first request may take longer than `quietMs` to arrive).
   */
  async function settled(count: () => number, quietMs = 500, timeoutMs = 15_000): Promise<number> {
    const start = Date.now();
    let last = count();
    let since = Date.now();
    while (Date.now() - start < timeoutMs) {
      await new Promise((r) => setTimeout(r, 25));
      const now = count();
      if (now !== last) [last, since] = [now, Date.now()];
      else if (now > 0 && Date.now() - since >= quietMs) return now;
    }
    return count();
  }

  it('a client that stops reading stops the intake; every answer arrives, in order, once it reads again', async () => {
    const n = 300;
    const floats = 64 * 1024; // 256 KiB answers: far more than HTTP/2 flow control lets through unread
    const stream = rawStream(port);
    const writing = (async () => {
      for (let i = 0; i < n; i++) {
        await stream.write({ model_name: 'identity', id: `unread-${i}`, inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [floats] }], raw_input_contents: [Buffer.alloc(floats * 4, i % 256)] });
      }
      stream.end();
    })();
    // Without backpressure all 300 reach the engine and 75 MiB of answers queue in the server.
    const held = await settled(() => submitted('unread-'));
    expect(held).toBeGreaterThan(0);
    expect(held).toBeLessThan(100);
    const { responses, grpcStatus } = await stream.readAll();
    await writing;
    expect(grpcStatus).toBe('0');
    expect(responses.map((r) => r.infer_response?.id)).toEqual(Array.from({ length: n }, (_, i) => `unread-${i}`));
    expect(responses[299]?.infer_response?.raw_output_contents[0]?.[0]).toBe(299 % 256);
  });

  it('holds at most maxStreamInflight requests of a stream in the engine; the rest wait, unrefused', async () => {
    const stream = cappedClient.stream();
    const done = collect(stream);
    for (let i = 0; i < CAP + 6; i++) stream.write({ model_name: 'slow', id: `held-${i}` });
    expect(await settled(() => submitted('held-'))).toBe(CAP);
    stream.cancel();
    expect((await done).error?.code).toBe(status.CANCELLED);

    const ordered = cappedClient.stream();
    const all = collect(ordered);
    for (let i = 0; i < 3 * CAP; i++) ordered.write(simple(`wait-${i}`, i, 10));
    ordered.end();
    const { responses, error } = await all;
    expect(error).toBeUndefined();
    expect(responses.map((r) => [r.infer_response?.id, r.error_message])).toEqual(Array.from({ length: 3 * CAP }, (_, i) => [`wait-${i}`, '']));
  });
});

/**
 * A ModelStreamInfer call over a bare HTTP/2 stream that reads nothing until `readAll()`: a client
 * that stops reading, seen by the server exactly as HTTP/2 flow control presents it.
 */
function rawStream(port: number): { write(request: object): Promise<void>; end(): void; readAll(): Promise<{ responses: StreamResponse[]; grpcStatus: string | undefined }> } {
  const method = loadGrpcProtos().inferenceService['ModelStreamInfer']!;
  const session = http2.connect(`http://127.0.0.1:${port}`);
  const req = session.request({ ':method': 'POST', ':path': method.path, 'content-type': 'application/grpc', te: 'trailers' });
  req.pause();
  let grpcStatus: string | undefined;
  req.on('trailers', (t) => (grpcStatus = String(t['grpc-status'])));
  return {
    write: (request) => {
      const body = method.requestSerialize(request);
      const prefix = Buffer.alloc(5);
      prefix.writeUInt32BE(body.byteLength, 1);
      // as a client does: wait while the server is not taking more
      return req.write(Buffer.concat([prefix, body])) ? Promise.resolve() : new Promise((r) => req.once('drain', () => r()));
    },
    end: () => req.end(),
    readAll: () =>
      new Promise((resolve, reject) => {
        const chunks: Buffer[] = [];
        req.on('data', (c: Buffer) => chunks.push(c));
        req.on('error', reject);
        req.on('close', () => {
          session.close();
          const all = Buffer.concat(chunks);
          const responses: StreamResponse[] = [];
          for (let at = 0; at + 5 <= all.byteLength; ) {
            const length = all.readUInt32BE(at + 1);
            responses.push(method.responseDeserialize(all.subarray(at + 5, at + 5 + length)) as StreamResponse);
            at += 5 + length;
          }
          resolve({ responses, grpcStatus });
        });
        req.resume();
      }),
  };
}

async function waitFor(cond: () => boolean, timeoutMs = 2000): Promise<void> {
  const start = Date.now();
  while (!cond()) {
    if (Date.now() - start > timeoutMs) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 5));
  }
}

describe('StreamSessions: a door lets go of every stream, however it ends', () => {
  it('client cancel, client half-close, an error status, a drain at close', async () => {
    const streams = new StreamSessions();
    const ctx = { engine: new FakeEngine(), streams, calls: new InFlight(), limits: { maxStreamInflight: 4 }, logger: silentLogger, compression: 'none' } as unknown as GrpcContext;
    const statuses: unknown[] = [];
    const call = () => {
      const c = Object.assign(new EventEmitter(), { metadata: new Metadata(), cancelled: false, pause: () => c, resume: () => c, write: () => true, end: () => statuses.push('end'), sendMetadata: () => undefined });
      c.on('error', (e: unknown) => statuses.push(e));
      serveModelStream(ctx, c as unknown as StreamCall);
      return c;
    };
    const ends: Array<(c: EventEmitter) => void> = [(c) => c.emit('cancelled'), (c) => c.emit('end'), (c) => c.emit('error', new Error('reset'))];
    for (const end of ends) {
      const c = call();
      expect(streams.size).toBe(1);
      end(c);
      expect(streams.size).toBe(0);
    }
    call();
    streams.drain();
    expect(streams.size).toBe(0);
    await streams.whenEmpty();
    expect(statuses.at(-1)).toMatchObject({ code: status.UNAVAILABLE, details: SHUTTING_DOWN });
    // opened while the door closes: drained at once
    call();
    expect(streams.size).toBe(0);
  });
});
