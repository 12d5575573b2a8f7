import { describe, expect, it } from 'vitest';
import { deserializeBytesElements, serializeBytesElements } from '@switchyard/kserve';
import { parseModelConfigText } from '@switchyard/model-config';
import { compileRaggedLayout, raggedFeed, scatterOutput } from './ragged-batch.js';

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
});
