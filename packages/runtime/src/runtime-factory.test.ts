import { randomBytes } from 'node:crypto';
import { MemoryRoutingTable, type RoutingTable } from '@switchyard/kv-router';
import { startEtcd, startNats, startRedis, type EtcdServer, type NatsServer, type RedisServer } from '@switchyard/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { componentName, endpointAddress, instanceAddress, instanceSubject, instancesPrefix, kvEventsSubject, namespace } from './addressing.js';
import { EtcdDiscovery } from './etcd-discovery.js';
import { JetStreamEventPlane } from './jetstream-event-plane.js';
import { MemoryDiscovery, MemoryDiscoveryStore } from './memory-discovery.js';
import { MemoryEventPlane, MemoryEventStore } from './memory-event-plane.js';
import { MemoryRequestBroker, MemoryRequestPlane } from './memory-request-plane.js';
import { NatsRequestPlane } from './nats-request-plane.js';
import type { JsonValue, Payload } from './protocols.js';
import { RedisRoutingTable } from './redis-routing-table.js';
import { type Runtime, type RuntimeConfig, connectRuntime, createDiscovery, createKvTransferPlane, createRoutingTable } from './runtime-factory.js';
import { MemoryKvTransferNetwork, MemoryKvTransferPlane } from './kv-transfer/memory-kv-transfer-plane.js';
import { TcpKvTransferPlane } from './kv-transfer/tcp-kv-transfer-plane.js';

async function collect(it: AsyncIterable<Payload>): Promise<Payload[]> {
  const out: Payload[] = [];
  for await (const v of it) out.push(v);
  return out;
}

/**
 * Two processes of one cluster: A registers and serves an endpoint and publishes a KV event; B sees
 * the instance, calls it, consumes the event; both see the same routing table.
 */
async function exercise(a: Runtime, b: Runtime): Promise<void> {
  const ns = namespace(a.namespace);
  const ep = endpointAddress(ns, 'backend', 'generate');
  const addr = instanceAddress(ep, a.discovery.instanceId);
  await a.requestPlane.serve(addr, async function* (payload) {
    yield { echo: payload as JsonValue };
  });
  await a.discovery.registerInstance({ v: 1, ...addr, subject: instanceSubject(addr), metadata: {} });

  const ac = new AbortController();
  const watch = b.discovery.watch(instancesPrefix(ns))[Symbol.asyncIterator]();
  const first = await watch.next();
  expect(first.value).toMatchObject({ type: 'put' });
  ac.abort();
  await watch.return?.();

  expect(await collect(b.requestPlane.request(ep, 'hi'))).toEqual([{ echo: 'hi' }]);

  const subject = kvEventsSubject(ns, componentName('backend'));
  const seq = await a.eventPlane.publish(subject, { event_id: 0 });
  const sub = new AbortController();
  const events = b.eventPlane.subscribe({ subject, durable: 'factory-test', signal: sub.signal })[Symbol.asyncIterator]();
  const got = await events.next();
  expect(got.value).toMatchObject({ seq, payload: { event_id: 0 } });
  got.value!.ack();
  sub.abort();
  await events.return?.();

  const d = await a.routingTable.selectAndReserve({
    requestId: `req-${randomBytes(4).toString('hex')}`,
    blockHashes: [],
    promptTokens: 32,
    blockSize: 16,
    candidates: ['w1'],
    overlapWeight: 1,
    temperature: 0,
    random: 0,
    now: Date.now(),
  });
  expect(d.worker).toBe('w1');
  expect((await b.routingTable.loads(Date.now())).get('w1')).toEqual({ activeBlocks: 2, prefillTokens: 32, requests: 1 });
}

describe('runtime factory: memory', () => {
  it('shares the given memory stores between the processes of an in-process cluster', async () => {
    const table = new MemoryRoutingTable();
    const memory = {
      discovery: new MemoryDiscoveryStore(),
      requests: new MemoryRequestBroker(),
      events: new MemoryEventStore(),
      routingTable: table,
    };
    const a = await connectRuntime({ namespace: 'mem', memory });
    const b = await connectRuntime({ namespace: 'mem', memory });
    expect(a.discovery).toBeInstanceOf(MemoryDiscovery);
    expect(a.requestPlane).toBeInstanceOf(MemoryRequestPlane);
    expect(a.eventPlane).toBeInstanceOf(MemoryEventPlane);
    expect(a.routingTable).toBe(table);
    expect(a.discovery.instanceId).not.toBe(b.discovery.instanceId);
    await exercise(a, b);
    const ns = namespace('mem');
    expect([...memory.discovery.snapshot(instancesPrefix(ns)).keys()]).toHaveLength(1);
    await a.close();
    await a.close();
    expect((a.discovery as MemoryDiscovery).state).toBe('closed');
    // a closed process's lease is gone: its registration with it
    expect([...memory.discovery.snapshot(instancesPrefix(ns)).keys()]).toHaveLength(0);
    await b.close();
  });

  it('gives each call fresh stores when none are shared', async () => {
    const [t1, t2] = [await createRoutingTable({ namespace: 'solo' }), await createRoutingTable({ namespace: 'solo' })];
    expect(t1).toBeInstanceOf(MemoryRoutingTable);
    expect(t2).not.toBe(t1);
    const a = await createDiscovery({ namespace: 'solo' });
    const b = await createDiscovery({ namespace: 'solo' });
    const ns = namespace('solo');
    const addr = instanceAddress(endpointAddress(ns, 'c', 'e'), a.instanceId);
    await a.registerInstance({ v: 1, ...addr, subject: instanceSubject(addr), metadata: {} });
    const it = b.watch(instancesPrefix(ns))[Symbol.asyncIterator]();
    expect((await it.next()).value).toMatchObject({ type: 'synced' }); // b's store is not a's
    await it.return?.();
    await Promise.all([a.close(), b.close()]);
  });

  it('rejects an invalid namespace and a role configured twice', async () => {
    await expect(connectRuntime({ namespace: 'Bad Name' })).rejects.toMatchObject({ code: 'invalid_argument' });
    const both: RuntimeConfig = { namespace: 'x', redisUrl: 'redis://127.0.0.1:1', memory: { routingTable: {} as RoutingTable } };
    await expect(createRoutingTable(both)).rejects.toMatchObject({ code: 'invalid_argument' });
    await expect(createDiscovery({ namespace: 'x', etcdUrl: 'http://127.0.0.1:1', memory: { discovery: new MemoryDiscoveryStore() } })).rejects.toMatchObject({
      code: 'invalid_argument',
    });
  });

  it('builds the KV transfer plane: the memory twin on the shared network, TCP when etcd is configured', async () => {
    const network = new MemoryKvTransferNetwork();
    const provider = { read: () => [{ hash: '00000000000000aa', data: Uint8Array.of(1, 2, 3) }], release: () => true };
    const serving = await createKvTransferPlane({ namespace: 'kv', memory: { kvTransfer: network } });
    const pulling = await createKvTransferPlane({ namespace: 'kv', memory: { kvTransfer: network }, kvTransfer: { maxHashesPerPull: 8 } });
    expect(serving).toBeInstanceOf(MemoryKvTransferPlane);
    const server = await serving.serve(provider);
    const request = { model: 'm', leaseId: 'l', layoutDigest: 'd', hashes: ['00000000000000aa'] };
    const chunks = [];
    for await (const c of pulling.pull(server.address, request)) chunks.push(c);
    expect(chunks).toEqual([[{ hash: '00000000000000aa', data: Uint8Array.of(1, 2, 3) }]]);
    const many = { ...request, hashes: Array(9).fill('00000000000000aa') };
    await expect(pulling.pull(server.address, many)[Symbol.asyncIterator]().next()).rejects.toMatchObject({ code: 'invalid_argument' });
    expect(await createKvTransferPlane({ namespace: 'kv', etcdUrl: 'http://127.0.0.1:1' })).toBeInstanceOf(TcpKvTransferPlane);
    await expect(createKvTransferPlane({ namespace: 'kv', etcdUrl: 'http://127.0.0.1:1', memory: { kvTransfer: network } })).rejects.toMatchObject({ code: 'invalid_argument' });
    await expect(createKvTransferPlane({ namespace: 'kv', kvTransfer: { chunkBytes: 0 } })).rejects.toMatchObject({ code: 'invalid_argument' });
    await server.close();
  });

  it('closes what it built when another role fails to connect', async () => {
    const store = new MemoryDiscoveryStore();
    const ns = namespace('partial');
    await expect(
      connectRuntime({ namespace: 'partial', memory: { discovery: store }, natsUrl: 'nats://127.0.0.1:1' }),
    ).rejects.toMatchObject({ code: 'unavailable' });
    // the discovery built before the failure was closed: a new process gets lease 2, and no key is left
    expect(store.snapshot(instancesPrefix(ns)).size).toBe(0);
    expect(store.connect().instanceId).toBe('0000000000000002');
  });
});

describe('runtime factory: real etcd + NATS + Redis', () => {
  let etcd: EtcdServer;
  let nats: NatsServer;
  let redis: RedisServer;
  beforeAll(async () => {
    [etcd, nats, redis] = await Promise.all([startEtcd(), startNats({ jetstream: true }), startRedis()]);
  }, 60_000);
  afterAll(async () => {
    await Promise.all([etcd?.stop(), nats?.stop(), redis?.stop()]);
  });

  it('connectRuntime yields working roles that talk to each other through the servers', async () => {
    const config: RuntimeConfig = {
      namespace: `it-${randomBytes(3).toString('hex')}`,
      etcdUrl: etcd.url,
      natsUrl: nats.url,
      redisUrl: redis.url,
    };
    const a = await connectRuntime(config);
    const b = await connectRuntime(config);
    try {
      expect(a.discovery).toBeInstanceOf(EtcdDiscovery);
      expect(a.requestPlane).toBeInstanceOf(NatsRequestPlane);
      expect(a.eventPlane).toBeInstanceOf(JetStreamEventPlane);
      expect(a.routingTable).toBeInstanceOf(RedisRoutingTable);
      await exercise(a, b);
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
    await a.close();
  }, 60_000);
});
