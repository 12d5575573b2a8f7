import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { normalizeModelConfig, parseModelConfigText } from '@switchyard/model-config';
import type { Backend, BackendInstance, BackendModel } from './backend.js';
import { createEngine, type Engine } from './engine.js';
import type { ModelLoadStep } from './model/model-loader.js';
import { OnnxRuntimeBackend } from './onnxruntime/onnxruntime-backend.js';
import { buildIdentityModel } from '@switchyard/onnx-builder';
import { createRepository, type RepositoryFixture } from './test-support/repository-fixture.js';
import { runWarmup } from './warmup.js';

const IO = (type: string) =>
  `backend: "onnxruntime" max_batch_size: 4 input { name: "INPUT0" data_type: ${type} dims: [ 2 ] } output { name: "OUTPUT0" data_type: ${type} dims: [ 2 ] }`;

/** Counts executions per model that reach the backend (warmup bypasses the scheduler). */
function counting(counts: Map<string, number>): Backend {
  const inner = new OnnxRuntimeBackend();
  return {
    name: inner.name,
    autoCompleteConfig: (c) => inner.autoCompleteConfig(c),
    async loadModel(context): Promise<BackendModel> {
      const model = await inner.loadModel(context);
      return {
        release: () => model.release(),
        async createInstance(spec) {
          const instance = await model.createInstance(spec);
          return {
            name: instance.name,
            release: () => instance.release(),
            execute: (requests) => {
              counts.set(context.modelName, (counts.get(context.modelName) ?? 0) + 1);
              return instance.execute(requests);
            },
          };
        },
      };
    },
  };
}

describe('model warmup', () => {
  let repo: RepositoryFixture;
  let engine: Engine;
  const counts = new Map<string, number>();
  const steps: ModelLoadStep[] = [];
  const stepsOf = (model: string): string[] => steps.filter((s) => s.model === model).map((s) => `${s.version}:${s.step}`);

  beforeAll(async () => {
    const model = { 1: { 'model.onnx': buildIdentityModel('FLOAT', ['batch', 2]) } };
    repo = await createRepository({
      warm_zero: {
        config: `${IO('TYPE_FP32')} instance_group { count: 2 } model_warmup { name: "z" batch_size: 3 count: 2 inputs { key: "INPUT0" value { data_type: TYPE_FP32 dims: [ 2 ] zero_data: true } } }`,
        versions: model,
      },
      warm_random: {
        config: `${IO('TYPE_FP32')} instance_group { count: 1 } model_warmup { name: "r" batch_size: 1 inputs { key: "INPUT0" value { data_type: TYPE_FP32 dims: [ 2 ] random_data: true } } }`,
        versions: model,
      },
      warm_file: {
        config: `${IO('TYPE_FP32')} instance_group { count: 1 } model_warmup { name: "f" batch_size: 1 inputs { key: "INPUT0" value { data_type: TYPE_FP32 dims: [ 2 ] input_data_file: "in.bin" } } }`,
        versions: model,
        files: { 'warmup/in.bin': new Uint8Array(new Float32Array([1, 2]).buffer) },
      },
      warm_missing_file: {
        config: `${IO('TYPE_FP32')} model_warmup { name: "m" batch_size: 1 inputs { key: "INPUT0" value { data_type: TYPE_FP32 dims: [ 2 ] input_data_file: "absent.bin" } } }`,
        versions: model,
      },
      warm_bad_shape: {
        config: `${IO('TYPE_FP32')} model_warmup { name: "s" batch_size: 1 inputs { key: "INPUT0" value { data_type: TYPE_FP32 dims: [ 5 ] zero_data: true } } }`,
        versions: model,
      },
    });
    engine = await createEngine({ modelRepositories: [repo.root], backends: { onnxruntime: counting(counts) }, onLoadStep: (s) => steps.push(s) });
  });

  afterAll(async () => {
    await engine.shutdown();
    await repo.cleanup();
  });

  it('runs every sample count times on every instance before READY', async () => {
    expect(engine.isModelReady('warm_zero')).toBe(true);
    expect(counts.get('warm_zero')).toBe(4);
    expect(engine.isModelReady('warm_random')).toBe(true);
    expect(counts.get('warm_random')).toBe(1);
    expect(engine.isModelReady('warm_file')).toBe(true);
    // Warmup executions are not inference statistics.
    expect(engine.modelStatistics('warm_zero')[0]?.execution_count).toBe(0);
  });

  it('reports each load step as it starts: warmup only for a model that has samples, then loaded or failed', () => {
    expect(stepsOf('warm_zero')).toEqual(['1:loading', '1:instances', '1:warmup', '1:loaded']);
    expect(stepsOf('warm_missing_file')).toEqual(['1:loading', '1:instances', '1:warmup', '1:failed']);
  });

  it('leaves the version UNAVAILABLE when warmup fails', async () => {
    const index = await engine.repositoryIndex(false);
    const missing = index.find((r) => r.name === 'warm_missing_file');
    expect(missing).toMatchObject({ state: 'UNAVAILABLE' });
    expect(missing?.reason).toContain("failed to warm up model 'warm_missing_file' with sample 'm'");
    expect(missing?.reason).toContain('absent.bin');
    const shape = index.find((r) => r.name === 'warm_bad_shape');
    expect(shape).toMatchObject({ state: 'UNAVAILABLE' });
    expect(shape?.reason).toContain("unexpected shape for input 'INPUT0'");
  });
});

describe('runWarmup', () => {
  const config = normalizeModelConfig(
    parseModelConfigText(
      `name: "w" ${IO('TYPE_FP32')} model_warmup { name: "a" batch_size: 1 count: 3 inputs { key: "INPUT0" value { data_type: TYPE_FP32 dims: [ 2 ] zero_data: true } } } model_warmup { name: "b" batch_size: 1 inputs { key: "INPUT0" value { data_type: TYPE_FP32 dims: [ 2 ] zero_data: true } } }`,
      'config.pbtxt',
    ),
    { modelName: 'w' },
  );

  /** Instances that take a few ms per execution and record what runs at once; `failing` fail sample runs. */
  function instances(n: number, failing: ReadonlySet<number> = new Set()) {
    const log = { running: 0, peak: 0, runs: [] as string[] };
    const list = Array.from({ length: n }, (_, i): BackendInstance => ({
      name: `w_0_${i}`,
      release: async () => undefined,
      async execute() {
        log.running++;
        log.peak = Math.max(log.peak, log.running);
        log.runs.push(`w_0_${i}`);
        await new Promise((r) => setTimeout(r, 5));
        log.running--;
        if (failing.has(i)) throw new Error(`instance ${i} broke`);
        return { results: [{ outputs: [] }] } as unknown as Awaited<ReturnType<BackendInstance['execute']>>;
      },
    }));
    return { list, log };
  }

  it('runs a sample on every instance side by side, count times each, samples in order', async () => {
    const { list, log } = instances(3);
    await runWarmup(config, '/nonexistent', list);
    expect(log.peak).toBe(3);
    expect(log.runs.filter((r) => r === 'w_0_1')).toHaveLength(4); // a: 3 times, b: once
    expect(log.runs).toHaveLength(12);
  });

  it("reports the first failing instance in order, as one-after-another warmup did, and runs no later sample", async () => {
    const { list, log } = instances(3, new Set([1, 2]));
    await expect(runWarmup(config, '/nonexistent', list)).rejects.toThrow("failed to warm up model 'w' instance 'w_0_1' with sample 'a': instance 1 broke");
    // sample a only: instance 0 three times, the failing ones once each
    expect(log.runs.sort()).toEqual(['w_0_0', 'w_0_0', 'w_0_0', 'w_0_1', 'w_0_2']);
  });
});
