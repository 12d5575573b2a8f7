import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MemoryRoutingTable } from '@switchyard/kv-router';
import { renderModelConfigJson } from '@switchyard/model-config';
import { type HttpFrontDoor, ServerSettings, SharedMemoryManager, createHttpServer, reusePortSupported } from '@switchyard/server';
import { type RouterCore, startRouterCore } from './router-core.js';
import { LLM, MockCluster, type MockWorker, NS, TENSOR, waitFor } from './test-support/mock-cluster.js';

let cluster: MockCluster;
let worker: MockWorker;
let router: RouterCore;
let door: HttpFrontDoor;
let base: string;

beforeAll(async () => {
  cluster = new MockCluster();
  worker = await cluster.addWorker({ tensor: true });
  await cluster.addWorker();
  router = await startRouterCore({ ...cluster.routerRoles(), routingTable: new MemoryRoutingTable(), namespace: NS, routerId: 'front' });
  await waitFor(() => router.registry.model(LLM)?.instances.size === 2 && router.registry.model(TENSOR) !== undefined, 5000, 'models');
  door = createHttpServer({ engine: router.engine, shm: new SharedMemoryManager({ enabled: false }), settings: new ServerSettings(), port: 0, host: '127.0.0.1' });
  base = `http://127.0.0.1:${await door.listen()}`;
});
afterAll(async () => {
  await door?.close();
  await router?.close();
  await cluster?.close();
});

const get = async (path: string) => {
  const r = await fetch(base + path);
  return { status: r.status, body: (await r.json().catch(() => null)) as Record<string, unknown> | null };
};

describe('ClusterEngine behind the unchanged front doors', () => {
  it('answers KServe metadata, config and index like the worker does', async () => {
    const server = await get('/v2');
    expect(server.body).toMatchObject({ name: 'triton', version: worker.engine.serverMetadata().version });
    expect(server.body!['extensions']).toContain('model_repository');
    expect((await get('/v2/health/ready')).status).toBe(200);

    // the worker's own answers, through its engine, are the reference
    const meta = await get(`/v2/models/${TENSOR}`);
    expect(meta.body).toEqual(JSON.parse(JSON.stringify(worker.engine.modelMetadata(TENSOR))));
    const config = await fetch(`${base}/v2/models/${TENSOR}/config`).then((r) => r.text());
    expect(config).toBe(renderModelConfigJson(worker.engine.modelConfig(TENSOR)));
    const llmConfig = await fetch(`${base}/v2/models/${LLM}/config`).then((r) => r.text());
    expect(llmConfig).toBe(renderModelConfigJson(worker.engine.modelConfig(LLM)));
    expect((await fetch(`${base}/v2/models/${TENSOR}/versions/1/ready`)).status).toBe(200);
    expect((await fetch(`${base}/v2/models/${TENSOR}/versions/2/ready`)).status).toBe(400);

    const index = await fetch(`${base}/v2/repository/index`, { method: 'POST', body: '{}' }).then((r) => r.json());
    expect(index).toEqual([
      { name: TENSOR, version: '1', state: 'READY' },
      { name: LLM, version: '1', state: 'READY' },
    ]);
    const load = await fetch(`${base}/v2/repository/models/${TENSOR}/load`, { method: 'POST', body: '{}' });
    expect(load.status).toBeGreaterThanOrEqual(400);
    expect(((await load.json()) as { error: string }).error).toContain('model control is done on workers');
  });

  it('forwards KServe infer to a worker and returns its answer', async () => {
    const body = {
      inputs: [
        { name: 'INPUT0', datatype: 'INT32', shape: [4], data: [1, 2, 3, 4] },
        { name: 'INPUT1', datatype: 'INT32', shape: [4], data: [10, 20, 30, 40] },
      ],
    };
    const r = await fetch(`${base}/v2/models/${TENSOR}/infer`, { method: 'POST', body: JSON.stringify(body) });
    expect(r.status).toBe(200);
    const json = (await r.json()) as { model_name: string; model_version: string; outputs: Array<{ name: string; data: number[] }> };
    expect(json).toMatchObject({ model_name: TENSOR, model_version: '1' });
    expect(json.outputs.find((o) => o.name === 'OUTPUT0')!.data).toEqual([11, 22, 33, 44]);
    expect(json.outputs.find((o) => o.name === 'OUTPUT1')!.data).toEqual([-9, -18, -27, -36]);
  });

  it.skipIf(!reusePortSupported())('serves the same answers through HTTP front threads (--http-thread-count)', async () => {
    const threaded = createHttpServer({ engine: router.engine, shm: new SharedMemoryManager({ enabled: false }), settings: new ServerSettings(), port: 0, host: '127.0.0.1', threads: 2 });
    const tbase = `http://127.0.0.1:${await threaded.listen()}`;
    try {
      const body = JSON.stringify({ id: 't', inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [2], data: [1, 2] }, { name: 'INPUT1', datatype: 'INT32', shape: [2], data: [5, 5] }] });
      for (const path of [`/v2/models/${TENSOR}/infer`, '/v2/models/nope/infer']) {
        const [a, b] = await Promise.all([base, tbase].map((u) => fetch(u + path, { method: 'POST', body }).then(async (r) => [r.status, await r.text()])));
        expect(b).toEqual(a);
      }
      expect((await fetch(`${tbase}/v2/models/${TENSOR}/config`).then((r) => r.text())).length).toBeGreaterThan(0);
    } finally {
      await threaded.close();
    }
  });

  it('tells its listeners when the cluster\'s models change', async () => {
    let changes = 0;
    const off = router.engine.onModelChange(() => changes++);
    const added = await cluster.addWorker({ tensor: true });
    await waitFor(() => changes > 0, 5000, 'a model change');
    off();
    await added.close();
  });

  it('gives the worker\'s error for an unknown model', async () => {
    const r = await fetch(`${base}/v2/models/nope/infer`, { method: 'POST', body: JSON.stringify({ inputs: [] }) });
    expect(r.status).toBe(400);
    expect(await r.json()).toEqual({ error: "Request for unknown model: 'nope' is not found" });
    await expect(router.engine.infer({ id: '', modelName: 'nope', modelVersion: undefined, parameters: {}, inputs: [], outputs: [] })).rejects.toMatchObject({
      message: "Request for unknown model: 'nope' is not found",
    });
  });

  it('streams an OpenAI chat completion across the cluster (openai SDK)', async () => {
    const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'unused', maxRetries: 0 });
    const models = await client.models.list();
    expect(models.data.map((m) => m.id)).toEqual([LLM]);
    const stream = await client.chat.completions.create({
      model: LLM,
      messages: [{ role: 'user', content: 'Hello there, how are you?' }],
      max_tokens: 12,
      temperature: 0,
      stream: true,
      stream_options: { include_usage: true },
    });
    let chunks = 0;
    let usage: OpenAI.CompletionUsage | undefined | null;
    let finish: string | null | undefined;
    for await (const chunk of stream) {
      chunks++;
      if (chunk.usage) usage = chunk.usage;
      finish = chunk.choices[0]?.finish_reason ?? finish;
    }
    expect(chunks).toBeGreaterThan(1);
    expect(usage?.prompt_tokens).toBeGreaterThan(0);
    expect(usage?.completion_tokens).toBeGreaterThan(0);
    expect(usage!.completion_tokens).toBeLessThanOrEqual(12);
    expect(finish === 'length' || finish === 'stop').toBe(true);
    expect(router.stats().decisionsByMode.kv).toBe(1);
    expect(router.engine.llmEndpoint(LLM)!.metrics().timeToFirstToken.count).toBe(1);
  });
});
