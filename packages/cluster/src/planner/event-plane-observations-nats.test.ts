/**
 * Integration: the planner's observations over real etcd and NATS JetStream. A worker node (mocker
 * LLM, role decode) and a router core publish on JetStream; an EventPlaneObservationSource with its
 * own connections sees the worker's load and steps in the decode pool and the router's request
 * figures in `collect()`, and drops a garbage message published beside them.
 */
import { rm } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createEngine, type Engine } from '@switchyard/engine';
import { MemoryRoutingTable } from '@switchyard/kv-router';
import { compileSamplingParams } from '@switchyard/llm';
import { distributionCount, distributionQuantile } from '@switchyard/planner';
import { EtcdDiscovery, JetStreamEventPlane, NatsRequestPlane, componentName, namespace, requestFiguresSubject } from '@switchyard/runtime';
import { type EtcdServer, type NatsServer, startEtcd, startNats } from '@switchyard/testing';
import { ROUTER_COMPONENT } from '../protocols.js';
import { type RouterCore, startRouterCore } from '../router/router-core.js';
import { LLM, waitFor, writeRepository } from '../router/test-support/mock-cluster.js';
import { type WorkerNode, startWorkerNode } from '../worker/worker-node.js';
import { EventPlaneObservationSource } from './event-plane-observations.js';

const NS = 'plannerobs';
let etcd: EtcdServer;
let nats: NatsServer;
let repo: string;
let engine: Engine;
let worker: WorkerNode;
let router: RouterCore;
const closers: (() => Promise<unknown>)[] = [];

beforeAll(async () => {
  [etcd, nats] = await Promise.all([startEtcd(), startNats({ jetstream: true })]);
  repo = await writeRepository();
  engine = await createEngine({ modelRepositories: [repo] });
  worker = await startWorkerNode({
    engine,
    discovery: await EtcdDiscovery.connect({ url: etcd.url }),
    requestPlane: await NatsRequestPlane.connect({ url: nats.url }),
    eventPlane: await JetStreamEventPlane.connect({ url: nats.url }),
    namespace: NS,
    role: 'decode',
    loadIntervalMs: 50,
    forwardPassIntervalMs: 100,
  });
  const routerRoles = {
    discovery: await EtcdDiscovery.connect({ url: etcd.url }),
    requestPlane: await NatsRequestPlane.connect({ url: nats.url }),
    eventPlane: await JetStreamEventPlane.connect({ url: nats.url }),
  };
  router = await startRouterCore({ ...routerRoles, routingTable: new MemoryRoutingTable(), namespace: NS, routerId: 'nats-router', requestFiguresIntervalMs: 100 });
  closers.push(() => routerRoles.discovery.close(), () => routerRoles.requestPlane.close(), () => routerRoles.eventPlane.close());
}, 60_000);

afterAll(async () => {
  await router?.close();
  for (const c of closers.splice(0).reverse()) await c().catch(() => {});
  await worker?.close();
  await engine?.shutdown();
  await rm(repo, { recursive: true, force: true });
  await Promise.all([etcd?.stop(), nats?.stop()]);
});

describe('planner observations over etcd + NATS JetStream', () => {
  it("a worker's load and forward-pass steps and a router's request figures arrive in collect(); garbage is dropped", async () => {
    const discovery = await EtcdDiscovery.connect({ url: etcd.url });
    const eventPlane = await JetStreamEventPlane.connect({ url: nats.url });
    closers.push(() => discovery.close(), () => eventPlane.close());
    const source = await EventPlaneObservationSource.start({ eventPlane, discovery, namespace: NS, model: LLM, plannerId: 'nats-planner' });
    closers.push(() => source.close());
    expect(source.collect().pools).toMatchObject({ decode: { replicas: 1 } });

    await eventPlane.publish(requestFiguresSubject(namespace(NS), componentName(ROUTER_COMPONENT)), { v: 1, routerId: 'evil', model: LLM, requests: -5 });
    await waitFor(() => router.engine.llmEndpoint(LLM) !== undefined, 10_000, 'the LLM on the router');
    const llm = router.engine.llmEndpoint(LLM)!;
    const sampling = compileSamplingParams({ temperature: 0, max_tokens: 8, ignore_eos: true });
    await Promise.all(
      [0, 1, 2, 3].map(async (i) => {
        for await (const _ of llm.generate({ requestId: `n${i}`, promptTokenIds: Array.from({ length: 60 + i * 40 }, (_, j) => 7 + ((i + j) % 100)), sampling }));
      }),
    );

    let requests = 0;
    let finished = 0;
    let ttfts = 0;
    let p90Isl: number | undefined;
    let steps = 0;
    let prefillTokens = 0;
    let loads = 0;
    await waitFor(() => {
      const o = source.collect();
      requests += o.requests.requests;
      finished += distributionCount(o.requests.osl);
      ttfts += distributionCount(o.requests.ttftMs);
      p90Isl = distributionQuantile(o.requests.isl, 90) ?? p90Isl;
      const decode = o.pools.decode;
      steps += decode?.forwardPass?.length ?? 0;
      prefillTokens += (decode?.forwardPass ?? []).reduce((a, s) => a + s.prefillTokens, 0);
      loads = Math.max(loads, decode?.load.filter((l) => l.instanceId === worker.instanceId).length ?? 0);
      expect(Object.keys(o.pools)).toEqual(['decode']);
      // 4 prompts computed, and at least 7 decode steps for the 8 tokens of each (shared steps)
      return finished === 4 && prefillTokens >= 60 + 100 + 140 + 180 && steps >= 8 && loads === 1;
    }, 15_000, "the worker's and the router's figures");
    expect(requests).toBe(4);
    expect(ttfts).toBe(4);
    // the longest prompt is 180 tokens: p90 lands in its bucket (re-read from the merged histogram)
    expect(p90Isl).toBeGreaterThan(140);
    expect(p90Isl).toBeLessThanOrEqual(200);
    expect(source.counters()).toMatchObject({ invalid: 1, failures: 0 });
  });
});
