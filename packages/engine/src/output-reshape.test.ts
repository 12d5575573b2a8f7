import { describe, expect, it } from 'vitest';
import type { InferTensor } from '@switchyard/kserve';
import type { ModelConfig, ModelOutput } from '@switchyard/model-config';
import { reshapeOutputShape, reshapeOutputs, reshapeResult } from './output-reshape.js';

const output = (name: string, dims: number[], reshape?: number[]): ModelOutput =>
  ({ name, data_type: 'TYPE_FP32', dims, ...(reshape === undefined ? {} : { reshape: { shape: reshape } }) }) as unknown as ModelOutput;
const config = (maxBatch: number, outputs: ModelOutput[]): ModelConfig => ({ name: 'm', max_batch_size: maxBatch, output: outputs }) as unknown as ModelConfig;
const tensor = (name: string, shape: number[]): InferTensor => ({ name, datatype: 'FP32', shape, data: new Uint8Array(4 * shape.reduce((n, d) => n * d, 1)), parameters: {} });

describe('reshapeOutputShape (Triton Output::Reshape)', () => {
  it('keeps the batch dimension and takes dims', () => {
    expect(reshapeOutputShape(output('O', [8], [4, 1, 2]), true, [1, 4, 1, 2])).toEqual([1, 8]);
    expect(reshapeOutputShape(output('O', [8], [4, 1, 2]), true, [3, 4, 1, 2])).toEqual([3, 8]);
    expect(reshapeOutputShape(output('O', [12], [3, 2, 2]), false, [3, 2, 2])).toEqual([12]);
  });

  it('fills each -1 of dims, in order, with the sizes at the -1s of reshape.shape', () => {
    expect(reshapeOutputShape(output('O', [-1, 2, -1], [-1, 1, 2, -1]), true, [2, 5, 1, 2, 7])).toEqual([2, 5, 2, 7]);
    expect(reshapeOutputShape(output('O', [-1], [1, -1]), false, [1, 6])).toEqual([6]);
  });

  it('an empty reshape (a scalar per batch entry) becomes dims [1]', () => {
    expect(reshapeOutputShape(output('O', [1], []), true, [4])).toEqual([4, 1]);
  });

  it('a shape missing the variable dimensions has no client shape', () => {
    expect(reshapeOutputShape(output('O', [-1], [1, -1]), false, [1])).toBeUndefined();
  });
});

describe('reshapeOutputs / reshapeResult', () => {
  const cfg = config(4, [output('A', [8], [4, 1, 2]), output('B', [2])]);

  it('reshapes the outputs that have a reshape, leaves the others (and unknown names) alone', () => {
    const outs = [tensor('A', [1, 4, 1, 2]), tensor('B', [1, 2]), tensor('EXTRA', [3])];
    const r = reshapeOutputs(cfg, outs);
    expect(Array.isArray(r) && r.map((t) => t.shape)).toEqual([[1, 8], [1, 2], [3]]);
    expect(outs[0]!.shape).toEqual([1, 4, 1, 2]); // the model's tensors are not changed in place
  });

  it('returns the same array when the config has no reshape', () => {
    const outs = [tensor('B', [1, 2])];
    expect(reshapeOutputs(config(4, [output('B', [2])]), outs)).toBe(outs);
  });

  it('an output whose elements do not fit its dims fails the result, keeping its finality', () => {
    const bad = { final: false, response: { id: '', modelName: 'm', modelVersion: '1', parameters: {}, outputs: [tensor('A', [1, 3])] } };
    const r = reshapeResult(cfg, bad);
    expect(r.final).toBe(false);
    expect(r.response).toBeUndefined();
    expect(r.error?.code).toBe('internal');
    expect(r.error?.message).toBe("output 'A' of model 'm' has shape [1,3], which its reshape [4,1,2] cannot turn into dims [8]");
  });

  it('errors and empty results pass through', () => {
    const empty = { final: true };
    expect(reshapeResult(cfg, empty)).toBe(empty);
  });
});
