/**
 * The decoder's thread samples (`threadDecoderSession`): an engine over it generates exactly what an
 * engine over an in-process session that returns the logits (sampled on the event loop) generates —
 * tokens, logprobs, top logprobs — for plain sampling of every kind and for guided requests beside
 * it in the same batch, whose logits rows come back from the thread. No [B, n, V] logits cross.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { compileSamplingParams, createOrtDecoderSession, LlmEngine, OnnxExecutor, TokenVocabulary, type DecoderSession, type GenerateOutput, type SamplingParams } from '@switchyard/llm';
import { LOGIT_ROWS_OUTPUT, SAMPLED_OUTPUT } from '@switchyard/llm/internal';
import { buildTinyDecoderModel, TINY_DECODER_SHAPE } from '@switchyard/onnx-builder';
import { threadDecoderSession } from './llm-session.js';

const V = TINY_DECODER_SHAPE.vocabSize;
const EOS = V - 1;
/** Byte tokens below 256 (enough for any JSON document); the rest, EOS included, have no bytes. */
const vocabulary = (): TokenVocabulary => TokenVocabulary.fromTokenBytes(Array.from({ length: V }, (_, id) => (id < 256 ? Uint8Array.of(id) : null)));

let dir: string;
const files: Record<'FLOAT' | 'FLOAT16', string> = { FLOAT: '', FLOAT16: '' };
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'switchyard-llm-session-'));
  for (const kvType of ['FLOAT', 'FLOAT16'] as const) {
    files[kvType] = join(dir, `${kvType}.onnx`);
    await writeFile(files[kvType], buildTinyDecoderModel({ kvType }));
  }
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

const REQUESTS: Array<[string, SamplingParams]> = [
  ['greedy', { temperature: 0, logprobs: true, top_logprobs: 3 }],
  ['seeded', { temperature: 1, seed: 11, logprobs: true, top_logprobs: 5 }],
  ['unseeded', { temperature: 0.8, top_p: 0.9, min_p: 0.02 }],
  ['top-k', { temperature: 1.3, top_k: 8, seed: 4, logprobs: true }],
  ['penalties', { temperature: 0.9, frequency_penalty: 0.6, presence_penalty: 0.2, repetition_penalty: 1.2, seed: 6 }],
  ['bias, min_tokens', { temperature: 1, logit_bias: { '65': 4, [String(EOS)]: 8 }, min_tokens: 5, seed: 8 }],
  ['guided', { temperature: 1, seed: 3, guided_decoding: { kind: 'json' }, logprobs: true, top_logprobs: 2 }],
];

/** Every request at once (so they share batches); each one's outputs; the kinds of outputs the session returned. */
async function generate(session: DecoderSession, passLogits: boolean): Promise<{ outputs: Record<string, GenerateOutput[]>; kinds: Set<string> }> {
  const kinds = new Set<string>();
  const spied: DecoderSession = {
    ...session,
    async run(feeds, rows) {
      const out = await (passLogits ? session.run(feeds) : session.run(feeds, rows));
      if (out['logits'] !== undefined) kinds.add('logits');
      if (out[SAMPLED_OUTPUT] !== undefined) kinds.add('sampled');
      if (out[LOGIT_ROWS_OUTPUT] !== undefined) kinds.add('logit rows');
      return out;
    },
  };
  const executor = OnnxExecutor.create(spied, { numBlocks: 64, blockSize: 4, vocabSize: V, threadSamplingMinVocab: 0, seed: 17, tokenVocabulary: vocabulary });
  const engine = new LlmEngine({ blockSize: 4, numBlocks: 64, maxModelLen: 256, executor, eosTokenIds: [EOS], vocabSize: V, scheduler: { maxNumSeqs: 8, maxNumBatchedTokens: 32 } });
  try {
    const outputs: Record<string, GenerateOutput[]> = {};
    await Promise.all(
      REQUESTS.map(async ([id, p], i) => {
        const list: GenerateOutput[] = (outputs[id] = []);
        const prompt = Array.from({ length: 5 + i * 3 }, (_, k) => (i * 37 + k * 11) % (V - 2));
        for await (const o of engine.generate({ requestId: id, promptTokenIds: prompt, sampling: compileSamplingParams({ max_tokens: 24, ...p }) })) list.push(o);
      }),
    );
    return { outputs, kinds };
  } finally {
    await engine.shutdown();
  }
}

describe('threadDecoderSession: sampling on the decoder thread', () => {
  for (const kvType of ['FLOAT', 'FLOAT16'] as const) {
    it(`generates what sampling the logits on the event loop generates (${kvType} KV)`, async () => {
      const thread = await threadDecoderSession(files[kvType]);
      const local = await createOrtDecoderSession(files[kvType]);
      try {
        const there = await generate(thread, false);
        const here = await generate(local, true);
        expect(here.kinds).toEqual(new Set(['logits']));
        // Logits rows come back only for the guided request; no step returned the logits.
        expect(there.kinds).toEqual(new Set(['sampled', 'logit rows']));
        expect(there.outputs).toEqual(here.outputs);
        const tokens = (id: string) => here.outputs[id]!.flatMap((o) => o.tokenIds);
        expect(tokens('seeded')).toHaveLength(24);
        expect(here.outputs['seeded']!.flatMap((o) => o.topLogprobs ?? []).every((t) => t.tokenIds.length === 5)).toBe(true);
        // The guided request kept to JSON (byte tokens; the text so far starts a JSON document).
        expect(tokens('guided').length).toBeGreaterThan(0);
        expect(tokens('guided').every((t) => t < 256 || t === EOS)).toBe(true);
        expect(Buffer.from(tokens('guided').filter((t) => t < 256)).toString('latin1').trimStart()).toMatch(/^[[{]/);
        expect(tokens('seeded')).not.toEqual(tokens('greedy'));
      } finally {
        await thread.release();
        await local.release();
      }
    }, 60_000);
  }

  it('a thread started without the sampler returns the logits for a run that asks for sampled rows, and generates the same', async () => {
    const thread = await threadDecoderSession(files.FLOAT, undefined, false);
    const local = await createOrtDecoderSession(files.FLOAT);
    try {
      const there = await generate(thread, false);
      const here = await generate(local, true);
      expect(there.kinds).toEqual(new Set(['logits']));
      expect(there.outputs).toEqual(here.outputs);
    } finally {
      await thread.release();
      await local.release();
    }
  }, 60_000);
});
