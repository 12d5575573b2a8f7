/**
 * OpenAI `POST /v1/embeddings` with the official `openai` SDK, on a worker and through a router, for
 * models of the `embedding` backend (test/fixtures/embedding_repository, files written by
 * onnx-builder's embeddingFixtureRepositoryFiles()). Every vector is checked against a reference
 * computed here: the ONNX model run directly with onnxruntime-node on each sequence alone (no
 * padding), pooled and normalised by this file's own code. A multi-input request reaches the worker as
 * ceil(n / max_batch_size) infer requests (token ids: per length), counted in the worker's KServe
 * statistics; `tiny_embed_single` (tiny_embed's folder, max_batch_size 0) gets one per input.
 */
import { join } from 'node:path';
import * as ort from 'onnxruntime-node';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { embeddingFixtureRepositoryFiles } from '@switchyard/onnx-builder';
import { Tokenizer } from '@switchyard/llm';
import { startWorkerProcess, type WorkerProcess } from '@switchyard/testing';
import { fixtureRepository, type FixtureRepository } from './lib/fixture-repository.js';
import { get, post } from './lib/tensors.js';
import { startCluster, type Cluster } from './support/cluster.js';

/** The fixture's generated files, and `tiny_embed_single`: tiny_embed's folder served without batching (max_batch_size 0). */
const files = (): Record<string, Uint8Array> => {
  const generated = Object.fromEntries(embeddingFixtureRepositoryFiles().map((f) => [f.path, f.build()]));
  const single = Object.entries(generated).filter(([path]) => path.startsWith('tiny_embed/1/'));
  const config = `name: "tiny_embed_single"\nbackend: "embedding"\nmax_batch_size: 0\ninstance_group [ { count: 1 kind: KIND_CPU } ]\n`;
  return { ...generated, ...Object.fromEntries(single.map(([path, bytes]) => [path.replace('tiny_embed/', 'tiny_embed_single/'), bytes])), 'tiny_embed_single/config.pbtxt': new TextEncoder().encode(config) };
};

/** The reference: each sequence alone through the ONNX model, then pooled (and normalised) here. */
class Reference {
  private constructor(
    private readonly session: ort.InferenceSession,
    readonly tokenizer: Tokenizer,
  ) {}

  static async open(folder: string): Promise<Reference> {
    return new Reference(await ort.InferenceSession.create(join(folder, 'model.onnx')), await Tokenizer.fromModelFolder(folder));
  }

  ids(text: string): number[] {
    return this.tokenizer.encode(text, { addSpecialTokens: true });
  }

  async embed(ids: readonly number[], pooling: 'mean' | 'cls', normalize: boolean, dimensions?: number): Promise<number[]> {
    const n = ids.length;
    const feeds: Record<string, ort.Tensor> = {
      input_ids: new ort.Tensor('int64', BigInt64Array.from(ids, BigInt), [1, n]),
      attention_mask: new ort.Tensor('int64', new BigInt64Array(n).fill(1n), [1, n]),
    };
    if (this.session.inputNames.includes('token_type_ids')) feeds['token_type_ids'] = new ort.Tensor('int64', new BigInt64Array(n), [1, n]);
    const hidden = (await this.session.run(feeds))['last_hidden_state']!;
    const h = hidden.data as Float32Array;
    const width = hidden.dims[2]!;
    let v: number[] = [];
    for (let i = 0; i < width; i++) {
      if (pooling === 'cls') v.push(h[i]!);
      else {
        let s = 0;
        for (let t = 0; t < n; t++) s += h[t * width + i]!;
        v.push(s / n);
      }
    }
    if (dimensions !== undefined) v = v.slice(0, dimensions);
    if (normalize) {
      const norm = Math.sqrt(v.reduce((a, x) => a + x * x, 0));
      v = v.map((x) => x / norm);
    }
    return v;
  }
}

function expectClose(actual: readonly number[], expected: readonly number[]): void {
  expect(actual.length).toBe(expected.length);
  const worst = actual.reduce((m, x, i) => Math.max(m, Math.abs(x - expected[i]!)), 0);
  expect(worst).toBeLessThan(1e-5);
}

const TEXTS = ['hello world', 'The quick brown fox jumps over the lazy dog', 'a', 'Switchyard serves embeddings'];

/** The suite both doors share: `url` is the OpenAI base URL of a worker or a router, `workerUrl` the worker's own. */
function embeddingsSuite(name: string, url: () => string, workerUrl: () => string, repoPath: () => string, stats: (model?: string) => string) {
  describe(name, () => {
    let client: OpenAI;
    let mean: Reference;
    let cls: Reference;
    beforeAll(async () => {
      client = new OpenAI({ baseURL: url(), apiKey: 'unused', maxRetries: 0 });
      mean = await Reference.open(join(repoPath(), 'tiny_embed', '1'));
      cls = await Reference.open(join(repoPath(), 'tiny_embed_cls', '1'));
    });

    it('answers a list of strings with float vectors equal to the reference (mean pooling, normalised)', async () => {
      const res = await client.embeddings.create({ model: 'tiny_embed', input: TEXTS, encoding_format: 'float' });
      expect(res.object).toBe('list');
      expect(res.model).toBe('tiny_embed');
      expect(res.data.map((d) => [d.object, d.index])).toEqual(TEXTS.map((_, i) => ['embedding', i]));
      let tokens = 0;
      for (const [i, text] of TEXTS.entries()) {
        const ids = mean.ids(text);
        tokens += ids.length;
        expectClose(res.data[i]!.embedding, await mean.embed(ids, 'mean', true));
      }
      expect(res.usage).toEqual({ prompt_tokens: tokens, total_tokens: tokens });
    });

    it('base64 is the little-endian float32 bytes of the vectors (explicit, and the SDK default)', async () => {
      const floats = await client.embeddings.create({ model: 'tiny_embed', input: TEXTS, encoding_format: 'float' });
      const b64 = await client.embeddings.create({ model: 'tiny_embed', input: TEXTS, encoding_format: 'base64' });
      for (const [i, d] of b64.data.entries()) {
        expect(typeof d.embedding).toBe('string');
        const bytes = Buffer.from(d.embedding as unknown as string, 'base64');
        const v = Array.from(new Float32Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 4));
        // Another request: its batch may be padded differently, which moves float32 results in the last bits.
        expectClose(v, floats.data[i]!.embedding);
      }
      // Without encoding_format the SDK asks for base64 and decodes it itself.
      const sdk = await client.embeddings.create({ model: 'tiny_embed', input: TEXTS });
      for (const [i, d] of sdk.data.entries()) expectClose(d.embedding, floats.data[i]!.embedding);
    });

    it('takes one string, a list of token ids and a list of lists of token ids', async () => {
      const ids = TEXTS.map((t) => mean.ids(t));
      const one = await client.embeddings.create({ model: 'tiny_embed', input: TEXTS[1]!, encoding_format: 'float' });
      const flat = await client.embeddings.create({ model: 'tiny_embed', input: ids[1]!, encoding_format: 'float' });
      const nested = await client.embeddings.create({ model: 'tiny_embed', input: ids, encoding_format: 'float' });
      expectClose(flat.data[0]!.embedding, one.data[0]!.embedding);
      expect(nested.data).toHaveLength(TEXTS.length);
      for (const [i, d] of nested.data.entries()) expectClose(d.embedding, await mean.embed(ids[i]!, 'mean', true));
      expect(nested.usage.prompt_tokens).toBe(ids.flat().length);
    });

    it('reads CLS pooling and no Normalize from the folder; dimensions truncates on a Matryoshka model', async () => {
      const ids = TEXTS.map((t) => cls.ids(t));
      const full = await client.embeddings.create({ model: 'tiny_embed_cls', input: TEXTS, encoding_format: 'float' });
      const short = await client.embeddings.create({ model: 'tiny_embed_cls', input: TEXTS, encoding_format: 'float', dimensions: 8 });
      for (const [i, seq] of ids.entries()) {
        expectClose(full.data[i]!.embedding, await cls.embed(seq, 'cls', false));
        expectClose(short.data[i]!.embedding, await cls.embed(seq, 'cls', false, 8));
      }
      await expect(client.embeddings.create({ model: 'tiny_embed_cls', input: 'x', dimensions: 12 })).rejects.toMatchObject({
        status: 400,
        message: expect.stringContaining('Model "tiny_embed_cls" only supports [8, 16] matryoshka dimensions'),
      });
      await expect(client.embeddings.create({ model: 'tiny_embed', input: 'x', dimensions: 8 })).rejects.toMatchObject({
        status: 400,
        message: expect.stringContaining('Model "tiny_embed" does not support matryoshka representation, changing output dimensions will lead to poor results.'),
      });
    });

    it('takes the vector of an export that pools itself (sentence_embedding), normalised per modules.json', async () => {
      const res = await client.embeddings.create({ model: 'tiny_embed_pooled', input: TEXTS, encoding_format: 'float' });
      // Same weights as tiny_embed: the model's own mean, not the CLS its Pooling module names.
      for (const [i, text] of TEXTS.entries()) expectClose(res.data[i]!.embedding, await mean.embed(mean.ids(text), 'mean', true));
    });

    it('refuses an input over max_seq_length with vLLM message; truncate_prompt_tokens keeps the last tokens', async () => {
      const long = 'The quick brown fox jumps over the lazy dog. '.repeat(6);
      const ids = mean.ids(long);
      expect(ids.length).toBeGreaterThan(32);
      await expect(client.embeddings.create({ model: 'tiny_embed', input: ['ok', long] })).rejects.toMatchObject({
        status: 400,
        message: expect.stringContaining(`This model's maximum context length is 32 tokens. However, you requested ${ids.length} tokens in the input for embedding generation. Please reduce the length of the input.`),
      });
      const cut = await client.embeddings.create({ model: 'tiny_embed', input: long, encoding_format: 'float', truncate_prompt_tokens: 5 } as OpenAI.EmbeddingCreateParams);
      expectClose(cut.data[0]!.embedding, await mean.embed(ids.slice(-5), 'mean', true));
      expect(cut.usage.prompt_tokens).toBe(5);
    });

    it('answers bad requests with OpenAI error bodies and the right status', async () => {
      const cases: Array<[unknown, number, string | null]> = [
        [{ model: 'tiny_embed', input: [] }, 400, 'input'],
        [{ model: 'tiny_embed', input: ['a', 1] }, 400, 'input'],
        [{ model: 'tiny_embed', input: [[1, 2], [-1]] }, 400, 'input'],
        [{ model: 'tiny_embed', input: [[1, 2], []] }, 400, 'input'],
        [{ model: 'tiny_embed', input: 'a', encoding_format: 'int8' }, 400, 'encoding_format'],
        [{ model: 'tiny_embed', input: Array(2049).fill('a') }, 400, null],
        [{ model: 'tiny_embed', input: [[1, 100000]] }, 400, null],
        [{ model: 'nope', input: 'a' }, 404, null],
        [{ input: 'a' }, 400, 'model'],
      ];
      for (const [body, status, param] of cases) {
        const res = await post(`${url()}/embeddings`, JSON.stringify(body), { 'Content-Type': 'application/json' });
        const error = (JSON.parse(res.body.toString('utf8')) as { error: { type: string; param: string | null; code: string | null; message: string } }).error;
        expect([res.status, error.param], JSON.stringify(body).slice(0, 80)).toEqual([status, param]);
        expect(error.type).toBe('invalid_request_error');
        if (status === 404) expect(error.code).toBe('model_not_found');
      }
      // The server keeps serving.
      expect((await client.embeddings.create({ model: 'tiny_embed', input: 'still here' })).data).toHaveLength(1);
    });

    it('lists the embedding models on /v1/models', async () => {
      const ids = (await client.models.list()).data.map((m) => m.id);
      expect(ids).toEqual(expect.arrayContaining(['tiny_embed', 'tiny_embed_cls', 'tiny_embed_pooled', 'tiny_embed_single']));
      expect((await client.models.retrieve('tiny_embed')).id).toBe('tiny_embed');
    });

    it('sends a multi-input request as ceil(n / max_batch_size) infer requests; rows come back in order, as the worker computes them', async () => {
      const inputs = Array.from({ length: 40 }, (_, i) => `input ${i} ${'y'.repeat(i % 5)}`);
      const before = await executionCounts(stats());
      const grouped = await client.embeddings.create({ model: 'tiny_embed', input: inputs, encoding_format: 'float' });
      const after = await executionCounts(stats());
      // max_batch_size 16: three requests of 14, 13 and 13 rows reach the worker (not 40).
      expect([after.requests - before.requests, after.inferences - before.inferences]).toEqual([3, 40]);
      expect(grouped.data.map((d) => d.index)).toEqual(inputs.map((_, i) => i));
      // The worker's own door groups the same way: the same executions, so the same floats bit for bit.
      const direct = await new OpenAI({ baseURL: workerUrl(), apiKey: 'unused', maxRetries: 0 }).embeddings.create({ model: 'tiny_embed', input: inputs, encoding_format: 'float' });
      expect(grouped.data).toEqual(direct.data);
      expect(grouped.usage).toEqual(direct.usage);
      // One by one (each input alone in its execution): equal up to float32 rounding, which moves with
      // the batch's shape (onnxruntime's CPU kernels), as it did when the dynamic batcher packed them.
      let tokens = 0;
      for (const [i, input] of inputs.entries()) {
        const alone = await client.embeddings.create({ model: 'tiny_embed', input, encoding_format: 'float' });
        expectClose(grouped.data[i]!.embedding, alone.data[0]!.embedding);
        expectClose(grouped.data[i]!.embedding, await mean.embed(mean.ids(input), 'mean', true));
        tokens += alone.usage.prompt_tokens;
      }
      expect(grouped.usage).toEqual({ prompt_tokens: tokens, total_tokens: tokens });
      // base64 carries the same float32 bytes.
      const b64 = await client.embeddings.create({ model: 'tiny_embed', input: inputs, encoding_format: 'base64' });
      for (const [i, d] of b64.data.entries()) expect(d.embedding as unknown as string).toBe(Buffer.from(Float32Array.from(grouped.data[i]!.embedding).buffer).toString('base64'));
    });

    it('groups token-id inputs by length, and dimensions applies to every row (no dynamic batching)', async () => {
      const ids = Array.from({ length: 12 }, (_, i) => Array.from({ length: 3 + (i % 3) }, (_, j) => 5 + ((i * 7 + j * 3) % 40)));
      const before = await executionCounts(stats('tiny_embed_cls'));
      const grouped = await client.embeddings.create({ model: 'tiny_embed_cls', input: ids, encoding_format: 'float', dimensions: 8 });
      const after = await executionCounts(stats('tiny_embed_cls'));
      // Three lengths, four inputs each: three requests, each one execution (no dynamic batching here).
      expect([after.requests - before.requests, after.inferences - before.inferences, after.executions - before.executions]).toEqual([3, 12, 3]);
      for (const [i, seq] of ids.entries()) {
        const alone = await client.embeddings.create({ model: 'tiny_embed_cls', input: [seq], encoding_format: 'float', dimensions: 8 });
        expectClose(grouped.data[i]!.embedding, alone.data[0]!.embedding);
        expect(grouped.data[i]!.embedding).toHaveLength(8);
        expectClose(grouped.data[i]!.embedding, await cls.embed(seq, 'cls', false, 8));
      }
      expect(grouped.usage.prompt_tokens).toBe(ids.flat().length);
    });

    it('one input over max_seq_length among many fails the whole request with its message', async () => {
      const long = 'The quick brown fox jumps over the lazy dog. '.repeat(6);
      const inputs = Array.from({ length: 30 }, (_, i) => (i === 21 ? long : `short ${i}`));
      await expect(client.embeddings.create({ model: 'tiny_embed', input: inputs })).rejects.toMatchObject({
        status: 400,
        message: expect.stringContaining(`However, you requested ${mean.ids(long).length} tokens in the input for embedding generation.`),
      });
      const ids = Array.from({ length: 10 }, (_, i) => Array(i === 4 ? 33 : 5).fill(7));
      await expect(client.embeddings.create({ model: 'tiny_embed', input: ids })).rejects.toMatchObject({ status: 400, message: expect.stringContaining('However, you requested 33 tokens') });
    });

    it('a model that does not batch (max_batch_size 0) gets one request per input, with the same vectors', async () => {
      const before = await executionCounts(stats('tiny_embed_single'));
      const single = await client.embeddings.create({ model: 'tiny_embed_single', input: TEXTS, encoding_format: 'float' });
      const after = await executionCounts(stats('tiny_embed_single'));
      expect([after.requests - before.requests, after.inferences - before.inferences]).toEqual([TEXTS.length, TEXTS.length]);
      const batched = await client.embeddings.create({ model: 'tiny_embed', input: TEXTS, encoding_format: 'float' });
      for (const [i, d] of single.data.entries()) expectClose(d.embedding, batched.data[i]!.embedding);
      expect(single.usage).toEqual(batched.usage);
      const ids = TEXTS.map((t) => mean.ids(t));
      const byIds = await client.embeddings.create({ model: 'tiny_embed_single', input: ids, encoding_format: 'float' });
      // Each alone, as the text inputs were: the same executions, the same floats.
      expect(byIds.data.map((d) => d.embedding)).toEqual(single.data.map((d) => d.embedding));
    });

    it('concurrent requests batch in the dynamic batcher and get their own vectors', async () => {
      const before = await executionCounts(stats());
      const inputs = Array.from({ length: 24 }, (_, i) => `sentence ${i} ${'x'.repeat(i % 8)}`);
      const answers = await Promise.all(inputs.map((input) => client.embeddings.create({ model: 'tiny_embed', input, encoding_format: 'float' })));
      for (const [i, a] of answers.entries()) expectClose(a.data[0]!.embedding, await mean.embed(mean.ids(inputs[i]!), 'mean', true));
      const after = await executionCounts(stats());
      expect(after.inferences - before.inferences).toBe(inputs.length);
      expect(after.executions - before.executions).toBeLessThan(inputs.length);
    });
  });
}

/** A model's request (successful infer requests), inference (rows) and execution counts from a worker's KServe statistics. */
async function executionCounts(statsUrl: string): Promise<{ requests: number; inferences: number; executions: number }> {
  const body = JSON.parse((await get(statsUrl)).body.toString('utf8')) as {
    model_stats: Array<{ inference_count: number; execution_count: number; inference_stats: { success: { count: number } } }>;
  };
  const stats = body.model_stats[0]!;
  return { requests: stats.inference_stats.success.count, inferences: stats.inference_count, executions: stats.execution_count };
}

let repo: FixtureRepository;
let worker: WorkerProcess;
let cluster: Cluster;

describe('embeddings', () => {
  beforeAll(async () => {
    repo = fixtureRepository('embedding_repository', { files: files() });
    worker = await startWorkerProcess({ modelRepositories: [repo.path] });
  });
  afterAll(async () => {
    await worker?.stop();
    repo?.remove();
  });
  it('serves the same model over KServe infer (token ids, parameters, per-request refusals)', async () => {
    const ref = await Reference.open(join(repo.path, 'tiny_embed_cls', '1'));
    const ids = ref.ids('hello world');
    const infer = (body: object) => post(`${worker.httpUrl}/v2/models/tiny_embed_cls/infer`, JSON.stringify(body), { 'Content-Type': 'application/json' });
    const ok = await infer({ inputs: [{ name: 'input_ids', datatype: 'INT64', shape: [1, ids.length], data: ids }], parameters: { dimensions: 16 } });
    expect(ok.status).toBe(200);
    const outputs = (ok.json() as { outputs: Array<{ name: string; shape: number[]; data: number[] }> }).outputs;
    expect(outputs.find((o) => o.name === 'prompt_tokens')).toMatchObject({ shape: [1, 1], data: [ids.length] });
    const embedding = outputs.find((o) => o.name === 'embedding')!;
    expect(embedding.shape).toEqual([1, 16]);
    expectClose(embedding.data, await ref.embed(ids, 'cls', false, 16));
    const tooLong = await infer({ inputs: [{ name: 'input_ids', datatype: 'INT64', shape: [1, 65], data: Array(65).fill(1) }] });
    expect([tooLong.status, tooLong.json().error]).toEqual([400, "This model's maximum context length is 64 tokens. However, you requested 65 tokens in the input for embedding generation. Please reduce the length of the input."]);
    const both = await infer({ inputs: [{ name: 'input_ids', datatype: 'INT64', shape: [1, 1], data: [1] }, { name: 'text_input', datatype: 'BYTES', shape: [1, 1], data: ['a'] }] });
    expect(both.status).toBe(400);
    const badTruncate = await infer({ inputs: [{ name: 'text_input', datatype: 'BYTES', shape: [1, 1], data: ['a'] }], parameters: { truncate_prompt_tokens: 100 } });
    expect([badTruncate.status, badTruncate.json().error]).toEqual([400, 'truncate_prompt_tokens value (100) is greater than max_model_len (64). Please, select a smaller truncation size.']);
  });

  embeddingsSuite('on a worker', () => `${worker.httpUrl}/v1`, () => `${worker.httpUrl}/v1`, () => repo.path, (model = 'tiny_embed') => `${worker.httpUrl}/v2/models/${model}/stats`);
});

describe('embeddings through a router', () => {
  beforeAll(async () => {
    cluster = await startCluster({ fixture: 'embedding_repository', files: files(), workers: [[]], waitForModels: ['tiny_embed', 'tiny_embed_cls', 'tiny_embed_pooled', 'tiny_embed_single'] });
  }, 60_000);
  afterAll(async () => {
    await cluster?.stop();
  });
  embeddingsSuite('through a router', () => `${cluster.router.httpUrl}/v1`, () => `${cluster.workers[0]!.httpUrl}/v1`, () => cluster.repo.path, (model = 'tiny_embed') => `${cluster.workers[0]!.httpUrl}/v2/models/${model}/stats`);
});
