import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import OpenAI from 'openai';
import { type CancelSignal, invalidArgument } from '@switchyard/common';
import { type InferRequest, type InferTensor, deserializeStringElements } from '@switchyard/kserve';
import { ServerSettings } from '../settings.js';
import { SharedMemoryManager } from '../shared-memory.js';
import { FakeEngine, type FakeModel } from '../test-support/fake-engine.js';
import { type HttpFrontDoor, createHttpServer } from '../http/http-server.js';

/**
 * `/v1/embeddings` over a fake engine whose `embedding` models compute a vector from each row alone:
 * [tokens, first code, row count of its request], so a row landing at the wrong input shows, and the
 * request plan (how many infers, of which shapes) is seen from the engine's recorded calls.
 */
const rowsOf = (t: InferTensor): Array<{ tokens: number; first: number }> => {
  if (t.name === 'text_input') return deserializeStringElements(t.data, t.name).map((s) => ({ tokens: s.length, first: s.charCodeAt(0) }));
  const ids = new BigInt64Array(t.data.slice().buffer);
  const width = t.shape[t.shape.length - 1]!;
  return Array.from({ length: ids.length / width }, (_, r) => ({ tokens: width, first: Number(ids[r * width]) }));
};

function embeddingModel(engine: FakeEngine, name: string, maxBatchSize: number, run: (request: InferRequest, signal?: CancelSignal) => Promise<void> = async () => {}): FakeModel {
  return {
    config: { ...engine.modelConfig('identity'), name, backend: 'embedding', max_batch_size: maxBatchSize },
    run: async (request, signal) => {
      await run(request, signal);
      const input = request.inputs[0]!;
      const rows = rowsOf(input);
      const vectors = Float32Array.from(rows.flatMap((r) => [r.tokens, r.first, rows.length]));
      const counts = Int32Array.from(rows.map((r) => r.tokens));
      const batched = maxBatchSize > 0;
      return [
        [
          { name: 'embedding', datatype: 'FP32', shape: batched ? [rows.length, 3] : [3], data: new Uint8Array(vectors.buffer), parameters: {} },
          { name: 'prompt_tokens', datatype: 'INT32', shape: batched ? [rows.length, 1] : [1], data: new Uint8Array(counts.buffer), parameters: {} },
        ],
      ];
    },
  };
}

/** Settles (rejects) only when `signal` aborts: a request that runs until cancelled. */
const untilAborted = (signal?: CancelSignal): Promise<void> => new Promise((_resolve, reject) => signal?.addEventListener('abort', () => reject(new Error('aborted')), { once: true }));

async function until(check: () => boolean): Promise<void> {
  for (let i = 0; i < 500 && !check(); i++) await new Promise((r) => setTimeout(r, 5));
  expect(check()).toBe(true);
}

describe('/v1/embeddings request plan', () => {
  const engine = new FakeEngine();
  let door: HttpFrontDoor;
  let client: OpenAI;
  let port: number;
  const submits = (model: string): InferRequest[] => engine.calls.flatMap((c) => (c.method === 'submit' && c.args[0].modelName === model ? [c.args[0]] : []));

  beforeAll(async () => {
    engine.models.set('embed3', embeddingModel(engine, 'embed3', 3));
    engine.models.set('embed0', embeddingModel(engine, 'embed0', 0));
    engine.models.set('picky', embeddingModel(engine, 'picky', 2, async (request, signal) => {
      if (rowsOf(request.inputs[0]!).some((r) => r.first === 'b'.charCodeAt(0))) throw invalidArgument('input "b…" refused');
      await untilAborted(signal);
    }));
    engine.models.set('hanging', embeddingModel(engine, 'hanging', 2, (_request, signal) => untilAborted(signal)));
    door = createHttpServer({ engine, shm: new SharedMemoryManager({ enabled: false }), settings: new ServerSettings(), port: 0, host: '127.0.0.1', maxInputSize: 1 << 20 });
    port = await door.listen();
    client = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: 'x', maxRetries: 0 });
  });
  afterAll(async () => {
    await door.close();
  });

  it('sends texts as ceil(n / max_batch_size) BYTES [n, 1] infers and puts every row back at its input', async () => {
    const input = ['a', 'bb', 'ccc', 'dddd', 'eeeee', 'ffffff', 'ggggggg'];
    const res = await client.embeddings.create({ model: 'embed3', input, encoding_format: 'float' });
    expect(submits('embed3').map((r) => r.inputs.map((t) => [t.name, t.shape]))).toEqual([
      [['text_input', [3, 1]]],
      [['text_input', [2, 1]]],
      [['text_input', [2, 1]]],
    ]);
    expect(res.data.map((d) => [d.index, d.embedding])).toEqual(input.map((s, i) => [i, [s.length, s.charCodeAt(0), i < 3 ? 3 : 2]]));
    expect(res.usage).toEqual({ prompt_tokens: 28, total_tokens: 28 });
    const b64 = await client.embeddings.create({ model: 'embed3', input, encoding_format: 'base64' });
    for (const [i, d] of b64.data.entries()) expect(d.embedding as unknown as string).toBe(Buffer.from(Float32Array.from(res.data[i]!.embedding).buffer).toString('base64'));
  });

  it('sends token ids of one length together, each length apart, and keeps the data order', async () => {
    engine.calls.length = 0;
    const input = [[10, 1], [20], [30, 1], [40, 1, 1], [50], [60, 1], [70, 1]];
    const res = await client.embeddings.create({ model: 'embed3', input, encoding_format: 'float' });
    expect(submits('embed3').map((r) => r.inputs[0]!.shape)).toEqual([[2, 2], [2, 2], [2, 1], [1, 3]]);
    expect(res.data.map((d) => d.embedding.slice(0, 2))).toEqual(input.map((ids) => [ids.length, ids[0]]));
    expect(res.usage.prompt_tokens).toBe(input.flat().length);
  });

  it('sends one unbatched infer per input to a model of max_batch_size 0', async () => {
    await client.embeddings.create({ model: 'embed0', input: ['a', 'b', 'c'], encoding_format: 'float' });
    await client.embeddings.create({ model: 'embed0', input: [[1, 2], [3, 4]], encoding_format: 'float' });
    expect(submits('embed0').map((r) => [r.inputs[0]!.name, r.inputs[0]!.shape])).toEqual([
      ['text_input', [1]],
      ['text_input', [1]],
      ['text_input', [1]],
      ['input_ids', [2]],
      ['input_ids', [2]],
    ]);
  });

  it('one refused input fails the request with its error and cancels the other infers', async () => {
    const aborted = engine.abortedRequests;
    await expect(client.embeddings.create({ model: 'picky', input: ['a1', 'a2', 'a3', 'b', 'a5', 'a6'] })).rejects.toMatchObject({ status: 400, message: expect.stringContaining('input "b…" refused') });
    await until(() => engine.abortedRequests - aborted === 2);
  });

  it('a client that goes away cancels every pending infer', async () => {
    const aborted = engine.abortedRequests;
    const before = submits('hanging').length;
    const controller = new AbortController();
    const pending = fetch(`http://127.0.0.1:${port}/v1/embeddings`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ model: 'hanging', input: ['a', 'b', 'c', 'd', 'e'] }),
      signal: controller.signal,
    }).catch((e: unknown) => e);
    await until(() => submits('hanging').length - before === 3);
    controller.abort();
    await pending;
    await until(() => engine.abortedRequests - aborted === 3);
  });
});
