/**
 * KServe requests to an LLM through the router (HTTP generate / generate_stream, ClusterEngine.infer)
 * are routed by the same KV-aware chooser as the OpenAI path: reserved, counted, released.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { internal } from '@switchyard/common';
import { MemoryRoutingTable } from '@switchyard/kv-router';
import { serializeBytesElements } from '@switchyard/kserve';
import { type HttpFrontDoor, ServerSettings, SharedMemoryManager, createHttpServer } from '@switchyard/server';
import { type RouterCore, startRouterCore } from './router-core.js';
import type { RouterMode } from './router-stats.js';
import { LLM, MockCluster, type MockWorker, NS, SteeredRoutingTable, waitFor } from './test-support/mock-cluster.js';

let cluster: MockCluster | undefined;
let router: RouterCore | undefined;
let door: HttpFrontDoor | undefined;
let workers: MockWorker[] = [];
afterEach(async () => {
  await door?.close();
  await router?.close();
  await cluster?.close();
  door = undefined;
  router = undefined;
  cluster = undefined;
});

async function start(mode: RouterMode, options: { kvEvents?: boolean; speedup?: number } = {}, table = new MemoryRoutingTable()): Promise<{ router: RouterCore; table: MemoryRoutingTable; base: string }> {
  cluster = new MockCluster();
  workers = [await cluster.addWorker(options), await cluster.addWorker(options)];
  router = await startRouterCore({ ...cluster.routerRoles(), routingTable: table, namespace: NS, mode, routerId: 'k1' });
  await waitFor(() => router!.registry.model(LLM)?.instances.size === 2, 5000, 'two LLM instances');
  door = createHttpServer({ engine: router.engine, shm: new SharedMemoryManager({ enabled: false }), settings: new ServerSettings(), port: 0, host: '127.0.0.1' });
  return { router, table, base: `http://127.0.0.1:${await door.listen()}` };
}

function decisionsOf(r: RouterCore): Map<string, number> {
  return new Map(r.stats().workers.map((w) => [w.worker, w.decisions]));
}
function chosenSince(r: RouterCore, before: Map<string, number>): string {
  const changed = [...decisionsOf(r)].filter(([w, n]) => n !== (before.get(w) ?? 0));
  expect(changed).toHaveLength(1);
  return changed[0]![0];
}

/** A prompt long enough for several 16-token blocks, different per seed. */
const text = (seed: number): string =>
  Array.from({ length: 90 }, (_, i) => ['alpha', 'bravo', 'charlie', 'delta', 'echo', 'foxtrot', 'golf', 'hotel', 'india'][(seed * 5 + i * 7) % 9]).join(' ') + ` seed ${seed}`;

async function generate(base: string, prompt: string, stream = false): Promise<{ cached: number; body: string }> {
  const r = await fetch(`${base}/v2/models/${LLM}/${stream ? 'generate_stream' : 'generate'}`, {
    method: 'POST',
    body: JSON.stringify({ text_input: prompt, parameters: { max_tokens: 4, temperature: 0 } }),
  });
  const body = await r.text();
  expect(r.status, body).toBe(200);
  const m = /"cached_tokens"\s*:\s*(\d+)/.exec(body);
  return { cached: m === null ? -1 : Number(m[1]), body };
}

async function expectReleased(table: MemoryRoutingTable): Promise<void> {
  await waitFor(async () => (await table.loads(Date.now())).size === 0, 2000, 'reservations released');
}

describe('ClusterEngine: KServe LLM requests use the KV-aware router', () => {
  it('kv mode: a repeated generate prompt lands on the worker that cached it; reservations are released', async () => {
    const { router, table, base } = await start('kv');
    for (let p = 0; p < 3; p++) {
      let before = decisionsOf(router);
      const counts = new Map<string, number>();
      for (const id of router.registry.model(LLM)!.instances.keys()) counts.set(`${id}/${LLM}`, await table.blockCount(`${id}/${LLM}`));
      await generate(base, text(p), p === 1);
      const first = chosenSince(router, before);
      await waitFor(async () => (await table.blockCount(first)) >= counts.get(first)! + 4, 5000, 'KV events applied');
      before = decisionsOf(router);
      const again = await generate(base, text(p), p === 2);
      expect(chosenSince(router, before)).toBe(first);
      expect(again.cached).toBeGreaterThanOrEqual(48);
      await expectReleased(table);
    }
    expect(router.stats().decisionsByMode.kv).toBe(6);

    // the engine's own infer (the gRPC doors' path) is routed the same way
    const before = decisionsOf(router);
    const response = await router.engine.infer({
      id: 'grpc-like',
      modelName: LLM,
      modelVersion: undefined,
      parameters: { max_tokens: 3 },
      inputs: [{ name: 'text_input', datatype: 'BYTES', shape: [1], data: serializeBytesElements([new TextEncoder().encode(text(0))]), parameters: {} }],
      outputs: [],
    });
    expect(response.parameters['cached_tokens']).toBeGreaterThanOrEqual(48);
    // the router tokenized the prompt as the worker did
    expect(response.parameters['prompt_tokens']).toBe(router.registry.model(LLM)!.text!.tokenizer.encode(text(0), { addSpecialTokens: true }).length);
    chosenSince(router, before);
    expect(router.stats().decisionsByMode.kv).toBe(7);
    await expectReleased(table);
  });

  it('round-robin alternates KServe generate requests between the workers', async () => {
    const { router, table, base } = await start('round-robin');
    const chosen: string[] = [];
    for (let i = 0; i < 4; i++) {
      const before = decisionsOf(router);
      await generate(base, text(7));
      chosen.push(chosenSince(router, before));
    }
    expect(chosen[0]).not.toBe(chosen[1]);
    expect(chosen).toEqual([chosen[0], chosen[1], chosen[0], chosen[1]]);
    expect(router.stats().decisionsByMode['round-robin']).toBe(4);
    await expectReleased(table);
  });

  it('generate_stream ended by a stop string reports the prompt tokens in its final event', async () => {
    const { router, base } = await start('kv');
    // the mocker samples pseudo-random tokens: within 40 of them one of these shows up
    const r = await fetch(`${base}/v2/models/${LLM}/generate_stream`, {
      method: 'POST',
      body: JSON.stringify({ text_input: text(3), parameters: { max_tokens: 40, stop: JSON.stringify(['e', 'a', 'o', 't', 'i', 'n', ' ']) } }),
    });
    const events = (await r.text()).split('\n').filter((l) => l.startsWith('data: ')).map((l) => JSON.parse(l.slice(6)) as Record<string, unknown>);
    expect(events.at(-1)).toMatchObject({
      finish_reason: 'stop',
      prompt_tokens: router.registry.model(LLM)!.text!.tokenizer.encode(text(3), { addSpecialTokens: true }).length,
    });
  });

  it("round-robin: a generate_stream reaches its worker before the table answers (the routed endpoint's path); the table's failure to decide fails the request as before", async () => {
    const table = new SteeredRoutingTable();
    table.hold = true;
    const { held } = table;
    const { router, base } = await start('round-robin', { speedup: 2 }, table);
    const r = await fetch(`${base}/v2/models/${LLM}/generate_stream`, { method: 'POST', body: JSON.stringify({ text_input: text(2), parameters: { max_tokens: 4, temperature: 0 } }) });
    expect(r.status).toBe(200);
    const reader = r.body!.getReader();
    const read = await Promise.race([reader.read(), new Promise<never>((_, reject) => setTimeout(() => reject(new Error('no event before the table answered')), 5000))]);
    const first = new TextDecoder().decode(read.value);
    expect(first).toContain('text_output');
    expect(held).toHaveLength(1);
    expect(router.stats().decisionsByMode['round-robin'] ?? 0).toBe(0);
    held.shift()!();
    while (!(await reader.read()).done);
    expect(router.stats().decisionsByMode['round-robin']).toBe(1);
    await expectReleased(table);

    table.failure = internal('the routing script failed');
    const bad = await fetch(`${base}/v2/models/${LLM}/generate`, { method: 'POST', body: JSON.stringify({ text_input: text(3), parameters: { max_tokens: 4, temperature: 0 } }) });
    expect(bad.status).toBe(500);
    expect(await bad.text()).toContain('the routing script failed');
  });

  it('releases the reservation of a request the worker rejects (its error passes through)', async () => {
    const { router, table, base } = await start('kv');
    const r = await fetch(`${base}/v2/models/${LLM}/generate`, {
      method: 'POST',
      body: JSON.stringify({ text_input: text(1), parameters: { max_tokens: 4, temperature: -3 } }),
    });
    expect(r.status).toBeGreaterThanOrEqual(400);
    expect(router.stats().decisionsByMode.kv).toBe(1);
    await expectReleased(table);
  });

  it('a client that closes its generate_stream stops the generation on the worker and releases the reservation', async () => {
    const { table, base } = await start('kv', { speedup: 2 });
    const running = (): number => workers.reduce((n, w) => n + w.engine.llmEndpoint(LLM)!.metrics().numRunning, 0);
    const generated = (): number => workers.reduce((n, w) => n + w.engine.llmEndpoint(LLM)!.metrics().generationTokens, 0);
    const ctrl = new AbortController();
    const r = await fetch(`${base}/v2/models/${LLM}/generate_stream`, {
      method: 'POST',
      body: JSON.stringify({ text_input: 'cancel me, please', parameters: { stream: true, max_tokens: 250, ignore_eos: true } }),
      signal: ctrl.signal,
    });
    let events = 0;
    try {
      for await (const chunk of r.body!) {
        events += new TextDecoder().decode(chunk as Uint8Array).split('data: ').length - 1;
        if (events >= 3) ctrl.abort();
      }
    } catch {
      // the aborted body throws
    }
    expect(events).toBeGreaterThanOrEqual(3);
    await waitFor(() => running() === 0, 3000, 'the generation stopped on the worker');
    expect(generated()).toBeLessThan(250);
    await expectReleased(table);
  });

  it('a prompt whose byte length proves it cannot fit is refused by the router before tokenizing, never forwarded', async () => {
    const { router } = await start('kv');
    const endpoint = router.engine.llmEndpoint!(LLM)!;
    const bound = endpoint.tokenizer.maxTokenBytes!;
    const contextLength = endpoint.card.contextLength;
    expect(bound).toBeGreaterThan(0);
    const prompt = 'x'.repeat(contextLength * bound * 4);
    const began = performance.now();
    const res = await router.engine.infer({
      id: 'long',
      modelName: LLM,
      modelVersion: undefined,
      parameters: {},
      inputs: [{ name: 'text_input', datatype: 'BYTES', shape: [1], data: serializeBytesElements([new TextEncoder().encode(prompt)]), parameters: {} }],
      outputs: [],
    }).then(() => undefined, (e: unknown) => e as Error & { code?: string });
    expect(res?.code).toBe('invalid_argument');
    expect(res?.message).toBe(
      `This model's maximum context length is ${contextLength} tokens. However, your request has at least ${contextLength * 4} input tokens. Please reduce the length of the input messages.`,
    );
    expect(performance.now() - began).toBeLessThan(2000);
    expect(router.stats().decisionsByMode.kv ?? 0).toBe(0);
  });
});
