import { status, type ClientDuplexStream, type ServiceError } from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ServerSettings } from '../settings.js';
import { SharedMemoryManager } from '../shared-memory.js';
import { FakeEngine } from '../test-support/fake-engine.js';
import { createGrpcServer, type GrpcFrontDoor } from './grpc-server.js';
import { createTestClient, type TestClient } from './grpc-test-client.js';

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

async function waitFor(cond: () => boolean, timeoutMs = 2000): Promise<void> {
  const start = Date.now();
  while (!cond()) {
    if (Date.now() - start > timeoutMs) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 5));
  }
}
