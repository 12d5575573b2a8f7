import { describe, expect, it } from 'vitest';
import { enforceLimits, isSwitchyardError } from '@switchyard/common';
import { normalizeModelConfig, parseModelConfigText } from '@switchyard/model-config';
import { buildSimpleModel } from '@switchyard/onnx-builder';
import { createEngine } from './engine.js';
import { compileLlmOptions } from './llm/llm-options.js';
import { compileEngineOptions } from './options.js';
import { createRepository } from './test-support/repository-fixture.js';
import { DEFAULT_LOAD_LIMITS, configLimitChecks, kvCacheLimitCheck, llmLimitChecks } from './load-limits.js';

const IO = 'input [{ name: "IN" data_type: TYPE_INT32 dims: [1] }] output [{ name: "OUT" data_type: TYPE_INT32 dims: [1] }]';
const config = (body: string) => normalizeModelConfig(parseModelConfigText(`name: "m" backend: "javascript" ${IO} ${body}`, 'config.pbtxt'), { modelName: 'm' });

/** The refusal message, or undefined when every check passes. */
function refusal(body: string): string | undefined {
  try {
    enforceLimits("unable to load model 'm'", configLimitChecks(config(body)));
    return undefined;
  } catch (e) {
    expect(isSwitchyardError(e) && e.code === 'invalid_argument').toBe(true);
    return (e as Error).message;
  }
}

describe('configLimitChecks', () => {
  it('passes ordinary configs, and counts below 1 as the default count (as Triton normalises them)', () => {
    expect(refusal('max_batch_size: 8 instance_group [{ count: 4 }]')).toBeUndefined();
    expect(refusal('instance_group [{ count: -1 }, { count: 0 }]')).toBeUndefined();
    expect(config('instance_group [{ count: -1 }]').instance_group[0]?.count).toBe(1);
    expect(refusal('max_batch_size: 2147483647 dynamic_batching { max_queue_delay_microseconds: 100 }')).toBeUndefined();
    expect(refusal('sequence_batching { oldest { max_candidate_sequences: 1024 } } instance_group [{ count: 4 }]')).toBeUndefined();
  });

  it('counts instances over every group', () => {
    expect(refusal('instance_group [{ count: 40 }, { count: 25 }]')).toBe(
      "unable to load model 'm': instance_group count (all groups) is 65 instances, above the limit of 64 instances (each instance runs on its own thread)",
    );
    expect(refusal('instance_group [{ count: 2147483647 }]')).toContain('is 2147483647 instances');
  });

  it('does not limit sequence slots: they are made as sequences take them', () => {
    expect(refusal('max_batch_size: 2147483647 sequence_batching { } instance_group [{ count: 2 }]')).toBeUndefined();
    expect(refusal('max_batch_size: 4 sequence_batching { oldest { max_candidate_sequences: 1000000000 } }')).toBeUndefined();
  });

  it('sizes implicit-state and warmup tensors without overflowing', () => {
    expect(refusal('max_batch_size: 1 sequence_batching { state [{ input_name: "S" output_name: "S_OUT" data_type: TYPE_FP32 dims: [100000, 100000] }] }')).toContain(
      "state 'S' is 40000000000 bytes",
    );
    const huge = 'model_warmup [{ name: "w" batch_size: 2000000000 inputs { key: "IN" value: { data_type: TYPE_INT32 dims: [2000000000] zero_data: true } } }]';
    expect(refusal(`max_batch_size: 8 ${huge}`)).toContain("warmup sample 'w' input 'IN' is 16000000000000000000 bytes");
    expect(refusal('model_warmup [{ name: "w" count: 4000000000 inputs { key: "IN" value: { data_type: TYPE_INT32 dims: [1] zero_data: true } } }]')).toContain(
      'model_warmup count (all samples) is 4000000000 runs, above the limit of 10000 runs',
    );
  });

  it('ONNX Runtime thread parameters', () => {
    expect(refusal('parameters { key: "inter_op_thread_count" value: { string_value: "65" } }')).toContain("parameter 'inter_op_thread_count' is 65 threads");
    expect(refusal('parameters { key: "intra_op_thread_count" value: { string_value: "64" } }')).toBeUndefined();
  });
});

describe('llmLimitChecks and kvCacheLimitCheck', () => {
  const llm = (parameters: Record<string, string>) => {
    const c = config('max_batch_size: 0');
    c.parameters = Object.fromEntries(Object.entries(parameters).map(([k, v]) => [k, { string_value: v }]));
    return llmLimitChecks(compileLlmOptions(c, 'mocker'));
  };
  it('passes the defaults and refuses values beyond the ceilings', () => {
    expect(() => enforceLimits('x', llm({}))).not.toThrow();
    expect(() => enforceLimits('x', llm({ num_gpu_blocks: '1000000000' }))).not.toThrow();
    expect(() => enforceLimits('x', llm({ max_num_seqs: '70000' }))).toThrow("x: parameter 'max_num_seqs' is 70000 sequences, above the limit of 65536 sequences (scheduled at once)");
    expect(() => enforceLimits('x', llm({ block_size: '1000000' }))).toThrow("parameter 'block_size' is 1000000 tokens");
    expect(() => enforceLimits('x', llm({ max_num_batched_tokens: '100000000' }))).toThrow("parameter 'max_num_batched_tokens' is 100000000 tokens");
  });
  it('the KV cache is checked in bytes', () => {
    expect(() => enforceLimits('', [kvCacheLimitCheck(DEFAULT_LOAD_LIMITS.maxKvCacheBytes)])).not.toThrow();
    expect(() => enforceLimits('', [kvCacheLimitCheck(DEFAULT_LOAD_LIMITS.maxKvCacheBytes + 1)])).toThrow(/^KV cache .* bytes, above the limit of 4294967296 bytes/);
  });
});

describe('EngineOptions.loadLimits', () => {
  it('replaces the defaults it names and is validated', () => {
    expect(compileEngineOptions({ modelRepositories: ['/m'] }).loadLimits).toEqual(DEFAULT_LOAD_LIMITS);
    expect(compileEngineOptions({ modelRepositories: ['/m'], loadLimits: { maxInstances: 256 } }).loadLimits).toEqual({ ...DEFAULT_LOAD_LIMITS, maxInstances: 256 });
    expect(() => compileEngineOptions({ modelRepositories: ['/m'], loadLimits: { maxInstances: 0 } })).toThrow('invalid load limit maxInstances 0, expected a positive number');
    expect(() => compileEngineOptions({ modelRepositories: ['/m'], loadLimits: { bogus: 1 } as never })).toThrow("unknown load limit 'bogus'");
  });

  it('a version whose config is over an engine limit is UNAVAILABLE with the reason; the others load', async () => {
    const repo = await createRepository({
      one: { config: 'backend: "onnxruntime" max_batch_size: 8 instance_group [{ count: 1 }]', versions: { 1: { 'model.onnx': buildSimpleModel() } } },
      three: { config: 'backend: "onnxruntime" max_batch_size: 8 instance_group [{ count: 3 }]', versions: { 1: { 'model.onnx': buildSimpleModel() } } },
    });
    const engine = await createEngine({ modelRepositories: [repo.root], loadLimits: { maxInstances: 2 } });
    try {
      expect(engine.isModelReady('one')).toBe(true);
      const rows = await engine.repositoryIndex(false);
      expect(rows.find((r) => r.name === 'three')).toMatchObject({
        state: 'UNAVAILABLE',
        reason: "unable to load model 'three': instance_group count (all groups) is 3 instances, above the limit of 2 instances (each instance runs on its own thread)",
      });
    } finally {
      await engine.shutdown();
      await repo.cleanup();
    }
  });
});
