/**
 * A real worker process in cluster mode (`--etcd --nats`) over real etcd and NATS JetStream started by
 * the harness on private ports, driven from this process through the runtime's real clients: the worker
 * registers its instances and model card, answers `generate` over NATS, publishes KV events to
 * JetStream, and on SIGTERM leaves etcd and exits 0.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decodeLlmCardMetadata, decodeWireGenerateOutput, decodeWireKvEvents, GENERATE_ENDPOINT, WORKER_COMPONENT, type WireKvEvents } from '@switchyard/cluster';
import { llmFixtureRepositoryFiles } from '@switchyard/onnx-builder';
import {
  EtcdDiscovery,
  JetStreamEventPlane,
  NatsRequestPlane,
  componentName,
  decodeModelCard,
  endpointAddress,
  instanceAddress,
  kvEventsSubject,
  namespace,
  namespacePrefix,
  parseKey,
} from '@switchyard/runtime';
import { startEtcd, startNats, startWorkerProcess, type EtcdServer, type NatsServer, type WorkerProcess } from '@switchyard/testing';
import { fixtureRepository, type FixtureRepository } from './lib/fixture-repository.js';
import { waitFor } from './lib/wait-for.js';

const NS = 'e2e';

let etcd: EtcdServer;
let nats: NatsServer;
let repo: FixtureRepository;
let worker: WorkerProcess;
let discovery: EtcdDiscovery;
let requests: NatsRequestPlane;
let events: JetStreamEventPlane;
const view = new Map<string, unknown>();
const watchStop = new AbortController();

beforeAll(async () => {
  [etcd, nats] = await Promise.all([startEtcd(), startNats({ jetstream: true })]);
  const files = llmFixtureRepositoryFiles().filter((f) => f.path.startsWith('mock_llm/'));
  repo = fixtureRepository('llm_repository', { files: Object.fromEntries(files.map((f) => [f.path, f.build()])) });
  worker = await startWorkerProcess({
    modelRepositories: [repo.path],
    args: ['--etcd', etcd.url, '--nats', nats.url, '--namespace', NS, '--model-control-mode=explicit', '--load-model=mock_llm'],
  });
  discovery = await EtcdDiscovery.connect({ url: etcd.url });
  requests = await NatsRequestPlane.connect({ url: nats.url });
  events = await JetStreamEventPlane.connect({ url: nats.url });
  void (async () => {
    for await (const e of discovery.watch(namespacePrefix(namespace(NS)), watchStop.signal)) {
      if (e.type === 'put') view.set(e.key, e.value);
      else if (e.type === 'delete') view.delete(e.key);
    }
  })();
});

afterAll(async () => {
  watchStop.abort();
  await worker?.stop('SIGKILL');
  await Promise.allSettled([discovery?.close(), requests?.close(), events?.close()]);
  await Promise.allSettled([etcd?.stop(), nats?.stop()]);
  repo?.remove();
});

const startedLog = () => worker.logs().find((l) => l['msg'] === 'worker started') as { cluster?: { instanceId: string; namespace: string } } | undefined;

describe('worker in cluster mode', () => {
  it('registers its four instances and the model card in etcd', async () => {
    const cluster = startedLog()?.cluster;
    expect(cluster).toMatchObject({ namespace: NS });
    const id = cluster!.instanceId;
    await waitFor(async () => view.size === 5, { timeoutMs: 10_000, message: `keys: ${[...view.keys()].join(', ')}` });
    const parsed = [...view.keys()].map((k) => parseKey(k)!);
    expect(parsed.filter((p) => p.kind === 'instance').map((p) => (p as { address: { endpoint: string } }).address.endpoint).sort()).toEqual([
      'generate',
      'infer',
      'kv_snapshot',
      'stats',
    ]);
    const cardKey = [...view.keys()].find((k) => parseKey(k)!.kind === 'model')!;
    const card = decodeModelCard(view.get(cardKey));
    expect(card).toMatchObject({ model: 'mock_llm', kind: 'llm', instanceId: id, endpoint: GENERATE_ENDPOINT, kvBlockSize: 16, contextLength: 512 });
    expect(card.tokenizer?.type).toBe('inline');
    expect(decodeLlmCardMetadata(card.metadata)).toMatchObject({ engine: 'mocker', kvEvents: true, totalKvBlocks: 64 });
  });

  it('generates over NATS and publishes the KV events to JetStream', async () => {
    const id = startedLog()!.cluster!.instanceId;
    const target = instanceAddress(endpointAddress(NS, WORKER_COMPONENT, GENERATE_ENDPOINT), id);
    const prompt = Array.from({ length: 40 }, (_, i) => 5 + i);
    const frames = [];
    for await (const f of requests.request(target, { v: 1, model: 'mock_llm', requestId: 'e2e-1', promptTokenIds: prompt, sampling: { max_tokens: 6 } })) {
      frames.push(decodeWireGenerateOutput(f));
    }
    expect(frames.flatMap((f) => f.tokenIds)).toHaveLength(6);
    expect(frames.at(-1)).toMatchObject({ finishReason: 'length', usage: { promptTokens: 40, completionTokens: 6 } });

    const ctrl = new AbortController();
    const timer = setTimeout(() => ctrl.abort(), 10_000);
    const batches: WireKvEvents[] = [];
    try {
      for await (const m of events.subscribe({ subject: kvEventsSubject(namespace(NS), componentName(WORKER_COMPONENT)), durable: 'e2e-indexer', signal: ctrl.signal })) {
        batches.push(decodeWireKvEvents(m.payload));
        m.ack();
        // 40 prompt tokens = 2 full blocks of 16, stored as the prompt is computed
        const stored = batches.flatMap((b) => b.events).flatMap((e) => (e.data.type === 'stored' ? e.data.blocks : []));
        if (stored.length >= 2) break;
      }
    } finally {
      clearTimeout(timer);
    }
    const all = batches.flatMap((b) => b.events);
    expect(batches.every((b) => b.instanceId === id && b.model === 'mock_llm')).toBe(true);
    expect(all.map((e) => e.event_id)).toEqual(all.map((_, i) => i));
    expect(all.flatMap((e) => (e.data.type === 'stored' ? e.data.blocks : [])).length).toBeGreaterThanOrEqual(2);
  });

  it('on SIGTERM leaves etcd and exits 0', async () => {
    expect(view.size).toBe(5); // 4 instances, 1 card
    const exit = await worker.stop('SIGTERM');
    expect(exit).toEqual({ code: 0, signal: null });
    await waitFor(async () => view.size === 0, { timeoutMs: 10_000, message: `keys left: ${[...view.keys()].join(', ')}` });
    const logs = worker.logs().map((l) => l['msg']);
    expect(logs.indexOf('cluster endpoints drained')).toBeGreaterThan(-1);
    expect(logs.indexOf('cluster endpoints drained')).toBeLessThan(logs.indexOf('worker stopped'));
  });
});
