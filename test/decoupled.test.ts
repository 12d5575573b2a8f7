/**
 * Decoupled models (`model_transaction_policy { decoupled: true }`) against a real worker:
 * gRPC ModelStreamInfer (many responses per request, `triton_final_response`, the optional
 * empty final response, error responses that do not end the stream), HTTP generate_stream
 * (server-sent events), the refusals of HTTP infer and gRPC ModelInfer, and statistics.
 * Models: JavaScript models in test/fixtures/javascript_repository, copied to a temporary repository
 * with Triton's repeat_int32 from examples/model_repository laid over it.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startWorkerProcess, type WorkerProcess } from '@switchyard/testing';
import { fixtureRepository, type FixtureRepository } from './lib/fixture-repository.js';
import { grpc, isFinalResponse, loadGrpcClients, streamInfer, unary, unaryError, type GrpcClient } from './lib/grpc-client.js';
import { fp32Bytes, get, int32Bytes, post, readFp32, readInt32, serverSentEvents } from './lib/tensors.js';

const MODELS = ['repeat_int32', 'square_int32', 'decoupled_error', 'add_sub'];
let repo: FixtureRepository;
let worker: WorkerProcess;
let client: GrpcClient;

beforeAll(async () => {
  repo = fixtureRepository('javascript_repository', { overlay: { repeat_int32: 'examples/model_repository/repeat_int32' } });
  worker = await startWorkerProcess({
    modelRepositories: [repo.path],
    args: ['--model-control-mode=explicit', ...MODELS.map((m) => `--load-model=${m}`)],
  });
  client = loadGrpcClients(worker.grpcAddress).inference;
});
afterAll(async () => {
  client?.close();
  await worker?.stop();
  repo?.remove();
});

const uint32Bytes = (values: number[]): Buffer => Buffer.from(new Uint32Array(values).buffer);

/** A repeat_int32 request: one response per IN element, the i-th after DELAY[i] ms; execute returns after WAIT ms. */
function repeat(id: string, values: number[], delays: number[], wait = 0, parameters: Record<string, unknown> = {}) {
  return {
    model_name: 'repeat_int32',
    id,
    parameters,
    inputs: [
      { name: 'IN', datatype: 'INT32', shape: [values.length] },
      { name: 'DELAY', datatype: 'UINT32', shape: [delays.length] },
      { name: 'WAIT', datatype: 'UINT32', shape: [1] },
    ],
    raw_input_contents: [int32Bytes(values), uint32Bytes(delays), uint32Bytes([wait])],
  };
}

const outValue = (r: any): number => readInt32(r.infer_response.raw_output_contents[0])[0]!;

describe('gRPC ModelStreamInfer with a decoupled model', () => {
  it('sends one response per element, each not final, and no empty final by default', async () => {
    const responses = await streamInfer(client, [repeat('r1', [4, 5, 6], [0, 10, 10])]);
    expect(responses.map((r) => r.error_message)).toEqual(['', '', '']);
    expect(responses.map(outValue)).toEqual([4, 5, 6]);
    expect(responses.map((r) => readInt32(r.infer_response.raw_output_contents[1])[0])).toEqual([0, 1, 2]);
    expect(responses.map(isFinalResponse)).toEqual([false, false, false]);
    expect(responses[0].infer_response).toMatchObject({ model_name: 'repeat_int32', model_version: '1', id: 'r1' });
    expect(responses[0].infer_response.outputs.map((o: any) => [o.name, o.datatype, o.shape])).toEqual([
      ['OUT', 'INT32', [1]],
      ['IDX', 'UINT32', [1]],
    ]);
  });

  it('sends an empty final response when the request asks for it', async () => {
    const ask = { triton_enable_empty_final_response: { bool_param: true } };
    const responses = await streamInfer(client, [repeat('r2', [7, 8], [0, 0], 0, ask), repeat('r3', [], [], 0, ask)]);
    const r2 = responses.filter((r) => r.infer_response.id === 'r2');
    expect(r2.map((r) => [r.infer_response.outputs.length, isFinalResponse(r)])).toEqual([
      [2, false],
      [2, false],
      [0, true],
    ]);
    // As in Triton, the empty final response echoes the request: its version is the one asked for ('').
    expect(r2[2].infer_response).toMatchObject({ model_name: 'repeat_int32', model_version: '', id: 'r2', raw_output_contents: [] });
    // Zero responses: only the final flag.
    const r3 = responses.filter((r) => r.infer_response.id === 'r3');
    expect(r3.map((r) => [r.infer_response.outputs.length, isFinalResponse(r)])).toEqual([[0, true]]);
  });

  it('a request with no response sends nothing without the empty final, and the stream still ends', async () => {
    const responses = await streamInfer(client, [repeat('none', [], [])]);
    expect(responses).toEqual([]);
  });

  it('responses of concurrent requests interleave in completion order on one instance', async () => {
    const responses = await streamInfer(client, [repeat('slow', [1, 2], [200, 200], 0), repeat('fast', [3, 4], [20, 20], 0)]);
    const ids = responses.map((r) => r.infer_response.id);
    expect(ids.filter((id) => id === 'slow')).toHaveLength(2);
    expect(ids.slice(0, 2)).toEqual(['fast', 'fast']);
  });

  it('mixes with non-decoupled requests on the same stream', async () => {
    const addSub = {
      model_name: 'add_sub',
      id: 'a1',
      inputs: [
        { name: 'INPUT0', datatype: 'FP32', shape: [4] },
        { name: 'INPUT1', datatype: 'FP32', shape: [4] },
      ],
      raw_input_contents: [fp32Bytes([1, 2, 3, 4]), fp32Bytes([1, 1, 1, 1])],
    };
    const responses = await streamInfer(client, [repeat('r4', [9], [50]), addSub, { model_name: 'square_int32', id: 's3', inputs: [{ name: 'IN', datatype: 'INT32', shape: [1] }], raw_input_contents: [int32Bytes([3])] }]);
    const a1 = responses.find((r) => r.infer_response.id === 'a1');
    expect(isFinalResponse(a1)).toBe(true);
    expect(readFp32(a1.infer_response.raw_output_contents[0])).toEqual([2, 3, 4, 5]);
    expect(responses.filter((r) => r.infer_response.id === 's3').map(outValue)).toEqual([3, 3, 3]);
    expect(responses.filter((r) => r.infer_response.id === 'r4').map(outValue)).toEqual([9]);
  });

  it('an error response does not end the request or the stream', async () => {
    const responses = await streamInfer(client, [{ model_name: 'decoupled_error', id: 'e1', inputs: [{ name: 'IN', datatype: 'INT32', shape: [1] }], raw_input_contents: [int32Bytes([0])] }]);
    expect(responses.map((r) => r.error_message)).toEqual(['', 'element 2 is bad', '']);
    expect(responses[1].infer_response.id).toBe('e1');
    expect(isFinalResponse(responses[2])).toBe(true);
    expect(outValue(responses[2])).toBe(3);
  });

  it('a bad request for a decoupled model is answered with an error and the stream goes on', async () => {
    const bad = { ...repeat('bad', [1], [0]), inputs: [{ name: 'IN', datatype: 'INT32', shape: [1] }], raw_input_contents: [int32Bytes([1])] };
    const responses = await streamInfer(client, [bad, repeat('good', [5], [0])]);
    expect(responses[0].error_message).toMatch(/expected 3 inputs but got 1 inputs for model 'repeat_int32'/);
    expect(responses[0].infer_response.id).toBe('bad');
    expect(responses.filter((r) => r.infer_response.id === 'good').map(outValue)).toEqual([5]);
  });
});

describe('the one-response front doors refuse decoupled models', () => {
  it('gRPC ModelInfer → UNIMPLEMENTED', async () => {
    const err = await unaryError(client, 'ModelInfer', repeat('x', [1], [0]));
    expect(err.code).toBe(grpc.status.UNIMPLEMENTED);
    expect(err.details).toBe("ModelInfer RPC doesn't support models with decoupled transaction policy");
  });

  it('HTTP infer → 501', async () => {
    const res = await post(`${worker.httpUrl}/v2/models/repeat_int32/infer`, {
      inputs: [
        { name: 'IN', shape: [1], datatype: 'INT32', data: [1] },
        { name: 'DELAY', shape: [1], datatype: 'UINT32', data: [0] },
        { name: 'WAIT', shape: [1], datatype: 'UINT32', data: [0] },
      ],
    });
    expect(res.status).toBe(501);
    expect(res.json()).toEqual({ error: "HTTP end point doesn't support models with decoupled transaction policy" });
  });
});

describe('HTTP generate_stream', () => {
  it('streams one server-sent event per response', async () => {
    const res = await post(`${worker.httpUrl}/v2/models/repeat_int32/generate_stream`, { IN: [10, 20, 30], DELAY: [0, 5, 5], WAIT: 0 });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const events = serverSentEvents(res.body);
    expect(events.map((e) => [e.OUT, e.IDX])).toEqual([
      [10, 0],
      [20, 1],
      [30, 2],
    ]);
    expect(events[0]).toMatchObject({ model_name: 'repeat_int32', model_version: '1' });
  });

  it('error responses are events too', async () => {
    const res = await post(`${worker.httpUrl}/v2/models/decoupled_error/generate_stream`, { IN: 0 });
    const events = serverSentEvents(res.body);
    expect(events).toEqual([expect.objectContaining({ OUT: 1 }), { error: 'element 2 is bad' }, expect.objectContaining({ OUT: 3 })]);
  });

  it('generate (not streaming) takes a decoupled model only when it answers once', async () => {
    const one = await post(`${worker.httpUrl}/v2/models/repeat_int32/generate`, { IN: [42], DELAY: [0], WAIT: 0 });
    expect(one.status).toBe(200);
    expect(one.json()).toMatchObject({ OUT: 42, IDX: 0 });
    const many = await post(`${worker.httpUrl}/v2/models/repeat_int32/generate`, { IN: [1, 2], DELAY: [0, 0], WAIT: 0 });
    expect(many.status).toBe(500);
    expect(many.json().error).toMatch(/generate expects model to produce exactly 1 response/);
  });
});

describe('statistics of a decoupled model', () => {
  it('counts requests and executions, and response_stats per response index (HTTP and gRPC)', async () => {
    const res = await get(`${worker.httpUrl}/v2/models/square_int32/stats`);
    expect(res.status).toBe(200);
    const stats = res.json().model_stats[0];
    // square_int32 ran once above, with IN = [3]: three responses, then the final flag.
    expect(stats.inference_stats.success.count).toBe(1);
    expect(stats.execution_count).toBe(1);
    expect(Object.keys(stats.response_stats)).toEqual(['0', '1', '2', '3']);
    expect(stats.response_stats['0'].success.count).toBe(1);
    expect(stats.response_stats['3'].empty_response.count).toBe(1);
    const g = await unary(client, 'ModelStatistics', { name: 'square_int32', version: '' });
    expect(g.model_stats[0].response_stats['0'].success.count).toBe(1);
    expect(g.model_stats[0].response_stats['3'].empty_response.count).toBe(1);
  });
});
