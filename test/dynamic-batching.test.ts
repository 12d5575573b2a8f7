/**
 * The dynamic batcher end to end: a real worker serving `test/fixtures/dynamic_batching_repository`,
 * driven over HTTP (fetch) and gRPC (grpc-js). Each model's config sets up one behaviour; tests
 * read batch composition from the statistics extension and queue depth from the metrics, and use
 * time only as generous bounds (a queue delay of seconds against a batch formed at once).
 *
 * The fixture's config.pbtxt files are committed; the ONNX files are built here, into a temporary
 * copy of the repository, from @switchyard/onnx-builder.
 */
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildAddConstantModel, buildIdentityModel, buildMlpModel } from '@switchyard/onnx-builder';
import { repoRoot, startWorkerProcess, type WorkerProcess } from '@switchyard/testing';
import { fixtureRepository, type FixtureRepository } from './lib/fixture-repository.js';
import { loadGrpcClients, unary, unaryError, grpc, type GrpcClient } from './lib/grpc-client.js';
import { fp32Bytes, get, post, range, readFp32 } from './lib/tensors.js';
import { waitFor } from './lib/wait-for.js';

const FIXTURE = 'dynamic_batching_repository';
/** What each fixture model computes. */
const MODEL_FILES: Record<string, () => Uint8Array> = {
  preferred: () => buildAddConstantModel(1),
  delayed: () => buildAddConstantModel(1),
  queue_full: () => buildAddConstantModel(1),
  timeout: () => buildAddConstantModel(1),
  priority: () => buildAddConstantModel(1),
  variable: () => buildIdentityModel('FLOAT'),
  // Triton's qa onnx_nobatch_zero_1_float32: identity over [-1], no batch dimension of its own.
  ragged: () => buildIdentityModel('FLOAT', [-1]),
  // 16 layers: a row's run (~4M multiply-adds) outlasts decoding the next request even on a fast core under load.
  concurrent: () => buildMlpModel({ width: 512, layers: 16 }),
};

/** `<model>/1/model.onnx` for every fixture model; throws for a fixture model without a plan. */
function modelFiles(): Record<string, Uint8Array> {
  const files: Record<string, Uint8Array> = {};
  for (const name of readdirSync(join(repoRoot(), 'test/fixtures', FIXTURE))) {
    const build = MODEL_FILES[name];
    if (build === undefined) throw new Error(`no model file planned for fixture model '${name}'`);
    files[`${name}/1/model.onnx`] = build();
  }
  return files;
}

let repo: FixtureRepository;
let worker: WorkerProcess;
let grpcClient: GrpcClient;

beforeAll(async () => {
  repo = fixtureRepository(FIXTURE, { files: modelFiles() });
  worker = await startWorkerProcess({ modelRepositories: [repo.path] });
  grpcClient = loadGrpcClients(worker.grpcAddress).inference;
}, 60_000);

afterAll(async () => {
  grpcClient?.close();
  await worker?.stop();
  repo?.remove();
});

// --- clients -------------------------------------------------------------------------------

interface InferOptions {
  id?: string;
  /** Rows of the request (its batch size); each row holds `width` values. */
  rows?: number[][];
  parameters?: Record<string, unknown>;
}

/** HTTP JSON infer; resolves with status, body and the time it took. */
async function httpInfer(model: string, opts: InferOptions) {
  const rows = opts.rows ?? [[0, 0, 0, 0]];
  const width = rows[0]!.length;
  const body = {
    ...(opts.id !== undefined ? { id: opts.id } : {}),
    ...(opts.parameters !== undefined ? { parameters: opts.parameters } : {}),
    inputs: [{ name: 'INPUT0', shape: [rows.length, width], datatype: 'FP32', data: rows.flat() }],
  };
  const started = performance.now();
  const res = await post(`${worker.httpUrl}/v2/models/${model}/infer`, body, { 'content-type': 'application/json' });
  const ms = performance.now() - started;
  const json = res.json() as { error?: string; outputs?: { name: string; shape: number[]; data: number[] }[] };
  return { status: res.status, json, ms, output: json.outputs?.[0] };
}

/** gRPC ModelInfer with raw contents; resolves with the output rows flattened. */
async function grpcInfer(model: string, opts: InferOptions) {
  const rows = opts.rows ?? [[0, 0, 0, 0]];
  const res = await unary(grpcClient, 'ModelInfer', {
    model_name: model,
    id: opts.id ?? '',
    parameters: opts.parameters ?? {},
    inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [rows.length, rows[0]!.length] }],
    raw_input_contents: [fp32Bytes(rows.flat())],
  });
  return { shape: res.outputs[0].shape as number[], values: readFp32(res.raw_output_contents[0]) };
}

interface Stats {
  execution_count: number;
  inference_count: number;
  inference_stats: { success: { count: number }; fail: { count: number }; queue: { count: number } };
  batch_stats: { batch_size: number; compute_infer: { count: number } }[];
}

async function stats(model: string): Promise<Stats> {
  return ((await get(`${worker.httpUrl}/v2/models/${model}/stats`)).json() as { model_stats: Stats[] }).model_stats[0]!;
}

/** Executions per batch size since `before`. */
function batchesSince(before: Stats, after: Stats): Record<number, number> {
  const out: Record<number, number> = {};
  for (const b of after.batch_stats) {
    const prev = before.batch_stats.find((p) => p.batch_size === b.batch_size)?.compute_infer.count ?? 0;
    if (b.compute_infer.count > prev) out[b.batch_size] = b.compute_infer.count - prev;
  }
  return out;
}

async function metric(name: string, labels: string): Promise<number> {
  const text = (await get(`${worker.metricsUrl}/metrics`)).body.toString('utf8');
  const line = text.split('\n').find((l) => l.startsWith(`${name}{${labels}}`));
  return Number(line?.split(' ').pop() ?? NaN);
}

/** Wait until `model` has `n` queued requests (so the next request surely arrives after them). */
async function untilQueued(model: string, n: number): Promise<void> {
  const queued = async () => (await metric('nv_inference_pending_request_count', `model="${model}",version="1"`)) === n;
  await waitFor(queued, { intervalMs: 10, message: `'${model}' never had ${n} queued requests` });
}

const plusOne = (rows: number[][]) => rows.flat().map((v) => v + 1);
/** `n` rows made by `row(i)`. */
const rowsOf = (n: number, row: (i: number) => number[]): number[][] => Array.from({ length: n }, (_, i) => row(i));

// --- batching -----------------------------------------------------------------------------------

describe('requests from different clients share executions', () => {
  const inputs = rowsOf(32, (i) => range(512, (j) => ((i * 7 + j) % 13) / 13 - 0.5));

  it('HTTP: 32 concurrent requests run in fewer executions, with batches above 1, each getting its own rows', async () => {
    const before = await stats('concurrent');
    const results = await Promise.all(inputs.map((row) => httpInfer('concurrent', { rows: [row] })));
    const after = await stats('concurrent');
    expect(results.map((r) => r.status)).toEqual(inputs.map(() => 200));
    expect(after.inference_count - before.inference_count).toBe(32);
    expect(after.execution_count - before.execution_count).toBeLessThan(32);
    expect(Math.max(...Object.keys(batchesSince(before, after)).map(Number))).toBeGreaterThan(1);
    // Split back correctly: a request sent alone gets the same output as inside a batch.
    for (const i of [0, 13, 31]) {
      const alone = await httpInfer('concurrent', { rows: [inputs[i]!] });
      expect(alone.output?.data).toEqual(results[i]!.output?.data);
    }
  });

  it('gRPC: the same, over ModelInfer', async () => {
    const before = await stats('concurrent');
    const results = await Promise.all(inputs.map((row) => grpcInfer('concurrent', { rows: [row] })));
    const after = await stats('concurrent');
    expect(after.execution_count - before.execution_count).toBeLessThan(32);
    for (const r of results) expect(r.shape).toEqual([1, 512]);
    const alone = await grpcInfer('concurrent', { rows: [inputs[5]!] });
    expect(alone.values).toEqual(results[5]!.values);
  });

  it('a preferred batch size is sent at once, long before the queue delay', async () => {
    const before = await stats('preferred');
    const labels = 'model="preferred",version="1"';
    const [execBefore, countBefore] = [await metric('nv_inference_exec_count', labels), await metric('nv_inference_count', labels)];
    const rows = rowsOf(4, (i) => [i, i, i, i]);
    const results = await Promise.all(rows.map((row) => httpInfer('preferred', { rows: [row] })));
    const after = await stats('preferred');
    for (const [i, r] of results.entries()) {
      expect(r.output?.data).toEqual(plusOne([rows[i]!]));
      expect(r.ms).toBeLessThan(4000); // the delay is 5 s
    }
    expect(batchesSince(before, after)).toEqual({ 4: 1 });
    expect(after.execution_count - before.execution_count).toBe(1);
    // Prometheus counts the same way: one execution, four inferences.
    expect(await metric('nv_inference_exec_count', labels)).toBe(execBefore + 1);
    expect(await metric('nv_inference_count', labels)).toBe(countBefore + 4);
  });

  it('gRPC: two requests of batch 2 make the preferred 4', async () => {
    const before = await stats('preferred');
    const [a, b] = await Promise.all([grpcInfer('preferred', { rows: [[1, 1, 1, 1], [2, 2, 2, 2]] }), grpcInfer('preferred', { rows: [[3, 3, 3, 3], [4, 4, 4, 4]] })]);
    expect(a.shape).toEqual([2, 4]);
    expect(a.values).toEqual([2, 2, 2, 2, 3, 3, 3, 3]);
    expect(b.values).toEqual([4, 4, 4, 4, 5, 5, 5, 5]);
    expect(batchesSince(before, await stats('preferred'))).toEqual({ 4: 1 });
  });

  it('below any preferred size, a batch waits for max_queue_delay_microseconds and then goes together', async () => {
    const before = await stats('delayed');
    const results = await Promise.all([httpInfer('delayed', { rows: [[1, 2, 3, 4]] }), httpInfer('delayed', { rows: [[5, 6, 7, 8]] })]);
    const after = await stats('delayed');
    expect(results.map((r) => r.output?.data)).toEqual([
      [2, 3, 4, 5],
      [6, 7, 8, 9],
    ]);
    expect(Math.max(...results.map((r) => r.ms))).toBeGreaterThanOrEqual(290);
    expect(batchesSince(before, after)).toEqual({ 2: 1 });
    // Queue time counts per request, compute per execution.
    expect(after.inference_stats.queue.count - before.inference_stats.queue.count).toBe(2);
  });

  it('requests whose variable-size inputs differ in shape never share a batch', async () => {
    const before = await stats('variable');
    const a3 = httpInfer('variable', { rows: [[1, 2, 3]] });
    await untilQueued('variable', 1);
    const b3 = httpInfer('variable', { rows: [[4, 5, 6], [7, 8, 9]] });
    await untilQueued('variable', 2);
    const c5 = httpInfer('variable', { rows: [[1, 1, 1, 1, 1]] }); // closes the [.,3] batch: sent now
    const [ra, rb] = await Promise.all([a3, b3]);
    expect(ra.output).toMatchObject({ shape: [1, 3], data: [1, 2, 3] });
    expect(rb.output).toMatchObject({ shape: [2, 3], data: [4, 5, 6, 7, 8, 9] });
    const d5 = grpcInfer('variable', { rows: [[2, 2, 2, 2, 2]] });
    const [rc, rd] = await Promise.all([c5, d5]);
    expect(rc.output).toMatchObject({ shape: [1, 5], data: [1, 1, 1, 1, 1] });
    expect(rd).toEqual({ shape: [1, 5], values: [2, 2, 2, 2, 2] });
    expect(batchesSince(before, await stats('variable'))).toEqual({ 3: 1, 2: 1 });
  });
});

describe('ragged batching (qa L0_batcher test_multi_batch_different_shape_allow_ragged)', () => {
  it('requests of shapes [1,16] and [1,8] share one execution of batch 2, each getting its own elements in its own shape', async () => {
    const before = await stats('ragged');
    const a = range(16, (i) => i + 0.5);
    const b = range(8, (i) => -i - 0.25);
    // HTTP first: alone it waits (1 is below every preferred size); the gRPC request makes the preferred 2.
    const http = httpInfer('ragged', { rows: [a] });
    await untilQueued('ragged', 1);
    const started = performance.now();
    const [rh, rg] = await Promise.all([http, grpcInfer('ragged', { rows: [b] })]);
    // Sent at the preferred size, long before the 10 s queue delay.
    expect(performance.now() - started).toBeLessThan(5000);
    expect(rh.status).toBe(200);
    expect(rh.output).toEqual({ name: 'OUTPUT0', datatype: 'FP32', shape: [1, 16], data: a });
    expect(rg).toEqual({ shape: [1, 8], values: b });
    const after = await stats('ragged');
    expect(batchesSince(before, after)).toEqual({ 2: 1 });
    expect(after.execution_count - before.execution_count).toBe(1);
    expect(after.inference_count - before.inference_count).toBe(2);
  });

  it('requests of several rows and different widths scatter back in order', async () => {
    const before = await stats('ragged');
    const rows = rowsOf(3, (r) => range(2, (i) => 10 * r + i));
    const first = httpInfer('ragged', { rows });
    await untilQueued('ragged', 1);
    // 3 + 3 rows: the preferred 6.
    const wide = rowsOf(3, (r) => range(5, (i) => 100 * r + i));
    const [r1, r2] = await Promise.all([first, grpcInfer('ragged', { rows: wide })]);
    expect(r1.output).toMatchObject({ shape: [3, 2], data: rows.flat() });
    expect(r2).toEqual({ shape: [3, 5], values: wide.flat() });
    expect(batchesSince(before, await stats('ragged'))).toEqual({ 6: 1 });
  });
});

// --- queue policy and priority ---------------------------------------------------------------------

describe('queue policy', () => {
  it('HTTP: a request past max_queue_size is refused at once with 503 and Triton’s message', async () => {
    const rejectedBefore = await metric('nv_inference_request_failure', 'model="queue_full",reason="REJECTED",version="1"');
    const queued = [httpInfer('queue_full', {}), httpInfer('queue_full', {})];
    await untilQueued('queue_full', 2);
    const refused = await httpInfer('queue_full', { id: 'third' });
    expect(refused.status).toBe(503);
    expect(refused.json).toEqual({ error: '[request id: third] Exceeds maximum queue size' });
    expect(refused.ms).toBeLessThan(1000); // the queued ones wait 1.5 s
    expect((await Promise.all(queued)).map((r) => r.status)).toEqual([200, 200]);
    expect(await metric('nv_inference_request_failure', 'model="queue_full",reason="REJECTED",version="1"')).toBe(rejectedBefore + 1);
  });

  it('gRPC: UNAVAILABLE with the same message', async () => {
    const queued = [grpcInfer('queue_full', {}), grpcInfer('queue_full', {})];
    await untilQueued('queue_full', 2);
    const err = await unaryError(grpcClient, 'ModelInfer', {
      model_name: 'queue_full',
      id: 'g3',
      inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 4] }],
      raw_input_contents: [fp32Bytes([0, 0, 0, 0])],
    });
    expect(err.code).toBe(grpc.status.UNAVAILABLE);
    expect(err.details).toBe('[request id: g3] Exceeds maximum queue size');
    await Promise.all(queued);
  });

  it('HTTP: a request timeout shorter than the default rejects the request when it expires (503)', async () => {
    const r = await httpInfer('timeout', { parameters: { timeout: 200_000 } });
    expect(r.status).toBe(503);
    expect(r.json).toEqual({ error: 'Request timeout expired' });
    expect(r.ms).toBeGreaterThanOrEqual(190);
    expect(r.ms).toBeLessThan(900); // the default timeout is 1 s
  });

  it('gRPC: the default timeout applies without a request timeout: UNAVAILABLE "Request timeout expired"', async () => {
    const started = performance.now();
    const err = await unaryError(grpcClient, 'ModelInfer', {
      model_name: 'timeout',
      inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 4] }],
      raw_input_contents: [fp32Bytes([0, 0, 0, 0])],
    });
    expect(performance.now() - started).toBeGreaterThanOrEqual(990);
    expect(err.code).toBe(grpc.status.UNAVAILABLE);
    expect(err.details).toBe('Request timeout expired');
  });

  it('gRPC: a timeout longer than the default does not extend it; a negative int64 is ignored', async () => {
    const request = (timeout: number) => ({
      model_name: 'timeout',
      parameters: { timeout: { int64_param: timeout } },
      inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 4] }],
      raw_input_contents: [fp32Bytes([0, 0, 0, 0])],
    });
    const started = performance.now();
    const [long, negative] = await Promise.all([unaryError(grpcClient, 'ModelInfer', request(30_000_000)), unaryError(grpcClient, 'ModelInfer', request(-5))]);
    expect(performance.now() - started).toBeLessThan(10_000); // not 30 s
    expect([long.details, negative.details]).toEqual(['Request timeout expired', 'Request timeout expired']);
  });
});

describe('priority', () => {
  // qa L0_batcher test_priority_levels: a (batch 2) and b (batch 1) wait at the default level;
  // c (batch 2) at level 1 goes in front and makes the preferred 4 with a; b waits for the delay.
  // FIFO would have sent a+b (3) and left c waiting.
  async function scenario(send: (rows: number[][], priority?: number) => Promise<number[]>) {
    const before = await stats('priority');
    const done: string[] = [];
    const track = (name: string, p: Promise<number[]>) => p.then((v) => (done.push(name), v));
    const a = track('a', send([[1, 1, 1, 1], [2, 2, 2, 2]]));
    await untilQueued('priority', 1);
    const b = track('b', send([[3, 3, 3, 3]]));
    await untilQueued('priority', 2);
    const c = track('c', send([[4, 4, 4, 4], [5, 5, 5, 5]], 1));
    const [ra, rc] = await Promise.all([a, c]);
    expect(done).not.toContain('b');
    expect(ra).toEqual([2, 2, 2, 2, 3, 3, 3, 3]);
    expect(rc).toEqual([5, 5, 5, 5, 6, 6, 6, 6]);
    expect(await b).toEqual([4, 4, 4, 4]);
    expect(done[2]).toBe('b');
    expect(batchesSince(before, await stats('priority'))).toEqual({ 4: 1, 1: 1 });
  }

  it('HTTP: the request parameter "priority" puts a request ahead of lower levels', async () => {
    await scenario(async (rows, priority) => {
      const r = await httpInfer('priority', { rows, ...(priority !== undefined ? { parameters: { priority } } : {}) });
      expect(r.status).toBe(200);
      return r.output!.data;
    });
  });

  it('gRPC: the same with a uint64 priority parameter', async () => {
    await scenario(async (rows, priority) => {
      const r = await grpcInfer('priority', { rows, ...(priority !== undefined ? { parameters: { priority: { uint64_param: priority } } } : {}) });
      return r.values;
    });
  });
});

describe('bad priority and timeout parameters', () => {
  it('HTTP: a non-integer priority fails to parse (Triton: 500 for JSON type errors)', async () => {
    const r = await httpInfer('preferred', { parameters: { priority: 'high' } });
    expect(r.status).toBe(500);
    expect(r.json.error).toContain("Unable to parse 'priority'");
  });

  it('HTTP: a negative timeout fails to parse', async () => {
    const r = await httpInfer('timeout', { parameters: { timeout: -1 } });
    expect(r.status).toBe(500);
    expect(r.json.error).toContain("Unable to parse 'timeout'");
  });

  it('gRPC: wrong parameter types are INVALID_ARGUMENT with Triton’s messages', async () => {
    const request = (parameters: object) => ({
      model_name: 'preferred',
      parameters,
      inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 4] }],
      raw_input_contents: [fp32Bytes([0, 0, 0, 0])],
    });
    const p = await unaryError(grpcClient, 'ModelInfer', request({ priority: { string_param: 'high' } }));
    expect(p.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(p.details).toBe("invalid value type for 'priority' parameter, expected int64_param or uint64_param.");
    const t = await unaryError(grpcClient, 'ModelInfer', request({ timeout: { bool_param: true } }));
    expect(t.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(t.details).toBe("invalid value type for 'timeout' parameter, expected int64_param.");
  });

  it('a priority above priority_levels runs at the default level', async () => {
    const rows = rowsOf(4, (i) => [i, 0, 0, 0]);
    const results = await Promise.all(rows.map((row) => httpInfer('priority', { rows: [row], parameters: { priority: 99 } })));
    expect(results.map((r) => r.status)).toEqual([200, 200, 200, 200]);
  });
});
