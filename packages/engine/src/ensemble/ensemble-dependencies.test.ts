/**
 * Ensembles in the lifecycle, through a real engine: load order at start-up, explicit loads that
 * pull in composing models, unloads that take ensembles down, `unload_dependents`, and the
 * reasons an ensemble does not load (missing model, cycle, mismatched steps).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { createEngine, type Engine, type EngineOptions } from '../index.js';
import { ENSEMBLE_MODELS } from './ensemble-test-models.js';
import { createRepository, float32s, request, tensor, type ModelFixture, type RepositoryFixture } from '../test-support/repository-fixture.js';

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()!();
});

/** The ONNX models and ensembles of ENSEMBLE_MODELS (not the JavaScript ones), plus `extra`. */
const BASE = ['add1', 'add2', 'sumdiff', 'diamond'];

async function setupWithRepo(extra: Record<string, ModelFixture>, options: Partial<EngineOptions> = {}): Promise<{ engine: Engine; repo: RepositoryFixture }> {
  const repo = await createRepository({ ...Object.fromEntries(BASE.map((n) => [n, ENSEMBLE_MODELS[n]!])), ...extra });
  cleanups.push(() => repo.cleanup());
  const engine = await createEngine({ modelRepositories: [repo.root], ...options });
  cleanups.push(() => engine.shutdown());
  return { engine, repo };
}

const setup = async (extra: Record<string, ModelFixture>, options: Partial<EngineOptions> = {}): Promise<Engine> => (await setupWithRepo(extra, options)).engine;

const ens = (name: string, model: string, io = 'input [{ name: "IN" data_type: TYPE_FP32 dims: [ 4 ] }] output [{ name: "OUT" data_type: TYPE_FP32 dims: [ 4 ] }]') => ({
  config: `name: "${name}" platform: "ensemble" max_batch_size: 8 ${io} ensemble_scheduling { step [{ model_name: "${model}" model_version: -1 input_map { key: "INPUT0" value: "IN" } output_map { key: "OUTPUT0" value: "OUT" } }] }`,
  versions: { 1: {} },
});
/** An ensemble whose only step is ensemble `inner` (IN → OUT). */
const outer = (name: string, inner: string) => ({
  config: `name: "${name}" platform: "ensemble" max_batch_size: 8 input [{ name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] }] output [{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] }] ensemble_scheduling { step [{ model_name: "${inner}" model_version: -1 input_map { key: "IN" value: "INPUT0" } output_map { key: "OUT" value: "OUTPUT0" } }] }`,
  versions: { 1: {} },
});

const state = async (engine: Engine, name: string) => (await engine.repositoryIndex(false)).filter((r) => r.name === name);

describe('ensembles at start-up (none mode)', () => {
  it('load after their composing models; a missing one leaves the ensemble UNAVAILABLE with the reason, server ready', async () => {
    const engine = await setup({ ghostly: ens('ghostly', 'ghost'), wrapped: outer('wrapped', 'diamond_in'), diamond_in: ens('diamond_in', 'add1') });
    expect(engine.isModelReady('diamond')).toBe(true);
    expect(engine.isModelReady('wrapped')).toBe(true);
    expect(await state(engine, 'ghostly')).toEqual([
      { name: 'ghostly', state: 'UNAVAILABLE', reason: 'ensemble ghostly contains models that are not available or ambiguous: ghost' },
    ]);
    expect(engine.isReady()).toBe(true);
    const res = await engine.infer(request('wrapped', [tensor('INPUT0', 'FP32', [1, 4], new Float32Array([1, 2, 3, 4]))]));
    expect(float32s(res.outputs[0]!.data)).toEqual([2, 3, 4, 5]);
  });

  it('refuses cycles and steps that do not fit the composing model', async () => {
    const engine = await setup({
      loop_a: outer('loop_a', 'loop_b'),
      loop_b: outer('loop_b', 'loop_a'),
      misfit: ens('misfit', 'add1', 'input [{ name: "IN" data_type: TYPE_INT32 dims: [ 4 ] }] output [{ name: "OUT" data_type: TYPE_FP32 dims: [ 4 ] }]'),
    });
    expect((await state(engine, 'loop_a'))[0]?.reason).toBe('circular dependency between ensembles: loop_a -> ... -> loop_b -> loop_a');
    expect((await state(engine, 'misfit'))[0]?.reason).toBe(
      'in ensemble misfit, ensemble tensor IN: inconsistent data type: TYPE_INT32 is inferred from model misfit while TYPE_FP32 is inferred from model add1',
    );
  });
});

describe('ensembles in explicit mode', () => {
  it('loading an ensemble loads its composing models; unloading one takes the ensemble down', async () => {
    const engine = await setup({}, { controlMode: 'explicit' });
    await engine.loadModel('diamond');
    const ready = (await engine.repositoryIndex(true)).map((r) => r.name);
    expect(ready).toEqual(['add1', 'add2', 'diamond', 'sumdiff']);
    await engine.unloadModel('add2');
    expect(await state(engine, 'diamond')).toEqual([{ name: 'diamond', version: '1', state: 'UNAVAILABLE', reason: 'unloaded' }]);
    expect(engine.isModelReady('diamond')).toBe(false);
    await expect(engine.infer(request('diamond', [tensor('IN', 'FP32', [1, 4], new Float32Array(4))]))).rejects.toMatchObject({ code: 'not_found' });
    expect(engine.isModelReady('add1')).toBe(true);
    // Loading it again brings add2 back.
    await engine.loadModel('diamond');
    expect(engine.isModelReady('add2')).toBe(true);
    expect(engine.isModelReady('diamond')).toBe(true);
  });

  it('unload_dependents also unloads composing models loaded only for the ensemble', async () => {
    const engine = await setup({}, { controlMode: 'explicit', startupModels: ['add1'] });
    await engine.loadModel('diamond');
    await engine.unloadModel('diamond', { unloadDependents: true });
    const ready = (await engine.repositoryIndex(true)).map((r) => r.name);
    // add1 was loaded by name: it stays.
    expect(ready).toEqual(['add1']);
    // Without the flag the composing models stay.
    await engine.loadModel('diamond');
    await engine.unloadModel('diamond');
    expect((await engine.repositoryIndex(true)).map((r) => r.name)).toEqual(['add1', 'add2', 'sumdiff']);
  });

  it('an ensemble whose composing model is missing does not load, with the reason', async () => {
    const engine = await setup({ ghostly: ens('ghostly', 'ghost'), loop_a: outer('loop_a', 'loop_b'), loop_b: outer('loop_b', 'loop_a') }, { controlMode: 'explicit' });
    await expect(engine.loadModel('ghostly')).rejects.toMatchObject({
      code: 'invalid_argument',
      message: "load failed for model 'ghostly': ensemble ghostly contains models that are not available or ambiguous: ghost",
    });
    expect(await state(engine, 'ghostly')).toEqual([
      { name: 'ghostly', state: 'UNAVAILABLE', reason: 'ensemble ghostly contains models that are not available or ambiguous: ghost' },
    ]);
    // A cycle fails instead of waiting forever.
    await expect(engine.loadModel('loop_a')).rejects.toThrow(/circular dependency between ensembles: loop_a -> \.\.\. -> loop_b -> loop_a|depends on 'loop_b' which is not valid/);
  });
});

describe('ensembles in poll mode', () => {
  it('a removed composing model takes the ensemble down; when it is back, the ensemble is checked again and loads', async () => {
    const { engine, repo } = await setupWithRepo({}, { controlMode: 'poll', pollIntervalSecs: 0.05 });
    expect(engine.isModelReady('diamond')).toBe(true);
    await repo.remove('add2');
    await expect.poll(() => engine.isModelReady('diamond'), { timeout: 10_000 }).toBe(false);
    expect(engine.isModelReady('add2')).toBe(false);
    await repo.addModel('add2', ENSEMBLE_MODELS['add2']!);
    await expect.poll(() => engine.isModelReady('diamond'), { timeout: 10_000 }).toBe(true);
    const res = await engine.infer(request('diamond', [tensor('IN', 'FP32', [1, 4], new Float32Array([1, 1, 1, 1]))]));
    expect(float32s(res.outputs[0]!.data)).toEqual([5, 5, 5, 5]);
  });
});
