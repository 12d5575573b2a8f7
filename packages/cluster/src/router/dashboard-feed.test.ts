/**
 * The dashboard's feed over the memory twins with real worker nodes and a real router core: workers
 * joining and leaving, a routing decision with its overlap and cost, TTFT and ITL, load samples, and
 * the planners' decisions from the event plane (hostile ones dropped and counted).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { MemoryRoutingTable } from '@switchyard/kv-router';
import { compileSamplingParams } from '@switchyard/llm';
import { MemoryEventPlane, componentName, namespace, plannerDecisionsSubject } from '@switchyard/runtime';
import { PLANNER_COMPONENT, type WirePlannerDecision } from '../protocols.js';
import { DashboardFeed, MAX_DASHBOARD_WORKERS } from './dashboard-feed.js';
import { DashboardState } from './dashboard-state.js';
import type { ModelRegistry } from './model-registry.js';
import { type RouterCore, startRouterCore } from './router-core.js';
import { silentLogger } from '@switchyard/common';
import { LLM, MockCluster, NS, waitFor } from './test-support/mock-cluster.js';

let cluster: MockCluster | undefined;
let router: RouterCore | undefined;
afterEach(async () => {
  await router?.close();
  await cluster?.close();
  router = cluster = undefined;
});

const decision = (over: Partial<WirePlannerDecision> = {}): WirePlannerDecision => ({
  v: 1,
  plannerId: 'host-1-abc',
  model: LLM,
  ts: 1_700_000_000_000,
  pool: 'decode',
  from: 1,
  to: 2,
  direction: 'up',
  reason: 'kv_usage_high',
  dryRun: true,
  ...over,
});

describe('DashboardFeed', () => {
  it('follows workers, routing decisions, figures and the planners', async () => {
    cluster = new MockCluster();
    const a = await cluster.addWorker();
    router = await startRouterCore({ ...cluster.routerRoles(), routingTable: new MemoryRoutingTable(), namespace: NS, routerId: 'dash1' });
    const feed = router.dashboard;
    await waitFor(() => feed.snapshot().workers.length === 1, 5000, 'the first worker');
    const v0 = feed.version;
    const b = await cluster.addWorker();
    await waitFor(() => feed.snapshot().workers.length === 2, 5000, 'the second worker');
    expect(feed.version).toBeGreaterThan(v0);
    let snap = feed.snapshot();
    expect(snap).toMatchObject({ routerId: 'dash1', mode: 'kv', namespace: NS });
    expect(snap.workers.map((w) => [w.instanceId, w.model, w.kind, w.role]).sort()).toEqual(
      [
        [a.node.instanceId, LLM, 'llm', 'aggregated'],
        [b.node.instanceId, LLM, 'llm', 'aggregated'],
      ].sort(),
    );
    expect(snap.workerEvents.map((e) => [e.type, e.instanceId])).toContainEqual(['joined', b.node.instanceId]);

    // one request: its decision, arrival, TTFT and ITL
    const llm = router.engine.llmEndpoint(LLM)!;
    const prompt = Array.from({ length: 40 }, (_, i) => 100 + i);
    for await (const _ of llm.generate({ requestId: 'q1', promptTokenIds: prompt, sampling: compileSamplingParams({ temperature: 0, max_tokens: 4, ignore_eos: true }) })) void _;
    snap = feed.snapshot();
    expect(snap.decisions).toHaveLength(1);
    const d = snap.decisions[0]!;
    expect(d).toMatchObject({ model: LLM, pool: 'decode', mode: 'kv', overlapBlocks: 0, candidates: 2, promptTokens: 40, fallback: false });
    expect([a.node.instanceId, b.node.instanceId]).toContain(d.instanceId);
    // 40 tokens, block size 16, nothing cached, nothing active: (3 prefill blocks) + 3 decode blocks
    expect(d.cost).toBeGreaterThan(0);
    expect(snap.workers.find((w) => w.instanceId === d.instanceId)!.decisions).toBe(1);
    // the request's arrival, first token and later tokens fall in the current 5 s bucket, or the one
    // before when a boundary passed while it ran (a busy machine made that happen in CI)
    const recent = snap.series.slice(-2);
    expect(recent.some((p) => p.rate > 0)).toBe(true);
    expect(recent.some((p) => p.ttftP50 !== null)).toBe(true);
    expect(recent.some((p) => p.itlP50 !== null)).toBe(true);
    // the workers' load samples arrive: a changed one within 20 ms here, an unchanged one within 200 ms
    // (the heartbeat; a worker that started before the router and served nothing sends no other)
    await waitFor(() => feed.snapshot().workers.every((w) => w.load !== null), 5000, 'load samples');
    expect(feed.snapshot().workers[0]!.load).toMatchObject({ running: expect.any(Number), waiting: expect.any(Number), kvUsage: expect.any(Number) });

    // planners' decisions from the event plane; undecodable ones dropped and counted
    const planner = new MemoryEventPlane(cluster.events);
    const subject = plannerDecisionsSubject(namespace(NS), componentName(PLANNER_COMPONENT));
    const v1 = feed.version;
    await planner.publish(subject, { ...decision(), pool: 'everything' });
    await planner.publish(subject, { ...decision(), reason: 'x\u0000' });
    await planner.publish(subject, decision());
    await planner.publish(subject, decision({ pool: 'prefill', direction: 'hold', from: 1, to: 1, reason: 'no_load_samples' }));
    await waitFor(() => feed.snapshot().plannerDecisions.length === 2, 5000, 'the planner decisions');
    expect(feed.snapshot().plannerDecisions.map((p) => [p.pool, p.from, p.to, p.reason, p.dryRun])).toEqual([
      ['prefill', 1, 1, 'no_load_samples', true],
      ['decode', 1, 2, 'kv_usage_high', true],
    ]);
    expect(feed.invalid).toBe(2);
    expect(feed.version).toBeGreaterThan(v1);

    // a worker leaves
    await b.close();
    await waitFor(() => feed.snapshot().workers.length === 1, 5000, 'the worker leaving');
    expect(feed.snapshot().workerEvents[0]).toMatchObject({ type: 'left', instanceId: b.node.instanceId, model: LLM });
    // nothing in a snapshot names a server or a credential
    expect(JSON.stringify(feed.snapshot())).not.toMatch(/:\/\/|password|token=/i);
  });
});

describe('DashboardFeed bounds', () => {
  it('lists at most MAX_DASHBOARD_WORKERS workers in a snapshot and counts the rest', async () => {
    const instances = new Map(Array.from({ length: MAX_DASHBOARD_WORKERS + 88 }, (_, i) => [i.toString(16).padStart(16, '0'), {}]));
    const registry = { list: () => [{ name: 'big', kind: 'tensor', instances }], onChange: () => () => undefined } as unknown as ModelRegistry;
    const events = new MemoryEventPlane(new MockCluster().events);
    const feed = new DashboardFeed({
      state: new DashboardState(),
      registry,
      eventPlane: events,
      namespace: namespace(NS),
      routerId: 'b1',
      mode: 'kv',
      loadOf: () => undefined,
      decisionsOf: () => 0,
      logger: silentLogger,
    });
    const snap = feed.snapshot();
    expect(snap.workers).toHaveLength(MAX_DASHBOARD_WORKERS);
    expect(snap.workersTotal).toBe(MAX_DASHBOARD_WORKERS + 88);
    expect(snap.workers[0]).toMatchObject({ model: 'big', kind: 'tensor', role: 'tensor', load: null });
    await feed.close();
  });
});
