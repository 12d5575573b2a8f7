import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SwitchyardError } from '@switchyard/common';
import { createEngine, type Engine } from './engine.js';
import type { InferenceTrace } from './types.js';
import { buildIdentityModel, buildSimpleModel } from '@switchyard/onnx-builder';
import { createRepository, int32s, request, SIMPLE_CONFIG, tensor, type RepositoryFixture } from './test-support/repository-fixture.js';

const seq = (n: number, f = (i: number) => i): Int32Array => Int32Array.from({ length: n }, (_, i) => f(i));

describe('engine core path', () => {
  let repo: RepositoryFixture;
  let engine: Engine;

  beforeAll(async () => {
    repo = await createRepository({
      simple: { config: SIMPLE_CONFIG, versions: { 1: { 'model.onnx': buildSimpleModel() } } },
      auto_identity: { versions: { 1: { 'model.onnx': buildIdentityModel('FLOAT', ['batch', 4]) } } },
      corrupt: { config: 'platform: "onnxruntime_onnx"', versions: { 1: { 'model.onnx': new Uint8Array([1, 2, 3, 4, 5]) } } },
      tensorrt_model: { config: 'platform: "tensorrt_plan"\nmax_batch_size: 1', versions: { 1: { 'model.plan': 'x' } } },
    });
    engine = await createEngine({ modelRepositories: [repo.root] });
  });

  afterAll(async () => {
    await engine.shutdown();
    await repo.cleanup();
  });

  it('runs simple: OUTPUT0 = a + b, OUTPUT1 = a - b', async () => {
    const a = seq(16);
    const b = seq(16, () => 1);
    const response = await engine.infer(
      request('simple', [tensor('INPUT0', 'INT32', [1, 16], a), tensor('INPUT1', 'INT32', [1, 16], b)], { id: 'r1' }),
    );
    expect(response.id).toBe('r1');
    expect(response.modelName).toBe('simple');
    expect(response.modelVersion).toBe('1');
    expect(response.outputs.map((o) => o.name)).toEqual(['OUTPUT0', 'OUTPUT1']);
    expect(response.outputs[0]?.shape).toEqual([1, 16]);
    expect(response.outputs[0]?.datatype).toBe('INT32');
    expect(int32s(response.outputs[0]!.data)).toEqual(Array.from(a, (x) => x + 1));
    expect(int32s(response.outputs[1]!.data)).toEqual(Array.from(a, (x) => x - 1));
  });

  it('reports a traced request: model, activities in order, tensors only when wanted', async () => {
    const log: string[] = [];
    const stamps: bigint[] = [];
    const trace = (wantsTensors: boolean): InferenceTrace => ({
      wantsTensors,
      start: (m, v, id) => log.push(`start ${m} ${v} ${id}`),
      activity: (a, ns) => {
        log.push(a);
        stamps.push(ns);
      },
      tensor: (a, t) => log.push(`${a} ${t.name}`),
      child: () => trace(wantsTensors),
    });
    const inputs = [tensor('INPUT0', 'INT32', [1, 16], seq(16)), tensor('INPUT1', 'INT32', [1, 16], seq(16))];
    await engine.infer(request('simple', inputs, { id: 't1' }), { trace: trace(false) });
    expect(log).toEqual(['start simple 1 t1', 'REQUEST_START', 'QUEUE_START', 'COMPUTE_START', 'COMPUTE_INPUT_END', 'COMPUTE_OUTPUT_START', 'COMPUTE_END', 'REQUEST_END']);
    expect(stamps.every((ns, i) => i === 0 || ns >= stamps[i - 1]!)).toBe(true);
    log.length = 0;
    await engine.infer(request('simple', inputs), { trace: trace(true) });
    expect(log.filter((l) => l.startsWith('TENSOR'))).toEqual(['TENSOR_QUEUE_INPUT INPUT0', 'TENSOR_QUEUE_INPUT INPUT1', 'TENSOR_BACKEND_OUTPUT OUTPUT0', 'TENSOR_BACKEND_OUTPUT OUTPUT1']);
    log.length = 0;
    // a request refused by validation still starts and ends
    await expect(engine.infer(request('simple', [inputs[0]!]), { trace: trace(false) })).rejects.toThrow();
    expect(log).toEqual(['start simple 1 ', 'REQUEST_START', 'REQUEST_END']);
  });

  it('returns only requested outputs, in request order', async () => {
    const a = seq(32);
    const response = await engine.infer(
      request('simple', [tensor('INPUT0', 'INT32', [2, 16], a), tensor('INPUT1', 'INT32', [2, 16], a)], {
        outputs: [{ name: 'OUTPUT1', parameters: {} }],
      }),
    );
    expect(response.outputs.map((o) => o.name)).toEqual(['OUTPUT1']);
    expect(response.outputs[0]?.shape).toEqual([2, 16]);
    expect(int32s(response.outputs[0]!.data)).toEqual(new Array(32).fill(0));
  });

  it('serves metadata and config', () => {
    expect(engine.modelMetadata('simple')).toEqual({
      name: 'simple',
      versions: ['1'],
      platform: 'onnxruntime_onnx',
      inputs: [
        { name: 'INPUT0', datatype: 'INT32', shape: [-1, 16] },
        { name: 'INPUT1', datatype: 'INT32', shape: [-1, 16] },
      ],
      outputs: [
        { name: 'OUTPUT0', datatype: 'INT32', shape: [-1, 16] },
        { name: 'OUTPUT1', datatype: 'INT32', shape: [-1, 16] },
      ],
    });
    const config = engine.modelConfig('simple');
    expect(config.backend).toBe('onnxruntime');
    expect(config.instance_group[0]?.count).toBe(2);
    expect(config.instance_group[0]?.kind).toBe('KIND_CPU');
    expect(config.default_model_filename).toBe('model.onnx');
  });

  it('auto-completes a model without config.pbtxt', () => {
    const config = engine.modelConfig('auto_identity');
    expect(config.name).toBe('auto_identity');
    expect(config.platform).toBe('onnxruntime_onnx');
    expect(config.max_batch_size).toBe(4);
    expect(config.dynamic_batching?.preferred_batch_size).toEqual([4]);
    expect(config.input).toMatchObject([{ name: 'INPUT0', data_type: 'TYPE_FP32', dims: [4] }]);
    expect(config.output).toMatchObject([{ name: 'OUTPUT0', data_type: 'TYPE_FP32', dims: [4] }]);
  });

  it('keeps serving others while a corrupt model and an unsupported platform are UNAVAILABLE', async () => {
    const index = await engine.repositoryIndex(false);
    const corrupt = index.find((r) => r.name === 'corrupt');
    expect(corrupt).toMatchObject({ version: '1', state: 'UNAVAILABLE' });
    expect(corrupt?.reason).toMatch(/protobuf parsing failed/i);
    const trt = index.find((r) => r.name === 'tensorrt_model');
    expect(trt).toMatchObject({ version: '1', state: 'UNAVAILABLE' });
    expect(trt?.reason).toContain("backend 'tensorrt' is not supported by this server");
    expect(index.find((r) => r.name === 'simple')).toEqual({ name: 'simple', version: '1', state: 'READY' });
    expect((await engine.repositoryIndex(true)).map((r) => r.name)).toEqual(['auto_identity', 'simple']);
    expect(engine.isModelReady('simple')).toBe(true);
    expect(engine.isModelReady('corrupt')).toBe(false);
    // Strict readiness: a version that failed to load makes the server not ready.
    expect(engine.isReady()).toBe(false);
    expect(engine.isLive()).toBe(true);
  });

  it('reports Triton lookup errors', async () => {
    const err = (f: () => unknown): SwitchyardError => {
      try {
        f();
      } catch (e) {
        return e as SwitchyardError;
      }
      throw new Error('expected a throw');
    };
    expect(err(() => engine.modelMetadata('nope'))).toMatchObject({ code: 'invalid_argument', message: "Request for unknown model: 'nope' is not found" });
    expect(err(() => engine.modelMetadata('corrupt'))).toMatchObject({ code: 'not_found', message: "Request for unknown model: 'corrupt' has no available versions" });
    expect(err(() => engine.modelMetadata('simple', 9))).toMatchObject({ code: 'not_found', message: "Request for unknown model: 'simple' version 9 is not found" });
    expect(err(() => engine.modelMetadata('corrupt', 1))).toMatchObject({ code: 'unavailable', message: "Request for unknown model: 'corrupt' version 1 is not at ready state" });
    await expect(engine.infer(request('nope', []))).rejects.toMatchObject({ code: 'invalid_argument' });
  });

  it('counts statistics', async () => {
    const before = engine.modelStatistics('simple')[0]!;
    const a = seq(48);
    await engine.infer(request('simple', [tensor('INPUT0', 'INT32', [3, 16], a), tensor('INPUT1', 'INT32', [3, 16], a)]));
    await expect(engine.infer(request('simple', [tensor('INPUT0', 'INT32', [1, 16], seq(16))]))).rejects.toMatchObject({ code: 'invalid_argument' });
    const after = engine.modelStatistics('simple')[0]!;
    expect(after.name).toBe('simple');
    expect(after.version).toBe('1');
    expect(after.inference_count - before.inference_count).toBe(3);
    expect(after.execution_count - before.execution_count).toBe(1);
    expect(after.inference_stats.success.count - before.inference_stats.success.count).toBe(1);
    expect(after.inference_stats.fail.count - before.inference_stats.fail.count).toBe(1);
    expect(after.inference_stats.queue.count).toBe(after.inference_stats.success.count);
    expect(after.batch_stats.find((b) => b.batch_size === 3)?.compute_infer.count).toBe(1);
    expect(after.last_inference).toBeGreaterThan(0);
    expect(after.inference_stats.cache_hit).toEqual({ count: 0, ns: 0 });
    const snapshot = engine.metricsSnapshot().find((s) => s.statistics.name === 'simple')!;
    expect(snapshot.failures.OTHER).toBeGreaterThanOrEqual(1);
    expect(snapshot.pendingRequests).toBe(0);
    expect(snapshot.loadDurationSecs).toBeGreaterThan(0);
    expect(() => engine.modelStatistics('corrupt')).toThrow("requested model 'corrupt' is not available");
    expect(() => engine.modelStatistics('simple', 2)).toThrow("requested model version is not available for model 'simple'");
    expect(engine.modelStatistics().map((s) => s.name)).toEqual(['auto_identity', 'simple']);
  });

  it('refuses load/unload outside explicit mode', async () => {
    await expect(engine.loadModel('simple')).rejects.toMatchObject({
      code: 'unavailable',
      message: 'explicit model load / unload is not allowed if polling is enabled',
    });
    await expect(engine.unloadModel('simple')).rejects.toMatchObject({ code: 'unavailable' });
  });

  it('reports server metadata', () => {
    const meta = engine.serverMetadata();
    expect(meta.name).toBe('triton');
    expect(meta.extensions).toContain('model_repository');
    expect(meta.extensions).toContain('binary_tensor_data');
  });
});
