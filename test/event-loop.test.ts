/**
 * No request stalls the event loop: a real worker process keeps answering `/v2/health/live` while it
 * decodes and encodes floods of small BYTES strings, and refuses prompts far over the context at once
 * instead of tokenizing them first. Bounds are generous (CI machines are shared): the bugs these
 * tests catch held the loop for 3–14 s.
 */
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { llmFixtureRepositoryFiles } from '@switchyard/onnx-builder';
import { startWorkerProcess, type WorkerProcess } from '@switchyard/testing';
import { fixtureRepository, type FixtureRepository } from './lib/fixture-repository.js';
import { grpc, loadGrpcClients, unary } from './lib/grpc-client.js';
import { post } from './lib/tensors.js';
import { startCluster, type Cluster } from './support/cluster.js';

let repo: FixtureRepository;
let worker: WorkerProcess;
let openai: OpenAI;

beforeAll(async () => {
  repo = fixtureRepository('llm_repository', { files: Object.fromEntries(llmFixtureRepositoryFiles().map((f) => [f.path, f.build()])) });
  worker = await startWorkerProcess({
    modelRepositories: [repo.path, 'test/fixtures/model_repository'],
    args: ['--model-control-mode=explicit', '--load-model=tiny_llm', '--load-model=identity_bytes'],
  });
  openai = new OpenAI({ baseURL: `${worker.httpUrl}/v1`, apiKey: 'unused', maxRetries: 0 });
});
afterAll(async () => {
  await worker?.stop();
  repo?.remove();
});

/**
 * Runs `work` while polling `/v2/health/live` (of the worker, or of `baseUrl`) every 50 ms; resolves
 * with work's result and the slowest health answer (ms) of the polls sent while it ran (Infinity when
 * one failed).
 */
async function withHealthPolls<T>(work: () => Promise<T>, baseUrl?: string): Promise<{ result: T; worstHealthMs: number }> {
  let done = false;
  let worst = 0;
  const poller = (async () => {
    while (!done) {
      const start = performance.now();
      try {
        const res = await fetch(`${baseUrl ?? worker.httpUrl}/v2/health/live`);
        await res.arrayBuffer();
        worst = Math.max(worst, res.status === 200 ? performance.now() - start : Infinity);
      } catch {
        worst = Infinity; // a connection reset by a stalled server counts as no answer
      }
      await new Promise((r) => setTimeout(r, 50));
    }
  })();
  try {
    const result = await work();
    return { result, worstHealthMs: worst };
  } finally {
    done = true;
    await poller;
  }
}

/** A KServe JSON request of `n` one-byte strings to identity_bytes (~4 bytes per string of JSON). */
function manyStringsRequest(n: number, binaryOutput: boolean): string {
  return JSON.stringify({
    inputs: [{ name: 'INPUT0', datatype: 'BYTES', shape: [1, n], data: new Array<string>(n).fill('a') }],
    outputs: [{ name: 'OUTPUT0', parameters: { binary_data: binaryOutput } }],
  });
}

describe('floods of small BYTES strings', () => {
  it('health answers within 2 s while four 3 MB JSON requests of 800k strings are decoded, run and encoded', async () => {
    const N = 800_000;
    for (const binaryOutput of [false, true]) {
      const body = manyStringsRequest(N, binaryOutput);
      const { result, worstHealthMs } = await withHealthPolls(() =>
        Promise.all(Array.from({ length: 4 }, () => post(`${worker.httpUrl}/v2/models/identity_bytes/infer`, body, { 'content-type': 'application/json' }))),
      );
      for (const res of result) {
        expect(res.status).toBe(200);
        const headerLength = Number(res.headers.get('inference-header-content-length') ?? res.body.byteLength);
        const header = JSON.parse(res.body.subarray(0, headerLength).toString('utf8'));
        expect(header.outputs[0].shape).toEqual([1, N]);
        if (binaryOutput) expect(res.body.byteLength - headerLength).toBe(5 * N);
        else expect(header.outputs[0].data).toHaveLength(N);
      }
      expect(worstHealthMs).toBeLessThan(2000); // 3-14 s before
    }
  }, 120_000);
});

describe('floods of small BYTES strings over gRPC', () => {
  it('health answers within 2 s while four ModelInfer requests of 800k strings (raw_input_contents) run', async () => {
    const N = 800_000;
    const blob = Buffer.alloc(5 * N);
    for (let i = 0; i < N; i++) {
      blob.writeUInt32LE(1, 5 * i);
      blob[5 * i + 4] = 0x61;
    }
    const { inference, health } = loadGrpcClients(worker.grpcAddress);
    try {
      const request = { model_name: 'identity_bytes', inputs: [{ name: 'INPUT0', datatype: 'BYTES', shape: [1, N] }], raw_input_contents: [blob] };
      const { result, worstHealthMs } = await withHealthPolls(() => Promise.all(Array.from({ length: 4 }, () => unary(inference, 'ModelInfer', request))));
      for (const res of result) {
        expect(res.outputs[0].shape.map(Number)).toEqual([1, N]);
        expect(Buffer.compare(res.raw_output_contents[0], blob)).toBe(0);
      }
      expect(worstHealthMs).toBeLessThan(2000); // ~6 s before
    } finally {
      inference.close();
      health.close();
    }
  }, 120_000);

  /**
   * The same strings as typed `bytes_contents`: 800k protobuf fields that grpc-js's deserializer
   * used to turn into 800k Buffers on the worker's event loop (health waited ~3 s). The messages
   * are serialized once up front and sent as bytes, so this process's own protobuf encoding stalls
   * none of its health polls.
   */
  it('health answers within 1.5 s while four ModelInfer and four ModelStreamInfer requests of 800k strings (bytes_contents) run', async () => {
    const N = 800_000;
    const strings = Array.from({ length: N }, () => Buffer.from('a'));
    const { inference, health } = loadGrpcClients(worker.grpcAddress);
    const methods = (inference.constructor as unknown as { service: Record<string, grpc.MethodDefinition<any, any>> }).service;
    const encode = (id: string): Buffer =>
      methods['ModelInfer']!.requestSerialize({ model_name: 'identity_bytes', id, inputs: [{ name: 'INPUT0', datatype: 'BYTES', shape: [1, N], contents: { bytes_contents: strings } }] });
    const messages = ['a', 'b', 'c', 'd'].map(encode);
    const raw = new grpc.Client(worker.grpcAddress, grpc.credentials.createInsecure(), { 'grpc.max_receive_message_length': -1, 'grpc.max_send_message_length': -1 });
    const asBytes = (b: Buffer): Buffer => b;
    const modelInfer = (bytes: Buffer): Promise<any> =>
      new Promise((resolve, reject) =>
        raw.makeUnaryRequest('/inference.GRPCInferenceService/ModelInfer', asBytes, methods['ModelInfer']!.responseDeserialize, bytes, (err, res) => (err ? reject(err) : resolve(res))),
      );
    const streamInfer = (all: Buffer[]): Promise<any[]> =>
      new Promise((resolve, reject) => {
        const call = raw.makeBidiStreamRequest('/inference.GRPCInferenceService/ModelStreamInfer', asBytes, methods['ModelStreamInfer']!.responseDeserialize);
        const responses: any[] = [];
        call.on('data', (r: any) => responses.push(r));
        call.on('end', () => resolve(responses));
        call.on('error', reject);
        for (const m of all) call.write(m);
        call.end();
      });
    const blob = Buffer.alloc(5 * N);
    for (let i = 0; i < N; i++) {
      blob.writeUInt32LE(1, 5 * i);
      blob[5 * i + 4] = 0x61;
    }
    try {
      const unaryRun = await withHealthPolls(() => Promise.all(messages.map(modelInfer)));
      for (const [i, res] of unaryRun.result.entries()) {
        expect(res.id).toBe('abcd'[i]);
        expect(res.outputs[0].shape.map(Number)).toEqual([1, N]);
        expect(Buffer.compare(res.raw_output_contents[0], blob)).toBe(0);
      }
      const streamRun = await withHealthPolls(() => streamInfer(messages));
      // one stream: answered in request order
      expect(streamRun.result.map((r) => [r.error_message, r.infer_response?.id])).toEqual(['a', 'b', 'c', 'd'].map((id) => ['', id]));
      for (const r of streamRun.result) expect(Buffer.compare(r.infer_response.raw_output_contents[0], blob)).toBe(0);
      expect(unaryRun.worstHealthMs).toBeLessThan(1500); // ~3 s before
      expect(streamRun.worstHealthMs).toBeLessThan(1500); // ~0.9 s before (one stream decodes one message at a time)
    } finally {
      raw.close();
      inference.close();
      health.close();
    }
  }, 120_000);
});

const HUGE_PROMPT = 'hello world '.repeat((20 * 1024 * 1024) / 12);
const CONTEXT_MESSAGE = /^This model's maximum context length is 512 tokens\. However, your request has at least \d+ input tokens\. Please reduce the length of the input messages\.$/;

describe('a 20 MB prompt is refused before it is tokenized', () => {
  it('OpenAI completions and chat: 400 invalid_request_error at once, health answering meanwhile', async () => {
    for (const call of [
      () => openai.completions.create({ model: 'tiny_llm', prompt: HUGE_PROMPT, max_tokens: 4 }),
      () => openai.chat.completions.create({ model: 'tiny_llm', messages: [{ role: 'user', content: HUGE_PROMPT }], max_tokens: 4 }),
    ]) {
      const start = performance.now();
      const { result: error, worstHealthMs } = await withHealthPolls(() => call().then(() => undefined, (e: unknown) => e));
      const elapsed = performance.now() - start;
      expect(error).toBeInstanceOf(OpenAI.BadRequestError);
      const e = error as InstanceType<typeof OpenAI.BadRequestError>;
      expect(e.status).toBe(400);
      expect(e.message).toMatch(/maximum context length is 512 tokens/);
      expect((e.error as { message: string; type: string }).message).toMatch(CONTEXT_MESSAGE);
      expect((e.error as { type: string }).type).toBe('invalid_request_error');
      expect(elapsed).toBeLessThan(5000); // tokenizing first took 10-14 s
      expect(worstHealthMs).toBeLessThan(2000);
    }
  });

  it('KServe generate: 400 with the same message at once, health answering meanwhile', async () => {
    const start = performance.now();
    const { result: res, worstHealthMs } = await withHealthPolls(() =>
      post(`${worker.httpUrl}/v2/models/tiny_llm/generate`, { text_input: HUGE_PROMPT, parameters: { max_tokens: 4 } }),
    );
    const elapsed = performance.now() - start;
    expect(res.status).toBe(400);
    expect(res.json().error).toMatch(CONTEXT_MESSAGE);
    expect(elapsed).toBeLessThan(5000);
    expect(worstHealthMs).toBeLessThan(2000);
  });

  it('a prompt that fits still generates', async () => {
    const r = await openai.completions.create({ model: 'tiny_llm', prompt: 'hello world', max_tokens: 2, temperature: 0 });
    expect(r.choices[0]?.finish_reason).toBe('length');
  });
});

describe('through the router: a 20 MB prompt is refused before it is tokenized', () => {
  let cluster: Cluster;
  beforeAll(async () => {
    cluster = await startCluster({ workers: [['--model-control-mode=explicit', '--load-model=tiny_llm']], waitForModels: ['tiny_llm'] });
  }, 90_000);
  afterAll(async () => {
    await cluster?.stop();
  });

  it('OpenAI completions and KServe generate: 400 with the worker\'s message at once, router health answering meanwhile', async () => {
    const router = cluster.router.httpUrl;
    const client = new OpenAI({ baseURL: `${router}/v1`, apiKey: 'unused', maxRetries: 0 });
    const calls: Array<() => Promise<{ status: number; message: string }>> = [
      () =>
        client.completions.create({ model: 'tiny_llm', prompt: HUGE_PROMPT, max_tokens: 4 }).then(
          () => ({ status: 200, message: '' }),
          (e: InstanceType<typeof OpenAI.APIError>) => ({ status: e.status ?? 0, message: (e.error as { message: string }).message }),
        ),
      () =>
        post(`${router}/v2/models/tiny_llm/generate`, { text_input: HUGE_PROMPT, parameters: { max_tokens: 4 } }).then((r) => ({
          status: r.status,
          message: r.json().error as string,
        })),
    ];
    for (const call of calls) {
      const start = performance.now();
      const { result, worstHealthMs } = await withHealthPolls(call, router);
      expect(result.status).toBe(400);
      expect(result.message).toMatch(CONTEXT_MESSAGE);
      expect(performance.now() - start).toBeLessThan(5000); // the router tokenized it first: 13+ s
      expect(worstHealthMs).toBeLessThan(2000);
    }
  });
});
