import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import * as ort from 'onnxruntime-node';
import { runOrtSession, type OrtTensorValue } from '@switchyard/ort';
import { buildTinyDecoderModel, pastKeyName, pastValueName, presentKeyName, presentValueName } from './tiny-decoder.js';
import { TINY_DECODER_SHAPE as S } from './tiny-tokenizer-files.js';

type KvType = 'FLOAT' | 'FLOAT16';
type Feeds = Record<string, OrtTensorValue>;

const int64 = (values: number[], dims: number[]): OrtTensorValue => ({ type: 'int64', data: BigInt64Array.from(values.map(BigInt)), dims });

function emptyPast(kv: KvType, batch: number): Feeds {
  const feeds: Feeds = {};
  for (let n = 0; n < S.numLayers; n++) {
    for (const name of [pastKeyName(n), pastValueName(n)]) {
      feeds[name] =
        kv === 'FLOAT'
          ? { type: 'float32', data: new Float32Array(0), dims: [batch, S.numKvHeads, 0, S.headDim] }
          : { type: 'float16', data: new Uint16Array(0), dims: [batch, S.numKvHeads, 0, S.headDim] };
    }
  }
  return feeds;
}

const argmax = (data: Float32Array, offset: number): number => {
  let best = 0;
  for (let i = 1; i < S.vocabSize; i++) if (data[offset + i]! > data[offset + best]!) best = i;
  return best;
};

/** Greedy decoding of one sequence; `cached` feeds present back as past, otherwise recomputes all. */
async function greedy(session: ort.InferenceSession, kv: KvType, prompt: number[], steps: number, cached: boolean): Promise<number[]> {
  const tokens = [...prompt];
  let past = emptyPast(kv, 1);
  let done = 0; // tokens whose KV is in `past`
  for (let step = 0; step < steps; step++) {
    const fresh = cached ? tokens.slice(done) : tokens;
    const start = cached ? done : 0;
    const out = await runOrtSession(session, {
      input_ids: int64(fresh, [1, fresh.length]),
      attention_mask: int64(new Array<number>(start + fresh.length).fill(1), [1, start + fresh.length]),
      position_ids: int64(fresh.map((_, i) => start + i), [1, fresh.length]),
      ...(cached ? past : emptyPast(kv, 1)),
    });
    const logits = out['logits']!;
    expect(logits.dims).toEqual([1, fresh.length, S.vocabSize]);
    tokens.push(argmax(logits.data as Float32Array, (fresh.length - 1) * S.vocabSize));
    if (cached) {
      past = {};
      for (let n = 0; n < S.numLayers; n++) {
        past[pastKeyName(n)] = out[presentKeyName(n)]!;
        past[pastValueName(n)] = out[presentValueName(n)]!;
      }
      done = start + fresh.length;
    }
  }
  return tokens.slice(prompt.length);
}

describe.each<KvType>(['FLOAT', 'FLOAT16'])('buildTinyDecoderModel (KV %s)', (kv) => {
  let session: ort.InferenceSession;
  beforeAll(async () => {
    session = await ort.InferenceSession.create(buildTinyDecoderModel({ kvType: kv }));
  });
  afterAll(async () => {
    await session.release();
  });

  it('has the Optimum input/output signature', () => {
    const kvNames = (f: (n: number) => string, g: (n: number) => string): string[] =>
      Array.from({ length: S.numLayers }, (_, n) => [f(n), g(n)]).flat();
    expect(session.inputNames).toEqual(['input_ids', 'attention_mask', 'position_ids', ...kvNames(pastKeyName, pastValueName)]);
    expect(session.outputNames).toEqual(['logits', ...kvNames(presentKeyName, presentValueName)]);
    const past = session.inputMetadata[3]!;
    expect(past.isTensor && past.type).toBe(kv === 'FLOAT' ? 'float32' : 'float16');
    expect(past.isTensor && past.shape).toEqual(['batch_size', S.numKvHeads, 'past_sequence_length', S.headDim]);
  });

  it('is deterministic', () => {
    expect(Buffer.from(buildTinyDecoderModel({ kvType: kv })).equals(Buffer.from(buildTinyDecoderModel({ kvType: kv })))).toBe(true);
  });

  it('incremental decoding with past_key_values gives the same greedy tokens as recomputing', async () => {
    const prompt = [72, 101, 108, 108, 111, 300, 32, 119];
    const recomputed = await greedy(session, kv, prompt, 12, false);
    const incremental = await greedy(session, kv, prompt, 12, true);
    expect(incremental).toEqual(recomputed);
    expect(new Set(recomputed).size).toBeGreaterThan(1); // not a degenerate constant model
  });

  it('present = past with the new keys appended', async () => {
    const out = await runOrtSession(session, {
      input_ids: int64([5, 6, 7], [1, 3]),
      attention_mask: int64([1, 1, 1], [1, 3]),
      position_ids: int64([0, 1, 2], [1, 3]),
      ...emptyPast(kv, 1),
    });
    const next = await runOrtSession(session, {
      input_ids: int64([8], [1, 1]),
      attention_mask: int64([1, 1, 1, 1], [1, 4]),
      position_ids: int64([3], [1, 1]),
      [pastKeyName(0)]: out[presentKeyName(0)]!,
      [pastValueName(0)]: out[presentValueName(0)]!,
      [pastKeyName(1)]: out[presentKeyName(1)]!,
      [pastValueName(1)]: out[presentValueName(1)]!,
    });
    const before = out[presentKeyName(1)]!;
    const after = next[presentKeyName(1)]!;
    expect(after.dims).toEqual([1, S.numKvHeads, 4, S.headDim]);
    // head 0, first three positions unchanged
    const a = after.data as Float32Array | Uint16Array;
    const b = before.data as Float32Array | Uint16Array;
    expect(Array.from(a.slice(0, 3 * S.headDim))).toEqual(Array.from(b.slice(0, 3 * S.headDim)));
  });

  it('batched incremental decoding over a left-padded KV cache matches each sequence alone', async () => {
    const seqs = [
      [11, 22, 33, 44, 55],
      [66, 77],
    ];
    const steps = 6;
    const alone = await Promise.all(seqs.map((s) => greedy(session, kv, s, steps, true)));
    const width = 5;
    const mask: number[][] = seqs.map((s) => [...new Array<number>(width - s.length).fill(0), ...s.map(() => 1)]);
    let ids = seqs.flatMap((s) => [...new Array<number>(width - s.length).fill(0), ...s]);
    let pos = seqs.flatMap((s) => [...new Array<number>(width - s.length).fill(1), ...s.map((_, i) => i)]);
    let lengths = seqs.map((s) => s.length);
    let past = emptyPast(kv, 2);
    let seqLen = width;
    const produced: number[][] = [[], []];
    for (let step = 0; step < steps; step++) {
      const out = await runOrtSession(session, {
        input_ids: int64(ids, [2, seqLen]),
        attention_mask: int64(mask.flat(), [2, mask[0]!.length]),
        position_ids: int64(pos, [2, seqLen]),
        ...past,
      });
      const logits = out['logits']!.data as Float32Array;
      const next = [0, 1].map((b) => argmax(logits, (b * seqLen + seqLen - 1) * S.vocabSize));
      next.forEach((t, b) => produced[b]!.push(t));
      past = {};
      for (let n = 0; n < S.numLayers; n++) {
        past[pastKeyName(n)] = out[presentKeyName(n)]!;
        past[pastValueName(n)] = out[presentValueName(n)]!;
      }
      ids = next;
      pos = lengths;
      lengths = lengths.map((l) => l + 1);
      mask.forEach((m) => m.push(1));
      seqLen = 1;
    }
    expect(produced).toEqual(alone);
  });

  it.each(['left', 'right'] as const)('a batch of two with %s padding matches each sequence alone', async (side) => {
    const seqs = [
      [10, 20, 30, 40, 50, 60],
      [70, 80, 90],
    ];
    const width = 6;
    const ids: number[] = [];
    const mask: number[] = [];
    const pos: number[] = [];
    for (const s of seqs) {
      const pad = width - s.length;
      const row = side === 'left' ? [...new Array<number>(pad).fill(0), ...s] : [...s, ...new Array<number>(pad).fill(0)];
      const m = side === 'left' ? [...new Array<number>(pad).fill(0), ...s.map(() => 1)] : [...s.map(() => 1), ...new Array<number>(pad).fill(0)];
      // HF convention: real tokens count from 0; padding positions are arbitrary (1 here).
      const p = side === 'left' ? [...new Array<number>(pad).fill(1), ...s.map((_, i) => i)] : [...s.map((_, i) => i), ...new Array<number>(pad).fill(1)];
      ids.push(...row);
      mask.push(...m);
      pos.push(...p);
    }
    const batched = await runOrtSession(session, {
      input_ids: int64(ids, [2, width]),
      attention_mask: int64(mask, [2, width]),
      position_ids: int64(pos, [2, width]),
      ...emptyPast(kv, 2),
    });
    const bl = batched['logits']!.data as Float32Array;
    for (let b = 0; b < 2; b++) {
      const s = seqs[b]!;
      const alone = await runOrtSession(session, {
        input_ids: int64(s, [1, s.length]),
        attention_mask: int64(s.map(() => 1), [1, s.length]),
        position_ids: int64(s.map((_, i) => i), [1, s.length]),
        ...emptyPast(kv, 1),
      });
      const al = alone['logits']!.data as Float32Array;
      const offset = side === 'left' ? width - s.length : 0;
      for (let t = 0; t < s.length; t++) {
        const rowB = (b * width + offset + t) * S.vocabSize;
        expect(argmax(bl, rowB)).toBe(argmax(al, t * S.vocabSize));
        for (let i = 0; i < S.vocabSize; i += 37) expect(bl[rowB + i]).toBeCloseTo(al[t * S.vocabSize + i]!, 3);
      }
    }
  });
});
