import { describe, expect, it } from 'vitest';
import {
  type InstanceId,
  endpointAddress,
  instanceAddress,
  instanceKey,
  instanceSubject,
  instancesPrefix,
  modelKey,
  modelName,
  namespace,
  namespacePrefix,
} from './addressing.js';
import type { WatchEvent } from './discovery.js';
import { MemoryDiscoveryStore } from './memory-discovery.js';
import type { InstanceInfo, ModelCard } from './protocols.js';

const ns = namespace('prod');
const ep = endpointAddress('prod', 'backend', 'generate');
const info = (id: InstanceId, metadata = {}): InstanceInfo => {
  const a = instanceAddress(ep, id);
  return { v: 1, ...a, subject: instanceSubject(a), metadata };
};
const card = (id: InstanceId): ModelCard => ({
  v: 1,
  model: modelName('m'),
  kind: 'tensor',
  ...ep,
  instanceId: id,
  metadata: {},
});

/** Pull `n` events from a watch iterator. */
async function take(it: AsyncIterator<WatchEvent>, n: number): Promise<WatchEvent[]> {
  const out: WatchEvent[] = [];
  while (out.length < n) {
    const r = await it.next();
    if (r.done) break;
    out.push(r.value);
  }
  return out;
}
const brief = (evs: WatchEvent[]): string[] => evs.map((e) => (e.type === 'synced' ? 'synced' : `${e.type} ${e.key}`));

describe('MemoryDiscovery', () => {
  it('gives each process its own lease-derived instance id', () => {
    const store = new MemoryDiscoveryStore();
    const a = store.connect();
    const b = store.connect();
    expect(a.instanceId).toMatch(/^[0-9a-f]{16}$/);
    expect(a.instanceId).not.toBe(b.instanceId);
  });

  it('registers create-if-absent, idempotent for the same value', async () => {
    const store = new MemoryDiscoveryStore();
    const a = store.connect();
    await a.registerInstance(info(a.instanceId));
    await a.registerInstance(info(a.instanceId));
    await expect(a.registerInstance(info(a.instanceId, { other: true }))).rejects.toMatchObject({ code: 'already_exists' });
    const b = store.connect();
    await expect(b.registerInstance(info(a.instanceId))).rejects.toMatchObject({ code: 'invalid_argument' });
    expect([...store.snapshot().keys()]).toEqual([instanceKey(info(a.instanceId))]);
  });

  it('watch yields a snapshot, synced, then live changes in order', async () => {
    const store = new MemoryDiscoveryStore();
    const w = store.connect();
    const a = store.connect();
    await a.registerInstance(info(a.instanceId));
    const it = w.watch(namespacePrefix(ns))[Symbol.asyncIterator]();
    expect(brief(await take(it, 2))).toEqual([`put ${instanceKey(info(a.instanceId))}`, 'synced']);
    await a.registerModel(card(a.instanceId));
    await a.unregisterModel(modelName('m'));
    await a.unregisterInstance(info(a.instanceId));
    const evs = await take(it, 3);
    expect(brief(evs)).toEqual([
      `put ${modelKey(ns, modelName('m'), a.instanceId)}`,
      `delete ${modelKey(ns, modelName('m'), a.instanceId)}`,
      `delete ${instanceKey(info(a.instanceId))}`,
    ]);
    const revs = evs.map((e) => e.revision);
    expect(revs).toEqual([...revs].sort((x, y) => x - y));
    const first = evs[0]!;
    expect(first.type === 'put' && first.value).toEqual(card(a.instanceId));
    await w.close();
    expect((await it.next()).done).toBe(true);
  });

  it('only sees keys under the prefix', async () => {
    const store = new MemoryDiscoveryStore();
    const a = store.connect();
    const other = instanceAddress(endpointAddress('prod-2', 'backend', 'generate'), a.instanceId);
    await a.registerInstance({ v: 1, ...other, subject: instanceSubject(other), metadata: {} });
    const ac = new AbortController();
    const it = a.watch(instancesPrefix(ns), ac.signal)[Symbol.asyncIterator]();
    expect(brief(await take(it, 1))).toEqual(['synced']);
    ac.abort();
    expect((await it.next()).done).toBe(true);
  });

  it('lease expiry deletes every key of the process and tells it', async () => {
    const store = new MemoryDiscoveryStore();
    const a = store.connect();
    const b = store.connect();
    await a.registerInstance(info(a.instanceId));
    await a.registerModel(card(a.instanceId));
    await b.registerInstance(info(b.instanceId));
    const lost: Error[] = [];
    a.onLeaseLost((e) => lost.push(e));
    const it = b.watch(namespacePrefix(ns))[Symbol.asyncIterator]();
    await take(it, 4);
    a.expireLease();
    expect(a.state).toBe('lost');
    expect(lost).toHaveLength(1);
    expect(lost[0]).toMatchObject({ code: 'unavailable' });
    expect(brief(await take(it, 2)).sort()).toEqual(
      [`delete ${instanceKey(info(a.instanceId))}`, `delete ${modelKey(ns, modelName('m'), a.instanceId)}`].sort(),
    );
    expect([...store.snapshot().keys()]).toEqual([instanceKey(info(b.instanceId))]);
    await expect(a.registerInstance(info(a.instanceId))).rejects.toMatchObject({ code: 'unavailable' });
  });

  it('a restored lease writes back every key the process still holds, under the same instance id', async () => {
    const store = new MemoryDiscoveryStore();
    const a = store.connect();
    await a.registerInstance(info(a.instanceId));
    await a.registerModel(card(a.instanceId));
    let restored = 0;
    a.onLeaseRestored(() => restored++);
    a.expireLease();
    expect(store.snapshot().size).toBe(0);
    await a.unregisterModel(modelName('m')); // while lost: not written back
    a.restoreLease();
    expect(a.state).toBe('active');
    expect(restored).toBe(1);
    expect([...store.snapshot().keys()]).toEqual([instanceKey(info(a.instanceId))]);
    await a.registerModel(card(a.instanceId));
    expect(store.snapshot().size).toBe(2);
  });

  it('close revokes the lease without calling lease-lost listeners', async () => {
    const store = new MemoryDiscoveryStore();
    const a = store.connect();
    await a.registerInstance(info(a.instanceId));
    let lost = 0;
    a.onLeaseLost(() => lost++);
    await a.close();
    await a.close();
    expect(store.snapshot().size).toBe(0);
    expect(lost).toBe(0);
    expect(a.state).toBe('closed');
  });

  it('resyncs a watch after reconnect: deletes for vanished keys, puts for new or changed, then synced', async () => {
    const store = new MemoryDiscoveryStore();
    const w = store.connect();
    const a = store.connect();
    const b = store.connect();
    await a.registerInstance(info(a.instanceId));
    await b.registerInstance(info(b.instanceId));
    const it = w.watch(instancesPrefix(ns))[Symbol.asyncIterator]();
    expect(await take(it, 3)).toHaveLength(3);
    store.disconnectWatches();
    a.expireLease();
    const c = store.connect();
    await c.registerInstance(info(c.instanceId));
    store.reconnectWatches();
    const resync = await take(it, 3);
    expect(brief(resync)).toEqual([`delete ${instanceKey(info(a.instanceId))}`, `put ${instanceKey(info(c.instanceId))}`, 'synced']);
    // the delete comes from the resync, not from a live change
    expect(resync[0]).toMatchObject({ type: 'delete', resync: true });
    // live again afterwards
    await b.unregisterInstance(info(b.instanceId));
    const live = await take(it, 1);
    expect(brief(live)).toEqual([`delete ${instanceKey(info(b.instanceId))}`]);
    expect(live[0]).not.toHaveProperty('resync');
  });
});
