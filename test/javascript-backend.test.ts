/**
 * The JavaScript backend against a real worker, with real HTTP and gRPC clients: a model.js
 * served like any other model, BLS into the same server, and the bad cases (a model that
 * throws, a model.js that does not parse, BLS to an unknown model, a hung model that must not
 * stall the others and whose unload terminates its thread).
 * Fixture: test/fixtures/javascript_repository.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startWorkerProcess, type WorkerProcess } from '@switchyard/testing';
import { grpc, loadGrpcClients, unary, unaryError, type GrpcClient } from './lib/grpc-client.js';
import { fp32Bytes, get, int32Bytes, post, readFp32, serializeStrings } from './lib/tensors.js';
import { sleep } from './lib/wait-for.js';

const MODELS = ['add_sub', 'bls', 'throws', 'syntax_error', 'hang'];
let worker: WorkerProcess;
let client: GrpcClient;

beforeAll(async () => {
  worker = await startWorkerProcess({
    modelRepositories: ['test/fixtures/javascript_repository'],
    // syntax_error must fail to load while the rest serve: tritonserver's --exit-on-error=false
    args: ['--model-control-mode=explicit', ...MODELS.map((m) => `--load-model=${m}`), '--exit-on-error=false'],
  });
  client = loadGrpcClients(worker.grpcAddress).inference;
});
afterAll(async () => {
  client?.close();
  await worker?.stop();
});

const addSubJson = (a: number[], b: number[]) => ({
  inputs: [
    { name: 'INPUT0', shape: [4], datatype: 'FP32', data: a },
    { name: 'INPUT1', shape: [4], datatype: 'FP32', data: b },
  ],
});

const blsGrpc = (model: string, a: number[], b: number[]) => ({
  model_name: 'bls',
  inputs: [
    { name: 'MODEL_NAME', datatype: 'BYTES', shape: [1] },
    { name: 'INPUT0', datatype: 'FP32', shape: [4] },
    { name: 'INPUT1', datatype: 'FP32', shape: [4] },
  ],
  raw_input_contents: [serializeStrings([model]), fp32Bytes(a), fp32Bytes(b)],
});

describe('a JavaScript model is served like any other', () => {
  it('metadata and config report the javascript backend', async () => {
    const meta = await get(`${worker.httpUrl}/v2/models/add_sub`);
    expect(meta.json()).toMatchObject({ name: 'add_sub', versions: ['1'], platform: 'javascript' });
    const config = (await get(`${worker.httpUrl}/v2/models/add_sub/config`)).json();
    expect(config).toMatchObject({ backend: 'javascript', max_batch_size: 0 });
    expect(config.instance_group[0].count).toBe(2);
  });

  it('HTTP JSON infer', async () => {
    const res = await post(`${worker.httpUrl}/v2/models/add_sub/infer`, { id: 'h1', ...addSubJson([1, 2, 3, 4], [0.5, 0.5, 0.5, 0.5]) });
    expect(res.status).toBe(200);
    const body = res.json();
    expect(body).toMatchObject({ id: 'h1', model_name: 'add_sub', model_version: '1' });
    expect(body.outputs).toEqual([
      { name: 'OUTPUT0', datatype: 'FP32', shape: [4], data: [1.5, 2.5, 3.5, 4.5] },
      { name: 'OUTPUT1', datatype: 'FP32', shape: [4], data: [0.5, 1.5, 2.5, 3.5] },
    ]);
  });

  it('gRPC ModelInfer, concurrently over both instances', async () => {
    const call = (i: number) =>
      unary(client, 'ModelInfer', {
        model_name: 'add_sub',
        id: `g${i}`,
        inputs: [
          { name: 'INPUT0', datatype: 'FP32', shape: [4] },
          { name: 'INPUT1', datatype: 'FP32', shape: [4] },
        ],
        raw_input_contents: [fp32Bytes([i, i, i, i]), fp32Bytes([1, 2, 3, 4])],
      });
    const responses = await Promise.all([1, 2, 3, 4, 5, 6].map(call));
    responses.forEach((r, k) => {
      const i = k + 1;
      expect(r.id).toBe(`g${i}`);
      expect(readFp32(r.raw_output_contents[0])).toEqual([i + 1, i + 2, i + 3, i + 4]);
      expect(readFp32(r.raw_output_contents[1])).toEqual([i - 1, i - 2, i - 3, i - 4]);
    });
  });
});

describe('BLS', () => {
  it('calls another model of the same server (gRPC and HTTP)', async () => {
    const r = await unary(client, 'ModelInfer', blsGrpc('add_sub', [1, 2, 3, 4], [1, 1, 1, 1]));
    expect(readFp32(r.raw_output_contents[0])).toEqual([2, 3, 4, 5]);
    const h = await post(`${worker.httpUrl}/v2/models/bls/infer`, {
      inputs: [{ name: 'MODEL_NAME', shape: [1], datatype: 'BYTES', data: ['add_sub'] }, ...addSubJson([4, 4, 4, 4], [1, 2, 3, 4]).inputs],
    });
    expect(h.json().outputs[1].data).toEqual([3, 2, 1, 0]);
  });

  it('a call to an unknown model fails with Triton wording', async () => {
    const err = await unaryError(client, 'ModelInfer', blsGrpc('nosuchmodel', [1, 2, 3, 4], [1, 1, 1, 1]));
    expect(err.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(err.details).toBe("Request for unknown model: 'nosuchmodel' is not found");
    const h = await post(`${worker.httpUrl}/v2/models/bls/infer`, {
      inputs: [{ name: 'MODEL_NAME', shape: [1], datatype: 'BYTES', data: ['nosuchmodel'] }, ...addSubJson([1, 1, 1, 1], [1, 1, 1, 1]).inputs],
    });
    expect(h.status).toBe(400);
    expect(h.json()).toEqual({ error: "Request for unknown model: 'nosuchmodel' is not found" });
  });
});

describe('bad models', () => {
  it('a model that throws fails its requests (HTTP 500, gRPC INTERNAL) and counts as a BACKEND failure', async () => {
    const body = { inputs: [{ name: 'IN', shape: [1], datatype: 'INT32', data: [1] }] };
    const res = await post(`${worker.httpUrl}/v2/models/throws/infer`, body);
    expect(res.status).toBe(500);
    expect(res.json().error).toBe("Failed to process the request(s) for model instance 'throws_0_0', message: Error: the model is broken on purpose");
    const err = await unaryError(client, 'ModelInfer', {
      model_name: 'throws',
      inputs: [{ name: 'IN', datatype: 'INT32', shape: [1] }],
      raw_input_contents: [int32Bytes([1])],
    });
    expect(err.code).toBe(grpc.status.INTERNAL);
    const metrics = await (await fetch(`${worker.metricsUrl}/metrics`)).text();
    expect(metrics).toContain('nv_inference_request_failure{model="throws",reason="BACKEND",version="1"} 2');
    // The model stays loaded and keeps answering (with its error).
    expect((await get(`${worker.httpUrl}/v2/models/throws/ready`)).status).toBe(200);
  });

  it('a model.js with a syntax error is UNAVAILABLE with the reason; the server keeps serving', async () => {
    const index = await post(`${worker.httpUrl}/v2/repository/index`, {});
    const row = index.json().find((r: any) => r.name === 'syntax_error');
    expect(row.state).toBe('UNAVAILABLE');
    expect(row.reason).toMatch(/^unable to load model 'syntax_error': failed to load '.*syntax_error\/1\/model\.js': SyntaxError: .* \(.*model\.js:\d+\)$/);
    const g = await unary(client, 'RepositoryIndex', { repository_name: '', ready: false });
    expect(g.models.find((m: any) => m.name === 'syntax_error').reason).toBe(row.reason);
    expect((await get(`${worker.httpUrl}/v2/models/syntax_error/ready`)).status).toBe(400);
    const res = await post(`${worker.httpUrl}/v2/models/syntax_error/infer`, { inputs: [{ name: 'IN', shape: [1], datatype: 'INT32', data: [1] }] });
    expect(res.status).toBe(404);
    expect(res.json().error).toBe("Request for unknown model: 'syntax_error' has no available versions");
    expect((await post(`${worker.httpUrl}/v2/models/add_sub/infer`, addSubJson([1, 1, 1, 1], [1, 1, 1, 1]))).status).toBe(200);
  });

  it('a hung model does not stall other models, and unloading it terminates its thread', async () => {
    const hung = post(`${worker.httpUrl}/v2/models/hang/infer`, { inputs: [{ name: 'IN', shape: [1], datatype: 'INT32', data: [1] }] });
    await sleep(100);
    // Other models, and the server itself, answer while the hang model is stuck.
    const started = Date.now();
    expect((await post(`${worker.httpUrl}/v2/models/add_sub/infer`, addSubJson([1, 1, 1, 1], [1, 1, 1, 1]))).status).toBe(200);
    expect((await get(`${worker.httpUrl}/v2/health/live`)).status).toBe(200);
    expect(Date.now() - started).toBeLessThan(2000);
    // Unload waits lifecycle_timeout_ms (3 s in its config) for the execution, then ends the thread.
    const unload = await post(`${worker.httpUrl}/v2/repository/models/hang/unload`, {});
    expect(unload.status).toBe(200);
    const res = await hung;
    expect(res.status).toBe(503);
    expect(res.json().error).toContain("JavaScript model 'hang' was unloaded before its request completed");
    expect((await get(`${worker.httpUrl}/v2/models/hang/ready`)).status).toBe(400);
    // It loads again, fresh.
    expect((await post(`${worker.httpUrl}/v2/repository/models/hang/load`, {})).status).toBe(200);
    const ok = await post(`${worker.httpUrl}/v2/models/hang/infer`, { inputs: [{ name: 'IN', shape: [1], datatype: 'INT32', data: [5] }] });
    expect(ok.json().outputs[0].data).toEqual([5]);
  });
});
