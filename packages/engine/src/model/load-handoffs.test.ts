import { afterEach, describe, expect, it, vi } from 'vitest';
import { silentLogger } from '@switchyard/common';
import { buildIdentityModel } from '@switchyard/onnx-builder';
import { createEngine } from '../engine.js';
import { SessionThread } from '../onnxruntime/session-thread.js';
import { createRepository, float32s, request, tensor } from '../test-support/repository-fixture.js';
import { LoadHandoffs } from './load-handoffs.js';

describe('LoadHandoffs', () => {
  it('gives a kept value to the first taker only; close releases what nobody took, once', async () => {
    const handoffs = new LoadHandoffs();
    const released: string[] = [];
    const a = { a: 1 };
    handoffs.keep('a', a, async () => void released.push('a'));
    handoffs.keep('b', { b: 1 }, async () => void released.push('b'));
    expect(handoffs.take('a')).toBe(a);
    expect(handoffs.take('a')).toBeUndefined();
    expect(handoffs.take('c')).toBeUndefined();
    await handoffs.close();
    await handoffs.close();
    expect(released).toEqual(['b']);
  });

  it('releases a value kept again under its key, and one kept after close', async () => {
    const handoffs = new LoadHandoffs();
    const released: string[] = [];
    handoffs.keep('k', { n: 1 }, async () => void released.push('first'));
    handoffs.keep('k', { n: 2 }, async () => void released.push('second'));
    await Promise.resolve();
    expect(released).toEqual(['first']);
    expect(handoffs.take('k')).toEqual({ n: 2 });
    await handoffs.close();
    handoffs.keep('late', {}, async () => void released.push('late'));
    await Promise.resolve();
    expect(released).toEqual(['first', 'late']);
  });

  it('a release that fails does not fail close', async () => {
    const handoffs = new LoadHandoffs();
    handoffs.keep('k', {}, () => Promise.reject(new Error('gone')));
    await expect(handoffs.close()).resolves.toBeUndefined();
  });
});

describe('the ONNX Runtime session auto-complete opens', () => {
  afterEach(() => vi.restoreAllMocks());

  it('becomes the first instance: an auto-completed model with 2 instances starts 2 session threads, not 3', async () => {
    const repo = await createRepository();
    await repo.addModel('auto', { versions: { 1: { 'model.onnx': buildIdentityModel('FLOAT', ['batch', 3]) } } });
    const create = vi.spyOn(SessionThread, 'create');
    const engine = await createEngine({ modelRepositories: [repo.root], logger: silentLogger });
    try {
      expect(engine.modelConfig('auto').input[0]).toMatchObject({ name: 'INPUT0', data_type: 'TYPE_FP32', dims: [3] });
      expect(create).toHaveBeenCalledTimes(2);
      const response = await engine.infer(request('auto', [tensor('INPUT0', 'FP32', [1, 3], Float32Array.from([1, 2, 3]))]));
      expect(float32s(response.outputs[0]!.data)).toEqual([1, 2, 3]);
    } finally {
      await engine.shutdown();
      await repo.cleanup();
    }
  });

  it('is released when the load fails after auto-complete (a missing label file)', async () => {
    const repo = await createRepository();
    await repo.addModel('labelled', {
      config: 'backend: "onnxruntime" output { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 3 ] label_filename: "missing.txt" }',
      versions: { 1: { 'model.onnx': buildIdentityModel('FLOAT', ['batch', 3]) } },
    });
    const create = vi.spyOn(SessionThread, 'create');
    const release = vi.spyOn(SessionThread.prototype, 'release');
    const engine = await createEngine({ modelRepositories: [repo.root], logger: silentLogger, exitOnError: false });
    try {
      const row = (await engine.repositoryIndex(false)).find((r) => r.name === 'labelled');
      expect(row?.state).toBe('UNAVAILABLE');
      expect(create).toHaveBeenCalledTimes(1);
      expect(release).toHaveBeenCalledTimes(1);
    } finally {
      await engine.shutdown();
      await repo.cleanup();
    }
  });
});
