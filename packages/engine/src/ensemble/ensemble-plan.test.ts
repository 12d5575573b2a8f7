import { describe, expect, it } from 'vitest';
import { normalizeModelConfig, parseModelConfigText } from '@switchyard/model-config';
import { composingModelNames, composingReady, neededSteps, planEnsemble, reshapeDims } from './ensemble-plan.js';

const DIAMOND = parseModelConfigText(
  `name: "d" platform: "ensemble" max_batch_size: 4
   input [{ name: "IN" data_type: TYPE_FP32 dims: [ 4 ] }]
   output [{ name: "SUM" data_type: TYPE_FP32 dims: [ 4 ] }, { name: "LEFT" data_type: TYPE_FP32 dims: [ 4 ] reshape { shape: [ 2, 2 ] } }]
   ensemble_scheduling { step [
     { model_name: "a" model_version: -1 input_map { key: "X" value: "IN" } output_map { key: "Y" value: "LEFT" } },
     { model_name: "b" model_version: 2 input_map { key: "X" value: "IN" } output_map { key: "Y" value: "right" } },
     { model_name: "a" model_version: -1 input_map [{ key: "X" value: "LEFT" }, { key: "Z" value: "right" }] output_map { key: "Y" value: "SUM" } }
   ] }`,
  'd/config.pbtxt',
);

describe('planEnsemble', () => {
  const plan = planEnsemble(normalizeModelConfig(DIAMOND, { modelName: 'd' }));

  it('maps tensors to the steps that read and write them', () => {
    expect(plan.steps.map((s) => [s.modelName, s.modelVersion])).toEqual([
      ['a', undefined],
      ['b', 2],
      ['a', undefined],
    ]);
    expect([...plan.consumers]).toEqual([
      ['IN', [0, 1]],
      ['LEFT', [2]],
      ['right', [2]],
    ]);
    expect([...plan.producer]).toEqual([
      ['LEFT', 0],
      ['right', 1],
      ['SUM', 2],
    ]);
    expect(plan.outputDims.get('LEFT')).toEqual([2, 2]);
    expect(plan.batching).toBe(true);
    expect(composingModelNames(DIAMOND)).toEqual(['a', 'b']);
  });

  it('keeps only the steps the requested outputs need', () => {
    expect([...neededSteps(plan, ['SUM', 'LEFT'])].sort()).toEqual([0, 1, 2]);
    expect([...neededSteps(plan, ['LEFT'])]).toEqual([0]);
    expect([...neededSteps(plan, [])]).toEqual([]);
  });

  it('is ready when every step model (and named version) is', () => {
    const ready = new Set(['a', 'b@2']);
    expect(composingReady(DIAMOND, (n, v) => ready.has(v === undefined ? n : `${n}@${v}`))).toBe(true);
    ready.delete('b@2');
    expect(composingReady(DIAMOND, (n, v) => ready.has(v === undefined ? n : `${n}@${v}`))).toBe(false);
  });
});

describe('reshapeDims (between batching and non-batching models)', () => {
  it('adds a batch of 1 for a batching model when the tensor matches its dims', () => {
    expect(reshapeDims([4], true, 0, [4])).toEqual([1, 4]);
    expect(reshapeDims([4], true, 0, [3, 4])).toEqual([3, 4]);
  });

  it('drops a batch of 1 for a non-batching model whose dims it does not match', () => {
    expect(reshapeDims([4], false, 1, [1, 4])).toEqual([4]);
    expect(reshapeDims([-1, 4], false, 1, [1, 4])).toEqual([1, 4]);
    expect(reshapeDims([4], false, 2, [2, 4])).toEqual([2, 4]);
  });

  it('leaves tensors alone when both sides batch the same way', () => {
    expect(reshapeDims([4], true, 2, [2, 4])).toEqual([2, 4]);
    expect(reshapeDims([-1], false, 0, [7])).toEqual([7]);
  });
});
