import { readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseModelConfigText } from '@switchyard/model-config';
import { materializeOverride, readModelSource } from './model/model-source.js';
import { compileEngineOptions } from './options.js';
import { completeBackendFields, parseVersionDir, selectVersions, validateModelName } from './repository.js';
import { createRepository } from './test-support/repository-fixture.js';

describe('repository rules', () => {
  it('recognises version folders', () => {
    expect(parseVersionDir('1')).toBe(1);
    expect(parseVersionDir('42')).toBe(42);
    expect(parseVersionDir('0')).toBeUndefined();
    expect(parseVersionDir('01')).toBeUndefined();
    expect(parseVersionDir('v1')).toBeUndefined();
    expect(parseVersionDir('1a')).toBeUndefined();
  });

  it('selects versions by policy', () => {
    const available = [3, 1, 2, 10];
    expect(selectVersions(undefined, available)).toEqual([10]);
    expect(selectVersions({ latest: { num_versions: 2 } }, available)).toEqual([3, 10]);
    expect(selectVersions({ all: {} }, available)).toEqual([1, 2, 3, 10]);
    expect(selectVersions({ specific: { versions: [2, 7] } }, available)).toEqual([2]);
    expect(selectVersions(undefined, [])).toEqual([]);
  });

  it('validates model names', () => {
    expect(() => validateModelName('ok_name-1.v2')).not.toThrow();
    expect(() => validateModelName('')).toThrow('Model name cannot be empty');
    for (const bad of ['a/b', '..', 'a\\b', '../x']) expect(() => validateModelName(bad)).toThrow('must not contain path traversal characters');
  });

  it('completes platform, backend and default file name', () => {
    const empty = parseModelConfigText('');
    expect(completeBackendFields(empty, 'm', [['model.onnx']], true)).toMatchObject({
      name: 'm',
      platform: 'onnxruntime_onnx',
      backend: 'onnxruntime',
      default_model_filename: 'model.onnx',
    });
    expect(completeBackendFields(empty, 'm', [['model.plan']], true)).toMatchObject({ platform: 'tensorrt_plan', backend: 'tensorrt', default_model_filename: 'model.plan' });
    expect(completeBackendFields(empty, 'm', [['model.py']], true)).toMatchObject({ platform: '', backend: 'python', default_model_filename: 'model.py' });
    expect(completeBackendFields(empty, 'm', [['model.js']], true)).toMatchObject({ platform: '', backend: 'javascript', default_model_filename: '' });
    expect(completeBackendFields(empty, 'm', [['model.mjs']], true)).toMatchObject({ backend: 'javascript' });
    expect(completeBackendFields(empty, 'm', [['model.onnx']], false)).toMatchObject({ platform: '', backend: '' });
    const named = parseModelConfigText('platform: "onnxruntime_onnx" default_model_filename: "net.onnx"');
    expect(completeBackendFields(named, 'm', [], true)).toMatchObject({ backend: 'onnxruntime', default_model_filename: 'net.onnx' });
    expect(completeBackendFields(parseModelConfigText('backend: "onnxruntime"'), 'm', [], true)).toMatchObject({ platform: 'onnxruntime_onnx' });
  });

  it('compiles options with defaults and validation', () => {
    const o = compileEngineOptions({ modelRepositories: ['/r'] });
    expect(o).toMatchObject({ controlMode: 'none', autoComplete: true, pollIntervalMs: 15_000, serverName: 'triton', strictReadiness: true });
    expect(() => compileEngineOptions({ modelRepositories: [] })).toThrow('at least one model repository');
    expect(() => compileEngineOptions({ modelRepositories: ['/r'], pollIntervalSecs: 0 })).toThrow('invalid poll interval');
    expect(compileEngineOptions({ modelRepositories: ['/r'], controlMode: 'explicit', startupModels: ['*'] }).loadAllAtStartup).toBe(true);
  });
});

describe('model source', () => {
  it('reads versions, config and change stamps', async () => {
    const repo = await createRepository({
      m: { config: 'backend: "onnxruntime"', versions: { 1: { 'model.onnx': 'a' }, 2: { 'model.onnx': 'b' }, '03': { 'model.onnx': 'c' } }, files: { 'labels.txt': 'x' } },
    });
    try {
      const first = await readModelSource(join(repo.root, 'm'));
      expect(first.versions).toEqual([1, 2]);
      expect(first.configText).toBe('backend: "onnxruntime"');
      expect(first.versionFiles.get(2)).toEqual(['model.onnx']);
      await repo.addModel('m', { versions: { 2: { 'model.onnx': 'bigger' } } });
      const second = await readModelSource(join(repo.root, 'm'));
      expect(second.versionStamps.get(1)).toBe(first.versionStamps.get(1));
      expect(second.versionStamps.get(2)).not.toBe(first.versionStamps.get(2));
      expect(second.configStamp).toBe(first.configStamp);
    } finally {
      await repo.cleanup();
    }
  });

  it('materialises override files inside a temp model folder only', async () => {
    const folder = await materializeOverride(new Map([['1/sub/model.onnx', new Uint8Array([1, 2])]]));
    try {
      expect(Array.from(await readFile(join(folder.path, '1', 'sub', 'model.onnx')))).toEqual([1, 2]);
    } finally {
      await folder.dispose();
    }
    // The normalized path is shown from the model folder: no local path in the message.
    await expect(materializeOverride(new Map([['1/../../escape', new Uint8Array(1)]]))).rejects.toThrow(
      "Invalid file parameter 'file:1/../../escape' with normalized path '../escape' must stay within model directory.",
    );
    const abs = await materializeOverride(new Map([['/abs', new Uint8Array(1)]])).catch((e: Error) => e);
    expect((abs as Error).message).toMatch(/^Invalid file parameter 'file:\/abs' with normalized path '(\.\.\/)+abs' must stay within model directory\.$/);
    expect((abs as Error).message).not.toContain(tmpdir());
  });

  it('override names that clash or that the file system refuses are client errors', async () => {
    const one = new Uint8Array(1);
    const refused = async (files: [string, Uint8Array][], message: string) => {
      const e = await materializeOverride(new Map(files)).then(
        () => undefined,
        (err: unknown) => err,
      );
      expect(e).toMatchObject({ code: 'invalid_argument' });
      expect((e as Error).message).toContain(message);
    };
    await refused([['1/x', one], ['1', one]], "Invalid file parameter 'file:1', a directory has been created with that name");
    await refused([['1', one], ['1/a/b', one]], "Invalid file parameter 'file:1/a/b', directory has been created as a file");
    await refused([[`1/${'n'.repeat(300)}`, one]], 'the name is too long');
    await refused([[`1/${'n'.repeat(300)}`, one]], `Invalid file parameter 'file:1/${'n'.repeat(300)}', the name is too long`);
  });
});
