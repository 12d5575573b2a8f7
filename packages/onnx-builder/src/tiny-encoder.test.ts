import * as ort from 'onnxruntime-node';
import { describe, expect, it } from 'vitest';
import { TINY_ENCODER_SHAPE, buildTinyEncoderModel, sentenceTransformersFiles } from './tiny-encoder.js';

const int64 = (values: number[], dims: number[]): ort.Tensor => new ort.Tensor('int64', BigInt64Array.from(values, BigInt), dims);

describe('buildTinyEncoderModel', () => {
  it('is deterministic and has the feature-extraction signature', async () => {
    const bytes = buildTinyEncoderModel();
    expect(Buffer.from(buildTinyEncoderModel()).equals(Buffer.from(bytes))).toBe(true);
    const session = await ort.InferenceSession.create(bytes);
    expect(session.inputNames).toEqual(['input_ids', 'attention_mask', 'token_type_ids']);
    expect(session.outputNames).toEqual(['last_hidden_state']);
    const plain = await ort.InferenceSession.create(buildTinyEncoderModel({ tokenTypeIds: false }));
    expect(plain.inputNames).toEqual(['input_ids', 'attention_mask']);
    await Promise.all([session.release(), plain.release()]);
  });

  it('gives a padded sequence the hidden states it has alone', async () => {
    const session = await ort.InferenceSession.create(buildTinyEncoderModel());
    const H = TINY_ENCODER_SHAPE.hiddenSize;
    const alone = (await session.run({ input_ids: int64([5, 6, 7], [1, 3]), attention_mask: int64([1, 1, 1], [1, 3]), token_type_ids: int64([0, 0, 0], [1, 3]) }))['last_hidden_state']!;
    const padded = (await session.run({ input_ids: int64([5, 6, 7, 0, 0], [1, 5]), attention_mask: int64([1, 1, 1, 0, 0], [1, 5]), token_type_ids: int64([0, 0, 0, 0, 0], [1, 5]) }))['last_hidden_state']!;
    expect(alone.dims).toEqual([1, 3, H]);
    const a = alone.data as Float32Array;
    const p = (padded.data as Float32Array).subarray(0, 3 * H);
    for (let i = 0; i < a.length; i++) expect(p[i]).toBeCloseTo(a[i]!, 5);
    await session.release();
  });
});

describe('sentenceTransformersFiles', () => {
  it('writes the pooling flag, the Normalize module and the length', () => {
    const files = sentenceTransformersFiles({ pooling: 'cls', normalize: false, maxSeqLength: 16 });
    expect(JSON.parse(files['1_Pooling/config.json']!)).toMatchObject({ pooling_mode_cls_token: true, pooling_mode_mean_tokens: false });
    expect((JSON.parse(files['modules.json']!) as Array<{ type: string }>).map((m) => m.type)).not.toContain('sentence_transformers.models.Normalize');
    expect(JSON.parse(files['sentence_bert_config.json']!)).toMatchObject({ max_seq_length: 16 });
    expect(Object.keys(files)).toContain('tokenizer.json');
  });
});
