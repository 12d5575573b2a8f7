import type { LoadSample, Observations } from '@switchyard/planner';
import { MemoryDiscoveryStore, type InstanceId, type ModelCard, type ModelName, type Namespace } from '@switchyard/runtime';
import { afterEach, describe, expect, it } from 'vitest';
import { ObservedSource, ReplicaLoads, portOf } from './replica-loads.js';

const LAYOUT = { modelId: 'm@1', engine: 'mocker', dtype: 'fp32', numLayers: 2, numKvHeads: 2, headDim: 4, blockSize: 2, bytesPerBlock: 64 };

function card(instanceId: string, model: string, address: string | undefined): ModelCard {
  return {
    v: 1,
    model: model as ModelName,
    kind: 'llm',
    namespace: 'ns' as Namespace,
    component: 'worker' as ModelCard['component'],
    endpoint: 'generate' as ModelCard['endpoint'],
    instanceId: instanceId as InstanceId,
    tokenizer: { type: 'ref', uri: 'org/m' },
    kvBlockSize: 16,
    contextLength: 512,
    metadata: {
      modelMetadata: { name: model },
      modelConfig: { name: model },
      versions: ['1'],
      decoupled: true,
      engine: 'mocker',
      totalKvBlocks: 64,
      eosTokenIds: [],
      created: 1,
      kvEvents: true,
      ...(address === undefined ? {} : { kvTransfer: { address, layout: LAYOUT } }),
    },
  };
}

const sample = (instanceId: string, ts: number, numRunning: number, numWaiting = 0): LoadSample => ({
  instanceId,
  ts,
  numRunning,
  numWaiting,
  kvActiveBlocks: 0,
  kvTotalBlocks: 64,
  kvUsage: 0,
  prefixCacheQueries: 0,
  prefixCacheHits: 0,
});
const obs = (...load: LoadSample[]): Observations => ({ intervalSec: 1, pools: { aggregated: { replicas: load.length, load } }, requests: { requests: 0 } });

async function until(cond: () => boolean): Promise<void> {
  for (let i = 0; i < 200 && !cond(); i++) await new Promise((r) => setTimeout(r, 5));
  expect(cond()).toBe(true);
}

describe('ReplicaLoads', () => {
  const closers: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const c of closers.splice(0)) await c();
  });

  it('portOf reads the port of host:port and [v6]:port', () => {
    expect(portOf('127.0.0.1:7001')).toBe(7001);
    expect(portOf('[::1]:65535')).toBe(65535);
    expect(portOf('host')).toBeUndefined();
    expect(portOf('host:0')).toBeUndefined();
    expect(portOf('host:70000')).toBeUndefined();
  });

  it("answers a replica's load from its instance's latest sample, matched by the KV transfer port its card advertises", async () => {
    const store = new MemoryDiscoveryStore();
    const planner = store.connect();
    const loads = new ReplicaLoads(planner, 'ns', 'm');
    closers.push(() => loads.close());
    const w1 = store.connect();
    const w2 = store.connect();
    const other = store.connect();
    await w1.registerModel(card(w1.instanceId, 'm', '127.0.0.1:7001'));
    await w2.registerModel(card(w2.instanceId, 'm', '127.0.0.1:7002'));
    await other.registerModel(card(other.instanceId, 'other-model', '127.0.0.1:7003'));
    await until(() => {
      loads.observe(obs(sample(w1.instanceId, 1, 3, 1), sample(w2.instanceId, 1, 0)));
      return loads.loadOf({ ports: { kv_transfer_port: 7001 } }) === 4;
    });
    expect(loads.loadOf({ ports: { kv_transfer_port: 7002 } })).toBe(0);
    // the latest sample wins; an older one arriving later does not
    loads.observe(obs(sample(w1.instanceId, 5, 1)));
    loads.observe(obs(sample(w1.instanceId, 2, 7)));
    expect(loads.loadOf({ ports: { kv_transfer_port: 7001 } })).toBe(1);
    // no card with the port, another model's card, no port in the template: unknown
    expect(loads.loadOf({ ports: { kv_transfer_port: 7003 } })).toBeUndefined();
    expect(loads.loadOf({ ports: { kv_transfer_port: 9999 } })).toBeUndefined();
    expect(loads.loadOf({ ports: { http_port: 7001 } })).toBeUndefined();
    // the instance leaves: unknown again
    await w1.close();
    await until(() => loads.loadOf({ ports: { kv_transfer_port: 7001 } }) === undefined);
    // two cards with one port (workers on two hosts): ambiguous, unknown
    const w3 = store.connect();
    await w3.registerModel(card(w3.instanceId, 'm', '10.0.0.9:7002'));
    loads.observe(obs(sample(w3.instanceId, 1, 2)));
    await until(() => loads.loadOf({ ports: { kv_transfer_port: 7002 } }) === undefined);
    for (const d of [w2, w3, other, planner]) await d.close();
  });

  it('ObservedSource shows every collect to the loads and closes what it owns, in order', async () => {
    const closed: string[] = [];
    const given = obs(sample('a', 1, 1));
    const seen: Observations[] = [];
    const source = new ObservedSource(
      { collect: () => given, close: async () => void closed.push('source') },
      { observe: (o: Observations) => seen.push(o), close: async () => void closed.push('loads') } as unknown as ReplicaLoads,
      [{ close: async () => void closed.push('event plane') }, { close: async () => void closed.push('discovery') }],
    );
    expect(source.collect()).toBe(given);
    expect(seen).toEqual([given]);
    await source.close();
    expect(closed).toEqual(['source', 'loads', 'event plane', 'discovery']);

    // a failing step does not keep the others open
    closed.length = 0;
    const failing = new ObservedSource(
      { collect: () => given, close: async () => Promise.reject(new Error('subscription stuck')) },
      undefined,
      [{ close: async () => void closed.push('event plane') }, { close: async () => void closed.push('discovery') }],
    );
    await expect(failing.close()).rejects.toThrow('subscription stuck');
    expect(closed).toEqual(['event plane', 'discovery']);
  });
});
