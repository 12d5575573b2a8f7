import { randomBytes } from 'node:crypto';
import { startEtcd, type EtcdServer } from '@switchyard/testing';
import { Etcd3 } from 'etcd3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
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
import { EtcdDiscovery } from './etcd-discovery.js';
import type { InstanceInfo, ModelCard } from './protocols.js';

const suffix = randomBytes(4).toString('hex');
const ns = namespace(`it-${suffix}`);
const ep = endpointAddress(ns, 'backend', 'generate');
const info = (id: InstanceId, metadata = {}): InstanceInfo => {
  const a = instanceAddress(ep, id);
  return { v: 1, ...a, subject: instanceSubject(a), metadata };
};
const card = (id: InstanceId): ModelCard => ({
  v: 1,
  model: modelName('org/m'),
  kind: 'tensor',
  ...ep,
  instanceId: id,
  metadata: {},
});

/** Pull `n` events from a watch iterator, failing after `ms`. */
async function take(it: AsyncIterator<WatchEvent>, n: number, ms = 5000): Promise<WatchEvent[]> {
  const out: WatchEvent[] = [];
  const deadline = Date.now() + ms;
  while (out.length < n) {
    const left = deadline - Date.now();
    let timer: NodeJS.Timeout | undefined;
    const r = await Promise.race([
      it.next(),
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`timed out after ${out.length}/${n} events: ${JSON.stringify(brief(out))}`)), left);
      }),
    ]).finally(() => clearTimeout(timer));
    if (r.done) break;
    out.push(r.value);
  }
  return out;
}
const brief = (evs: WatchEvent[]): string[] => evs.map((e) => (e.type === 'synced' ? 'synced' : `${e.type} ${e.key}`));

describe('EtcdDiscovery (real etcd)', () => {
  let etcd: EtcdServer;
  const open: EtcdDiscovery[] = [];
  const connect = async (leaseTtlSeconds = 10): Promise<EtcdDiscovery> => {
    const d = await EtcdDiscovery.connect({ url: etcd.url, namespace: `test-${suffix}/`, leaseTtlSeconds });
    open.push(d);
    return d;
  };

  beforeAll(async () => {
    etcd = await startEtcd();
  });
  afterAll(async () => {
    await Promise.all(open.map((d) => d.close()));
    await etcd?.stop();
  });

  it('gives each process its own lease-derived instance id', async () => {
    const a = await connect();
    const b = await connect();
    expect(a.instanceId).toMatch(/^[0-9a-f]{16}$/);
    expect(a.instanceId).not.toBe(b.instanceId);
    await a.close();
    await b.close();
  });

  it('watch yields a snapshot, synced, then live changes from another process', async () => {
    const w = await connect();
    const a = await connect();
    await a.registerInstance(info(a.instanceId));
    const it = w.watch(namespacePrefix(ns))[Symbol.asyncIterator]();
    const snap = await take(it, 2);
    expect(brief(snap)).toEqual([`put ${instanceKey(info(a.instanceId))}`, 'synced']);
    expect(snap[0]!.type === 'put' && snap[0]!.value).toEqual(info(a.instanceId));
    await a.registerModel(card(a.instanceId));
    await a.unregisterModel(modelName('org/m'));
    await a.unregisterInstance(info(a.instanceId));
    const evs = await take(it, 3);
    expect(brief(evs)).toEqual([
      `put ${modelKey(ns, modelName('org/m'), a.instanceId)}`,
      `delete ${modelKey(ns, modelName('org/m'), a.instanceId)}`,
      `delete ${instanceKey(info(a.instanceId))}`,
    ]);
    const revs = evs.map((e) => e.revision);
    expect(revs[0]).toBeGreaterThan(snap[1]!.revision);
    expect(revs).toEqual([...revs].sort((x, y) => x - y));
    expect(evs[0]!.type === 'put' && evs[0]!.value).toEqual(card(a.instanceId));
    await w.close();
    expect((await it.next()).done).toBe(true);
    await a.close();
  });

  it('only sees keys under the prefix, and ends when the signal aborts', async () => {
    const a = await connect();
    const other = instanceAddress(endpointAddress(`${ns}-2`, 'backend', 'generate'), a.instanceId);
    await a.registerInstance({ v: 1, ...other, subject: instanceSubject(other), metadata: {} });
    const ac = new AbortController();
    const it = a.watch(instancesPrefix(ns), ac.signal)[Symbol.asyncIterator]();
    expect(brief(await take(it, 1))).toEqual(['synced']);
    ac.abort();
    expect((await it.next()).done).toBe(true);
    await a.close();
  });

  it('registers create-if-absent, idempotent for the same value', async () => {
    const a = await connect();
    const b = await connect();
    await a.registerInstance(info(a.instanceId));
    await a.registerInstance(info(a.instanceId));
    await expect(a.registerInstance(info(a.instanceId, { other: true }))).rejects.toMatchObject({ code: 'already_exists' });
    await a.registerModel(card(a.instanceId));
    await a.registerModel(card(a.instanceId));
    await expect(a.registerModel({ ...card(a.instanceId), kind: 'llm' } as ModelCard)).rejects.toMatchObject({
      code: 'already_exists',
    });
    await expect(b.registerInstance(info(a.instanceId))).rejects.toMatchObject({ code: 'invalid_argument' });
    // b unregistering a's key (by address) leaves it alone: deletes only keys under b's lease.
    await b.unregisterInstance(info(a.instanceId));
    const it = b.watch(instancesPrefix(ns))[Symbol.asyncIterator]();
    expect(brief(await take(it, 2))).toEqual([`put ${instanceKey(info(a.instanceId))}`, 'synced']);
    await a.close();
    await b.close();
  });

  it('close() revokes the lease: every key of the process vanishes, watchers see deletes', async () => {
    const a = await connect();
    const b = await connect();
    await a.registerInstance(info(a.instanceId));
    await a.registerModel(card(a.instanceId));
    await b.registerInstance(info(b.instanceId));
    let lost = 0;
    a.onLeaseLost(() => lost++);
    const it = b.watch(namespacePrefix(ns))[Symbol.asyncIterator]();
    expect(await take(it, 4)).toHaveLength(4);
    await a.close();
    await a.close();
    expect(a.state).toBe('closed');
    const deletes = await take(it, 2);
    expect(brief(deletes).sort()).toEqual(
      [`delete ${instanceKey(info(a.instanceId))}`, `delete ${modelKey(ns, modelName('org/m'), a.instanceId)}`].sort(),
    );
    // etcd deletes every key of a revoked lease in one transaction: one revision for all.
    expect(deletes[0]!.revision).toBe(deletes[1]!.revision);
    expect(lost).toBe(0);
    await expect(a.registerInstance(info(a.instanceId))).rejects.toMatchObject({ code: 'unavailable' });
    // A fresh watch sees only b's key.
    const it2 = b.watch(namespacePrefix(ns))[Symbol.asyncIterator]();
    expect(brief(await take(it2, 2))).toEqual([`put ${instanceKey(info(b.instanceId))}`, 'synced']);
    await b.close();
  });

  it('lease revoked from outside: onLeaseLost fires, keys vanish, then a new lease holds them again (same instance id)', async () => {
    const a = await connect(2);
    const b = await connect();
    await a.registerInstance(info(a.instanceId));
    const back = new Promise<void>((resolve) => a.onLeaseRestored(resolve));
    const lost: Error[] = [];
    const gotLost = new Promise<void>((resolve) =>
      a.onLeaseLost((e) => {
        lost.push(e);
        resolve();
      }),
    );
    const it = b.watch(instancesPrefix(ns))[Symbol.asyncIterator]();
    expect(await take(it, 2)).toHaveLength(2);
    const res = await fetch(`${etcd.url}/v3/lease/revoke`, {
      method: 'POST',
      body: JSON.stringify({ ID: BigInt(`0x${a.instanceId}`).toString() }),
    });
    expect(res.status).toBe(200);
    expect(brief(await take(it, 1))).toEqual([`delete ${instanceKey(info(a.instanceId))}`]);
    await gotLost;
    expect(lost).toHaveLength(1);
    expect(lost[0]).toMatchObject({ code: 'unavailable' });
    // The loss is not the end: a new lease, the same instance id, the key written again.
    expect(brief(await take(it, 1))).toEqual([`put ${instanceKey(info(a.instanceId))}`]);
    await back;
    expect(a.state).toBe('active');
    await a.registerModel(card(a.instanceId));
    await a.close();
    await b.close();
  });

  it('a registration that finds its lease revoked fails unavailable and reports the loss', async () => {
    const a = await connect(10);
    const lost: Error[] = [];
    a.onLeaseLost((e) => lost.push(e));
    const res = await fetch(`${etcd.url}/v3/lease/revoke`, {
      method: 'POST',
      body: JSON.stringify({ ID: BigInt(`0x${a.instanceId}`).toString() }),
    });
    expect(res.status).toBe(200);
    // Before the next keep-alive (TTL/3 ≈ 3.3 s) notices: the txn itself fails with "lease not found".
    await expect(a.registerInstance(info(a.instanceId))).rejects.toMatchObject({ code: 'unavailable' });
    expect(lost).toHaveLength(1);
    await a.close();
  });

  it('keeps the lease alive (keep-alive thread) while the main event loop is blocked longer than the TTL', async () => {
    const a = await connect(2);
    const b = await connect();
    await a.registerInstance(info(a.instanceId));
    await a.registerModel(card(a.instanceId));
    let lost = 0;
    a.onLeaseLost(() => lost++);
    const blockStart = Date.now();
    while (Date.now() - blockStart < 3000) {
      // Busy-wait: this event loop runs nothing for 1.5 × the TTL.
    }
    // Let the messages the thread posted meanwhile (and another keep-alive or two) arrive.
    await new Promise((r) => setTimeout(r, 700));
    expect(lost).toBe(0);
    expect(a.state).toBe('active');
    // Keep-alives kept being acknowledged during the block (every TTL/3 ≈ 667 ms).
    expect(a.lastKeepAlive).toBeGreaterThan(blockStart + 2000);
    // Another process still sees every key of the lease.
    const it = b.watch(namespacePrefix(ns))[Symbol.asyncIterator]();
    const evs = [];
    for (;;) {
      const [ev] = await take(it, 1);
      if (ev!.type === 'synced') break;
      if (ev!.key.endsWith(a.instanceId)) evs.push(ev!);
    }
    expect(brief(evs).sort()).toEqual([`put ${instanceKey(info(a.instanceId))}`, `put ${modelKey(ns, modelName('org/m'), a.instanceId)}`].sort());
    await a.unregisterModel(modelName('org/m'));
    await a.close();
    await b.close();
  });

  it('a lease revoked by another etcd3 client is reported lost by the next keep-alive (TTL 0)', async () => {
    const a = await connect(10);
    await a.registerInstance(info(a.instanceId));
    const gotLost = new Promise<Error>((resolve) => a.onLeaseLost(resolve));
    const other = new Etcd3({ hosts: etcd.url });
    const t0 = Date.now();
    try {
      await other.leaseClient.leaseRevoke({ ID: BigInt(`0x${a.instanceId}`).toString() });
    } finally {
      other.close();
    }
    const err = await gotLost;
    // Within one keep-alive period (TTL/3 ≈ 3.3 s), far before the 10 s expiry bound.
    expect(Date.now() - t0).toBeLessThan(5000);
    expect(err).toMatchObject({ code: 'unavailable', message: expect.stringMatching(/answered TTL 0/) });
    await a.close();
  });

  it('reports the loss once no keep-alive was acknowledged for longer than the TTL (etcd gone)', async () => {
    const etcd2 = await startEtcd();
    const d = await EtcdDiscovery.connect({ url: etcd2.url, leaseTtlSeconds: 2 });
    try {
      const gotLost = new Promise<Error>((resolve) => d.onLeaseLost(resolve));
      const t0 = Date.now();
      await etcd2.stop();
      const err = await gotLost;
      expect(Date.now() - t0).toBeLessThan(4500);
      expect(err).toMatchObject({ code: 'unavailable', message: expect.stringMatching(/no keep-alive acknowledged for \d+ ms \(TTL 2 s\)/) });
      expect(d.state).toBe('lost');
    } finally {
      await d.close();
      await etcd2.stop();
    }
  });

  it('a watch survives an etcd restart and resyncs (synced again, then live)', async () => {
    const w = await connect();
    const a = await connect();
    await a.registerInstance(info(a.instanceId));
    const it = w.watch(instancesPrefix(ns))[Symbol.asyncIterator]();
    expect(await take(it, 2)).toHaveLength(2);
    await etcd.restart();
    // The watcher reconnects (etcd3 backoff) and resyncs: nothing changed, so just `synced`.
    expect(brief(await take(it, 1, 10_000))).toEqual(['synced']);
    await a.unregisterInstance(info(a.instanceId));
    expect(brief(await take(it, 1))).toEqual([`delete ${instanceKey(info(a.instanceId))}`]);
    await w.close();
    await a.close();
  });

  // Each of these starts its own etcd and spends most of its time waiting out an outage or a lease:
  // they run side by side (the file still runs with nothing else beside it, see vitest.config.ts).
  describe.concurrent('etcd outages longer than the lease', () => {
    /** Resolves on the next onLeaseRestored of `d`. */
    const restored = (d: EtcdDiscovery): Promise<void> => new Promise((resolve) => d.onLeaseRestored(resolve));
    /** The lease (decimal) etcd holds `key` under, or undefined when the key is absent. */
    const leaseOf = async (server: EtcdServer, key: string): Promise<string | undefined> => {
      const client = new Etcd3({ hosts: server.url });
      try {
        const res = await client.getAll().prefix(key).exec();
        const kv = res.kvs.find((k) => k.key.toString() === key);
        return kv === undefined ? undefined : String(kv.lease);
      } finally {
        client.close();
      }
    };

    it('etcd back with its data: the lease is vouched for again, keys intact, onLeaseRestored; the watch resyncs within ~1 s', async ({ expect }) => {
      const server = await startEtcd();
      const a = await EtcdDiscovery.connect({ url: server.url, leaseTtlSeconds: 2 });
      const w = await EtcdDiscovery.connect({ url: server.url });
      try {
        await a.registerInstance(info(a.instanceId));
        const it = w.watch(instancesPrefix(ns))[Symbol.asyncIterator]();
        expect(brief(await take(it, 2))).toEqual([`put ${instanceKey(info(a.instanceId))}`, 'synced']);
        const lease = await leaseOf(server, instanceKey(info(a.instanceId)));
        const lost = new Promise<Error>((resolve) => a.onLeaseLost(resolve));
        const back = restored(a);
        // down for 5 TTLs: every keep-alive, watch and gRPC backoff grows meanwhile
        const outage = server.restart({ downMs: 10_000 });
        await lost;
        expect(a.state).toBe('lost');
        await expect(a.registerModel(card(a.instanceId))).rejects.toMatchObject({ code: 'unavailable' });
        await outage;
        const returned = Date.now();
        await back;
        console.log(`lease vouched for again ${Date.now() - returned} ms after etcd returned`);
        expect(a.state).toBe('active');
        // etcd restored the lease with a fresh TTL and the keeper resumed it: same lease, same key
        expect(await leaseOf(server, instanceKey(info(a.instanceId)))).toBe(lease);
        // the watcher saw nothing leave; it resyncs (nothing changed) soon after etcd is back
        expect(brief(await take(it, 1, 3_000))).toEqual(['synced']);
        expect(Date.now() - returned).toBeLessThan(3_000);
        // still there after any lease nobody renews would have expired
        await new Promise((r) => setTimeout(r, 4_000));
        expect(await leaseOf(server, instanceKey(info(a.instanceId)))).toBe(lease);
        await a.registerModel(card(a.instanceId));
      } finally {
        await Promise.all([a.close(), w.close()]);
        await server.stop();
      }
    }, 60_000);

    it('etcd back without its data: a new lease, the same instance id, every key written again but the one unregistered meanwhile', async ({ expect }) => {
      const server = await startEtcd();
      const a = await EtcdDiscovery.connect({ url: server.url, leaseTtlSeconds: 2 });
      try {
        await a.registerInstance(info(a.instanceId));
        await a.registerModel(card(a.instanceId));
        const lease = await leaseOf(server, instanceKey(info(a.instanceId)));
        const lost = new Promise<Error>((resolve) => a.onLeaseLost(resolve));
        const back = restored(a);
        const outage = server.restart({ downMs: 4_000, wipe: true });
        await lost;
        await a.unregisterModel(modelName('org/m')); // while lost: does not wait for etcd
        await outage;
        const returned = Date.now();
        await back;
        console.log(`registered again ${Date.now() - returned} ms after an empty etcd returned`);
        expect(Date.now() - returned).toBeLessThan(5_000);
        const newLease = await leaseOf(server, instanceKey(info(a.instanceId)));
        expect(newLease).toBeDefined();
        expect(newLease).not.toBe(lease);
        expect(await leaseOf(server, modelKey(ns, modelName('org/m'), a.instanceId))).toBeUndefined();
        expect(a.state).toBe('active');
        // kept alive: still there two TTLs later; registrations work again
        await new Promise((r) => setTimeout(r, 4_000));
        expect(await leaseOf(server, instanceKey(info(a.instanceId)))).toBe(newLease);
        await a.registerModel(card(a.instanceId));
        expect(await leaseOf(server, modelKey(ns, modelName('org/m'), a.instanceId))).toBe(newLease);
      } finally {
        await a.close();
        await server.stop();
      }
    }, 60_000);

    it('a watch follows an etcd that came back without its data (its revisions start again at 1)', async ({ expect }) => {
      const server = await startEtcd();
      const a = await EtcdDiscovery.connect({ url: server.url, leaseTtlSeconds: 2 });
      const w = await EtcdDiscovery.connect({ url: server.url });
      try {
        // the watcher sees revisions well past what the empty etcd will reach soon
        for (let i = 0; i < 20; i++) {
          await a.registerInstance(info(a.instanceId, { i }));
          await a.unregisterInstance(info(a.instanceId));
        }
        await a.registerInstance(info(a.instanceId));
        const view = new Map<string, unknown>();
        const stop = new AbortController();
        const watching = (async () => {
          for await (const e of w.watch(namespacePrefix(ns), stop.signal)) {
            if (e.type === 'put') view.set(e.key, e.value);
            else if (e.type === 'delete') view.delete(e.key);
          }
        })();
        const until = async (cond: () => boolean, ms: number): Promise<void> => {
          const deadline = Date.now() + ms;
          while (!cond()) {
            if (Date.now() > deadline) throw new Error(`watch view: ${JSON.stringify([...view.keys()])}`);
            await new Promise((r) => setTimeout(r, 50));
          }
        };
        await until(() => view.has(instanceKey(info(a.instanceId))), 5_000);
        const back = restored(a);
        await server.restart({ downMs: 3_000, wipe: true });
        await back;
        // registered again on the new etcd, and later changes reach the watcher live
        await until(() => view.has(instanceKey(info(a.instanceId))), 5_000);
        await a.registerModel(card(a.instanceId));
        await until(() => view.has(modelKey(ns, modelName('org/m'), a.instanceId)), 3_000);
        await a.unregisterInstance(info(a.instanceId));
        await until(() => !view.has(instanceKey(info(a.instanceId))), 3_000);
        stop.abort();
        await watching;
      } finally {
        await Promise.all([a.close(), w.close()]);
        await server.stop();
      }
    }, 60_000);

    it('a keep-alive thread that dies is replaced: the same lease is kept alive from a new thread', async ({ expect }) => {
      const server = await startEtcd();
      const a = await EtcdDiscovery.connect({ url: server.url, leaseTtlSeconds: 2 });
      try {
        await a.registerInstance(info(a.instanceId));
        const lease = await leaseOf(server, instanceKey(info(a.instanceId)));
        const back = restored(a);
        // a bug in the thread (simulated: the thread is terminated under the keeper)
        const keeper = (a as unknown as { keeper: { worker: { terminate(): Promise<number> } } }).keeper;
        await keeper.worker.terminate();
        await back;
        expect(a.state).toBe('active');
        // kept alive from the new thread: still there, under the same lease, two TTLs later
        await new Promise((r) => setTimeout(r, 4_000));
        expect(await leaseOf(server, instanceKey(info(a.instanceId)))).toBe(lease);
      } finally {
        await a.close();
        await server.stop();
      }
    }, 30_000);
  });
});
