/**
 * The worker node over the runtime's memory twins and a real engine: the simulated LLM (mock_llm from
 * test/fixtures/llm_repository) and two JavaScript tensor models (add_sub; square_int32, decoupled).
 */
import { cpSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createEngine, type Engine } from '@switchyard/engine';
import { applyKvEvent, type SnapshotBlock } from '@switchyard/llm';
import { renderModelConfigJson } from '@switchyard/model-config';
import { llmFixtureRepositoryFiles } from '@switchyard/onnx-builder';
import {
  MemoryDiscoveryStore,
  MemoryEventPlane,
  MemoryEventStore,
  MemoryKvTransferNetwork,
  MemoryKvTransferPlane,
  MemoryRequestBroker,
  MemoryRequestPlane,
  NoRespondersError,
  decodeModelCard,
  endpointAddress,
  instanceAddress,
  instancesPrefix,
  forwardPassSubject,
  kvEventsSubject,
  loadSubject,
  modelsPrefix,
  namespace,
  componentName,
  type EventMessage,
  type JsonValue,
  type Payload,
  BinaryPayload,
  type MemoryDiscovery,
} from '@switchyard/runtime';
import { repoRoot } from '@switchyard/testing';
import { GENERATE_ENDPOINT, HEALTH_ENDPOINT, INFER_ENDPOINT, KV_SNAPSHOT_ENDPOINT, STATS_ENDPOINT, WORKER_COMPONENT, type WireGenerateOutput } from '../protocols.js';
import {
  decodeLlmCardMetadata,
  decodeTensorCardMetadata,
  decodeWireGenerateOutput,
  decodeWireInferResponse,
  decodeWireStats,
  decodeWireForwardPass,
  decodeWireKvEvents,
  decodeWireLoad,
  decodeWireSnapshotChunk,
  inferRequestToBinary,
  inferRequestToWire,
  inferResponseFromWire,
  toJson,
} from '../wire-codec.js';
import { kvLayoutDigest, pinnedKvBlocks } from './kv-provider.js';
import { KV_LEASE_DRAIN_MS, startWorkerNode, type WorkerNode, type WorkerNodeOptions } from './worker-node.js';

const NS = 'test-ns';
const ns = namespace(NS);
const backend = componentName(WORKER_COMPONENT);

let repo: string;
beforeAll(() => {
  const root = repoRoot();
  repo = mkdtempSync(join(tmpdir(), 'switchyard-worker-node-'));
  cpSync(join(root, 'test/fixtures/llm_repository/mock_llm'), join(repo, 'mock_llm'), { recursive: true });
  for (const m of ['add_sub', 'square_int32']) cpSync(join(root, 'test/fixtures/javascript_repository', m), join(repo, m), { recursive: true });
  for (const f of llmFixtureRepositoryFiles().filter((f) => f.path.startsWith('mock_llm/'))) {
    mkdirSync(dirname(join(repo, f.path)), { recursive: true });
    writeFileSync(join(repo, f.path), f.build());
  }
});
afterAll(() => rmSync(repo, { recursive: true, force: true }));

interface Cluster {
  engine: Engine;
  store: MemoryDiscoveryStore;
  discovery: MemoryDiscovery;
  broker: MemoryRequestBroker;
  events: MemoryEventStore;
  node: WorkerNode;
  client: MemoryRequestPlane;
  clientEvents: MemoryEventPlane;
  leaseLost: Error[];
}
const open: Cluster[] = [];
afterEach(async () => {
  for (const c of open.splice(0)) {
    await c.node.close();
    await c.client.close();
    await c.clientEvents.close();
    await c.engine.shutdown();
  }
});

async function startCluster(
  extra: Partial<WorkerNodeOptions> = {},
  shared: { store?: MemoryDiscoveryStore; broker?: MemoryRequestBroker; events?: MemoryEventStore } = {},
  models = ['mock_llm', 'add_sub', 'square_int32'],
): Promise<Cluster> {
  const engine = await createEngine({ modelRepositories: [repo], controlMode: 'explicit', startupModels: models });
  const store = shared.store ?? new MemoryDiscoveryStore();
  const discovery = store.connect();
  const broker = shared.broker ?? new MemoryRequestBroker();
  const events = shared.events ?? new MemoryEventStore();
  const leaseLost: Error[] = [];
  const node = await startWorkerNode({
    ...extra,
    engine,
    discovery,
    requestPlane: new MemoryRequestPlane(broker),
    eventPlane: new MemoryEventPlane(events),
    namespace: NS,
    loadIntervalMs: 20,
    onLeaseLost: (e) => leaseLost.push(e),
  });
  const c = { engine, store, discovery, broker, events, node, client: new MemoryRequestPlane(broker), clientEvents: new MemoryEventPlane(events), leaseLost };
  open.push(c);
  return c;
}

const target = (c: Cluster, endpoint: string) => instanceAddress(endpointAddress(NS, WORKER_COMPONENT, endpoint), c.node.instanceId);

async function collect(iterable: AsyncIterable<Payload>): Promise<Payload[]> {
  const out: Payload[] = [];
  for await (const v of iterable) out.push(v);
  return out;
}

async function codeOf(p: Promise<unknown>): Promise<string | undefined> {
  try {
    await p;
  } catch (e) {
    return (e as { code?: string }).code;
  }
  return undefined;
}

function generate(c: Cluster, promptTokenIds: number[], sampling: Record<string, JsonValue>, options: { signal?: AbortSignal } = {}) {
  return c.client.request(target(c, GENERATE_ENDPOINT), { v: 1, model: 'mock_llm', requestId: 'r', promptTokenIds, sampling }, options);
}

async function waitFor(cond: () => boolean, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 5));
  }
}

/** Messages of a durable until `done` says enough (or the timeout). */
async function consume(c: Cluster, subject: string, done: (msgs: EventMessage[]) => boolean, timeoutMs = 5000): Promise<EventMessage[]> {
  const ctrl = new AbortController();
  const timer = setTimeout(() => ctrl.abort(), timeoutMs);
  const msgs: EventMessage[] = [];
  try {
    for await (const m of c.clientEvents.subscribe({ subject, durable: `d${Math.random().toString(36).slice(2, 10)}`, signal: ctrl.signal })) {
      msgs.push(m);
      m.ack();
      if (done(msgs)) break;
    }
  } finally {
    clearTimeout(timer);
  }
  if (!done(msgs)) throw new Error(`only ${msgs.length} messages on ${subject}`);
  return msgs;
}

const prompt = (n: number, offset = 0) => Array.from({ length: n }, (_, i) => 10 + ((i + offset) % 200));

describe('worker node over memory twins', () => {
  it('registers its four instances and one card per READY model with the right fields', async () => {
    const c = await startCluster();
    const instances = c.store.snapshot(instancesPrefix(ns, backend));
    expect([...instances.values()].map((v) => (v as { endpoint: string }).endpoint).sort()).toEqual([GENERATE_ENDPOINT, INFER_ENDPOINT, KV_SNAPSHOT_ENDPOINT, STATS_ENDPOINT]);

    const cards = new Map([...c.store.snapshot(modelsPrefix(ns)).values()].map((v) => decodeModelCard(v)).map((card) => [card.model as string, card]));
    expect([...cards.keys()].sort()).toEqual(['add_sub', 'mock_llm', 'square_int32']);
    expect(c.node.models()).toEqual(['add_sub', 'mock_llm', 'square_int32']);

    const llm = cards.get('mock_llm')!;
    expect(llm).toMatchObject({ kind: 'llm', endpoint: GENERATE_ENDPOINT, component: WORKER_COMPONENT, namespace: NS, instanceId: c.node.instanceId, kvBlockSize: 16, contextLength: 512 });
    expect(llm.tokenizer?.type).toBe('inline');
    const files = (llm.tokenizer as { files: Record<string, string> }).files;
    expect(Object.keys(files)).toContain('tokenizer.json');
    expect(JSON.parse(files['tokenizer.json']!)).toHaveProperty('model');
    const meta = decodeLlmCardMetadata(llm.metadata);
    expect(meta).toMatchObject({ engine: 'mocker', totalKvBlocks: 64, eosTokenIds: [], kvEvents: true, decoupled: true, versions: ['1'] });
    expect(meta.modelConfig).toEqual(JSON.parse(renderModelConfigJson(c.engine.modelConfig('mock_llm'))));

    const addSub = cards.get('add_sub')!;
    expect(addSub).toMatchObject({ kind: 'tensor', endpoint: INFER_ENDPOINT });
    expect(addSub.tokenizer).toBeUndefined();
    const tmeta = decodeTensorCardMetadata(addSub.metadata);
    expect(tmeta.decoupled).toBe(false);
    expect(tmeta.binaryTensors).toBe(true);
    expect(tmeta.modelConfig).toEqual(JSON.parse(renderModelConfigJson(c.engine.modelConfig('add_sub'))));
    expect(tmeta.modelMetadata).toEqual({
      name: 'add_sub', versions: ['1'], platform: 'javascript',
      inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [4] }, { name: 'INPUT1', datatype: 'FP32', shape: [4] }],
      outputs: [{ name: 'OUTPUT0', datatype: 'FP32', shape: [4] }, { name: 'OUTPUT1', datatype: 'FP32', shape: [4] }],
    });
    expect(decodeTensorCardMetadata(cards.get('square_int32')!.metadata).decoupled).toBe(true);
  });

  it('re-registers cards when models are unloaded and loaded', async () => {
    const c = await startCluster();
    const names = () => [...c.store.snapshot(modelsPrefix(ns)).values()].map((v) => (v as { model: string }).model).sort();
    await c.engine.unloadModel('add_sub');
    await waitFor(() => !names().includes('add_sub'));
    expect(names()).toEqual(['mock_llm', 'square_int32']);
    await c.engine.loadModel('add_sub');
    await waitFor(() => names().includes('add_sub'));
  });

  it('generate streams tokens and usage; stop strings and unknown models are refused', async () => {
    const c = await startCluster();
    const frames = (await collect(generate(c, prompt(40), { max_tokens: 5, temperature: 0 }))).map(decodeWireGenerateOutput);
    const tokens = frames.flatMap((f) => f.tokenIds);
    expect(tokens).toHaveLength(5);
    const last = frames.at(-1) as WireGenerateOutput;
    expect(last.finishReason).toBe('length');
    expect(last.usage).toEqual({ promptTokens: 40, completionTokens: 5, cachedTokens: 0 });
    expect(frames.slice(0, -1).every((f) => f.finishReason === null)).toBe(true);

    expect(await codeOf(collect(generate(c, prompt(4), { max_tokens: 2, stop: ['x'] })))).toBe('invalid_argument');
    expect(await codeOf(collect(generate(c, prompt(4), { max_tokens: 0 })))).toBe('invalid_argument');
    expect(
      await codeOf(collect(c.client.request(target(c, GENERATE_ENDPOINT), { v: 1, model: 'add_sub', requestId: 'x', promptTokenIds: [1], sampling: {} }))),
    ).toBe('not_found');
  });

  it('cancelling a generate aborts it in the engine', async () => {
    const c = await startCluster();
    const llm = c.engine.llmEndpoint('mock_llm')!;
    const ctrl = new AbortController();
    let received = 0;
    const code = await codeOf(
      (async () => {
        for await (const f of generate(c, prompt(8), { max_tokens: 480, ignore_eos: true }, { signal: ctrl.signal })) {
          received += decodeWireGenerateOutput(f).tokenIds.length;
          if (received >= 2) ctrl.abort();
        }
      })(),
    );
    expect(code).toBe('cancelled');
    expect(received).toBeLessThan(480);
    await waitFor(() => llm.metrics().requestsFinished.abort === 1 && llm.metrics().numRunning === 0);
  });

  it('infer round-trips a tensor model, streams a decoupled one and keeps error codes', async () => {
    const c = await startCluster();
    const f32 = (xs: number[]) => new Uint8Array(new Float32Array(xs).buffer);
    const request = {
      id: 'i1', modelName: 'add_sub', modelVersion: undefined, parameters: {},
      inputs: [
        { name: 'INPUT0', datatype: 'FP32' as const, shape: [4], data: f32([1, 2, 3, 4]), parameters: {} },
        { name: 'INPUT1', datatype: 'FP32' as const, shape: [4], data: f32([10, 20, 30, 40]), parameters: {} },
      ],
      outputs: [],
    };
    const frames = await collect(c.client.request(target(c, INFER_ENDPOINT), toJson(inferRequestToWire(request))));
    expect(frames).toHaveLength(1);
    const response = inferResponseFromWire(decodeWireInferResponse(frames[0]));
    expect(response).toMatchObject({ id: 'i1', modelName: 'add_sub', modelVersion: '1' });
    const out = (name: string) => {
      const t = response.outputs.find((o) => o.name === name)!;
      return [...new Float32Array(t.data.buffer.slice(t.data.byteOffset, t.data.byteOffset + t.data.byteLength))];
    };
    expect(out('OUTPUT0')).toEqual([11, 22, 33, 44]);
    expect(out('OUTPUT1')).toEqual([-9, -18, -27, -36]);

    const square = {
      id: 's', modelName: 'square_int32', modelVersion: undefined, parameters: {},
      inputs: [{ name: 'IN', datatype: 'INT32' as const, shape: [1], data: new Uint8Array(new Int32Array([3]).buffer), parameters: {} }],
      outputs: [],
    };
    const streamed = (await collect(c.client.request(target(c, INFER_ENDPOINT), toJson(inferRequestToWire(square))))).map((f) =>
      inferResponseFromWire(decodeWireInferResponse(f)),
    );
    expect(streamed).toHaveLength(3);
    for (const r of streamed) expect([...new Int32Array(r.outputs[0]!.data.slice().buffer)]).toEqual([3]);

    const bad = { ...request, inputs: [{ ...request.inputs[0]!, name: 'NOPE' }, request.inputs[1]!] };
    expect(await codeOf(collect(c.client.request(target(c, INFER_ENDPOINT), toJson(inferRequestToWire(bad)))))).toBe('invalid_argument');
    expect(await codeOf(collect(c.client.request(target(c, INFER_ENDPOINT), { v: 1, id: 'x' })))).toBe('invalid_argument');

    // each request is answered in its own form: JSON (base64) above, a binary payload (raw tensors) here
    expect(frames[0]).not.toBeInstanceOf(BinaryPayload);
    const binary = await collect(c.client.request(target(c, INFER_ENDPOINT), inferRequestToBinary(request)));
    expect(binary).toHaveLength(1);
    expect(binary[0]).toBeInstanceOf(BinaryPayload);
    const raw = inferResponseFromWire(decodeWireInferResponse(binary[0]));
    expect(raw.outputs.map((o) => [...new Float32Array(o.data.buffer, o.data.byteOffset, o.data.byteLength / 4)])).toEqual([
      [11, 22, 33, 44],
      [-9, -18, -27, -36],
    ]);
    const streamedRaw = await collect(c.client.request(target(c, INFER_ENDPOINT), inferRequestToBinary(square)));
    expect(streamedRaw.map((f) => [...new Int32Array(inferResponseFromWire(decodeWireInferResponse(f)).outputs[0]!.data.slice().buffer)])).toEqual([[3], [3], [3]]);

    // stats: the engine's statistics, its errors with their code
    const stats = await collect(c.client.request(target(c, STATS_ENDPOINT), { v: 1, model: 'add_sub', version: null }));
    expect(stats).toHaveLength(1);
    expect(decodeWireStats(stats[0]).models).toEqual(JSON.parse(JSON.stringify(await c.engine.modelStatistics('add_sub'))));
    expect(decodeWireStats(stats[0]).models[0]!.inference_count).toBe(2); // the JSON request and the binary one
    expect(await codeOf(collect(c.client.request(target(c, STATS_ENDPOINT), { v: 1, model: 'nope', version: null })))).toBe('invalid_argument');
  });

  it('publishes KV events in id order; applying them gives the kv_snapshot', async () => {
    const c = await startCluster();
    // shared prefixes (cache hits) and enough distinct prompts to evict blocks from 64
    for (let i = 0; i < 12; i++) await collect(generate(c, prompt(100, i % 3 === 0 ? 0 : i * 7), { max_tokens: 20, ignore_eos: true }));

    const chunks = (await collect(c.client.request(target(c, KV_SNAPSHOT_ENDPOINT), { v: 1, model: 'mock_llm' }))).map(decodeWireSnapshotChunk);
    expect(chunks.at(-1)!.done).toBe(true);
    const snapshot = chunks[0]!;
    expect(snapshot.last_event_id).toBeGreaterThan(0);

    const msgs = await consume(c, kvEventsSubject(ns, backend), (ms) => {
      const last = ms.at(-1);
      return last !== undefined && decodeWireKvEvents(last.payload).events.at(-1)!.event_id >= snapshot.last_event_id;
    });
    const events = msgs.map((m) => decodeWireKvEvents(m.payload)).flatMap((b) => {
      expect(b).toMatchObject({ instanceId: c.node.instanceId, model: 'mock_llm' });
      return b.events;
    });
    expect(events.map((e) => e.event_id)).toEqual(events.map((_, i) => i));
    expect(events.some((e) => e.data.type === 'removed')).toBe(true);
    const view = new Map<string, SnapshotBlock>();
    for (const e of events) applyKvEvent(view as Map<never, SnapshotBlock>, e);
    const fromSnapshot = new Map(chunks.flatMap((ch) => ch.blocks).map((b) => [b.block_hash as string, b]));
    expect(view).toEqual(fromSnapshot);
  });

  it('a reloaded LLM continues its KV event ids after a cleared event, and kv_snapshot speaks the same ids', async () => {
    const c = await startCluster();
    await collect(generate(c, prompt(100), { max_tokens: 4, ignore_eos: true }));
    const snapshot = async () => (await collect(c.client.request(target(c, KV_SNAPSHOT_ENDPOINT), { v: 1, model: 'mock_llm' }))).map(decodeWireSnapshotChunk);
    const before = (await snapshot())[0]!.last_event_id;
    expect(before).toBeGreaterThanOrEqual(0);
    const old = c.engine.llmEndpoint?.('mock_llm');
    // A reload with a config override (an unchanged folder is not reloaded): a new engine whose own ids restart at 0.
    await c.engine.loadModel('mock_llm', { config: renderModelConfigJson(c.engine.modelConfig('mock_llm')) });
    await waitFor(() => c.engine.llmEndpoint?.('mock_llm') !== old);
    await collect(generate(c, prompt(100), { max_tokens: 4, ignore_eos: true }));
    const after = await snapshot();
    const msgs = await consume(c, kvEventsSubject(ns, backend), (ms) => {
      const last = ms.at(-1);
      return last !== undefined && decodeWireKvEvents(last.payload).events.at(-1)!.event_id >= after[0]!.last_event_id;
    });
    const events = msgs.flatMap((m) => decodeWireKvEvents(m.payload).events);
    expect(events.map((e) => e.event_id)).toEqual(events.map((_, i) => i));
    expect(events[before + 1]!.data.type).toBe('cleared');
    expect(after[0]!.last_event_id).toBeGreaterThan(before + 1);
    const view = new Map<string, SnapshotBlock>();
    for (const e of events) applyKvEvent(view as Map<never, SnapshotBlock>, e);
    expect(view).toEqual(new Map(after.flatMap((ch) => ch.blocks).map((b) => [b.block_hash as string, b])));
  });

  it('publishes load samples and heartbeats', async () => {
    const c = await startCluster();
    await collect(generate(c, prompt(40), { max_tokens: 3 }));
    const msgs = await consume(c, loadSubject(ns, backend), (ms) => ms.some((m) => decodeWireLoad(m.payload).prefixCacheQueries >= 40));
    const loads = msgs.map((m) => decodeWireLoad(m.payload));
    expect(loads[0]).toMatchObject({ instanceId: c.node.instanceId, model: 'mock_llm', kvTotalBlocks: 64 });
    // unchanged samples are not repeated every interval (20 ms): well under one per interval
    const before = c.events.lastSeq;
    await new Promise((r) => setTimeout(r, 300));
    let loadsAfter = 0;
    for (let seq = before + 1; seq <= c.events.lastSeq; seq++) if (c.events.at(seq)?.subject === loadSubject(ns, backend)) loadsAfter++;
    expect(loadsAfter).toBeLessThanOrEqual(1);
  });

  it("publishes the engine's forward-pass figures in batches: one prefill step, then the decode steps", async () => {
    const c = await startCluster({ forwardPassIntervalMs: 20 });
    await collect(generate(c, prompt(40), { max_tokens: 4, ignore_eos: true }));
    const msgs = await consume(c, forwardPassSubject(ns, backend), (ms) => ms.flatMap((m) => decodeWireForwardPass(m.payload).steps).length >= 4);
    const batches = msgs.map((m) => decodeWireForwardPass(m.payload));
    for (const b of batches) {
      expect(b).toMatchObject({ instanceId: c.node.instanceId, model: 'mock_llm', dropped: 0 });
      expect(b.to).toBeGreaterThanOrEqual(b.from);
    }
    const steps = batches.flatMap((b) => b.steps);
    expect(steps.map((st) => [st.prefillTokens, st.decodeKvTokens])).toEqual([
      [40, 0],
      [0, 41],
      [0, 42],
      [0, 43],
    ]);
    for (const st of steps) expect(st.wallMs).toBeGreaterThan(0);
    // an idle engine sends nothing
    const before = c.events.lastSeq;
    await new Promise((r) => setTimeout(r, 100));
    for (let seq = before + 1; seq <= c.events.lastSeq; seq++) expect(c.events.at(seq)?.subject).not.toBe(forwardPassSubject(ns, backend));
  });

  it('drain: leaves discovery before in-flight requests finish, and they finish', async () => {
    const c = await startCluster();
    const mine = () => [...c.store.snapshot(`switchyard/${NS}/`).keys()];
    expect(mine().length).toBe(7); // 4 instances, 3 cards
    const it1 = generate(c, prompt(8), { max_tokens: 480, ignore_eos: true })[Symbol.asyncIterator]();
    const first = await it1.next();
    expect(first.done).toBe(false);
    let drained = false;
    const draining = c.node.drain().then(() => (drained = true));
    await waitFor(() => mine().length === 0);
    // discovery is empty while the engine still runs the request
    expect(c.engine.llmEndpoint('mock_llm')!.metrics().numRunning).toBe(1);
    expect(drained).toBe(false);
    let tokens = decodeWireGenerateOutput(first.value).tokenIds.length;
    let last: WireGenerateOutput | undefined;
    for (;;) {
      const r = await it1.next();
      if (r.done === true) break;
      last = decodeWireGenerateOutput(r.value);
      tokens += last.tokenIds.length;
      // still streaming after discovery emptied
    }
    expect(tokens).toBe(480);
    expect(last!.finishReason).toBe('length');
    // the health endpoint is not in discovery and keeps answering while draining
    expect(await collect(c.client.request(target(c, HEALTH_ENDPOINT), {}))).toEqual([{ state: 'draining' }]);
    await draining;
    expect(drained).toBe(true);
    expect(c.node.state).toBe('draining');
    await expect(collect(generate(c, prompt(4), { max_tokens: 1 }))).rejects.toBeInstanceOf(NoRespondersError);
    expect(await collect(c.client.request(target(c, HEALTH_ENDPOINT), {}))).toEqual([{ state: 'draining' }]);
    await c.node.close();
    await expect(collect(c.client.request(target(c, HEALTH_ENDPOINT), {}))).rejects.toBeInstanceOf(NoRespondersError);
  });

  it('lease loss: keeps serving; once the lease is restored the cards are back, following models changed meanwhile', async () => {
    const c = await startCluster();
    const restored: number[] = [];
    const names = () => [...c.store.snapshot(modelsPrefix(ns)).values()].map((v) => (v as { model: string }).model).sort();
    const instances = () => c.store.snapshot(instancesPrefix(ns)).size;
    expect(names()).toEqual(['add_sub', 'mock_llm', 'square_int32']);
    const registered = instances();
    c.discovery.onLeaseRestored(() => restored.push(1));
    c.discovery.expireLease();
    await waitFor(() => c.leaseLost.length === 1);
    expect(c.node.state).toBe('serving');
    expect(names()).toEqual([]);
    // still serving over the request plane: routers that know it keep using it
    const out = (await collect(generate(c, prompt(4), { max_tokens: 2 }))).map((v) => decodeWireGenerateOutput(v));
    expect(out.reduce((n, o) => n + o.tokenIds.length, 0)).toBe(2);
    expect(await collect(c.client.request(target(c, HEALTH_ENDPOINT), {}))).toEqual([{ state: 'serving' }]);
    // a model leaves while discovery is away
    await c.engine.unloadModel('square_int32');
    c.discovery.restoreLease();
    await waitFor(() => names().length === 2);
    expect(names()).toEqual(['add_sub', 'mock_llm']);
    expect(instances()).toBe(registered);
    expect(c.node.models()).toEqual(['add_sub', 'mock_llm']);
    // and one comes back after the restore: announced as usual
    await c.engine.loadModel('square_int32');
    await waitFor(() => names().length === 3);
    expect(restored).toHaveLength(1);
  });

});

describe('disaggregation over memory twins', () => {
  /** A prefill and a decode worker (mock_llm only) on one discovery, broker and KV transfer network. */
  async function prefillAndDecode(): Promise<{ prefill: Cluster; decode: Cluster; network: MemoryKvTransferNetwork }> {
    const network = new MemoryKvTransferNetwork();
    const prefill = await startCluster({ role: 'prefill', kvTransferPlane: new MemoryKvTransferPlane(network) }, {}, ['mock_llm']);
    const decode = await startCluster({ role: 'decode', kvTransferPlane: new MemoryKvTransferPlane(network) }, { store: prefill.store, broker: prefill.broker, events: prefill.events }, ['mock_llm']);
    return { prefill, decode, network };
  }
  const llmCard = (c: Cluster) => {
    const card = [...c.store.snapshot(modelsPrefix(ns)).values()].map((v) => decodeModelCard(v)).find((k) => k.model === 'mock_llm' && k.instanceId === c.node.instanceId)!;
    return decodeLlmCardMetadata(card.metadata);
  };
  const request = (c: Cluster, body: Record<string, unknown>, options: { signal?: AbortSignal } = {}) =>
    c.client.request(target(c, GENERATE_ENDPOINT), toJson({ v: 1, model: 'mock_llm', requestId: 'd1', ...body } as never), options);

  it('cards carry the role and, with a plane, the transfer address and layout of one server per process', async () => {
    const { prefill, decode, network } = await prefillAndDecode();
    const p = llmCard(prefill);
    const d = llmCard(decode);
    expect(p.role).toBe('prefill');
    expect(d.role).toBe('decode');
    const layout = prefill.engine.llmEndpoint('mock_llm')!.kvTransfer!.layout;
    expect(p.kvTransfer).toEqual({ address: expect.stringMatching(/^memory:\d+$/), layout: { ...layout } });
    expect(d.kvTransfer!.address).not.toBe(p.kvTransfer!.address);
    expect(network.addresses()).toEqual([p.kvTransfer!.address, d.kvTransfer!.address].sort());
    // without a plane: aggregated, and no transfer on the card
    const plain = await startCluster({}, {}, ['mock_llm']);
    expect(llmCard(plain).role).toBe('aggregated');
    expect(llmCard(plain).kvTransfer).toBeUndefined();
    expect(await codeOf(collect(request(plain, { promptTokenIds: prompt(40), sampling: { max_tokens: 4 }, prefillOnly: true })))).toBe('unsupported');
  });

  it('a prefill worker hands out a handle; the decode worker pulls through it and reports the import on its first output', async () => {
    const { prefill, decode } = await prefillAndDecode();
    const tokens = prompt(70);
    // a prefill worker runs nothing but prefill-only requests
    expect(await codeOf(collect(request(prefill, { promptTokenIds: tokens, sampling: { max_tokens: 4 } })))).toBe('unsupported');

    const pre = (await collect(request(prefill, { promptTokenIds: tokens, sampling: { max_tokens: 6, temperature: 0 }, prefillOnly: true }))).map(decodeWireGenerateOutput);
    const last = pre.at(-1)!;
    expect(last.finishReason).toBe('length');
    expect(pre.flatMap((f) => f.tokenIds)).toHaveLength(1);
    const handle = last.kvTransfer!;
    expect(handle).toMatchObject({ address: llmCard(prefill).kvTransfer!.address, instanceId: prefill.node.instanceId, blockHashes: expect.any(Array) });
    expect(handle.blockHashes).toHaveLength(4);
    expect(pinnedKvBlocks(prefill.engine)).toBe(4);

    const first = pre[0]!.tokenIds[0]!;
    const out = (
      await collect(request(decode, { promptTokenIds: tokens, outputTokenIds: [first], sampling: { max_tokens: 6, temperature: 0, seed: handle.seed }, kvTransfer: handle }))
    ).map(decodeWireGenerateOutput);
    expect(out[0]!.kvImport).toMatchObject({ pulledBlocks: 4, cachedBlocks: 0 });
    expect(out[0]!.kvImport!.fallback).toBeUndefined();
    expect(out.slice(1).every((f) => f.kvImport === undefined)).toBe(true);
    expect(out.flatMap((f) => f.tokenIds)).toHaveLength(5);
    expect(out.at(-1)!.usage).toEqual({ promptTokens: 70, completionTokens: 6, cachedTokens: 64 });
    await waitFor(() => pinnedKvBlocks(prefill.engine) === 0 && pinnedKvBlocks(decode.engine) === 0);

    // the same prompt again: the decode worker holds every block now and pulls nothing
    const pre2 = (await collect(request(prefill, { requestId: 'd2', promptTokenIds: tokens, sampling: { max_tokens: 3 }, prefillOnly: true }))).map(decodeWireGenerateOutput);
    const again = (
      await collect(request(decode, { requestId: 'd2', promptTokenIds: tokens, outputTokenIds: pre2[0]!.tokenIds, sampling: { max_tokens: 3 }, kvTransfer: pre2.at(-1)!.kvTransfer! }))
    ).map(decodeWireGenerateOutput);
    expect(again[0]!.kvImport).toMatchObject({ pulledBlocks: 0, cachedBlocks: 4, bytes: 0 });
    await waitFor(() => pinnedKvBlocks(prefill.engine) === 0);

    // a handle whose lease is gone: the decode worker prefills locally and says why
    const other = prompt(50, 7);
    const pre3 = (await collect(request(prefill, { requestId: 'd3', promptTokenIds: other, sampling: { max_tokens: 3 }, prefillOnly: true }))).map(decodeWireGenerateOutput);
    const gone = pre3.at(-1)!.kvTransfer!;
    expect(prefill.engine.llmEndpoint('mock_llm')!.kvTransfer!.releaseLease(gone.leaseId)).toBe(true);
    const fallback = (
      await collect(request(decode, { requestId: 'd3', promptTokenIds: other, outputTokenIds: pre3[0]!.tokenIds, sampling: { max_tokens: 3 }, kvTransfer: gone }))
    ).map(decodeWireGenerateOutput);
    expect(fallback[0]!.kvImport!.fallback).toMatch(/unknown or expired KV transfer lease/);
    expect(fallback.flatMap((f) => f.tokenIds)).toHaveLength(2);
    expect(fallback.at(-1)!.usage!.cachedTokens).toBe(0);
  });

  it('a prefill-only request aborted before its handle goes out leaves nothing pinned', async () => {
    const { prefill } = await prefillAndDecode();
    const ctrl = new AbortController();
    ctrl.abort();
    expect(await codeOf(collect(request(prefill, { promptTokenIds: prompt(70), sampling: { max_tokens: 4 }, prefillOnly: true }, { signal: ctrl.signal })))).toBe('cancelled');
    await waitFor(() => pinnedKvBlocks(prefill.engine) === 0);
  });

  it('drain waits for the leases handed out to be released (bounded by KV_LEASE_DRAIN_MS)', async () => {
    const { prefill, network } = await prefillAndDecode();
    const pre = (await collect(request(prefill, { promptTokenIds: prompt(40), sampling: { max_tokens: 4 }, prefillOnly: true }))).map(decodeWireGenerateOutput);
    const handle = pre.at(-1)!.kvTransfer!;
    expect(pinnedKvBlocks(prefill.engine)).toBe(2);
    let drained = false;
    const t0 = Date.now();
    const drain = prefill.node.drain().then(() => (drained = true));
    await new Promise((r) => setTimeout(r, 150));
    expect(drained).toBe(false);
    // a decode worker still pulls from the draining worker's transfer server, then releases the lease
    const puller = new MemoryKvTransferPlane(network);
    let pulled = 0;
    for await (const chunk of puller.pull(handle.address, { model: 'mock_llm', leaseId: handle.leaseId, hashes: handle.blockHashes, layoutDigest: kvLayoutDigest(handle.layout) })) pulled += chunk.length;
    expect(pulled).toBe(2);
    expect(await puller.release(handle.address, { model: 'mock_llm', leaseId: handle.leaseId })).toBe(true);
    await puller.close();
    await drain;
    expect(Date.now() - t0).toBeLessThan(KV_LEASE_DRAIN_MS);
  });
});
