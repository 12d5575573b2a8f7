import { describe, expect, it } from 'vitest';
import { buildIdentityModel, buildSimpleModel } from '@switchyard/onnx-builder';
import { compileBackendConfig, DEFAULT_BACKEND_SETTINGS } from './backend-config.js';
import { createEngine } from './engine.js';
import { createRepository, int32s, request, SIMPLE_CONFIG, tensor } from './test-support/repository-fixture.js';

const invalid = (f: () => unknown): string => {
  try {
    f();
  } catch (e) {
    expect((e as { code?: string }).code).toBe('invalid_argument');
    return (e as Error).message;
  }
  throw new Error('expected invalid_argument');
};

describe('compileBackendConfig (--backend-config)', () => {
  it('has Triton defaults with nothing given', () => {
    expect(compileBackendConfig({})).toEqual(DEFAULT_BACKEND_SETTINGS);
    expect(DEFAULT_BACKEND_SETTINGS.onnxruntime.defaultMaxBatchSize).toBe(4);
  });

  it('reads the global default-max-batch-size, which the onnxruntime one overrides', () => {
    expect(compileBackendConfig({ '': { 'default-max-batch-size': '16' } }).onnxruntime.defaultMaxBatchSize).toBe(16);
    expect(compileBackendConfig({ '': { 'default-max-batch-size': '16' }, onnxruntime: { 'default-max-batch-size': '0' } }).onnxruntime.defaultMaxBatchSize).toBe(0);
  });

  it('applies onnxruntime thread counts only with the global threadpool, as Triton does', () => {
    const pooled = compileBackendConfig({ onnxruntime: { 'enable-global-threadpool': '1', intra_op_thread_count: '2', inter_op_thread_count: '1' } });
    expect(pooled.onnxruntime.sessionThreads).toEqual({ intraOp: 2, interOp: 1 });
    expect(pooled.ignored).toEqual([]);
    const unpooled = compileBackendConfig({ onnxruntime: { intra_op_thread_count: '2' } });
    expect(unpooled.onnxruntime.sessionThreads).toBeUndefined();
    expect(unpooled.ignored).toEqual([{ backend: 'onnxruntime', setting: 'intra_op_thread_count', why: "it applies only with 'onnxruntime,enable-global-threadpool=true', as in Triton" }]);
  });

  it('takes LLM model parameters as backend defaults, checked like the parameters', () => {
    expect(compileBackendConfig({ llm: { max_num_seqs: '8' }, mocker: { speedup_ratio: '10' } })).toMatchObject({ llm: { max_num_seqs: '8' }, mocker: { speedup_ratio: '10' } });
    expect(invalid(() => compileBackendConfig({ llm: { max_num_seqs: '0' } }))).toBe("llm setting 'max_num_seqs' must be an integer >= 1, got '0'");
  });

  it('keeps settings of backends it does not have, to report them', () => {
    expect(compileBackendConfig({ tensorflow: { version: '2' }, python: { 'shm-default-byte-size': '1' } }).otherBackends).toEqual(['tensorflow', 'python']);
  });

  it('ignores, and lists, settings its backends do not read, as Triton backends ignore them', () => {
    const s = compileBackendConfig({ onnxruntime: { enable_mem_arena: '0' }, '': { 'backend-directory': '/x' }, javascript: { 'shm-default-byte-size': '1' }, llm: { max_num_seq: '8' } });
    expect(s.ignored.map((i) => `${i.backend}/${i.setting}`)).toEqual(['/backend-directory', 'onnxruntime/enable_mem_arena', 'javascript/shm-default-byte-size', 'llm/max_num_seq']);
    expect(s.ignored[1]!.why).toMatch(/^the 'onnxruntime' backend reads default-max-batch-size, enable-global-threadpool/);
    expect(s.llm).toEqual({});
  });

  it('refuses absurd values of the settings it reads', () => {
    expect(invalid(() => compileBackendConfig({ onnxruntime: { 'enable-global-threadpool': '1', intra_op_thread_count: '100000' } }))).toMatch(/from 0 to 1024, got '100000'/);
    expect(invalid(() => compileBackendConfig({ onnxruntime: { intra_op_thread_count: '-1' } }))).toMatch(/got '-1'/);
    expect(invalid(() => compileBackendConfig({ onnxruntime: { 'enable-global-threadpool': 'maybe' } }))).toMatch(/must be true or false/);
    expect(invalid(() => compileBackendConfig({ '': { 'default-max-batch-size': '1e9999' } }))).toMatch(/default-max-batch-size/);
  });

  it('runs ONNX sessions with the global threadpool thread counts (0: onnxruntime picks)', async () => {
    const repo = await createRepository({ simple: { config: SIMPLE_CONFIG, versions: { 1: { 'model.onnx': buildSimpleModel() } } } });
    for (const counts of [{ intra_op_thread_count: '2', inter_op_thread_count: '1' }, { intra_op_thread_count: '0', inter_op_thread_count: '0' }]) {
      const engine = await createEngine({ modelRepositories: [repo.root], exitOnError: true, backendConfig: { onnxruntime: { 'enable-global-threadpool': 'true', ...counts } } });
      try {
        const a = Int32Array.from({ length: 16 }, (_, i) => i);
        const res = await engine.infer(request('simple', [tensor('INPUT0', 'INT32', [1, 16], a), tensor('INPUT1', 'INT32', [1, 16], a)]));
        expect(int32s(res.outputs[0]!.data)).toEqual(Array.from(a, (x) => 2 * x));
      } finally {
        await engine.shutdown();
      }
    }
    await repo.cleanup();
  });

  it('auto-completes a batchable ONNX model with the configured default-max-batch-size', async () => {
    const repo = await createRepository({ auto: { versions: { 1: { 'model.onnx': buildIdentityModel('FLOAT', ['batch', 4]) } } } });
    const engine = await createEngine({ modelRepositories: [repo.root], backendConfig: { '': { 'default-max-batch-size': '16' } } });
    try {
      expect(engine.modelConfig('auto').max_batch_size).toBe(16);
    } finally {
      await engine.shutdown();
      await repo.cleanup();
    }
  });
});
