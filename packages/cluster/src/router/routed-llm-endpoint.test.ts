import { afterEach, describe, expect, it } from 'vitest';
import { type CancelSignal, SwitchyardError, internal, unavailable } from '@switchyard/common';
import { MemoryRoutingTable } from '@switchyard/kv-router';
import { type GenerateOutput, type LlmEndpoint, compileSamplingParams } from '@switchyard/llm';
import { type JsonValue, type MemoryDiscovery, type ModelCard, endpointAddress, instanceAddress, modelKey, modelName, namespace } from '@switchyard/runtime';
import { type RouterCore, type RouterCoreOptions, startRouterCore } from './router-core.js';
import type { RouterMode } from './router-stats.js';
import { LLM, MockCluster, type MockWorker, NS, SteeredRoutingTable, waitFor } from './test-support/mock-cluster.js';

let cluster: MockCluster;
let router: RouterCore | undefined;
afterEach(async () => {
  await router?.close();
  router = undefined;
  await cluster?.close();
});

async function start(
  mode: RouterMode,
  table = new MemoryRoutingTable(),
  extra: Partial<RouterCoreOptions> = {},
): Promise<{ router: RouterCore; table: MemoryRoutingTable; llm: LlmEndpoint }> {
  router = await startRouterCore({ ...cluster.routerRoles(), routingTable: table, namespace: NS, mode, routerId: 'r1', ...extra });
  await waitFor(() => router!.engine.llmEndpoint(LLM) !== undefined, 5000, 'the LLM');
  return { router, table, llm: router.engine.llmEndpoint(LLM)! };
}

/** Run a generation to the end: its tokens and its final output. */
async function run(llm: LlmEndpoint, requestId: string, prompt: number[], maxTokens: number, onOutput?: (n: number) => void | Promise<void>) {
  const tokens: number[] = [];
  let last: GenerateOutput | undefined;
  const sampling = compileSamplingParams({ temperature: 0, max_tokens: maxTokens, ignore_eos: true });
  for await (const out of llm.generate({ requestId, promptTokenIds: prompt, sampling })) {
    tokens.push(...out.tokenIds);
    last = out;
    await onOutput?.(tokens.length);
  }
  return { tokens, last: last! };
}

/** Which worker the router chose for the last request (from the per-worker decision counters). */
function decisionsOf(r: RouterCore): Map<string, number> {
  return new Map(r.stats().workers.map((w) => [w.worker, w.decisions]));
}
function chosenSince(r: RouterCore, before: Map<string, number>): string {
  const changed = [...decisionsOf(r)].filter(([w, n]) => n !== (before.get(w) ?? 0));
  expect(changed).toHaveLength(1);
  return changed[0]![0];
}

const prompt = (seed: number, n = 64): number[] => Array.from({ length: n }, (_, i) => 100 + ((seed * 31 + i * 7) % 200));

describe('RoutedLlmEndpoint', () => {
  it("carries the workers' generation-config defaults on its card; generationConfig 'vllm' drops them", async () => {
    cluster = new MockCluster();
    await cluster.addWorker({ generationConfig: JSON.stringify({ eos_token_id: [5, 6], temperature: 0.5, top_k: 50, max_new_tokens: 7 }) });
    const { llm } = await start('kv');
    // the mocker generates to max_tokens (no end ids); top_k 50 is Hugging Face's default, not the model's
    expect(llm.card.samplingDefaults).toEqual({ temperature: 0.5, max_tokens: 7 });
    await router!.close();
    const neutral = await start('kv', new MemoryRoutingTable(), { generationConfig: 'vllm' });
    expect(neutral.llm.card.samplingDefaults).toBeUndefined();
  });

  it('kv mode sends a repeated prompt to the worker that cached it (real KV events)', async () => {
    cluster = new MockCluster();
    await cluster.addWorker();
    await cluster.addWorker();
    const { router, table, llm } = await start('kv');
    await waitFor(() => llm.card !== undefined && router.registry.model(LLM)!.instances.size === 2);
    for (let p = 0; p < 4; p++) {
      let before = decisionsOf(router);
      const counts = new Map<string, number>();
      for (const id of router.registry.model(LLM)!.instances.keys()) counts.set(`${id}/${LLM}`, await table.blockCount(`${id}/${LLM}`));
      await run(llm, `first-${p}`, prompt(p), 4);
      const first = chosenSince(router, before);
      // the worker's stored events (4 full prompt blocks) reach the table through the event plane
      await waitFor(async () => (await table.blockCount(first)) >= counts.get(first)! + 4, 5000, 'KV events applied');
      before = decisionsOf(router);
      const again = await run(llm, `again-${p}`, prompt(p), 4);
      expect(chosenSince(router, before)).toBe(first);
      expect(again.last.usage!.cachedTokens).toBeGreaterThanOrEqual(48);
    }
    const s = router.stats();
    expect(s.kvEvents.applied).toBeGreaterThan(0);
    expect(s.decisionsByMode.kv).toBe(8);
    expect(s.approximateModels).toEqual([]);
  });

  it('approximate mode: workers without KV events get repeats routed by the router\'s own decisions, loudly', async () => {
    cluster = new MockCluster();
    await cluster.addWorker({ kvEvents: false });
    await cluster.addWorker({ kvEvents: false });
    const { router, table, llm } = await start('kv');
    await waitFor(() => router.registry.model(LLM)!.instances.size === 2);
    for (let p = 0; p < 3; p++) {
      let before = decisionsOf(router);
      await run(llm, `approx-first-${p}`, prompt(p), 4);
      const first = chosenSince(router, before);
      expect(await table.blockCount(first)).toBeGreaterThanOrEqual(4); // recorded by the decision, not by events
      before = decisionsOf(router);
      await run(llm, `approx-again-${p}`, prompt(p), 4);
      expect(chosenSince(router, before)).toBe(first);
    }
    const s = router.stats();
    expect(s.approximateModels).toEqual([LLM]);
    expect(s.kvEvents.applied).toBe(0);
  });

  it('round-robin alternates between the workers', async () => {
    cluster = new MockCluster();
    await cluster.addWorker();
    await cluster.addWorker();
    const { router, llm } = await start('round-robin');
    await waitFor(() => router.registry.model(LLM)!.instances.size === 2);
    const chosen: string[] = [];
    for (let i = 0; i < 4; i++) {
      const before = decisionsOf(router);
      await run(llm, `rr-${i}`, prompt(7), 2); // the same prompt: kv mode would stick to one worker
      chosen.push(chosenSince(router, before));
    }
    expect(chosen[0]).not.toBe(chosen[1]);
    expect(chosen).toEqual([chosen[0], chosen[1], chosen[0], chosen[1]]);
  });

  it('migrates a stream whose worker dies: exactly max_tokens tokens, identical to a run without failure (greedy)', async () => {
    cluster = new MockCluster();
    const workers = [await cluster.addWorker({ speedup: 5 }), await cluster.addWorker({ speedup: 5 })];
    const { router, llm } = await start('kv');
    await waitFor(() => router.registry.model(LLM)!.instances.size === 2);
    const p = prompt(3, 40);
    const baseline = await run(llm, 'mig', p, 40);
    expect(baseline.tokens).toHaveLength(40);

    const before = decisionsOf(router);
    let crashed = false;
    const migrated = await run(llm, 'mig', p, 40, (n) => {
      if (crashed || n < 10) return;
      crashed = true;
      const victim = chosenSince(router, before);
      workers.find((w) => victim.startsWith(w.node.instanceId))!.crash();
    });
    expect(crashed).toBe(true);
    expect(migrated.tokens).toEqual(baseline.tokens);
    expect(migrated.last.finishReason).toBe('length');
    expect(migrated.last.usage).toMatchObject({ promptTokens: 40, completionTokens: 40 });
    expect(router.stats().migrations.ongoing_request).toBe(1);
  });

  it('aborts the in-flight stream of an instance that leaves discovery and migrates it at once', async () => {
    cluster = new MockCluster();
    // a stuck worker: three tokens, then silence (no idle timeout in the memory twin: without the
    // abort on removal this request would hang)
    const stuck = cluster.store.connect();
    const plane = cluster.routerRoles().requestPlane;
    const address = instanceAddress(endpointAddress(NS, 'backend', 'generate'), stuck.instanceId);
    let stuckSignal: CancelSignal | undefined;
    await plane.serve(address, async function* (_payload, ctx) {
      stuckSignal = ctx.signal;
      yield { tokenIds: [1, 2, 3], finishReason: null, stopReason: null } as unknown as JsonValue;
      await new Promise(() => {});
    });
    const real = await cluster.addWorker();
    await copyCard(cluster.store.snapshot(), real.node.instanceId, stuck);
    await real.node.drain(); // only the stuck worker serves at first
    const { router, llm } = await start('kv');
    await waitFor(() => [...(router.registry.model(LLM)?.instances.keys() ?? [])].join() === stuck.instanceId, 5000, 'stuck worker only');

    let other: MockWorker | undefined;
    const t0 = Date.now();
    const result = await run(llm, 'gone-1', prompt(5, 20), 12, async (n) => {
      if (n !== 3) return;
      other = await cluster.addWorker(); // joins only now: the first attempt had the stuck worker alone
      await waitFor(() => router.registry.model(LLM)!.instances.size === 2, 5000, 'second worker');
      stuck.expireLease();
    });
    expect(Date.now() - t0).toBeLessThan(5000);
    expect(result.tokens.slice(0, 3)).toEqual([1, 2, 3]);
    expect(result.tokens).toHaveLength(12);
    expect(result.last.usage).toMatchObject({ promptTokens: 20, completionTokens: 12 });
    expect(stuckSignal?.aborted).toBe(true); // the router cancelled it on the stuck worker
    const s = router.stats();
    expect(s.instanceRemovalAborts).toBe(1);
    expect(s.migrations.ongoing_request).toBe(1);
    expect(s.workers.find((w) => w.worker.startsWith(other!.node.instanceId))?.decisions).toBe(1);
  });

  it('lets the in-flight stream of a draining worker finish: health probe answers, no abort, no migration', async () => {
    cluster = new MockCluster();
    const workers = [await cluster.addWorker({ speedup: 5 }), await cluster.addWorker({ speedup: 5 })];
    // count the router's finished health probes (the removal must be probed before the stream ends)
    const roles = cluster.routerRoles();
    let probed = 0;
    const plane = roles.requestPlane;
    const request = plane.request.bind(plane);
    plane.request = (target, payload, options) => {
      const it = request(target, payload, options);
      if (target.endpoint !== 'health') return it;
      return (async function* () {
        try {
          yield* it;
        } finally {
          probed++;
        }
      })();
    };
    router = await startRouterCore({ ...roles, routingTable: new MemoryRoutingTable(), namespace: NS, mode: 'kv', routerId: 'r1' });
    const llm = router.engine.llmEndpoint(LLM)!;
    await waitFor(() => router!.registry.model(LLM)?.instances.size === 2);
    const p = prompt(4, 40);
    const baseline = await run(llm, 'drain-1', p, 60);
    const before = decisionsOf(router);
    let drained: Promise<void> | undefined;
    let victim: MockWorker | undefined;
    const result = await run(llm, 'drain-1', p, 60, async (n) => {
      if (drained !== undefined || n < 5) return;
      const chosen = chosenSince(router!, before);
      victim = workers.find((w) => chosen.startsWith(w.node.instanceId))!;
      drained = victim.node.drain();
      await waitFor(() => router!.registry.model(LLM)!.instances.size === 1 && probed >= 1, 5000, 'removal seen and probed');
      expect(victim.node.state).toBe('draining');
    });
    await drained;
    expect(result.tokens).toEqual(baseline.tokens);
    expect(result.last.usage).toMatchObject({ completionTokens: 60 });
    const s = router.stats();
    expect(s.instanceRemovalAborts).toBe(0);
    expect(s.migrations).toEqual({ new_request: 0, ongoing_request: 0 });
    // no longer routed to: the next request goes to the other worker
    const next = decisionsOf(router);
    await run(llm, 'drain-2', p, 2);
    expect(chosenSince(router, next).startsWith(victim!.node.instanceId)).toBe(false);
  });

  it('stall probe: a silent stream whose instance is dead migrates before the lease expires; a live one is left alone', async () => {
    cluster = new MockCluster();
    // fake workers: three tokens, then silence until `release`; `dead` serves no health endpoint
    const serveFake = async (withHealth: boolean) => {
      const d = cluster.store.connect();
      const plane = cluster.routerRoles().requestPlane;
      let release!: () => void;
      const released = new Promise<void>((r) => (release = r));
      let healthAnswers = 0;
      await plane.serve(instanceAddress(endpointAddress(NS, 'backend', 'generate'), d.instanceId), async function* (payload) {
        const max = ((payload as { sampling: { max_tokens: number } }).sampling.max_tokens);
        yield { tokenIds: [1, 2, 3], finishReason: null, stopReason: null } as unknown as JsonValue;
        await released;
        yield { tokenIds: Array.from({ length: max - 3 }, (_, i) => 4 + i), finishReason: 'length', stopReason: null } as unknown as JsonValue;
      });
      if (withHealth) {
        await plane.serve(instanceAddress(endpointAddress(NS, 'backend', 'health'), d.instanceId), async function* () {
          healthAnswers++;
          yield { state: 'serving' };
        });
      }
      return { discovery: d, release, healthAnswers: () => healthAnswers };
    };
    const real = await cluster.addWorker();
    const card = cluster.store.snapshot();
    await real.node.drain(); // only the fakes serve
    const onlyInstance = () => [...(router!.registry.model(LLM)?.instances.keys() ?? [])].join();

    // alive: silent for several probe periods, answers its probes, then finishes: no abort
    const slow = await serveFake(true);
    await copyCard(card, real.node.instanceId, slow.discovery);
    const { router, llm } = await start('kv', new MemoryRoutingTable(), { stallProbeMs: 100 });
    await waitFor(() => onlyInstance() === slow.discovery.instanceId, 5000, 'slow fake only');
    const slowRun = run(llm, 'stall-1', prompt(8, 20), 10);
    await waitFor(() => slow.healthAnswers() >= 3, 5000, 'three answered probes');
    slow.release();
    const ok = await slowRun;
    expect(ok.tokens).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    expect(router.stats().stallProbeAborts).toBe(0);
    expect(router.stats().migrations).toEqual({ new_request: 0, ongoing_request: 0 });
    slow.discovery.expireLease();

    // dead: the lease lives on (no removal), the stall probe finds nobody and migrates
    const dead = await serveFake(false);
    await copyCard(card, real.node.instanceId, dead.discovery);
    await waitFor(() => onlyInstance() === dead.discovery.instanceId, 5000, 'dead fake only');
    const t0 = Date.now();
    const migrated = await run(llm, 'stall-2', prompt(6, 20), 12, async (n) => {
      if (n !== 3) return;
      await cluster.addWorker();
      await waitFor(() => router.registry.model(LLM)!.instances.size === 2, 5000, 'second worker');
    });
    expect(Date.now() - t0).toBeLessThan(5000);
    expect(migrated.tokens.slice(0, 3)).toEqual([1, 2, 3]);
    expect(migrated.tokens).toHaveLength(12);
    const s = router.stats();
    expect(s.stallProbeAborts).toBe(1);
    expect(s.instanceRemovalAborts).toBe(0);
    expect(s.migrations.ongoing_request).toBe(1);
    expect(router.registry.model(LLM)!.instances.has(dead.discovery.instanceId)).toBe(true); // lease still alive
  });

  it('routes round-robin without the routing table while it is unavailable (Redis down), and with it again after', async () => {
    cluster = new MockCluster();
    await cluster.addWorker();
    await cluster.addWorker();
    const table = new SteeredRoutingTable();
    const { router, llm } = await start('kv', table);
    await waitFor(() => router.registry.model(LLM)!.instances.size === 2);
    table.failure = unavailable('Redis is down');
    const chosen: string[] = [];
    for (let i = 0; i < 4; i++) {
      const before = decisionsOf(router);
      const r = await run(llm, `down-${i}`, prompt(9), 3);
      expect(r.tokens).toHaveLength(3);
      chosen.push(chosenSince(router, before));
    }
    expect(chosen).toEqual([chosen[0], chosen[1], chosen[0], chosen[1]]);
    expect(chosen[0]).not.toBe(chosen[1]);
    expect(router.stats().tableFallbacks).toBe(4);
    table.failure = undefined;
    await run(llm, 'up', prompt(9), 3);
    expect(router.stats().tableFallbacks).toBe(4);
    expect(router.stats().errors).toBe(0);
  });

  it("sends to the only worker of its pool before the table answers, which still matches and reserves it; with a choice to make it waits for the answer", async () => {
    cluster = new MockCluster();
    const only = `${(await cluster.addWorker()).node.instanceId}/${LLM}`;
    // the table reserves at once (the memory twin works synchronously) but its answers are held back
    const table = new SteeredRoutingTable();
    table.hold = true;
    const { held } = table;
    const { router, llm } = await start('kv', table);
    const sampling = compileSamplingParams({ temperature: 0, max_tokens: 3, ignore_eos: true });
    const one = llm.generate({ requestId: 'one', promptTokenIds: prompt(1), sampling })[Symbol.asyncIterator]();
    const first = await Promise.race([one.next(), new Promise<never>((_, reject) => setTimeout(() => reject(new Error('no output before the table answered')), 5000))]);
    expect(first.value.tokenIds.length).toBeGreaterThan(0);
    expect(held).toHaveLength(1);
    expect(router.stats().decisionsByMode.kv ?? 0).toBe(0); // counted once the table answers
    expect((await table.loads(Date.now())).get(only)?.requests).toBe(1);
    held.shift()!();
    let last = first.value as GenerateOutput;
    for (let r = await one.next(); !r.done; r = await one.next()) last = r.value;
    expect(last.finishReason).toBe('length');
    expect(router.stats().decisionsByMode.kv).toBe(1);
    await waitFor(async () => ((await table.loads(Date.now())).get(only)?.requests ?? 0) === 0, 5000, 'the reservation released');

    // two workers: the table chooses, so nothing is sent before its answer
    await cluster.addWorker();
    await waitFor(() => router.registry.model(LLM)!.instances.size === 2);
    let answered = false;
    const two = run(llm, 'two', prompt(2), 3, () => void (answered = true));
    await waitFor(() => held.length === 1, 5000, 'the decision asked');
    await new Promise((r) => setTimeout(r, 200));
    expect(answered).toBe(false);
    held.shift()!();
    expect((await two).tokens).toHaveLength(3);
    expect(router.stats().errors).toBe(0);
  });

  it("fails a request sent before the table's answer with the table's error when it cannot decide (as one that waited for it)", async () => {
    cluster = new MockCluster();
    await cluster.addWorker({ speedup: 5 });
    const table = new SteeredRoutingTable();
    table.failure = internal('the routing script failed');
    const { router, llm } = await start('kv', table);
    const err = await run(llm, 'bad-table', prompt(3), 8).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(SwitchyardError);
    expect((err as SwitchyardError).code).toBe('internal');
    expect((err as SwitchyardError).message).toBe('the routing script failed');
    expect(router.stats().errors).toBe(1);
  });

  it('round-robin without the routing table: each request goes to the worker its decision names', async () => {
    cluster = new MockCluster();
    const workers = [await cluster.addWorker(), await cluster.addWorker()];
    const table = new SteeredRoutingTable();
    const { router, llm } = await start('round-robin', table);
    await waitFor(() => router.registry.model(LLM)!.instances.size === 2);
    // one request while the table is up: the round-robin cursor is one ahead of where it started
    await run(llm, 'rr-up', prompt(4), 2);
    table.failure = unavailable('Redis is down');
    const finished = () => workers.map((w) => Object.values(w.engine.llmEndpoint!(LLM)!.metrics().requestsFinished).reduce((a, b) => a + b, 0));
    const served: string[] = [];
    const chosen: string[] = [];
    for (let i = 0; i < 4; i++) {
      const before = decisionsOf(router);
      const counts = finished();
      await run(llm, `rr-down-${i}`, prompt(4), 2);
      chosen.push(chosenSince(router, before));
      const w = finished().findIndex((n, k) => n !== counts[k]);
      served.push(`${workers[w]!.node.instanceId}/${LLM}`);
    }
    expect(served).toEqual(chosen);
    expect(chosen[0]).not.toBe(chosen[1]);
    expect(router.stats().tableFallbacks).toBe(4);
  });

  it('refuses an empty prompt, passes worker errors through, and ends with finish reason abort on caller abort', async () => {
    cluster = new MockCluster();
    await cluster.addWorker({ speedup: 5 });
    const { router, llm } = await start('least-loaded');
    const sampling = compileSamplingParams({ max_tokens: 4 });
    const drain = async (it: AsyncIterable<GenerateOutput>) => {
      for await (const _ of it);
    };
    await expect(drain(llm.generate({ requestId: 'e1', promptTokenIds: [], sampling }))).rejects.toMatchObject({ code: 'invalid_argument', message: expect.stringContaining('empty') });
    // too long for the context: the worker's invalid_argument comes back unchanged, not migrated
    const err = await drain(llm.generate({ requestId: 'e2', promptTokenIds: prompt(1, 600), sampling })).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(SwitchyardError);
    expect(err).toMatchObject({ code: 'invalid_argument', message: expect.stringContaining('maximum context length is 512') });
    expect(router.stats().migrations).toEqual({ new_request: 0, ongoing_request: 0 });

    const abort = new AbortController();
    const outs: GenerateOutput[] = [];
    for await (const o of llm.generate({ requestId: 'e3', promptTokenIds: prompt(2), sampling: compileSamplingParams({ max_tokens: 200, ignore_eos: true }) }, abort.signal)) {
      outs.push(o);
      if (outs.length === 2) abort.abort();
    }
    expect(outs.at(-1)).toMatchObject({ finishReason: 'abort', usage: { promptTokens: 64 } });
    expect(router.stats().decisionsByMode['least-loaded']).toBe(2);
  });
});

/** Register, under `target`'s lease, a copy of the LLM card `from` registered. */
async function copyCard(snapshot: Map<string, unknown>, from: string, target: MemoryDiscovery): Promise<void> {
  const card = snapshot.get(modelKey(namespace(NS), modelName(LLM), from as never)) as ModelCard;
  await target.registerModel({ ...card, instanceId: target.instanceId });
}
