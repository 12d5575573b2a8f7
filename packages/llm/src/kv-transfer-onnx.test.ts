// KV transfer between two LlmEngines over the tiny ONNX decoder (fp32 and fp16 KV): engine A prefills
// (prefillOnly → lease), its blocks' bytes go to engine B (beginImport / write), B continues with
// outputTokenIds = [first] and the import — and the tokens equal one aggregated engine's, greedy and
// seeded. The blocks really carry the KV: B computes only the prompt's tail.

import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTinyDecoderModel, TINY_DECODER_SHAPE } from '@switchyard/onnx-builder';
import { createOrtDecoderSession, type DecoderSession } from './decoder-session.js';
import type { GenerateOutput, GenerateRequest } from './llm-endpoint.js';
import { LlmEngine } from './llm-engine.js';
import { OnnxExecutor } from './onnx-executor.js';
import { compileSamplingParams } from './sampling-params.js';

type KvType = 'FLOAT' | 'FLOAT16';
const BS = 8;
const models: Record<KvType, { session: DecoderSession; modelId: string }> = {} as never;

beforeAll(async () => {
  for (const kvType of ['FLOAT', 'FLOAT16'] as const) {
    const bytes = buildTinyDecoderModel({ kvType });
    models[kvType] = { session: await createOrtDecoderSession(bytes), modelId: createHash('sha256').update(bytes).digest('hex').slice(0, 32) };
  }
});
afterAll(async () => {
  await Promise.all(Object.values(models).map((m) => m.session.release()));
});

function engine(kvType: KvType, withModelId = true) {
  const { session, modelId } = models[kvType];
  const counter = { tokens: 0 };
  // The session as the executor sees it, counting the tokens each forward pass computes.
  const counting: DecoderSession = {
    inputMetadata: session.inputMetadata,
    outputMetadata: session.outputMetadata,
    run: (feeds) => {
      const [rows, n] = feeds['input_ids']!.dims;
      counter.tokens += rows! * n!;
      return session.run(feeds);
    },
    release: async () => {},
  };
  const executor = OnnxExecutor.create(counting, { numBlocks: 64, blockSize: BS, vocabSize: TINY_DECODER_SHAPE.vocabSize, ...(withModelId ? { modelId } : {}) });
  const e = new LlmEngine({ blockSize: BS, numBlocks: 64, maxModelLen: 256, executor, eosTokenIds: [] });
  return { engine: e, counter, xfer: e.kvTransfer };
}

async function collect(it: AsyncIterable<GenerateOutput>): Promise<GenerateOutput[]> {
  const out: GenerateOutput[] = [];
  for await (const o of it) out.push(o);
  return out;
}
const tokensOf = (outs: readonly GenerateOutput[]): number[] => outs.flatMap((o) => o.tokenIds);
const prompt = (n: number, base = 3): number[] => Array.from({ length: n }, (_, i) => (base + i * 37) % TINY_DECODER_SHAPE.vocabSize);

describe.each(['FLOAT', 'FLOAT16'] as const)('KV transfer over the tiny ONNX decoder (%s KV)', (kvType) => {
  it('the layout names the model file, the KV geometry and the block bytes', () => {
    const { xfer } = engine(kvType);
    const { numLayers, numKvHeads, headDim } = TINY_DECODER_SHAPE;
    const esz = kvType === 'FLOAT16' ? 2 : 4;
    expect(xfer!.layout).toEqual({
      modelId: models[kvType].modelId,
      engine: 'llm',
      dtype: kvType === 'FLOAT16' ? 'fp16' : 'fp32',
      numLayers,
      numKvHeads,
      headDim,
      blockSize: BS,
      bytesPerBlock: numLayers * 2 * numKvHeads * BS * headDim * esz,
    });
    expect(xfer!.simulatedTransferMs(10)).toBe(0);
    // Without a model identity there is no transfer.
    expect(engine(kvType, false).xfer).toBeUndefined();
  });

  const cases: Array<[string, number, number]> = [
    ['a prompt of several blocks', 45, 0],
    ['a prompt shorter than a block', 5, 0],
    ['a prompt whose first blocks the decode engine holds', 45, 16],
  ];
  it.each(cases)('greedy and seeded continuations equal one aggregated engine: %s', async (_what, n, warm) => {
    const p = prompt(n);
    for (const [samplingFields, id] of [
      [{ temperature: 0 }, 'g'],
      [{ temperature: 0.8, seed: 7 }, 's'],
      [{ temperature: 0.8, seed: 7, frequency_penalty: 0.5, top_k: 20 }, 'sp'],
    ] as const) {
      const a = engine(kvType);
      const b = engine(kvType);
      const c = engine(kvType);
      const request: GenerateRequest = { requestId: id, promptTokenIds: p, sampling: compileSamplingParams({ ...samplingFields, max_tokens: 10 }) };
      if (warm > 0) {
        await collect(b.engine.generate({ requestId: 'warm', promptTokenIds: [...p.slice(0, warm), 1, 2, 3], sampling: compileSamplingParams({ temperature: 0, max_tokens: 1 }) }));
      }
      const whole = tokensOf(await collect(c.engine.generate(request)));

      const first = await collect(a.engine.generate({ ...request, prefillOnly: true }));
      expect(first.at(-1)).toMatchObject({ finishReason: 'length', usage: { completionTokens: 1 } });
      const lease = first.at(-1)!.kvTransfer!;
      expect(lease.blockHashes).toHaveLength(Math.floor(n / BS));
      if (samplingFields.temperature > 0) expect(lease.seed).toBe(7);
      expect(a.xfer!.pinnedBlocks()).toBe(lease.blockHashes.length);

      const imp = b.xfer!.beginImport(p, lease.layout);
      expect(imp.cachedBlocks).toBe(warm / BS);
      expect(imp.missing).toEqual(lease.blockHashes.slice(warm / BS));
      const blocks = a.xfer!.readBlocks(lease.leaseId, imp.missing);
      for (const blk of blocks) expect(blk.data.byteLength).toBe(lease.layout.bytesPerBlock);
      imp.write(blocks);
      expect(a.xfer!.releaseLease(lease.leaseId)).toBe(true);
      expect(a.xfer!.pinnedBlocks()).toBe(0);

      const rest = await collect(
        b.engine.generate({ ...request, outputTokenIds: tokensOf(first), sampling: { ...request.sampling, seed: lease.seed }, kvImport: imp }),
      );
      expect([...tokensOf(first), ...tokensOf(rest)]).toEqual(whole);
      // b computed the prompt's tail with the first token, then 8 decodes: never the imported blocks.
      const cached = Math.floor(n / BS) * BS;
      expect(b.counter.tokens - (warm > 0 ? warm + 3 : 0)).toBe(n + 1 - cached + 8);
      expect(rest.at(-1)!.usage).toEqual({ promptTokens: n, completionTokens: 10, cachedTokens: Math.floor(n / BS) * BS });
      expect(b.xfer!.pinnedBlocks()).toBe(0);
      for (const e of [a, b, c]) expect(e.engine.metrics().kvActiveBlocks).toBe(0);
      await Promise.all([a, b, c].map((e) => e.engine.shutdown()));
    }
  });

  it('imported bytes are the KV: a block read back from the decode engine equals the prefill engine\'s', async () => {
    const a = engine(kvType);
    const b = engine(kvType);
    const p = prompt(24);
    const first = await collect(a.engine.generate({ requestId: 'x', promptTokenIds: p, sampling: compileSamplingParams({ temperature: 0, max_tokens: 4 }), prefillOnly: true }));
    const lease = first.at(-1)!.kvTransfer!;
    const blocks = a.xfer!.readBlocks(lease.leaseId, lease.blockHashes);
    const imp = b.xfer!.beginImport(p, lease.layout);
    imp.write(blocks);
    // b leases its copy by prefilling the same prompt: all three blocks are hits, and their bytes are a's.
    const again = await collect(b.engine.generate({ requestId: 'y', promptTokenIds: p, sampling: compileSamplingParams({ temperature: 0, max_tokens: 4 }), prefillOnly: true }));
    expect(again.at(-1)!.usage!.cachedTokens).toBe(23);
    const back = b.xfer!.readBlocks(again.at(-1)!.kvTransfer!.leaseId, lease.blockHashes);
    back.forEach((blk, i) => expect(Buffer.from(blk.data).equals(Buffer.from(blocks[i]!.data))).toBe(true));
    imp.release();
    // A wrong size or a non-finite element is refused before anything is kept.
    const c = engine(kvType);
    const imp2 = c.xfer!.beginImport(p, lease.layout);
    expect(() => imp2.write([{ hash: blocks[0]!.hash, data: blocks[0]!.data.subarray(1) }])).toThrow(expect.objectContaining({ code: 'invalid_argument' }));
    const poisoned = blocks[0]!.data.slice();
    poisoned.fill(0xff, 0, 4); // a NaN (fp32) / two NaNs (fp16)
    expect(() => imp2.write([{ hash: blocks[0]!.hash, data: poisoned }])).toThrow(/not finite/);
    expect(imp2.written).toBe(0);
    expect(c.engine.metrics().kvActiveBlocks).toBe(0);
    imp2.release();
    await Promise.all([a, b, c].map((e) => e.engine.shutdown()));
    expect(a.xfer!.pinnedBlocks() + b.xfer!.pinnedBlocks()).toBe(0);
  });

  it('refuses another model\'s layout', () => {
    const other = kvType === 'FLOAT' ? 'FLOAT16' : 'FLOAT';
    const b = engine(kvType);
    expect(() => b.xfer!.beginImport(prompt(20), engine(other).xfer!.layout)).toThrow(
      expect.objectContaining({ code: 'invalid_argument', message: expect.stringContaining('KV layout mismatch: modelId') }),
    );
    expect(b.xfer!.pinnedBlocks()).toBe(0);
  });
});
