/**
 * Ensembles through a real engine (ONNX Runtime and JavaScript composing models in a temporary
 * repository): routing between steps, fan-out / fan-in, pruning to the requested outputs, step
 * errors, decoupled steps, statistics.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createEngine, type Engine } from '../engine.js';
import { ENSEMBLE_MODELS } from './ensemble-test-models.js';
import { createRepository, float32s, int32s, request, tensor, type RepositoryFixture } from '../test-support/repository-fixture.js';
import type { InferResult } from '../types.js';

const fp32 = (name: string, rows: number[][]) => tensor(name, 'FP32', [rows.length, 4], new Float32Array(rows.flat()));

/** Every result of one submitted request, up to its final one. */
function collect(engine: Engine, req: Parameters<Engine['submit']>[0]): Promise<InferResult[]> {
  return new Promise((resolve) => {
    const results: InferResult[] = [];
    engine.submit(req, (r) => {
      results.push(r);
      if (r.final) resolve(results);
    });
  });
}

let repo: RepositoryFixture;
let engine: Engine;
beforeAll(async () => {
  repo = await createRepository(ENSEMBLE_MODELS);
  engine = await createEngine({ modelRepositories: [repo.root] });
}, 60_000);
afterAll(async () => {
  await engine?.shutdown();
  await repo?.cleanup();
});

describe('an ensemble request', () => {
  it('routes tensors through a fan-out / fan-in and answers the requested outputs', async () => {
    const res = await engine.infer(request('diamond', [fp32('IN', [[1, 2, 3, 4], [0, 0, 0, 0]])], { id: 'd1' }));
    expect(res).toMatchObject({ id: 'd1', modelName: 'diamond', modelVersion: '1' });
    expect(res.outputs.map((o) => [o.name, o.datatype, o.shape])).toEqual([
      ['SUM', 'FP32', [2, 4]],
      ['DIFF', 'FP32', [2, 4]],
      ['LEFT', 'FP32', [2, 4]],
    ]);
    expect(float32s(res.outputs[0]!.data)).toEqual([5, 7, 9, 11, 3, 3, 3, 3]);
    expect(float32s(res.outputs[1]!.data)).toEqual(Array(8).fill(-1));
    expect(float32s(res.outputs[2]!.data)).toEqual([2, 3, 4, 5, 1, 1, 1, 1]);
  });

  it('runs only the steps the requested outputs need', async () => {
    const before = engine.modelStatistics('sumdiff')[0]!.inference_stats.success.count;
    const res = await engine.infer(request('diamond', [fp32('IN', [[1, 1, 1, 1]])], { outputs: [{ name: 'LEFT', parameters: {} }] }));
    expect(res.outputs.map((o) => o.name)).toEqual(['LEFT']);
    expect(float32s(res.outputs[0]!.data)).toEqual([2, 2, 2, 2]);
    expect(engine.modelStatistics('sumdiff')[0]!.inference_stats.success.count).toBe(before);
  });

  it('fails with the step error, counted on the ensemble, and the server keeps serving', async () => {
    const failuresBefore = engine.metricsSnapshot().find((s) => s.statistics.name === 'guarded')!.failures.OTHER;
    await expect(engine.infer(request('guarded', [fp32('IN', [[-5, 0, 0, 0]])], { id: 'g1' }))).rejects.toMatchObject({
      code: 'invalid_argument',
      message: "in ensemble 'guarded', negative input",
    });
    const ok = await engine.infer(request('guarded', [fp32('IN', [[1, 2, 3, 4]])]));
    expect(float32s(ok.outputs[0]!.data)).toEqual([2, 3, 4, 5]);
    const snapshot = engine.metricsSnapshot().find((s) => s.statistics.name === 'guarded')!;
    expect(snapshot.failures.OTHER - failuresBefore).toBe(1);
    // A bad request for a step (here: its shape) fails the ensemble the same way.
    await expect(engine.infer(request('guarded', [tensor('IN', 'FP32', [1, 3], new Float32Array(3))]))).rejects.toMatchObject({
      code: 'invalid_argument',
      message: expect.stringContaining("unexpected shape for input 'IN' for model 'guarded'"),
    });
  });

  it('streams one response per response of a decoupled step', async () => {
    expect(engine.modelConfig('counted').model_transaction_policy).toEqual({ decoupled: true });
    expect(engine.modelConfig('diamond').model_transaction_policy).toEqual({ decoupled: false });
    const results = await collect(engine, request('counted', [tensor('IN', 'INT32', [1], Int32Array.of(3))]));
    expect(results.map((r) => [r.final, r.response === undefined ? undefined : int32s(r.response.outputs[0]!.data)[0]])).toEqual([
      [false, 0],
      [false, 10],
      [false, 20],
      [true, undefined],
    ]);
    // Zero responses from the decoupled step: only the final flag.
    const none = await collect(engine, request('counted', [tensor('IN', 'INT32', [1], Int32Array.of(0))]));
    expect(none).toEqual([{ final: true }]);
  });

  it('counts one execution per ensemble request, with the steps compute times', async () => {
    const before = engine.modelStatistics('diamond')[0]!;
    await engine.infer(request('diamond', [fp32('IN', [[1, 1, 1, 1], [2, 2, 2, 2], [3, 3, 3, 3]])]));
    const after = engine.modelStatistics('diamond')[0]!;
    expect(after.inference_count - before.inference_count).toBe(3);
    expect(after.execution_count - before.execution_count).toBe(1);
    expect(after.inference_stats.success.count - before.inference_stats.success.count).toBe(1);
    expect(after.inference_stats.compute_infer.count - before.inference_stats.compute_infer.count).toBe(1);
    expect(after.inference_stats.compute_infer.ns).toBeGreaterThan(before.inference_stats.compute_infer.ns);
    expect(after.batch_stats.find((b) => b.batch_size === 3)?.compute_infer.count).toBe(1);
    // Each step is an ordinary request of its composing model.
    expect(engine.modelStatistics('add2')[0]!.inference_count).toBeGreaterThanOrEqual(3);
  });
});
