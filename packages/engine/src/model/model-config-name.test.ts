/** tritonserver's `--model-config-name`: `configs/<name>.pbtxt` where a model has it, else `config.pbtxt`. */
import { afterAll, describe, expect, it } from 'vitest';
import { buildSimpleModel } from '@switchyard/onnx-builder';
import { createEngine } from '../engine.js';
import { createRepository, SIMPLE_CONFIG, type RepositoryFixture } from '../test-support/repository-fixture.js';

let repo: RepositoryFixture | undefined;
afterAll(async () => {
  await repo?.cleanup();
});

describe('modelConfigName', () => {
  it('reads configs/<name>.pbtxt where present, config.pbtxt elsewhere', async () => {
    const onnx = buildSimpleModel();
    repo = await createRepository({
      tuned: { config: SIMPLE_CONFIG.replace('"simple"', '"tuned"'), versions: { 1: { 'model.onnx': onnx } }, files: { 'configs/h100.pbtxt': SIMPLE_CONFIG.replace('"simple"', '"tuned"').replace('max_batch_size: 8', 'max_batch_size: 2') } },
      plain: { config: SIMPLE_CONFIG.replace('"simple"', '"plain"'), versions: { 1: { 'model.onnx': onnx } } },
    });
    expect(SIMPLE_CONFIG).toContain('max_batch_size: 8');
    const custom = await createEngine({ modelRepositories: [repo.root], exitOnError: true, modelConfigName: 'h100' });
    const standard = await createEngine({ modelRepositories: [repo.root], exitOnError: true });
    try {
      expect(custom.modelConfig('tuned').max_batch_size).toBe(2);
      expect(custom.modelConfig('plain').max_batch_size).toBe(8);
      expect(standard.modelConfig('tuned').max_batch_size).toBe(8);
    } finally {
      await custom.shutdown();
      await standard.shutdown();
    }
  });

  it('is a plain file name', async () => {
    for (const bad of ['', '../x', 'a/b', 'a b', '..']) {
      await expect(createEngine({ modelRepositories: ['/tmp'], modelConfigName: bad })).rejects.toMatchObject({ code: 'invalid_argument' });
    }
  });
});
