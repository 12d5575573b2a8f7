import { rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { createEngine, type Engine } from '../engine.js';
import { buildIdentityModel, buildSimpleModel } from '@switchyard/onnx-builder';
import { createRepository, float32s, int32s, request, SIMPLE_CONFIG, tensor, type RepositoryFixture } from '../test-support/repository-fixture.js';

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()!();
});

async function setup(models: Parameters<typeof createRepository>[0], options: Partial<Parameters<typeof createEngine>[0]> = {}): Promise<{ repo: RepositoryFixture; engine: Engine }> {
  const repo = await createRepository(models);
  cleanups.push(() => repo.cleanup());
  const engine = await createEngine({ modelRepositories: [repo.root], ...options });
  cleanups.push(() => engine.shutdown());
  return { repo, engine };
}

const simpleRequest = (version?: number) =>
  request('simple', [tensor('INPUT0', 'INT32', [1, 16], new Int32Array(16).fill(3)), tensor('INPUT1', 'INT32', [1, 16], new Int32Array(16).fill(1))], {
    modelVersion: version,
  });

async function waitFor(check: () => Promise<boolean> | boolean, timeoutMs = 10_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (Date.now() < end) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error('condition not reached in time');
}

describe('explicit model control', () => {
  it('loads nothing at start-up, then loads, reloads and unloads on request', async () => {
    const { engine } = await setup({ simple: { config: SIMPLE_CONFIG, versions: { 1: { 'model.onnx': buildSimpleModel() } } } }, { controlMode: 'explicit' });
    expect(await engine.repositoryIndex(false)).toEqual([{ name: 'simple' }]);
    expect(engine.isReady()).toBe(true);
    await expect(engine.infer(simpleRequest())).rejects.toMatchObject({ message: "Request for unknown model: 'simple' is not found" });

    await engine.loadModel('simple');
    expect(await engine.repositoryIndex(true)).toEqual([{ name: 'simple', version: '1', state: 'READY' }]);
    expect(int32s((await engine.infer(simpleRequest())).outputs[0]!.data)[0]).toBe(4);

    // Reload with an override config: requests keep succeeding throughout.
    const inflight = Array.from({ length: 20 }, () => engine.infer(simpleRequest()));
    const reload = engine.loadModel('simple', { config: JSON.stringify({ max_batch_size: 16, backend: 'onnxruntime' }) });
    inflight.push(...Array.from({ length: 20 }, () => engine.infer(simpleRequest())));
    await reload;
    await Promise.all(inflight);
    expect(engine.modelConfig('simple').max_batch_size).toBe(16);
    // The override carried no I/O: auto-complete filled it from the model.
    expect(engine.modelConfig('simple').input.map((i) => i.name)).toEqual(['INPUT0', 'INPUT1']);

    await engine.unloadModel('simple');
    expect(await engine.repositoryIndex(false)).toEqual([{ name: 'simple', version: '1', state: 'UNAVAILABLE', reason: 'unloaded' }]);
    await expect(engine.infer(simpleRequest())).rejects.toMatchObject({ code: 'not_found', message: "Request for unknown model: 'simple' has no available versions" });
    expect(engine.isReady()).toBe(true);
    // Unknown model: unload is a no-op success.
    await expect(engine.unloadModel('never_seen', { unloadDependents: true })).resolves.toBeUndefined();
  });

  it('reports load errors with Triton messages', async () => {
    const { repo, engine } = await setup({ empty: { config: 'backend: "onnxruntime"' } }, { controlMode: 'explicit' });
    await expect(engine.loadModel('missing')).rejects.toMatchObject({ code: 'internal', message: "failed to load 'missing', failed to poll from model repository" });
    await expect(engine.loadModel('empty')).rejects.toMatchObject({ message: "failed to load 'empty', no version is available" });
    await expect(engine.loadModel('')).rejects.toMatchObject({ code: 'invalid_argument', message: 'Model name cannot be empty. Please enter a valid name to deploy.' });
    await expect(engine.loadModel('../etc')).rejects.toMatchObject({
      message: "invalid model name '../etc', model name must not contain path traversal characters",
    });
    await repo.addModel('bad_config', { config: 'max_batch_size: "x"', versions: { 1: { 'model.onnx': buildSimpleModel() } } });
    const err = await engine.loadModel('bad_config').then(() => new Error('expected a failure'), (e: Error) => e);
    expect(err.message).toContain("failed to load 'bad_config'");
    expect(err.message).toContain('config.pbtxt:1:');
    const index = await engine.repositoryIndex(false);
    expect(index.find((r) => r.name === 'bad_config')).toMatchObject({ state: 'UNAVAILABLE' });
    await expect(engine.loadModel('empty', { config: '{"max_batch_size": ' })).rejects.toThrow("failed to load 'empty'");
  });

  it('loads from override files and rejects paths that escape the model folder', async () => {
    const { engine } = await setup({}, { controlMode: 'explicit' });
    const files = new Map([['1/model.onnx', buildIdentityModel('FLOAT', [2])]]);
    await expect(engine.loadModel('ov', { files })).rejects.toMatchObject({
      message: "Load parameter 'config' must be specified for model file override",
    });
    await engine.loadModel('ov', { config: '{"backend":"onnxruntime"}', files });
    const response = await engine.infer(request('ov', [tensor('INPUT0', 'FP32', [2], new Float32Array([1.5, 2.5]))]));
    expect(float32s(response.outputs[0]!.data)).toEqual([1.5, 2.5]);
    for (const bad of ['../1/model.onnx', '/tmp/x/model.onnx', '1/../../model.onnx']) {
      const err = await engine.loadModel('ov2', { config: '{}', files: new Map([[bad, new Uint8Array(1)]]) }).then(() => new Error('expected a failure'), (e: Error) => e);
      expect(err.message).toContain(`Invalid file parameter 'file:${bad}' with normalized path`);
      expect(err.message).toContain('must stay within model directory.');
    }
  });

  it('honours version policies', async () => {
    const versions = { 1: { 'model.onnx': buildSimpleModel() }, 2: { 'model.onnx': buildSimpleModel() }, 3: { 'model.onnx': buildSimpleModel() }, '04': { 'model.onnx': buildSimpleModel() }, x: {} };
    const policy = (p: string) => SIMPLE_CONFIG.replace('max_batch_size: 8', `max_batch_size: 8\nversion_policy: ${p}`);
    const { repo, engine } = await setup({ simple: { config: SIMPLE_CONFIG, versions } }, { controlMode: 'explicit' });
    const readyVersions = async () => (await engine.repositoryIndex(true)).map((r) => r.version);

    await engine.loadModel('simple');
    expect(await readyVersions()).toEqual(['3']);
    expect((await engine.infer(simpleRequest())).modelVersion).toBe('3');

    await repo.addModel('simple', { config: policy('{ all { } }') });
    await engine.loadModel('simple');
    expect(await readyVersions()).toEqual(['1', '2', '3']);
    expect(engine.modelMetadata('simple').versions).toEqual(['1', '2', '3']);
    expect((await engine.infer(simpleRequest(2))).modelVersion).toBe('2');

    await repo.addModel('simple', { config: policy('{ specific { versions: [ 1, 3 ] } }') });
    await engine.loadModel('simple');
    expect(await readyVersions()).toEqual(['1', '3']);
    const index = await engine.repositoryIndex(false);
    expect(index.find((r) => r.version === '2')).toMatchObject({ state: 'UNAVAILABLE', reason: 'unloaded' });

    await repo.addModel('simple', { config: policy('{ latest { num_versions: 2 } }') });
    await engine.loadModel('simple');
    expect(await readyVersions()).toEqual(['2', '3']);
  });

  it('loads start-up models, and rejects a wildcard that does not stand alone', async () => {
    const models = {
      a: { versions: { 1: { 'model.onnx': buildIdentityModel('FLOAT', [1]) } } },
      b: { versions: { 1: { 'model.onnx': buildIdentityModel('FLOAT', [1]) } } },
    };
    const { engine } = await setup(models, { controlMode: 'explicit', startupModels: ['b'] });
    expect((await engine.repositoryIndex(false)).map((r) => r.state ?? 'ON_DISK')).toEqual(['ON_DISK', 'READY']);
    const all = await setup(models, { controlMode: 'explicit', startupModels: ['*'] });
    expect((await all.engine.repositoryIndex(true)).length).toBe(2);
    await expect(createEngine({ modelRepositories: [all.repo.root], controlMode: 'explicit', startupModels: ['*', 'a'] })).rejects.toThrow(
      "Wildcard model name '*' must be the ONLY startup model if specified at all.",
    );
  });

  it('makes models that exist in two repositories unavailable', async () => {
    const one = await createRepository({ dup: { versions: { 1: { 'model.onnx': buildIdentityModel('FLOAT', [1]) } } } });
    const two = await createRepository({ dup: { versions: { 1: { 'model.onnx': buildIdentityModel('FLOAT', [1]) } } } });
    cleanups.push(() => one.cleanup(), () => two.cleanup());
    const engine = await createEngine({ modelRepositories: [one.root, two.root] });
    cleanups.push(() => engine.shutdown());
    const row = (await engine.repositoryIndex(false)).find((r) => r.name === 'dup');
    expect(row).toMatchObject({ state: 'UNAVAILABLE' });
    expect(row?.reason).toContain('not unique across all model repositories');
  });
});

describe('poll model control', () => {
  it('loads added models, reloads changed ones and unloads removed ones', async () => {
    const { repo, engine } = await setup({ simple: { config: SIMPLE_CONFIG, versions: { 1: { 'model.onnx': buildSimpleModel() } } } }, { controlMode: 'poll', pollIntervalSecs: 0.05 });
    expect(engine.isModelReady('simple')).toBe(true);

    await repo.addModel('added', { versions: { 1: { 'model.onnx': buildIdentityModel('FLOAT', [1]) } } });
    await waitFor(() => engine.isModelReady('added'));

    await repo.addModel('simple', { versions: { 2: { 'model.onnx': buildSimpleModel() } } });
    await waitFor(() => engine.isModelReady('simple', 2));
    await waitFor(() => !engine.isModelReady('simple', 1));

    // A broken update keeps the old version serving.
    await writeFile(join(repo.root, 'simple', '2', 'model.onnx'), new Uint8Array([9, 9, 9]));
    await new Promise((r) => setTimeout(r, 400));
    expect(engine.isModelReady('simple', 2)).toBe(true);
    expect((await engine.infer(simpleRequest())).modelVersion).toBe('2');

    await rm(join(repo.root, 'added'), { recursive: true });
    await waitFor(() => !engine.isModelReady('added'));
    // Not ready already while UNLOADING; the row settles once the instances are released.
    let row: unknown;
    await waitFor(async () => {
      row = (await engine.repositoryIndex(false)).find((r) => r.name === 'added');
      return (row as { state?: string } | undefined)?.state === 'UNAVAILABLE';
    });
    expect(row).toMatchObject({ state: 'UNAVAILABLE', reason: 'unloaded' });
  });
});

describe('shutdown', () => {
  it('stops admitting, drains in-flight requests and unloads everything', async () => {
    const repo = await createRepository({ simple: { config: SIMPLE_CONFIG, versions: { 1: { 'model.onnx': buildSimpleModel() } } } });
    cleanups.push(() => repo.cleanup());
    const engine = await createEngine({ modelRepositories: [repo.root] });
    const inflight = Array.from({ length: 10 }, () => engine.infer(simpleRequest()));
    const stopping = engine.shutdown();
    expect(engine.isReady()).toBe(false);
    await expect(engine.infer(simpleRequest())).rejects.toMatchObject({ code: 'unavailable' });
    await stopping;
    await expect(Promise.all(inflight)).resolves.toHaveLength(10);
    expect(engine.isLive()).toBe(false);
    expect(await engine.repositoryIndex(false)).toEqual([{ name: 'simple', version: '1', state: 'UNAVAILABLE', reason: 'unloaded' }]);
  });
});
