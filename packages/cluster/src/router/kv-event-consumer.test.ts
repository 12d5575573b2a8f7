import { afterEach, describe, expect, it } from 'vitest';
import { silentLogger, unavailable } from '@switchyard/common';
import type { WorkerId } from '@switchyard/kv-router';
import { compileSamplingParams, type KvCacheEvent } from '@switchyard/llm';
import { type EventPlane, namespace } from '@switchyard/runtime';
import { KvEventConsumer, type KvIndexerPort } from './kv-event-consumer.js';
import { ModelRegistry } from './model-registry.js';
import { RouterStatsRecorder } from './router-stats.js';
import { LLM, MockCluster, type MockWorker, NS, waitFor } from './test-support/mock-cluster.js';

/** An indexer that records calls; `hold(worker)` makes that worker's resync wait until released. */
class RecordingIndexer implements KvIndexerPort {
  readonly applied = new Map<WorkerId, number>();
  /** Every apply call's event ids, per worker. */
  readonly calls = new Map<WorkerId, number[][]>();
  private readonly held = new Map<WorkerId, Promise<void>>();
  private readonly releases: (() => void)[] = [];

  hold(worker: WorkerId): void {
    this.held.set(worker, new Promise<void>((r) => this.releases.push(r)));
  }
  releaseAll(): void {
    for (const r of this.releases) r();
  }
  async apply(worker: WorkerId, events: readonly KvCacheEvent[]): Promise<unknown> {
    this.applied.set(worker, (this.applied.get(worker) ?? 0) + events.length);
    this.calls.set(worker, [...(this.calls.get(worker) ?? []), events.map((e) => e.event_id)]);
    return { status: 'ok', applied: events.length };
  }
  async resync(worker: WorkerId): Promise<unknown> {
    await this.held.get(worker);
    return undefined;
  }
  async forget(): Promise<unknown> {
    return undefined;
  }
}

async function generateOn(w: MockWorker, seed: number): Promise<void> {
  const llm = w.engine.llmEndpoint(LLM)!;
  const promptTokenIds = Array.from({ length: 64 }, (_, i) => 10 + ((i * 7 + seed) % 200));
  for await (const _ of llm.generate({ requestId: `r${seed}`, promptTokenIds, sampling: compileSamplingParams({ max_tokens: 2, ignore_eos: true }) }));
}

let cluster: MockCluster | undefined;
afterEach(async () => {
  await cluster?.close();
  cluster = undefined;
});

describe('KvEventConsumer', () => {
  it("applies other workers' events while one worker's resync is stuck (workers in parallel, each in order)", async () => {
    cluster = new MockCluster();
    const [a, b] = [await cluster.addWorker(), await cluster.addWorker()];
    const roles = cluster.routerRoles();
    const registry = new ModelRegistry({ discovery: roles.discovery, namespace: namespace(NS), logger: silentLogger });
    const indexer = new RecordingIndexer();
    const workerA = `${a.node.instanceId}/${LLM}`;
    const workerB = `${b.node.instanceId}/${LLM}`;
    indexer.hold(workerA); // A's first-sight resync hangs (a snapshot fetch from a stalled worker)
    const stats = new RouterStatsRecorder();
    const consumer = new KvEventConsumer({
      eventPlane: roles.eventPlane,
      requestPlane: roles.requestPlane,
      registry,
      indexer,
      namespace: namespace(NS),
      routerId: 'r1',
      stats,
      logger: silentLogger,
    });
    try {
      await registry.ready();
      await generateOn(a, 1); // A's batch queues behind its stuck resync...
      await generateOn(b, 2); // ...B's must not
      await waitFor(() => (indexer.applied.get(workerB) ?? 0) > 0, 5000, "B's events applied");
      expect(indexer.applied.get(workerA) ?? 0).toBe(0);
      // more of A's batches while it waits: they join the waiting one (one indexer call, ids in order)
      for (const seed of [3, 4]) {
        await new Promise((r) => setTimeout(r, 30)); // past the worker's publish interval: batches of their own
        await generateOn(a, seed);
      }
      await waitFor(() => stats.kvEvents.batches >= 4, 5000, "A's three batches and B's received");
      indexer.releaseAll();
      await waitFor(() => (indexer.applied.get(workerA) ?? 0) > 0, 5000, "A's events applied after its resync");
      const aCalls = indexer.calls.get(workerA)!;
      expect(aCalls).toHaveLength(1);
      const ids = aCalls[0]!;
      expect(ids.length).toBeGreaterThan(2);
      expect(ids).toEqual(ids.map((_, i) => ids[0]! + i)); // every event once, in order
    } finally {
      indexer.releaseAll();
      await consumer.close();
      await registry.close();
    }
  });

  it('starts a subscription that failed again, and then applies events', async () => {
    cluster = new MockCluster();
    const a = await cluster.addWorker();
    const roles = cluster.routerRoles();
    const registry = new ModelRegistry({ discovery: roles.discovery, namespace: namespace(NS), logger: silentLogger });
    const indexer = new RecordingIndexer();
    // JetStream unavailable when the router starts: every subscription's first try fails
    let failuresLeft = 2;
    const flaky: EventPlane = {
      publish: (subject, payload) => roles.eventPlane.publish(subject, payload),
      subscribe: (options) => {
        if (failuresLeft-- > 0) {
          return {
            [Symbol.asyncIterator]: async function* () {
              throw unavailable('JetStream not ready');
            },
          };
        }
        return roles.eventPlane.subscribe(options);
      },
      close: () => roles.eventPlane.close(),
    };
    const stats = new RouterStatsRecorder();
    const consumer = new KvEventConsumer({
      eventPlane: flaky,
      requestPlane: roles.requestPlane,
      registry,
      indexer,
      namespace: namespace(NS),
      routerId: 'r1',
      stats,
      logger: silentLogger,
    });
    try {
      await registry.ready();
      await waitFor(() => failuresLeft < 0, 5000, 'subscriptions started again');
      await new Promise((r) => setTimeout(r, 100)); // (the retried subscriptions are live)
      await generateOn(a, 1);
      await waitFor(() => (indexer.applied.get(`${a.node.instanceId}/${LLM}`) ?? 0) > 0, 5000, 'events applied after the retry');
      expect(stats.kvEvents.subscriptionFailures).toBe(2);
    } finally {
      await consumer.close();
      await registry.close();
    }
  }, 10_000);
});
