/**
 * Scale to zero end to end: real etcd, NATS (JetStream) and Redis, a router process started with
 * `--queue-timeout-secs` and `--model mock_llm` while no worker runs. A request that arrives with no
 * worker is held; a worker process started 2 s later serves it. With no worker at all, the request
 * fails 503 once the queue timeout has passed; a model the router does not know is 404 at once.
 */
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startCluster, type Cluster } from './support/cluster.js';
import { isFinalResponse, loadGrpcClients, streamInfer, unaryError } from './lib/grpc-client.js';
import { metricsText } from './lib/metrics.js';
import { deserializeStrings, serializeStrings } from './lib/tensors.js';
import { sleep, waitFor } from './lib/wait-for.js';

const QUEUE_TIMEOUT_SECS = 4;
let cluster: Cluster;
let openai: OpenAI;

beforeAll(async () => {
  cluster = await startCluster({ workers: [], routerArgs: [`--queue-timeout-secs=${QUEUE_TIMEOUT_SECS}`, '--model=mock_llm'] });
  openai = new OpenAI({ baseURL: `${cluster.router.httpUrl}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 120_000 });
}, 120_000);
afterAll(async () => {
  await cluster?.stop();
}, 60_000);

/** A KServe gRPC request to the LLM (`text_input`), answered on the router. */
const grpcGenerate = (id: string): object => ({
  model_name: 'mock_llm',
  id,
  inputs: [{ name: 'text_input', datatype: 'BYTES', shape: [1] }],
  parameters: { max_tokens: { int64_param: 2 } },
  raw_input_contents: [serializeStrings(['hello there'])],
});

const held = async (): Promise<number | undefined> => {
  const line = (await metricsText(cluster.router.metricsUrl)).split('\n').find((l) => l.startsWith('switchyard_router_held_requests{model="mock_llm"} '));
  return line === undefined ? undefined : Number(line.split(' ')[1]);
};

describe('scale to zero: the router holds requests until a worker starts', () => {
  it('with no worker, a request fails 503 after the queue timeout; an unknown model is 404 at once', async () => {
    expect(await held()).toBe(0);
    const t0 = Date.now();
    const err = await openai.completions.create({ model: 'mock_llm', prompt: 'hello', max_tokens: 2 }).catch((e: unknown) => e);
    const waited = Date.now() - t0;
    expect(err).toMatchObject({ status: 503 });
    expect((err as Error).message).toMatch(/no worker available for model 'mock_llm' \(none started within 4 s\)/);
    expect(waited).toBeGreaterThanOrEqual(QUEUE_TIMEOUT_SECS * 1000 - 100);
    expect(waited).toBeLessThan(QUEUE_TIMEOUT_SECS * 1000 + 5000);

    // not held: a held request would end 503 after the timeout
    await expect(openai.completions.create({ model: 'nope', prompt: 'hello', max_tokens: 2 })).rejects.toMatchObject({ status: 404 });
  }, 60_000);

  it('gRPC: ModelInfer fails UNAVAILABLE after the timeout, ModelStreamInfer answers the refusal in the stream', async () => {
    const { inference } = loadGrpcClients(cluster.router.grpcAddress);
    try {
      const err = await unaryError(inference, 'ModelInfer', grpcGenerate('unary'));
      expect(err.code).toBe(14); // UNAVAILABLE
      expect(err.details).toMatch(/no worker available for model 'mock_llm'/);
      const responses = await streamInfer(inference, [grpcGenerate('streamed')]);
      expect(responses).toHaveLength(1);
      expect(responses[0].error_message).toMatch(/no worker available for model 'mock_llm'/);
    } finally {
      inference.close();
    }
  }, 60_000);

  it('a request that arrives with no worker succeeds once a worker starts 2 s later (OpenAI, KServe HTTP and gRPC)', async () => {
    // Long enough for a worker process to start and join on a loaded machine.
    const router = await cluster.addRouter(['--queue-timeout-secs=90', '--model=mock_llm']);
    const client = new OpenAI({ baseURL: `${router.httpUrl}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 120_000 });
    const chat = client.chat.completions.create({ model: 'mock_llm', messages: [{ role: 'user', content: 'hi' }], max_tokens: 3 });
    const kserve = fetch(`${router.httpUrl}/v2/models/mock_llm/generate`, { method: 'POST', body: JSON.stringify({ text_input: 'hello', parameters: { max_tokens: 2 } }) });
    const { inference } = loadGrpcClients(router.grpcAddress);
    // mock_llm is decoupled, which ModelInfer refuses: once held and then answered, the refusal is the model's own (not UNAVAILABLE)
    const grpcUnary = unaryError(inference, 'ModelInfer', grpcGenerate('unary'));
    const grpcStream = streamInfer(inference, [grpcGenerate('streamed')]);
    await waitFor(async () => (await metricsText(router.metricsUrl)).includes('switchyard_router_held_requests{model="mock_llm"} 4'), {
      timeoutMs: 10_000,
      message: 'the router did not report four held requests',
    });
    await sleep(2000);
    await cluster.addWorker();
    const answer = await chat;
    expect(answer.choices[0]!.message.content?.length).toBeGreaterThan(0);
    const k = await kserve;
    expect(k.status, await k.clone().text()).toBe(200);
    expect(((await k.json()) as { text_output: string }).text_output.length).toBeGreaterThan(0);
    try {
      const u = await grpcUnary;
      expect(u.code).toBe(12); // UNIMPLEMENTED
      expect(u.details).toBe("ModelInfer RPC doesn't support models with decoupled transaction policy");
      const streamed = await grpcStream;
      expect(streamed.map((r) => r.error_message)).toEqual(streamed.map(() => ''));
      expect(isFinalResponse(streamed.at(-1))).toBe(true);
      expect(streamed.at(-1).infer_response.id).toBe('streamed');
      expect(streamed.map((r) => deserializeStrings(r.infer_response.raw_output_contents[0] ?? Buffer.alloc(0))[0] ?? '').join('').length).toBeGreaterThan(0);
    } finally {
      inference.close();
    }
    expect(await metricsText(router.metricsUrl)).toContain('switchyard_router_held_requests{model="mock_llm"} 0');
  }, 150_000);
});
