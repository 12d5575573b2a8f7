/**
 * Scale to zero on the router (held-requests.ts), with memory twins and the unchanged HTTP door:
 * requests for a known model without a worker wait for one (OpenAI and KServe), up to the queue
 * timeout, within the cap, and leave when their client does.
 */
import OpenAI from 'openai';
import { afterEach, describe, expect, it } from 'vitest';
import { MemoryRoutingTable } from '@switchyard/kv-router';
import { type HttpFrontDoor, ServerSettings, SharedMemoryManager, createHttpServer } from '@switchyard/server';
import { type RouterCore, type RouterCoreOptions, startRouterCore } from './router-core.js';
import { LLM, MockCluster, NS, TENSOR, waitFor } from './test-support/mock-cluster.js';

let cluster: MockCluster | undefined;
let router: RouterCore | undefined;
let door: HttpFrontDoor | undefined;
afterEach(async () => {
  await door?.close();
  await router?.close();
  await cluster?.close();
  door = router = cluster = undefined;
});

async function start(options: Partial<RouterCoreOptions>): Promise<{ router: RouterCore; cluster: MockCluster; base: string }> {
  cluster = new MockCluster();
  router = await startRouterCore({ ...cluster.routerRoles(), routingTable: new MemoryRoutingTable(), namespace: NS, routerId: 'held', ...options });
  door = createHttpServer({ engine: router.engine, shm: new SharedMemoryManager({ enabled: false }), settings: new ServerSettings(), port: 0, host: '127.0.0.1' });
  return { router, cluster, base: `http://127.0.0.1:${await door.listen()}` };
}

const INFER_BODY = JSON.stringify({
  inputs: [
    { name: 'INPUT0', datatype: 'INT32', shape: [4], data: [1, 2, 3, 4] },
    { name: 'INPUT1', datatype: 'INT32', shape: [4], data: [10, 20, 30, 40] },
  ],
});

function completion(base: string, model: string, signal?: AbortSignal): Promise<Response> {
  return fetch(`${base}/v1/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model, prompt: 'hello there', max_tokens: 3, temperature: 0 }),
    ...(signal !== undefined ? { signal } : {}),
  });
}

describe('HeldRequests: scale to zero on the router', () => {
  it('holds OpenAI and KServe requests for configured models until a worker starts, then serves them', async () => {
    const { router, cluster, base } = await start({ queueTimeoutMs: 20_000, models: [LLM, TENSOR] });
    expect(router.heldByModel()).toEqual([
      [TENSOR, 0], // add_sub
      [LLM, 0], // mock_llm
    ]);
    const openai = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'none', maxRetries: 0 });
    const chat = openai.completions.create({ model: LLM, prompt: 'hello there', max_tokens: 3, temperature: 0 });
    const infer = fetch(`${base}/v2/models/${TENSOR}/infer`, { method: 'POST', body: INFER_BODY });
    const generate = fetch(`${base}/v2/models/${LLM}/generate`, { method: 'POST', body: JSON.stringify({ text_input: 'hello', parameters: { max_tokens: 2 } }) });
    await waitFor(() => router.heldRequests(LLM) === 2 && router.heldRequests(TENSOR) === 1, 5000, 'three held requests');
    await new Promise((r) => setTimeout(r, 200));
    expect(router.heldRequests(LLM)).toBe(2); // still waiting: nothing serves them yet

    await cluster.addWorker({ tensor: true });
    const [c, i, g] = await Promise.all([chat, infer, generate]);
    expect(c.choices[0]!.text.length).toBeGreaterThan(0);
    expect(i.status).toBe(200);
    expect(((await i.json()) as { outputs: { name: string; data: number[] }[] }).outputs.find((o) => o.name === 'OUTPUT0')!.data).toEqual([11, 22, 33, 44]);
    expect(g.status, await g.clone().text()).toBe(200);
    expect(router.heldRequests(LLM)).toBe(0);
    expect(router.heldRequests(TENSOR)).toBe(0);
  });

  it('fails 503 after the queue timeout with the no-worker error; unknown models are answered at once as before', async () => {
    const { router, base } = await start({ queueTimeoutMs: 400, models: [LLM, TENSOR] });
    let t0 = Date.now();
    const r = await completion(base, LLM);
    expect(r.status).toBe(503);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(380);
    expect(((await r.json()) as { error: { message: string } }).error.message).toBe(`no worker available for model '${LLM}' (none started within 0.4 s)`);
    t0 = Date.now();
    const k = await fetch(`${base}/v2/models/${TENSOR}/infer`, { method: 'POST', body: INFER_BODY });
    expect(k.status).toBe(503);
    expect(((await k.json()) as { error: string }).error).toMatch(/^no worker available for model 'add_sub'/);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(380);
    expect(router.heldRequests(LLM)).toBe(0);

    // not held: a held request would end 503 after the timeout, not with the lookup's answer
    expect((await completion(base, 'nope')).status).toBe(404);
    const unknown = await fetch(`${base}/v2/models/nope/infer`, { method: 'POST', body: INFER_BODY });
    expect(unknown.status).toBe(400);
    expect(((await unknown.json()) as { error: string }).error).toBe("Request for unknown model: 'nope' is not found");
    expect(router.heldByModel().map(([m]) => m)).not.toContain('nope');
  });

  it('a model that had a worker is known: once its last worker leaves, requests wait for the next one (and 503 at once with no timeout)', async () => {
    const { router, cluster, base } = await start({ queueTimeoutMs: 20_000 });
    const first = await cluster.addWorker();
    await waitFor(() => router.registry.model(LLM) !== undefined, 5000, 'first worker');
    expect((await completion(base, LLM)).status).toBe(200);
    await first.close();
    await waitFor(() => router.registry.model(LLM) === undefined, 5000, 'worker gone');
    const held = completion(base, LLM);
    await waitFor(() => router.heldRequests(LLM) === 1, 5000, 'held');
    await cluster.addWorker();
    expect((await held).status).toBe(200);
  });

  it('with no queue timeout a known model without a worker is 503 at once (not 404)', async () => {
    const { router, base } = await start({ models: [LLM] });
    const t0 = Date.now();
    const r = await completion(base, LLM);
    expect(r.status).toBe(503);
    expect(((await r.json()) as { error: { message: string } }).error.message).toBe(`no worker available for model '${LLM}'`);
    expect(Date.now() - t0).toBeLessThan(5000);
    expect(router.heldRequests(LLM)).toBe(0);
  });

  it('bounds held requests: past the cap 503 at once; a client that disconnects frees its slot', async () => {
    const { router, base } = await start({ queueTimeoutMs: 20_000, maxHeldRequests: 2, models: [LLM] });
    const aborts = [new AbortController(), new AbortController()];
    const held = aborts.map((a) => completion(base, LLM, a.signal).catch((e: unknown) => e));
    await waitFor(() => router.heldRequests(LLM) === 2, 5000, 'two held');
    const t0 = Date.now();
    const over = await completion(base, LLM);
    expect(over.status).toBe(503);
    expect(((await over.json()) as { error: { message: string } }).error.message).toMatch(/2 requests are already waiting/);
    expect(Date.now() - t0).toBeLessThan(5000); // not held (the queue timeout is 20 s)

    aborts[0]!.abort();
    await waitFor(() => router.heldRequests(LLM) === 1, 5000, 'the disconnected client left');
    const ka = new AbortController();
    const kserve = fetch(`${base}/v2/models/${LLM}/generate`, { method: 'POST', body: JSON.stringify({ text_input: 'x' }), signal: ka.signal }).catch((e: unknown) => e);
    await waitFor(() => router.heldRequests(LLM) === 2, 5000, 'a KServe request took the slot');
    ka.abort();
    aborts[1]!.abort();
    await waitFor(() => router.heldRequests(LLM) === 0, 5000, 'all left');
    await Promise.all([...held, kserve]);
  });

  it('a router that stops fails its held requests 503', async () => {
    const { router, base } = await start({ queueTimeoutMs: 20_000, models: [LLM] });
    const held = completion(base, LLM);
    await waitFor(() => router.heldRequests(LLM) === 1, 5000, 'held');
    await router.engine.shutdown();
    const r = await held;
    expect(r.status).toBe(503);
    expect(router.heldRequests(LLM)).toBe(0);
  });

  it('refuses bad options', async () => {
    cluster = new MockCluster();
    const base = { ...cluster.routerRoles(), routingTable: new MemoryRoutingTable(), namespace: NS };
    await expect(startRouterCore({ ...base, queueTimeoutMs: -1 })).rejects.toMatchObject({ code: 'invalid_argument', message: expect.stringContaining('queueTimeoutMs') });
    await expect(startRouterCore({ ...base, queueTimeoutMs: 2 ** 31 })).rejects.toMatchObject({ code: 'invalid_argument' });
    await expect(startRouterCore({ ...base, maxHeldRequests: 1.5 })).rejects.toMatchObject({ code: 'invalid_argument', message: expect.stringContaining('maxHeldRequests') });
  });
});
