import { describe, expect, it } from 'vitest';
import { deserializeBytesElements, serializeBytesElements } from '@switchyard/kserve';
import { parseModelConfigText } from '@switchyard/model-config';
import { batchInputTensor, compileRaggedLayout, raggedFeed, scatterOutput, type BatchInputKind } from './ragged-batch.js';

const f32 = (...v: number[]) => new Uint8Array(Float32Array.from(v).buffer);
const floats = (b: Uint8Array) => [...new Float32Array(b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength))];
const strings = (...v: string[]) => serializeBytesElements(v.map((s) => new TextEncoder().encode(s)));
const texts = (b: Uint8Array) => deserializeBytesElements(b).map((e) => new TextDecoder().decode(e));

describe('ragged batches', () => {
  it('compiles ragged inputs and scatter outputs from the config', () => {
    const config = parseModelConfigText(
      'max_batch_size: 8 input [ { name: "A" data_type: TYPE_FP32 dims: [ -1 ] allow_ragged_batch: true }, { name: "B" data_type: TYPE_FP32 dims: [ 2 ] } ] ' +
        'output [ { name: "X" data_type: TYPE_FP32 dims: [ -1 ] }, { name: "Y" data_type: TYPE_FP32 dims: [ 2 ] } ] ' +
        'batch_output [ { target_name: [ "X" ] kind: BATCH_SCATTER_WITH_INPUT_SHAPE source_input: "A" } ]',
    );
    const layout = compileRaggedLayout(config);
    expect([...layout.raggedInputs]).toEqual(['A']);
    expect([...layout.scatterOutputs]).toEqual([['X', 'A']]);
  });

  it('feeds every request’s elements end to end as one 1-D tensor', () => {
    const feed = raggedFeed([
      { shape: [1, 3], data: f32(1, 2, 3) },
      { shape: [2, 1], data: f32(4, 5) },
    ]);
    expect(feed.shape).toEqual([5]);
    expect(floats(feed.data)).toEqual([1, 2, 3, 4, 5]);
    const bytes = raggedFeed([
      { shape: [1, 1], data: strings('a') },
      { shape: [1, 2], data: strings('bc', '') },
    ]);
    expect([bytes.shape, texts(bytes.data)]).toEqual([[3], ['a', 'bc', '']]);
  });

  it('scatters an output back with each request’s source shape, BYTES included', () => {
    const parts = scatterOutput('m', 'X', 'FP32', f32(1, 2, 3, 4, 5), [5], [[1, 3], [2, 1]]);
    expect(parts.map((p) => [p.shape, floats(p.data)])).toEqual([
      [[1, 3], [1, 2, 3]],
      [[2, 1], [4, 5]],
    ]);
    const bytes = scatterOutput('m', 'X', 'BYTES', strings('a', 'bc', ''), [3], [[1, 1], [1, 2]]);
    expect(bytes.map((p) => [p.shape, texts(p.data)])).toEqual([
      [[1, 1], ['a']],
      [[1, 2], ['bc', '']],
    ]);
  });

  it('an output of another element count than the batch’s is an internal error, not a short answer', () => {
    expect(() => scatterOutput('m', 'X', 'FP32', f32(1, 2, 3), [3], [[1, 3], [1, 1]])).toThrow(
      "output 'X' of model 'm' has 3 elements, but its batch output scatters 4 (the element count of its source input over the batch)",
    );
  });

  it('makes batch inputs as Triton’s input collector does, from each request’s source shape', () => {
    const spec = (kind: BatchInputKind, datatype: 'INT32' | 'FP32' = 'INT32') => ({ kind, targets: ['T'], datatype, source: 'A' });
    const shapes = [[1, 3], [2, 2]];
    const ints = (t: { shape: number[]; data: Uint8Array }) => [t.shape, [...new Int32Array(t.data.buffer.slice(t.data.byteOffset, t.data.byteOffset + t.data.byteLength))]];
    expect(ints(batchInputTensor(spec('BATCH_ELEMENT_COUNT'), shapes))).toEqual([[2], [3, 4]]);
    expect(ints(batchInputTensor(spec('BATCH_ACCUMULATED_ELEMENT_COUNT'), shapes))).toEqual([[2], [3, 7]]);
    expect(ints(batchInputTensor(spec('BATCH_ACCUMULATED_ELEMENT_COUNT_WITH_ZERO'), shapes))).toEqual([[3], [0, 3, 7]]);
    expect(ints(batchInputTensor(spec('BATCH_MAX_ELEMENT_COUNT_AS_SHAPE'), shapes))).toEqual([[4], [0, 0, 0, 0]]);
    // One row per batch item: the second request has two items of shape [2].
    expect(ints(batchInputTensor(spec('BATCH_ITEM_SHAPE'), shapes))).toEqual([[3, 1], [3, 2, 2]]);
    expect(ints(batchInputTensor(spec('BATCH_ITEM_SHAPE_FLATTEN'), [[1, 2, 5], [1, 4, 1]]))).toEqual([[4], [2, 5, 4, 1]]);
    const fp = batchInputTensor(spec('BATCH_ACCUMULATED_ELEMENT_COUNT', 'FP32'), shapes);
    expect([fp.shape, floats(fp.data)]).toEqual([[2], [3, 7]]);
    expect(() => batchInputTensor(spec('BATCH_ITEM_SHAPE'), [[1, 2, 2], [1, 3]])).toThrow('unexpected total byte size for batch input');
  });

  it('compiles batch inputs and refuses a kind it does not know', () => {
    const config = parseModelConfigText(
      'name: "m" max_batch_size: 8 input [ { name: "A" data_type: TYPE_FP32 dims: [ -1 ] allow_ragged_batch: true } ] ' +
        'batch_input [ { kind: BATCH_ACCUMULATED_ELEMENT_COUNT target_name: [ "I", "J" ] data_type: TYPE_FP32 source_input: "A" } ]',
    );
    expect(compileRaggedLayout(config).batchInputs).toEqual([{ kind: 'BATCH_ACCUMULATED_ELEMENT_COUNT', targets: ['I', 'J'], datatype: 'FP32', source: 'A' }]);
    const odd = { ...config, batch_input: [{ kind: 'BATCH_SOMETHING', target_name: ['I'], source_input: ['A'] }] };
    expect(() => compileRaggedLayout(odd)).toThrow("unsupported BatchInputKind received for model 'm': 'BATCH_SOMETHING'");
  });
});
