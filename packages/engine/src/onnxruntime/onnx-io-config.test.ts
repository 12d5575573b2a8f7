import { describe, expect, it } from 'vitest';
import { parseModelConfigText } from '@switchyard/model-config';
import { autoCompleteOnnxConfig, checkOnnxIo, type OnnxIo } from './onnx-io-config.js';

const base = (text = '') => ({ ...parseModelConfigText(text), name: 'm' });

describe('autoCompleteOnnxConfig', () => {
  it('enables batching with the default max batch size when every dim 0 is dynamic', () => {
    const io: OnnxIo = { inputs: [{ name: 'X', type: 'float32', dims: [-1, 3] }], outputs: [{ name: 'Y', type: 'int64', dims: [-1] }] };
    const c = autoCompleteOnnxConfig(base(), io);
    expect(c.max_batch_size).toBe(4);
    expect(c.dynamic_batching?.preferred_batch_size).toEqual([4]);
    expect(c.input).toMatchObject([{ name: 'X', data_type: 'TYPE_FP32', dims: [3] }]);
    // A batched scalar: dims [1] plus an empty reshape.
    expect(c.output).toMatchObject([{ name: 'Y', data_type: 'TYPE_INT64', dims: [1], reshape: { shape: [] } }]);
  });

  it('leaves batching off for fixed first dims, and refuses a batch size the model cannot take', () => {
    const io: OnnxIo = { inputs: [{ name: 'X', type: 'string', dims: [2, 3] }], outputs: [{ name: 'Y', type: 'bool', dims: [] }] };
    const c = autoCompleteOnnxConfig(base(), io);
    expect(c.max_batch_size).toBe(0);
    expect(c.dynamic_batching).toBeUndefined();
    expect(c.input).toMatchObject([{ data_type: 'TYPE_STRING', dims: [2, 3] }]);
    expect(c.output[0]).toMatchObject({ data_type: 'TYPE_BOOL', dims: [1] });
    expect(c.output[0]?.reshape).toBeUndefined();
    expect(() => autoCompleteOnnxConfig(base('max_batch_size: 8'), io)).toThrow(
      "autofill failed for model 'm': model does not support batching while non-zero max_batch_size is specified",
    );
  });

  it('keeps an explicit max batch size and completes only what is missing', () => {
    const io: OnnxIo = { inputs: [{ name: 'X', type: 'float32', dims: [-1, 3] }], outputs: [{ name: 'Y', type: 'float32', dims: [-1, 3] }] };
    const c = autoCompleteOnnxConfig(base('max_batch_size: 16 input { name: "X" data_type: TYPE_FP32 dims: [ 3 ] }'), io);
    expect(c.max_batch_size).toBe(16);
    expect(c.input).toHaveLength(1);
    expect(c.output).toMatchObject([{ name: 'Y', dims: [3] }]);
    const full = base('input { name: "X" data_type: TYPE_FP32 dims: [ 3 ] } output { name: "Y" data_type: TYPE_FP32 dims: [ 3 ] }');
    expect(autoCompleteOnnxConfig(full, io)).toBe(full);
  });
});

describe('checkOnnxIo', () => {
  const io: OnnxIo = { inputs: [{ name: 'X', type: 'float32', dims: [-1, 3] }], outputs: [{ name: 'Y', type: 'float32', dims: [-1, 3] }] };
  const cfg = (inType: string, inDims: string, mbs = 4) =>
    base(`max_batch_size: ${mbs} input { name: "X" data_type: ${inType} dims: ${inDims} } output { name: "Y" data_type: TYPE_FP32 dims: [ 3 ] }`);

  it('accepts a matching config', () => {
    expect(() => checkOnnxIo(cfg('TYPE_FP32', '[ 3 ]'), io)).not.toThrow();
  });

  it('reports mismatches with Triton messages', () => {
    expect(() => checkOnnxIo(cfg('TYPE_INT32', '[ 3 ]'), io)).toThrow("unable to load model 'm', configuration expects datatype TYPE_INT32 for input 'X', model provides TYPE_FP32");
    expect(() => checkOnnxIo(cfg('TYPE_FP32', '[ 4 ]'), io)).toThrow(
      "model 'm', tensor 'X': the model expects 2 dimensions (shape [-1,3]) but the model configuration specifies 2 dimensions (an initial batch dimension because max_batch_size > 0 followed by the explicit tensor shape, making complete shape [-1,4])",
    );
    const unbatched = base('input { name: "X" data_type: TYPE_FP32 dims: [ 5, 3 ] } output { name: "Y" data_type: TYPE_FP32 dims: [ -1, 3 ] }');
    expect(() => checkOnnxIo(unbatched, io)).not.toThrow();
    const fixed: OnnxIo = { inputs: [{ name: 'X', type: 'float32', dims: [2, 3] }], outputs: io.outputs };
    expect(() => checkOnnxIo(cfg('TYPE_FP32', '[ 3 ]'), fixed)).toThrow('for the model to support batching the shape should have at least 1 dimension and the first dimension must be -1');
    const renamed = base('input { name: "Z" data_type: TYPE_FP32 dims: [ 3 ] } output { name: "Y" data_type: TYPE_FP32 dims: [ 3 ] }');
    expect(() => checkOnnxIo(renamed, io)).toThrow("unexpected inference input 'Z', allowed inputs are: X");
  });

  it("allows a ragged input only where the model takes [-1], and does not compare a batch output's dims", () => {
    const model: OnnxIo = { inputs: [{ name: 'X', type: 'float32', dims: [-1] }], outputs: [{ name: 'Y', type: 'float32', dims: [-1] }] };
    const ragged = (extra = '') =>
      base(
        `max_batch_size: 8 input { name: "X" data_type: TYPE_FP32 dims: [ -1 ] allow_ragged_batch: true } output { name: "Y" data_type: TYPE_FP32 dims: [ -1 ] } ${extra}`,
      );
    // Without a batch output, Y is an ordinary batched output the model lacks a batch dimension for.
    expect(() => checkOnnxIo(ragged(), model)).toThrow("model 'm', tensor 'Y': the model expects 1 dimensions (shape [-1]) but the model configuration specifies 2 dimensions");
    const scattered = ragged('batch_output { target_name: "Y" kind: BATCH_SCATTER_WITH_INPUT_SHAPE source_input: "X" }');
    expect(() => checkOnnxIo(scattered, model)).not.toThrow();
    // Config dims do not matter for a ragged input; the model's shape does.
    const batchedModel: OnnxIo = { inputs: [{ name: 'X', type: 'float32', dims: [-1, 4] }], outputs: model.outputs };
    expect(() => checkOnnxIo(scattered, batchedModel)).toThrow(
      "unable to load model 'm', configuration expects model provides input with shape [-1]  for ragged input 'X', model provides [-1,4]",
    );
    // The datatype is still checked first, for the input and for the batch output.
    const ints: OnnxIo = { inputs: [{ name: 'X', type: 'int32', dims: [-1] }], outputs: model.outputs };
    expect(() => checkOnnxIo(scattered, ints)).toThrow("unable to load model 'm', configuration expects datatype TYPE_FP32 for input 'X', model provides TYPE_INT32");
    const intOut: OnnxIo = { inputs: model.inputs, outputs: [{ name: 'Y', type: 'int32', dims: [-1] }] };
    expect(() => checkOnnxIo(scattered, intOut)).toThrow("unable to load model 'm', configuration expects datatype TYPE_FP32 for output 'Y', model provides TYPE_INT32");
  });
});
