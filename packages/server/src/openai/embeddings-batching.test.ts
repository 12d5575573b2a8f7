import { describe, expect, it } from 'vitest';
import { SwitchyardError } from '@switchyard/common';
import { type InferResponse, type InferTensor, deserializeStringElements } from '@switchyard/kserve';
import { chunkSizes, embeddingRows, groupEmbeddingInputs } from './embeddings-batching.js';
import type { EmbeddingInput } from './embeddings-request.js';

const texts = (n: number): EmbeddingInput[] => Array.from({ length: n }, (_, i) => ({ text: `t${i}` }));
const idsOf = (t: InferTensor): bigint[] => Array.from(new BigInt64Array(t.data.slice().buffer));

describe('chunkSizes', () => {
  it('makes ceil(count / max) runs of near-equal size that add up to count', () => {
    expect(chunkSizes(0, 4)).toEqual([]);
    expect(chunkSizes(3, 4)).toEqual([3]);
    expect(chunkSizes(4, 4)).toEqual([4]);
    expect(chunkSizes(5, 4)).toEqual([3, 2]);
    expect(chunkSizes(256, 32)).toEqual(Array(8).fill(32));
    expect(chunkSizes(33, 32)).toEqual([17, 16]);
    for (let count = 1; count <= 70; count++) {
      for (const max of [1, 2, 3, 7, 16, 32]) {
        const sizes = chunkSizes(count, max);
        expect(sizes).toHaveLength(Math.ceil(count / max));
        expect(sizes.reduce((a, b) => a + b, 0)).toBe(count);
        expect(Math.max(...sizes)).toBeLessThanOrEqual(max);
        expect(Math.max(...sizes) - Math.min(...sizes)).toBeLessThanOrEqual(1);
      }
    }
  });
});

describe('groupEmbeddingInputs', () => {
  it('sends texts in order as BYTES [n, 1] requests of at most max_batch_size rows', () => {
    const groups = groupEmbeddingInputs(texts(10), 4);
    expect(groups.map((g) => g.indexes)).toEqual([
      [0, 1, 2, 3],
      [4, 5, 6],
      [7, 8, 9],
    ]);
    for (const g of groups) {
      expect(g.tensor).toMatchObject({ name: 'text_input', datatype: 'BYTES', shape: [g.indexes.length, 1] });
      expect(deserializeStringElements(g.tensor.data, 'text_input')).toEqual(g.indexes.map((i) => `t${i}`));
    }
  });

  it('puts token-id inputs of one length together ([n, length]) and never pads one to another length', () => {
    const inputs: EmbeddingInput[] = [{ ids: [1, 2, 3] }, { ids: [4] }, { ids: [5, 6, 7] }, { ids: [8, 9] }, { ids: [10, 11, 12] }, { ids: [13] }];
    const groups = groupEmbeddingInputs(inputs, 2);
    expect(groups.map((g) => [g.indexes, g.tensor.shape])).toEqual([
      [[0, 2], [2, 3]],
      [[4], [1, 3]],
      [[1, 5], [2, 1]],
      [[3], [1, 2]],
    ]);
    expect(groups.every((g) => g.tensor.name === 'input_ids' && g.tensor.datatype === 'INT64')).toBe(true);
    expect(idsOf(groups[0]!.tensor)).toEqual([1n, 2n, 3n, 5n, 6n, 7n]);
    expect(idsOf(groups[2]!.tensor)).toEqual([4n, 13n]);
  });

  it('carries every input exactly once', () => {
    const inputs: EmbeddingInput[] = Array.from({ length: 300 }, (_, i) => ({ ids: Array.from({ length: 1 + ((i * 7) % 5) }, (_, j) => i + j) }));
    for (const max of [1, 3, 32]) {
      const groups = groupEmbeddingInputs(inputs, max);
      expect(groups.flatMap((g) => g.indexes).sort((a, b) => a - b)).toEqual(inputs.map((_, i) => i));
      for (const g of groups) {
        expect(g.indexes.length).toBeLessThanOrEqual(max);
        expect(idsOf(g.tensor).map(Number)).toEqual(g.indexes.flatMap((i) => (inputs[i] as { ids: number[] }).ids));
      }
    }
    expect(groupEmbeddingInputs(texts(256), 32)).toHaveLength(8);
  });

  it('sends one unbatched request per input to a model that does not batch (max_batch_size 0)', () => {
    const t = groupEmbeddingInputs(texts(3), 0);
    expect(t.map((g) => [g.indexes, g.tensor.name, g.tensor.shape])).toEqual([
      [[0], 'text_input', [1]],
      [[1], 'text_input', [1]],
      [[2], 'text_input', [1]],
    ]);
    const ids = groupEmbeddingInputs([{ ids: [1, 2] }, { ids: [3, 4] }], 0);
    expect(ids.map((g) => [g.indexes, g.tensor.name, g.tensor.shape])).toEqual([
      [[0], 'input_ids', [2]],
      [[1], 'input_ids', [2]],
    ]);
  });
});

const answer = (vectors: number[][], tokens: number[], shape?: { embedding?: number[] }): InferResponse => ({
  modelName: 'm',
  modelVersion: '1',
  id: '',
  parameters: {},
  outputs: [
    { name: 'embedding', datatype: 'FP32', shape: shape?.embedding ?? [vectors.length, vectors[0]?.length ?? 0], data: new Uint8Array(Float32Array.from(vectors.flat()).buffer), parameters: {} },
    { name: 'prompt_tokens', datatype: 'INT32', shape: [tokens.length, 1], data: new Uint8Array(Int32Array.from(tokens).buffer), parameters: {} },
  ],
});

describe('embeddingRows', () => {
  it('splits an answer into its rows, each vector an aligned copy', () => {
    const a = answer(
      [
        [1, 2, 3],
        [4, 5, 6],
      ],
      [7, 9],
    );
    const rows = embeddingRows(a, 2);
    expect(rows.map((r) => [Array.from(r.vector), r.tokens])).toEqual([
      [[1, 2, 3], 7],
      [[4, 5, 6], 9],
    ]);
    rows[0]!.vector[0] = 100;
    expect(new Float32Array(a.outputs[0]!.data.buffer)[0]).toBe(1);
    expect(rows[1]!.vector.byteOffset).toBe(0);
  });

  it('reads an unbatched answer ([dim]) as one row', () => {
    expect(embeddingRows(answer([[0.5, -0.5]], [3], { embedding: [2] }), 1).map((r) => [Array.from(r.vector), r.tokens])).toEqual([[[0.5, -0.5], 3]]);
  });

  it('refuses, as a server error, an answer whose rows do not match the request', () => {
    const internal = (a: InferResponse, rows: number): string | undefined => {
      try {
        embeddingRows(a, rows);
        return undefined;
      } catch (e) {
        expect(e).toBeInstanceOf(SwitchyardError);
        return (e as SwitchyardError).code;
      }
    };
    expect(internal(answer([[1, 2]], [3]), 2)).toBe('internal');
    expect(internal(answer([[1], [2], [3]], [1, 1, 1]), 2)).toBe('internal');
    expect(internal({ ...answer([[1, 2]], [3]), outputs: answer([[1, 2]], [3]).outputs.slice(0, 1) }, 1)).toBe('internal');
    const wrongType = answer([[1, 2]], [3]);
    expect(internal({ ...wrongType, outputs: [{ ...wrongType.outputs[0]!, datatype: 'FP64' }, wrongType.outputs[1]!] }, 1)).toBe('internal');
  });
});
