import { afterEach, describe, expect, it } from 'vitest';
import { type InstanceId, namespace } from '@switchyard/runtime';
import { type ModelEntry, ModelRegistry, type RegistryChange, instanceRole, instancesWithRole, isDisaggregated, onlyPrefillWorkers, takesWholeRequests } from './model-registry.js';
import { LLM, MockCluster, NS, TENSOR, waitFor } from './test-support/mock-cluster.js';

let cluster: MockCluster;
let registry: ModelRegistry | undefined;
afterEach(async () => {
  await registry?.close();
  registry = undefined;
  await cluster?.close();
});

describe('ModelRegistry', () => {
  it('follows workers joining and leaving, builds one tokenizer per content, and resyncs after a watch outage', async () => {
    cluster = new MockCluster();
    const a = await cluster.addWorker({ tensor: true });
    registry = new ModelRegistry({ discovery: cluster.store.connect(), namespace: namespace(NS), resyncGraceMs: 50 });
    const changes: RegistryChange[] = [];
    registry.onChange((c) => changes.push(c));
    await registry.ready();

    const llm = registry.model(LLM)!;
    expect(llm.kind).toBe('llm');
    expect([...llm.instances.keys()]).toEqual([a.node.instanceId]);
    expect(llm.card.kvBlockSize).toBe(16);
    expect(llm.llm).toMatchObject({ engine: 'mocker', kvEvents: true });
    expect(llm.text!.tokenizer.encode('Hello world').length).toBeGreaterThan(0);
    expect(llm.text!.chatTemplate).toBeDefined();
    expect(registry.model(TENSOR)!.kind).toBe('tensor');
    expect(registry.model(TENSOR)!.metadata.versions).toEqual(['1']);

    // a second worker of the same model: announced, and the tokenizer is shared (built once)
    const b = await cluster.addWorker();
    await waitFor(() => registry!.model(LLM)!.instances.size === 2, 5000, 'second instance');
    expect(changes).toContainEqual(expect.objectContaining({ type: 'instance-added', model: LLM, instanceId: b.node.instanceId }));
    expect(registry.model(LLM)!.text).toBe(llm.text);
    expect(registry.counters().tokenizerBuilds).toBe(1);

    // the oldest instance dies (lease expiry): removed at once, the model card falls back to b's
    a.crash();
    a.discovery.expireLease();
    await waitFor(() => registry!.model(LLM)!.instances.size === 1, 5000, 'instance removal');
    expect(changes).toContainEqual(expect.objectContaining({ type: 'instance-removed', model: LLM, instanceId: a.node.instanceId }));
    expect(registry.model(LLM)!.card.instanceId).toBe(b.node.instanceId);
    expect(registry.model(TENSOR)).toBeUndefined(); // only a served it

    // watch outage: b leaves unseen; the reconnect's resync removes it (after the grace) and says synced again
    cluster.store.disconnectWatches();
    await b.node.drain();
    expect(registry.model(LLM)).toBeDefined();
    const syncedBefore = changes.filter((c) => c.type === 'synced').length;
    cluster.store.reconnectWatches();
    await waitFor(() => registry!.model(LLM) === undefined, 5000, 'resync');
    await waitFor(() => changes.filter((c) => c.type === 'synced').length === syncedBefore + 1, 5000, 'synced');
    expect(registry.list()).toEqual([]);
  });

  it('ignores cards it cannot serve (bad metadata, unbuildable tokenizer) and counts them', async () => {
    cluster = new MockCluster();
    const d = cluster.store.connect();
    const base = { v: 1, namespace: NS, component: 'backend', instanceId: d.instanceId };
    await d.registerModel({ ...base, model: 'broken' as never, kind: 'tensor', endpoint: 'infer' as never, metadata: { modelConfig: {} } } as never);
    await d.registerModel({
      ...base,
      model: 'no-tokenizer' as never,
      kind: 'llm',
      endpoint: 'generate' as never,
      tokenizer: { type: 'ref', uri: 'hf://some/model' },
      kvBlockSize: 16,
      contextLength: 64,
      metadata: { modelMetadata: {}, modelConfig: {}, versions: ['1'], decoupled: true, engine: 'mocker', totalKvBlocks: 8, eosTokenIds: [], created: 0, kvEvents: true },
    } as never);
    registry = new ModelRegistry({ discovery: cluster.store.connect(), namespace: namespace(NS) });
    await registry.ready();
    expect(registry.list()).toEqual([]);
    expect(registry.counters().rejectedCards).toBe(2);
  });

  it('after a resync, instances missing from the snapshot get a grace to register again (etcd back without its data)', async () => {
    cluster = new MockCluster();
    const a = await cluster.addWorker();
    const b = await cluster.addWorker();
    registry = new ModelRegistry({ discovery: cluster.store.connect(), namespace: namespace(NS), resyncGraceMs: 1500 });
    const changes: RegistryChange[] = [];
    registry.onChange((c) => changes.push(c));
    await registry.ready();
    expect(registry.model(LLM)!.instances.size).toBe(2);
    const routerSynced = changes.filter((c) => c.type === 'synced').length;
    const addedBefore = changes.filter((c) => c.type === 'instance-added').length;

    // etcd goes away and comes back empty: both leases and every card are gone from the store
    cluster.store.disconnectWatches();
    a.discovery.expireLease();
    b.discovery.expireLease();
    let atResync: number | undefined;
    registry.onChange((c) => {
      if (c.type === 'synced') atResync ??= registry!.model(LLM)?.instances.size ?? 0;
    });
    cluster.store.reconnectWatches();
    await waitFor(() => atResync !== undefined, 5000, 'resync');
    // the router still routes to both: a resync that misses them is not "they left"
    expect(atResync).toBe(2);
    expect(changes.filter((c) => c.type === 'synced').length).toBe(routerSynced + 1);
    // a registers again within the grace, b never does
    a.discovery.restoreLease();
    await waitFor(() => registry!.model(LLM)!.instances.size === 1, 5000, 'b removed after the grace');
    expect([...registry.model(LLM)!.instances.keys()]).toEqual([a.node.instanceId]);
    const removed = changes.filter((c) => c.type === 'instance-removed').map((c) => (c as { instanceId: string }).instanceId);
    expect(removed).toEqual([b.node.instanceId]);
    // a came back unchanged: no instance-added, its routing state (KV index, pins, loads) untouched
    expect(changes.filter((c) => c.type === 'instance-added')).toHaveLength(addedBefore);
  });
});

describe('worker roles of a model entry', () => {
  const entry = (kind: 'llm' | 'tensor', roles: Array<string | undefined>): ModelEntry => {
    const ids = roles.map((_, i) => `000000000000000${i}` as InstanceId);
    const decoded = new Map(ids.map((id, i) => [id, (roles[i] === undefined ? {} : { role: roles[i] }) as never]));
    return { name: 'm', kind, instances: new Map(ids.map((id) => [id, {} as never])), decoded, card: {} as never, metadata: {} as never };
  };
  const id = (i: number) => `000000000000000${i}` as InstanceId;

  it('reads the role from each card (absent = aggregated); prefill instances take no whole request', () => {
    const e = entry('llm', [undefined, 'prefill', 'decode', 'aggregated']);
    expect([0, 1, 2, 3].map((i) => instanceRole(e, id(i)))).toEqual(['aggregated', 'prefill', 'decode', 'aggregated']);
    expect([0, 1, 2, 3].map((i) => takesWholeRequests(e, id(i)))).toEqual([true, false, true, true]);
    expect(instancesWithRole(e, 'prefill')).toEqual([id(1)]);
    expect(isDisaggregated(e)).toBe(true);
    expect(isDisaggregated(entry('llm', [undefined, 'aggregated']))).toBe(false);
    expect(isDisaggregated(entry('llm', ['decode']))).toBe(true);
    // a tensor model has no roles
    expect(instanceRole(entry('tensor', ['prefill']), id(0))).toBe('aggregated');
    expect(onlyPrefillWorkers(entry('llm', ['prefill', 'prefill']))).toMatchObject({ code: 'unavailable', message: expect.stringContaining("model 'm' is served only by prefill workers (2 registered)") });
  });
});
