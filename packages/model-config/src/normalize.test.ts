import { SwitchyardError } from '@switchyard/common';
import { describe, expect, it } from 'vitest';
import { normalizeModelConfig } from './normalize.js';
import { parseModelConfigText } from './text-parser.js';
import type { ModelOptimizationPolicy, ModelSequenceBatching } from './types.js';

const norm = (pbtxt: string, modelName = 'm', extra: Partial<Parameters<typeof normalizeModelConfig>[1]> = {}) =>
  normalizeModelConfig(parseModelConfigText(pbtxt), { modelName, ...extra });

describe('normalizeModelConfig', () => {
  it('takes the name from the model directory when the config has none', () => {
    expect(norm('backend: "onnxruntime"', 'dir_name').name).toBe('dir_name');
    expect(norm('name: "own" backend: "onnxruntime"', 'dir_name').name).toBe('own');
  });

  it('does not modify its input and is idempotent', () => {
    const input = parseModelConfigText('backend: "onnxruntime" max_batch_size: 4 dynamic_batching {}');
    const snapshot = structuredClone(input);
    const once = normalizeModelConfig(input, { modelName: 'm' });
    expect(input).toEqual(snapshot);
    expect(normalizeModelConfig(once, { modelName: 'm' })).toEqual(once);
  });

  it('defaults the version policy to latest 1', () => {
    expect(norm('backend: "onnxruntime"').version_policy).toEqual({ latest: { num_versions: 1 } });
    expect(norm('backend: "onnxruntime" version_policy { all {} }').version_policy).toEqual({ all: {} });
  });

  it('defaults preferred batch sizes to [max_batch_size] (dynamic batching and oldest sequences)', () => {
    expect(norm('backend: "onnxruntime" max_batch_size: 8 dynamic_batching {}').dynamic_batching?.preferred_batch_size).toEqual([8]);
    expect(norm('backend: "onnxruntime" max_batch_size: 0 dynamic_batching {}').dynamic_batching?.preferred_batch_size).toEqual([]);
    expect(norm('backend: "onnxruntime" max_batch_size: 8 dynamic_batching { preferred_batch_size: 2 }').dynamic_batching?.preferred_batch_size).toEqual([2]);
    const sb = norm('backend: "onnxruntime" max_batch_size: 8 sequence_batching { oldest {} }').sequence_batching as ModelSequenceBatching;
    expect(sb.oldest?.preferred_batch_size).toEqual([8]);
  });

  it('defaults max_sequence_idle_microseconds to one second', () => {
    const sb = (pbtxt: string) => norm(pbtxt).sequence_batching as ModelSequenceBatching;
    expect(sb('backend: "onnxruntime" sequence_batching {}').max_sequence_idle_microseconds).toBe(1_000_000);
    expect(sb('backend: "onnxruntime" sequence_batching { max_sequence_idle_microseconds: 5 }').max_sequence_idle_microseconds).toBe(5);
  });

  it('enables pinned memory unless set, except for ensembles', () => {
    const opt = norm('backend: "onnxruntime" optimization { output_pinned_memory { enable: false } graph { level: 1 } }')
      .optimization as ModelOptimizationPolicy;
    expect(opt.input_pinned_memory).toEqual({ enable: true });
    expect(opt.output_pinned_memory).toEqual({ enable: false });
    expect(opt.graph).toEqual({ level: 1 });
    expect(norm('platform: "ensemble" ensemble_scheduling {}').optimization).toBeUndefined();
  });

  it('adds one instance group named after the model when there is none (not for ensembles)', () => {
    expect(norm('backend: "onnxruntime"', 'dense').instance_group).toEqual([
      { name: 'dense', kind: 'KIND_CPU', count: 2, gpus: [], secondary_devices: [], profile: [], passive: false, host_policy: '' },
    ]);
    expect(norm('platform: "ensemble" ensemble_scheduling {}').instance_group).toEqual([]);
  });

  it('names unnamed groups <model>_<index>, resolves KIND_AUTO to CPU and fills counts', () => {
    const groups = norm(
      'backend: "python" instance_group [ { count: 3 }, { name: "g" kind: KIND_MODEL }, { kind: KIND_CPU } ]',
      'py',
    ).instance_group;
    expect(groups.map((g) => [g.name, g.kind, g.count])).toEqual([
      ['py_0', 'KIND_CPU', 3],
      ['g', 'KIND_MODEL', 1],
      ['py_2', 'KIND_CPU', 1],
    ]);
  });

  it('resolves KIND_AUTO to GPU when every GPU it names is supported, and gives GPU groups every supported GPU', () => {
    const groups = (pbtxt: string, supportedGpus: number[]) =>
      norm(pbtxt, 'm', { supportedGpus }).instance_group.map((g) => [g.kind, g.count, g.gpus]);
    expect(groups('backend: "onnxruntime" instance_group [ { kind: KIND_AUTO } ]', [1, 0])).toEqual([['KIND_GPU', 1, [0, 1]]]);
    expect(groups('backend: "onnxruntime"', [0])).toEqual([['KIND_GPU', 1, [0]]]);
    expect(groups('backend: "onnxruntime" instance_group [ { kind: KIND_AUTO gpus: [ 1 ] } ]', [0, 1])).toEqual([['KIND_GPU', 1, [1]]]);
    expect(groups('backend: "onnxruntime" instance_group [ { kind: KIND_AUTO gpus: [ 1, 2 ] } ]', [0, 1])).toEqual([['KIND_CPU', 2, [1, 2]]]);
    expect(groups('backend: "onnxruntime" instance_group [ { kind: KIND_AUTO } ]', [])).toEqual([['KIND_CPU', 2, []]]);
    expect(groups('backend: "onnxruntime" instance_group [ { kind: KIND_GPU count: 2 } ]', [])).toEqual([['KIND_GPU', 2, []]]);
    expect(groups('backend: "onnxruntime" instance_group [ { kind: KIND_GPU gpus: [ 3 ] } ]', [0])).toEqual([['KIND_GPU', 1, [3]]]);
  });

  it('asks defaultInstanceCount for CPU groups', () => {
    const g = norm('backend: "onnxruntime"', 'm', { defaultInstanceCount: (b) => (b === 'onnxruntime' ? 5 : 9) }).instance_group;
    expect(g[0]?.count).toBe(5);
  });

  it('completes backend, platform and default_model_filename from each other', () => {
    const pick = (pbtxt: string, extra = {}) => {
      const c = norm(pbtxt, 'm', extra);
      return [c.backend, c.platform, c.default_model_filename];
    };
    expect(pick('platform: "onnxruntime_onnx"')).toEqual(['onnxruntime', 'onnxruntime_onnx', 'model.onnx']);
    expect(pick('backend: "onnxruntime"')).toEqual(['onnxruntime', 'onnxruntime_onnx', 'model.onnx']);
    expect(pick('default_model_filename: "model.onnx"')).toEqual(['onnxruntime', 'onnxruntime_onnx', 'model.onnx']);
    expect(pick('backend: "onnxruntime" default_model_filename: "other.onnx"')).toEqual(['onnxruntime', 'onnxruntime_onnx', 'other.onnx']);
    expect(pick('platform: "pytorch_libtorch"')).toEqual(['pytorch', 'pytorch_libtorch', '']);
    expect(pick('backend: "pytorch"')).toEqual(['pytorch', 'pytorch_libtorch', 'model.pt']);
    expect(pick('platform: "tensorrt_plan"')).toEqual(['tensorrt', 'tensorrt_plan', 'model.plan']);
    expect(pick('backend: "python"')).toEqual(['python', '', 'model.py']);
    expect(pick('platform: "ensemble"')).toEqual(['', 'ensemble', '']);
    expect(pick('backend: "identity"')).toEqual(['identity', '', '']);
  });

  it('detects the backend from the version directory when told its entries', () => {
    const entries = (name: string, isDirectory = false) => ({ versionEntries: [{ name, isDirectory }] });
    const c = norm('max_batch_size: 16', 'simple', entries('model.onnx'));
    expect([c.backend, c.platform, c.default_model_filename]).toEqual(['onnxruntime', 'onnxruntime_onnx', 'model.onnx']);
    expect(norm('', 'm', entries('model.onnx', true)).backend).toBe('onnxruntime');
    expect(norm('', 'm', entries('model.py')).backend).toBe('python');
    expect(norm('', 'm', entries('model.savedmodel', true)).platform).toBe('tensorflow_savedmodel');
  });

  it('falls back to a custom backend named by the model name suffix, as Triton does', () => {
    const c = norm('', 'model.identity');
    expect([c.backend, c.default_model_filename]).toEqual(['identity', 'model.identity']);
    let err: unknown;
    try {
      norm('', 'plain');
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(SwitchyardError);
    expect((err as SwitchyardError).code).toBe('invalid_argument');
    expect((err as Error).message).toBe(
      "Invalid model name: Could not determine backend for model 'plain' with no backend in model configuration. " +
        "Expected model name of the form 'model.<backend_name>'.",
    );
  });
});
