/**
 * The router's front doors take the worker's access flags: a real router process (with a real worker
 * behind it over private etcd, NATS and Redis) started with `--http-restricted-api`,
 * `--grpc-restricted-protocol` and `--openai-api-key`, driven by raw HTTP, grpc-js built from proto/
 * and the official `openai` SDK.
 */
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { grpc, loadGrpcClients, type GrpcClient } from './lib/grpc-client.js';
import { get, post } from './lib/tensors.js';
import { waitFor } from './lib/wait-for.js';
import { startCluster, type Cluster } from './support/cluster.js';

const API_KEY = 'sk-router-test';
let cluster: Cluster;
let client: GrpcClient;

beforeAll(async () => {
  cluster = await startCluster({
    workers: [['--model-control-mode=explicit', '--load-model=mock_llm']],
    routerArgs: [
      '--http-restricted-api=model-repository,statistics:Admin-Key=r0uter-admin',
      '--grpc-restricted-protocol=model-repository,metadata:admin-key=r0uter-admin',
      `--openai-api-key=${API_KEY}`,
    ],
  });
  // The cluster helper's own wait asks /v1/models without a key: wait here with it.
  await waitFor(
    async () => {
      const res = await fetch(`${cluster.router.httpUrl}/v1/models`, { headers: { authorization: `Bearer ${API_KEY}` } }).catch(() => undefined);
      return res?.status === 200 && ((await res.json()) as { data: { id: string }[] }).data.some((m) => m.id === 'mock_llm');
    },
    { timeoutMs: 30_000, message: 'the router did not list mock_llm in time' },
  );
  client = loadGrpcClients(cluster.router.grpcAddress).inference;
}, 120_000);
afterAll(async () => {
  client?.close();
  await cluster?.stop();
});

function call(method: string, request: object, metadata: Record<string, string> = {}): Promise<{ err: grpc.ServiceError | null; res: any }> {
  const md = new grpc.Metadata();
  for (const [k, v] of Object.entries(metadata)) md.set(k, v);
  return new Promise((resolve) => client[method](request, md, (err: grpc.ServiceError | null, res: any) => resolve({ err, res })));
}

describe('router access control', () => {
  it('HTTP: restricted groups answer 403 without the header and serve with it; the others stay open', async () => {
    const router = cluster.router.httpUrl;
    const refused = [403, { error: "This API is restricted, expecting header 'Admin-Key'" }];
    const index = await post(`${router}/v2/repository/index`, undefined);
    expect([index.status, index.json()]).toEqual(refused);
    const stats = await get(`${router}/v2/models/mock_llm/stats`);
    expect([stats.status, stats.json()]).toEqual(refused);
    const allowed = await post(`${router}/v2/repository/index`, undefined, { 'admin-key': 'r0uter-admin' });
    expect(allowed.status).toBe(200);
    expect(allowed.json()).toEqual(expect.arrayContaining([expect.objectContaining({ name: 'mock_llm', state: 'READY' })]));
    expect((await get(`${router}/v2/health/ready`)).status).toBe(200);
    const generate = await post(`${router}/v2/models/mock_llm/generate`, { text_input: 'hello', parameters: { max_tokens: 2 } });
    expect(generate.status).toBe(200);
  });

  it('gRPC: restricted protocols answer UNAVAILABLE without the metadata and serve with it', async () => {
    const { err } = await call('ServerMetadata', {});
    expect([err?.code, err?.details]).toEqual([grpc.status.UNAVAILABLE, "This protocol is restricted, expecting header 'triton-grpc-protocol-admin-key'"]);
    const ok = await call('RepositoryIndex', {}, { 'triton-grpc-protocol-admin-key': 'r0uter-admin' });
    expect(ok.err).toBeNull();
    expect(ok.res.models.map((m: { name: string }) => m.name)).toContain('mock_llm');
    expect((await call('ServerLive', {})).err).toBeNull();
  });

  it('OpenAI: the SDK works with the key and fails with AuthenticationError without the right one', async () => {
    const good = new OpenAI({ baseURL: `${cluster.router.httpUrl}/v1`, apiKey: API_KEY, maxRetries: 0 });
    const chat = await good.chat.completions.create({ model: 'mock_llm', messages: [{ role: 'user', content: 'Hello, cluster!' }], max_tokens: 4 });
    expect(chat.choices[0]?.message.role).toBe('assistant');
    const bad = new OpenAI({ baseURL: `${cluster.router.httpUrl}/v1`, apiKey: 'sk-wrong', maxRetries: 0 });
    const err = await bad.chat.completions.create({ model: 'mock_llm', messages: [{ role: 'user', content: 'Hi' }], max_tokens: 4 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.AuthenticationError);
    expect(err).toMatchObject({ status: 401, code: 'invalid_api_key' });
    const raw = await get(`${cluster.router.httpUrl}/v1/models`);
    expect([raw.status, raw.json().error.code]).toEqual([401, 'invalid_api_key']);
  });
});
