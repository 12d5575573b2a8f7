import { describe, expect, it } from 'vitest';
import * as ort from 'onnxruntime-node';
import { runOrtSession, type OrtTensorValue } from '@switchyard/ort';
import { buildScriptedDecoderModel } from './scripted-decoder.js';

const int64 = (values: number[], dims: number[]): OrtTensorValue => ({ type: 'int64', data: BigInt64Array.from(values.map(BigInt)), dims });
const V = 262_144;
const MARKER = 105;

/** The argmax of each position's logits row (and that every other logit is 0). */
function rows(logits: OrtTensorValue): number[] {
  const data = logits.data as Float32Array;
  const out: number[] = [];
  for (let p = 0; p < logits.dims[1]!; p++) {
    let best = 0;
    let nonZero = 0;
    for (let i = 0; i < V; i++) {
      const l = data[p * V + i]!;
      if (l !== 0) nonZero++;
      if (l > data[p * V + best]!) best = i;
    }
    expect(nonZero).toBe(1);
    out.push(best);
  }
  return out;
}

describe('buildScriptedDecoderModel', () => {
  it("answers its script after the last marker at Gemma 3's width, recomputed or continued over a past", async () => {
    const script = [7, 8, 9, 1];
    const session = await ort.InferenceSession.create(buildScriptedDecoderModel({ vocabSize: V, markerTokenId: MARKER, offset: 2, script }));
    // An earlier marker, then the generation prompt `<marker> m o` whose next tokens follow the script.
    const prompt = [2, MARKER, 50, 51, MARKER, 60, 61];
    const all = [...prompt, ...script.slice(0, 3)];
    const empty: OrtTensorValue = { type: 'float32', data: new Float32Array(0), dims: [1, 1, 0, 1] };
    const run = (ids: number[], start: number, past: OrtTensorValue) =>
      runOrtSession(session, {
        input_ids: int64(ids, [1, ids.length]),
        attention_mask: int64(Array(start + ids.length).fill(1), [1, start + ids.length]),
        position_ids: int64(ids.map((_, i) => start + i), [1, ids.length]),
        'past_key_values.0.key': past,
        'past_key_values.0.value': past,
      });
    const whole = await run(all, 0, empty);
    expect(whole['logits']!.dims).toEqual([1, all.length, V]);
    expect(rows(whole['logits']!).slice(prompt.length - 1)).toEqual(script);
    // A chunked prefill: the first 5 tokens, then the rest over their KV.
    const first = await run(all.slice(0, 5), 0, empty);
    const rest = await run(all.slice(5), 5, first['present.0.key']!);
    expect(rows(rest['logits']!).slice(prompt.length - 1 - 5)).toEqual(script);
    // Past the script it repeats the last entry.
    const beyond = await run([...all, 1, 1], 0, empty);
    expect(rows(beyond['logits']!).slice(-2)).toEqual([1, 1]);
    await session.release();
  });

  it('refuses ids outside the vocabulary and an empty script', () => {
    expect(() => buildScriptedDecoderModel({ vocabSize: 10, markerTokenId: 3, offset: 0, script: [10] })).toThrow('outside the vocabulary');
    expect(() => buildScriptedDecoderModel({ vocabSize: 10, markerTokenId: 3, offset: 0, script: [] })).toThrow('empty');
  });
});
