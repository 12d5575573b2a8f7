/**
 * Ensembles (`platform: "ensemble"`) end to end, over HTTP and gRPC against a real worker in
 * explicit mode: the example text pipeline (tokenizer → text_classifier → postprocess), a
 * fan-out / fan-in DAG, a step that fails inside an ensemble, an ensemble whose composing model
 * is missing, explicit loads pulling in composing models, unloads taking ensembles down,
 * `unload_dependents`, steps batched by their model's dynamic batcher, a decoupled step in a
 * decoupled ensemble over gRPC streaming, and statistics.
 * Models: test/fixtures/ensemble_repository (README there) plus the example pipeline's folders,
 * copied to a temporary repository where the ONNX files are written.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BATCH_DIM, buildAddConstantModel, buildIdentityModel, buildSimpleModel } from '@switchyard/onnx-builder';
import { startWorkerProcess, type WorkerProcess } from '@switchyard/testing';
import { exampleFile, fixtureRepository, type FixtureRepository } from './lib/fixture-repository.js';
import { grpc, isFinalResponse, loadGrpcClients, streamInfer, unary, unaryError, type GrpcClient } from './lib/grpc-client.js';
import { deserializeStrings, fp32Bytes, get, int32Bytes, post, readFp32, readInt32, serializeStrings, serverSentEvents } from './lib/tensors.js';

const PIPELINE = ['tokenizer', 'text_classifier', 'postprocess', 'text_pipeline'];

const prepareRepository = (): FixtureRepository =>
  fixtureRepository('ensemble_repository', {
    overlay: Object.fromEntries(PIPELINE.map((name) => [name, `examples/model_repository/${name}`])),
    files: {
      'text_classifier/1/model.onnx': exampleFile('text_classifier/1/model.onnx'),
      'add_one/1/model.onnx': buildAddConstantModel(1),
      'add_two/1/model.onnx': buildAddConstantModel(2),
      'sum_diff/1/model.onnx': buildSimpleModel({ elemType: 'FLOAT', dims: [BATCH_DIM, 4], graphName: 'sum_diff' }),
      'batched_identity/1/model.onnx': buildIdentityModel('FLOAT', [BATCH_DIM, 4]),
    },
  });

let repo: FixtureRepository;
let worker: WorkerProcess;
let client: GrpcClient;
const url = (path: string): string => `${worker.httpUrl}${path}`;

beforeAll(async () => {
  repo = prepareRepository();
  worker = await startWorkerProcess({
    modelRepositories: [repo.path],
    args: ['--model-control-mode=explicit', ...['text_pipeline', 'guarded', 'counted', 'batch_pipeline'].map((m) => `--load-model=${m}`)],
  });
  client = loadGrpcClients(worker.grpcAddress).inference;
}, 60_000);

afterAll(async () => {
  client?.close();
  await worker?.stop();
  repo?.remove();
});

const index = async (): Promise<{ name: string; version?: string; state?: string; reason?: string }[]> => (await post(url('/v2/repository/index'), {})).json();
const stateOf = async (name: string) => (await index()).filter((r) => r.name === name);
const readyNames = async () => (await index()).filter((r) => r.state === 'READY').map((r) => r.name);
const stats = async (model: string) => (await get(url(`/v2/models/${model}/stats`))).json().model_stats[0];
const fp32Input = (name: string, rows: number[][]) => ({ name, shape: [rows.length, 4], datatype: 'FP32', data: rows.flat() });

describe('the example text pipeline', () => {
  it('loading the ensemble (--load-model) loaded its composing models', async () => {
    expect(await readyNames()).toEqual(expect.arrayContaining(PIPELINE));
    const meta = (await get(url('/v2/models/text_pipeline'))).json();
    expect(meta).toEqual({
      name: 'text_pipeline',
      versions: ['1'],
      platform: 'ensemble',
      inputs: [{ name: 'TEXT', datatype: 'BYTES', shape: [-1, 1] }],
      outputs: [
        { name: 'LABEL', datatype: 'BYTES', shape: [-1, 1] },
        { name: 'SCORES', datatype: 'FP32', shape: [-1, 3] },
      ],
    });
    const config = (await get(url('/v2/models/text_pipeline/config'))).json();
    expect(config).toMatchObject({ platform: 'ensemble', instance_group: [], model_transaction_policy: { decoupled: false } });
    expect(config.ensemble_scheduling.step.map((s: { model_name: string }) => s.model_name)).toEqual(['tokenizer', 'text_classifier', 'postprocess']);
  });

  it('classifies strings over HTTP JSON', async () => {
    const texts = ['What a great movie, I loved it', 'A boring and terrible waste of time', 'The film is two hours long'];
    const res = await post(url('/v2/models/text_pipeline/infer'), { id: 'p1', inputs: [{ name: 'TEXT', shape: [3, 1], datatype: 'BYTES', data: texts }] });
    expect(res.status, res.body.toString()).toBe(200);
    const body = res.json();
    expect(body).toMatchObject({ id: 'p1', model_name: 'text_pipeline', model_version: '1' });
    const label = body.outputs.find((o: { name: string }) => o.name === 'LABEL');
    const scores = body.outputs.find((o: { name: string }) => o.name === 'SCORES');
    expect(label).toEqual({ name: 'LABEL', datatype: 'BYTES', shape: [3, 1], data: ['positive', 'negative', 'neutral'] });
    expect(scores.shape).toEqual([3, 3]);
    for (let row = 0; row < 3; row++) {
      const p = scores.data.slice(row * 3, row * 3 + 3) as number[];
      expect(p.reduce((a, b) => a + b, 0)).toBeCloseTo(1, 5);
    }
    // Classification on an ensemble output uses the ensemble's own label file.
    const top = await post(url('/v2/models/text_pipeline/infer'), {
      inputs: [{ name: 'TEXT', shape: [1, 1], datatype: 'BYTES', data: ['excellent'] }],
      outputs: [{ name: 'SCORES', parameters: { classification: 1 } }],
    });
    expect(top.json().outputs).toEqual([{ name: 'SCORES', datatype: 'BYTES', shape: [1, 1], data: [expect.stringMatching(/^0\.\d{6}:2:positive$/)] }]);
  });

  it('classifies strings over gRPC', async () => {
    const res = await unary(client, 'ModelInfer', {
      model_name: 'text_pipeline',
      id: 'g1',
      inputs: [{ name: 'TEXT', datatype: 'BYTES', shape: [2, 1] }],
      outputs: [{ name: 'LABEL' }],
      raw_input_contents: [serializeStrings(['I hate it, the worst', 'brilliant and wonderful'])],
    });
    expect(res).toMatchObject({ model_name: 'text_pipeline', model_version: '1', id: 'g1' });
    expect(res.outputs.map((o: { name: string; datatype: string; shape: number[] }) => [o.name, o.datatype, o.shape])).toEqual([['LABEL', 'BYTES', [2, 1]]]);
    expect(deserializeStrings(res.raw_output_contents[0])).toEqual(['negative', 'positive']);
    const meta = await unary(client, 'ModelMetadata', { name: 'text_pipeline' });
    expect(meta.platform).toBe('ensemble');
  });

  it('a bad request is refused by the ensemble with its own name', async () => {
    const res = await post(url('/v2/models/text_pipeline/infer'), { inputs: [{ name: 'TEXT', shape: [1, 1], datatype: 'INT32', data: [1] }] });
    expect(res.status).toBe(400);
    expect(res.json().error).toContain("inference input 'TEXT' data-type is 'INT32', but model 'text_pipeline' expects 'BYTES'");
  });
});

describe('a fan-out / fan-in ensemble', () => {
  it('explicit load pulls in its composing models, and the DAG routes tensors', async () => {
    expect(await stateOf('add_two')).toEqual([{ name: 'add_two' }]);
    const load = await post(url('/v2/repository/models/fan/load'), {});
    expect(load.status, load.body.toString()).toBe(200);
    expect(await readyNames()).toEqual(expect.arrayContaining(['fan', 'add_one', 'add_two', 'sum_diff']));
    const res = await post(url('/v2/models/fan/infer'), { inputs: [fp32Input('IN', [[1, 2, 3, 4], [0, 0, 0, 0]])] });
    expect(res.status, res.body.toString()).toBe(200);
    const out = Object.fromEntries(res.json().outputs.map((o: { name: string; data: number[]; shape: number[] }) => [o.name, [o.shape, o.data]]));
    expect(out.SUM).toEqual([[2, 4], [5, 7, 9, 11, 3, 3, 3, 3]]);
    expect(out.DIFF).toEqual([[2, 4], Array(8).fill(-1)]);
    expect(out.LEFT).toEqual([[2, 4], [2, 3, 4, 5, 1, 1, 1, 1]]);
  });

  it('answers only the requested outputs over gRPC (binary)', async () => {
    const res = await unary(client, 'ModelInfer', {
      model_name: 'fan',
      inputs: [{ name: 'IN', datatype: 'FP32', shape: [1, 4] }],
      outputs: [{ name: 'DIFF' }],
      raw_input_contents: [fp32Bytes([5, 5, 5, 5])],
    });
    expect(res.outputs.map((o: { name: string }) => o.name)).toEqual(['DIFF']);
    expect(readFp32(res.raw_output_contents[0])).toEqual([-1, -1, -1, -1]);
  });
});

describe('errors inside an ensemble', () => {
  it('a failing step fails the request with its message and code; the server keeps serving (HTTP and gRPC)', async () => {
    const bad = await post(url('/v2/models/guarded/infer'), { id: 'bad1', inputs: [fp32Input('IN', [[-3, 0, 0, 0]])] });
    expect(bad.status).toBe(400);
    expect(bad.json()).toEqual({ error: "in ensemble 'guarded', negative input" });
    const err = await unaryError(client, 'ModelInfer', {
      model_name: 'guarded',
      inputs: [{ name: 'IN', datatype: 'FP32', shape: [1, 4] }],
      raw_input_contents: [fp32Bytes([-9, 1, 1, 1])],
    });
    expect(err.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(err.details).toBe("in ensemble 'guarded', negative input");
    const good = await post(url('/v2/models/guarded/infer'), { inputs: [fp32Input('IN', [[1, 2, 3, 4]])] });
    expect(good.status).toBe(200);
    expect(good.json().outputs[0].data).toEqual([2, 3, 4, 5]);
    expect((await get(url('/v2/health/ready'))).status).toBe(200);
    const s = await stats('guarded');
    expect(s.inference_stats.fail.count).toBe(2);
    expect(s.inference_stats.success.count).toBe(1);
    const metrics = await (await fetch(`${worker.metricsUrl}/metrics`)).text();
    expect(metrics).toContain('nv_inference_request_failure{model="guarded",reason="OTHER",version="1"} 2');
  });

  it('an ensemble whose composing model is missing does not load: 400 with the reason, UNAVAILABLE in the index', async () => {
    const res = await post(url('/v2/repository/models/orphaned/load'), {});
    expect(res.status).toBe(400);
    expect(res.json().error).toBe("load failed for model 'orphaned': ensemble orphaned contains models that are not available or ambiguous: does_not_exist");
    expect(await stateOf('orphaned')).toEqual([
      { name: 'orphaned', state: 'UNAVAILABLE', reason: 'ensemble orphaned contains models that are not available or ambiguous: does_not_exist' },
    ]);
    expect((await get(url('/v2/models/orphaned/ready'))).status).toBe(400);
    const err = await unaryError(client, 'RepositoryModelLoad', { model_name: 'orphaned' });
    expect(err.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(err.details).toContain('contains models that are not available or ambiguous: does_not_exist');
    // Strict readiness is about model versions: the server stays ready.
    expect((await get(url('/v2/health/ready'))).status).toBe(200);
  });
});

describe('unloading', () => {
  it('unloading a composing model takes the ensemble down; loading the ensemble again brings both back', async () => {
    expect((await post(url('/v2/repository/models/fan/load'), {})).status).toBe(200);
    expect((await post(url('/v2/repository/models/add_two/unload'), {})).status).toBe(200);
    expect(await stateOf('fan')).toEqual([{ name: 'fan', version: '1', state: 'UNAVAILABLE', reason: 'unloaded' }]);
    expect((await get(url('/v2/models/fan/ready'))).status).toBe(400);
    const res = await post(url('/v2/models/fan/infer'), { inputs: [fp32Input('IN', [[1, 1, 1, 1]])] });
    expect(res.status).toBe(404);
    expect(await readyNames()).toEqual(expect.arrayContaining(['add_one', 'sum_diff']));
    expect((await post(url('/v2/repository/models/fan/load'), {})).status).toBe(200);
    expect(await readyNames()).toEqual(expect.arrayContaining(['fan', 'add_two']));
  });

  it('unload_dependents also unloads the composing models loaded only for the ensemble (gRPC)', async () => {
    expect((await post(url('/v2/repository/models/fan/load'), {})).status).toBe(200);
    await unary(client, 'RepositoryModelUnload', { model_name: 'fan', parameters: { unload_dependents: { bool_param: true } } });
    const ready = await readyNames();
    expect(ready).not.toContain('fan');
    expect(ready).not.toContain('add_two');
    expect(ready).not.toContain('sum_diff');
    // add_one is still used by `guarded`.
    expect(ready).toContain('add_one');
    expect(ready).toContain('guarded');
  });
});

describe('steps on their own schedulers', () => {
  it("concurrent ensemble requests are batched by a composing model's dynamic batcher", async () => {
    const before = await stats('batched_identity');
    const results = await Promise.all([1, 2, 3, 4].map((v) => post(url('/v2/models/batch_pipeline/infer'), { inputs: [fp32Input('IN', [[v, v, v, v]])] })));
    expect(results.map((r) => r.json().outputs[0].data[0])).toEqual([1, 2, 3, 4]);
    const after = await stats('batched_identity');
    expect(after.inference_count - before.inference_count).toBe(4);
    expect(after.execution_count - before.execution_count).toBe(1);
    expect(after.batch_stats.find((b: { batch_size: number }) => b.batch_size === 4)?.compute_infer.count).toBe(1);
    // The ensemble counts one execution per request.
    const ensemble = await stats('batch_pipeline');
    expect(ensemble.inference_count).toBe(4);
    expect(ensemble.execution_count).toBe(4);
  });
});

describe('a decoupled step', () => {
  const counted = (id: string, n: number, parameters: object = {}) => ({
    model_name: 'counted',
    id,
    parameters,
    inputs: [{ name: 'IN', datatype: 'INT32', shape: [1] }],
    raw_input_contents: [int32Bytes([n])],
  });

  it('makes the ensemble decoupled: it streams one response per response of the step over gRPC', async () => {
    const config = (await get(url('/v2/models/counted/config'))).json();
    expect(config.model_transaction_policy).toEqual({ decoupled: true });
    const ask = { triton_enable_empty_final_response: { bool_param: true } };
    const responses = await streamInfer(client, [counted('c1', 3, ask)]);
    expect(responses.map((r) => r.error_message)).toEqual(['', '', '', '']);
    const values = responses.slice(0, 3).map((r) => {
      const byName = Object.fromEntries(r.infer_response.outputs.map((o: { name: string }, i: number) => [o.name, readInt32(r.infer_response.raw_output_contents[i])[0]]));
      return [byName.COUNT, byName.OUT];
    });
    expect(values).toEqual([
      [0, 0],
      [1, 10],
      [2, 20],
    ]);
    expect(responses.map(isFinalResponse)).toEqual([false, false, false, true]);
    expect(responses[0].infer_response).toMatchObject({ model_name: 'counted', model_version: '1', id: 'c1' });
  });

  it('HTTP infer refuses it (501); generate_stream streams it', async () => {
    const res = await post(url('/v2/models/counted/infer'), { inputs: [{ name: 'IN', shape: [1], datatype: 'INT32', data: [2] }] });
    expect(res.status).toBe(501);
    const sse = await post(url('/v2/models/counted/generate_stream'), { IN: 2 });
    expect(sse.status).toBe(200);
    const events = serverSentEvents(sse.body);
    expect(events.map((e) => [e.COUNT, e.OUT])).toEqual([
      [0, 0],
      [1, 10],
    ]);
  });

  it('counts the ensemble requests and their responses', async () => {
    const s = await stats('counted');
    expect(s.inference_stats.success.count).toBe(2);
    expect(s.execution_count).toBe(2);
    expect(s.response_stats['0'].success.count).toBe(2);
    expect(s.response_stats['2'].success.count).toBe(1);
  });
});

describe('statistics of an ensemble', () => {
  it("counts requests, inferences and executions as Triton does, compute times from the steps", async () => {
    const before = await stats('text_pipeline');
    const res = await post(url('/v2/models/text_pipeline/infer'), { inputs: [{ name: 'TEXT', shape: [2, 1], datatype: 'BYTES', data: ['good', 'bad'] }] });
    expect(res.status).toBe(200);
    const after = await stats('text_pipeline');
    expect(after.inference_count - before.inference_count).toBe(2);
    expect(after.execution_count - before.execution_count).toBe(1);
    expect(after.inference_stats.success.count - before.inference_stats.success.count).toBe(1);
    expect(after.inference_stats.queue.count).toBe(after.inference_stats.success.count);
    expect(after.inference_stats.compute_infer.ns).toBeGreaterThan(before.inference_stats.compute_infer.ns);
    expect(after.batch_stats.find((b: { batch_size: number }) => b.batch_size === 2)?.compute_infer.count).toBeGreaterThanOrEqual(1);
    const grpcStats = await unary(client, 'ModelStatistics', { name: 'text_pipeline' });
    expect(grpcStats.model_stats[0].inference_count).toBe(after.inference_count);
  });
});
