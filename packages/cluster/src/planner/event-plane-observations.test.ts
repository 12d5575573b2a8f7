/**
 * EventPlaneObservationSource over the memory twins: a real worker node (mocker LLM) and a real router
 * core publish; the source follows discovery and the three subjects.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { MemoryRoutingTable } from '@switchyard/kv-router';
import { compileSamplingParams } from '@switchyard/llm';
import { distributionCount } from '@switchyard/planner';
import { MemoryEventPlane, componentName, forwardPassSubject, loadSubject, namespace, requestFiguresSubject } from '@switchyard/runtime';
import { ROUTER_COMPONENT, WORKER_COMPONENT } from '../protocols.js';
import { type RouterCore, startRouterCore } from '../router/router-core.js';
import { LLM, MockCluster, NS, waitFor } from '../router/test-support/mock-cluster.js';
import { EventPlaneObservationSource } from './event-plane-observations.js';

let cluster: MockCluster | undefined;
let router: RouterCore | undefined;
let source: EventPlaneObservationSource | undefined;
afterEach(async () => {
  await source?.close();
  await router?.close();
  await cluster?.close();
  source = router = cluster = undefined;
});

describe('EventPlaneObservationSource (memory twins)', () => {
  it("collects a worker's load and steps and a router's request figures for its model, and drops garbage without stopping", async () => {
    cluster = new MockCluster();
    const worker = await cluster.addWorker();
    router = await startRouterCore({ ...cluster.routerRoles(), routingTable: new MemoryRoutingTable(), namespace: NS, routerId: 'r1', requestFiguresIntervalMs: 50 });
    source = await EventPlaneObservationSource.start({ eventPlane: new MemoryEventPlane(cluster.events), discovery: cluster.store.connect(), namespace: NS, model: LLM, plannerId: 'p1' });
    // hostile and garbage messages on every subject, before and between the real ones
    const garbage = new MemoryEventPlane(cluster.events);
    const ns = namespace(NS);
    const subjects = [loadSubject(ns, componentName(WORKER_COMPONENT)), forwardPassSubject(ns, componentName(WORKER_COMPONENT)), requestFiguresSubject(ns, componentName(ROUTER_COMPONENT))];
    for (const s of subjects) {
      await garbage.publish(s, 'nope');
      await garbage.publish(s, { v: 1, instanceId: 'x', model: LLM, from: 0, to: 1, steps: new Array(5000).fill({}), dropped: 0 });
      await garbage.publish(s, { v: 2 });
    }
    const before = source.collect();
    expect(before.pools.aggregated?.replicas).toBe(1);

    await waitFor(() => router!.engine.llmEndpoint(LLM) !== undefined, 5000, 'the LLM');
    const llm = router.engine.llmEndpoint(LLM)!;
    const sampling = compileSamplingParams({ temperature: 0, max_tokens: 6, ignore_eos: true });
    for (let i = 0; i < 3; i++) for await (const _ of llm.generate({ requestId: `q${i}`, promptTokenIds: Array.from({ length: 50 }, (_, j) => 5 + i + j), sampling }));
    await waitFor(() => source!.counters().forwardPassBatches >= 1 && source!.counters().requestFigures >= 1, 5000, 'figures from the worker and the router');
    await waitFor(() => {
      const c = source!.counters();
      return c.invalid >= 9;
    }, 2000, 'the garbage counted');

    // the router may still be publishing the last finishes: collect until all three are in
    let requests = 0;
    let osl = 0;
    let steps = 0;
    let load: readonly unknown[] = [];
    await waitFor(() => {
      const o = source!.collect();
      requests += o.requests.requests;
      osl += distributionCount(o.requests.osl);
      steps += o.pools.aggregated?.forwardPass?.length ?? 0;
      if (o.pools.aggregated !== undefined) load = o.pools.aggregated.load;
      expect(o.requests.heldRequests).toBe(0);
      expect(Object.keys(o.pools)).toEqual(['aggregated']);
      return osl === 3 && steps >= 3 * 6;
    }, 5000, 'three requests and their steps');
    expect(requests).toBe(3);
    expect(load).toEqual([expect.objectContaining({ instanceId: worker.node.instanceId, kvTotalBlocks: 64 })]);
    expect(source.counters()).toMatchObject({ invalid: 9, failures: 0 });
  });

  it('a worker that drains leaves its pool: its replica and its load go', async () => {
    cluster = new MockCluster();
    const a = await cluster.addWorker();
    await cluster.addWorker();
    source = await EventPlaneObservationSource.start({ eventPlane: new MemoryEventPlane(cluster.events), discovery: cluster.store.connect(), namespace: NS, model: LLM });
    // the source reads new messages only: an idle worker's load comes with its next heartbeat (5 s)
    await waitFor(() => (source!.collect().pools.aggregated?.load.length ?? 0) === 2, 8000, 'both workers load');
    await a.node.drain();
    await waitFor(() => {
      const o = source!.collect();
      return o.pools.aggregated?.replicas === 1 && o.pools.aggregated.load.length === 1;
    }, 5000, 'the drained worker gone from the pool');
  });
});
