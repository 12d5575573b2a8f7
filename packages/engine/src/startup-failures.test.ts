/**
 * tritonserver's start-up rules: `--exit-on-error` ("failed to load all models") and what strict
 * readiness counts as a model that is not ready (qa/L0_lifecycle's parse-error cases).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { buildSimpleModel } from '@switchyard/onnx-builder';
import { createEngine } from './engine.js';
import { createRepository, SIMPLE_CONFIG, type RepositoryFixture } from './test-support/repository-fixture.js';

let repo: RepositoryFixture | undefined;
afterEach(async () => {
  await repo?.cleanup();
  repo = undefined;
});

const simple = { config: SIMPLE_CONFIG, versions: { 1: { 'model.onnx': buildSimpleModel() } } };

describe('exitOnError', () => {
  it('fails creation when a model fails to load, and serves otherwise', async () => {
    repo = await createRepository({ simple, corrupt: { config: 'platform: "onnxruntime_onnx"', versions: { 1: { 'model.onnx': new Uint8Array([1, 2, 3]) } } } });
    await expect(createEngine({ modelRepositories: [repo.root], exitOnError: true })).rejects.toMatchObject({ code: 'internal', message: 'failed to load all models' });
    const engine = await createEngine({ modelRepositories: [repo.root], exitOnError: false });
    expect(engine.isModelReady('simple')).toBe(true);
    await engine.shutdown();
  });

  it('counts a config that does not parse, a model without versions and an unknown start-up model', async () => {
    repo = await createRepository({ simple, bad: { config: 'max_batch_size: "x"' } });
    await expect(createEngine({ modelRepositories: [repo.root], exitOnError: true })).rejects.toThrow('failed to load all models');
    await repo.remove('bad');
    await repo.addModel('empty', { config: SIMPLE_CONFIG.replace('"simple"', '"empty"') });
    await expect(createEngine({ modelRepositories: [repo.root], exitOnError: true })).rejects.toThrow('failed to load all models');
    await expect(createEngine({ modelRepositories: [repo.root], exitOnError: true, controlMode: 'explicit', startupModels: ['nope'] })).rejects.toThrow('failed to load all models');
    const engine = await createEngine({ modelRepositories: [repo.root], exitOnError: true, controlMode: 'explicit', startupModels: ['simple'] });
    expect(engine.isReady()).toBe(true);
    await engine.shutdown();
  });
});

describe('strict readiness', () => {
  it('a model found without any version keeps a strict server not ready (L0_lifecycle test_parse_error_model_no_version)', async () => {
    repo = await createRepository({ simple, empty: { config: SIMPLE_CONFIG.replace('"simple"', '"empty"') } });
    const strict = await createEngine({ modelRepositories: [repo.root] });
    expect(strict.isLive()).toBe(true);
    expect(strict.isReady()).toBe(false);
    await strict.shutdown();
    const lax = await createEngine({ modelRepositories: [repo.root], strictReadiness: false });
    expect(lax.isReady()).toBe(true);
    await lax.shutdown();
  });

  it('a config that does not parse leaves the model out, as Triton leaves it out of the model states', async () => {
    repo = await createRepository({ simple, bad: { config: 'max_batch_size: "x"' } });
    const engine = await createEngine({ modelRepositories: [repo.root] });
    expect(engine.isReady()).toBe(true);
    await engine.shutdown();
  });
});

describe('modelLoadThreadCount', () => {
  it('is checked', async () => {
    repo = await createRepository({ simple });
    await expect(createEngine({ modelRepositories: [repo.root], modelLoadThreadCount: 0 })).rejects.toThrow('invalid model load thread count 0');
    const engine = await createEngine({ modelRepositories: [repo.root], modelLoadThreadCount: 1 });
    expect(engine.isModelReady('simple')).toBe(true);
    await engine.shutdown();
  });
});

describe("initFailure: 'not-live' (tritonserver --exit-on-error=false with a repository that is not there)", () => {
  it('throws by default; not-live gives an engine that is up, not live, not ready, answering metadata', async () => {
    await expect(createEngine({ modelRepositories: ['/nonexistent/xyzx'] })).rejects.toThrow("repository path is not a valid directory: '/nonexistent/xyzx'");
    repo = await createRepository({ simple });
    const engine = await createEngine({ modelRepositories: ['/nonexistent/xyzx', repo.root], initFailure: 'not-live', controlMode: 'explicit', startupModels: ['simple'] });
    expect(engine.isLive()).toBe(false);
    expect(engine.isReady()).toBe(false);
    expect(engine.serverMetadata().name).toBe('triton');
    expect(engine.isModelReady('simple')).toBe(false);
    await expect(engine.loadModel('simple')).rejects.toMatchObject({ code: 'unavailable', message: 'Server not ready' });
    await engine.shutdown();
  });
});

describe('modelLoadRetryCount (--model-load-retry-count)', () => {
  // initialize fails while the marker file is absent, and creates it: the second attempt loads
  const flaky = (marker: string) => ({
    config: 'name: "flaky"\nbackend: "javascript"\ninput [ { name: "IN" data_type: TYPE_INT32 dims: [ 1 ] } ]\noutput [ { name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] } ]\ninstance_group [ { count: 1 kind: KIND_CPU } ]',
    versions: {
      1: {
        'model.js': `import { existsSync, writeFileSync } from 'node:fs';
export class TritonModel {
  initialize() {
    if (!existsSync(${JSON.stringify(marker)})) { writeFileSync(${JSON.stringify(marker)}, 'x'); throw new Error('not yet'); }
  }
  execute(requests) { return requests.map(() => ({ outputs: [] })); }
}
`,
      },
    },
  });

  it('tries a failed version load again, up to the count', async () => {
    repo = await createRepository();
    await repo.addModel('flaky', flaky(`${repo.root}/marker-0`));
    const noRetry = await createEngine({ modelRepositories: [repo.root] });
    expect(noRetry.isModelReady('flaky')).toBe(false);
    await noRetry.shutdown();
    await repo.remove('flaky');
    await repo.addModel('flaky', flaky(`${repo.root}/marker-1`));
    const retrying = await createEngine({ modelRepositories: [repo.root], modelLoadRetryCount: 1, exitOnError: true });
    expect(retrying.isModelReady('flaky')).toBe(true);
    await retrying.shutdown();
    await expect(createEngine({ modelRepositories: [repo.root], modelLoadRetryCount: -1 })).rejects.toThrow('invalid model load retry count -1');
  });
});
