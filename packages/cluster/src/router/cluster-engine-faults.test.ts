/**
 * KServe tensor requests through the router when their worker dies (memory twins): a stateless
 * request is re-sent to another instance (stall probe of a silent dead instance; a crashed stream);
 * a request in the middle of a sequence fails `unavailable` at once with a clear message, and so do
 * the next ones until the dead instance leaves discovery; a sequence START is re-sent.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { SwitchyardError, cancelled } from '@switchyard/common';
import type { InferResult } from '@switchyard/engine';
import { MemoryRoutingTable } from '@switchyard/kv-router';
import { type InferRequest, type InferResponse, deserializeBytesElements, serializeBytesElements } from '@switchyard/kserve';
import { SimulatedExecutor } from '@switchyard/llm';
import { type InstanceId, type ModelCard, type RequestPlane, endpointAddress, instanceAddress, modelKey, modelName, namespace } from '@switchyard/runtime';
import { type HttpFrontDoor, ServerSettings, SharedMemoryManager, createHttpServer } from '@switchyard/server';
import type { WireGenerateRequest } from '../protocols.js';
import { inferResponseToWire, toJson } from '../wire-codec.js';
import { type RouterCore, startRouterCore } from './router-core.js';
import { rendezvousInstance, sequencePinKey } from './sequence-pins.js';
import { DECOUPLED_ERROR, LLM, MockCluster, type MockWorker, NS, SEQUENCE, TENSOR, waitFor } from './test-support/mock-cluster.js';

let cluster: MockCluster | undefined;
let router: RouterCore | undefined;
let door: HttpFrontDoor | undefined;
afterEach(async () => {
  await door?.close();
  await router?.close();
  await cluster?.close();
  door = undefined;
  router = undefined;
  cluster = undefined;
});

const addSub = (id: string): InferRequest => ({
  id,
  modelName: TENSOR,
  modelVersion: undefined,
  parameters: {},
  inputs: [
    { name: 'INPUT0', datatype: 'INT32', shape: [4], data: new Uint8Array(Int32Array.of(1, 2, 3, 4).buffer), parameters: {} },
    { name: 'INPUT1', datatype: 'INT32', shape: [4], data: new Uint8Array(Int32Array.of(10, 20, 30, 40).buffer), parameters: {} },
  ],
  outputs: [],
});
const int32s = (r: InferResponse, name: string): number[] => {
  const t = r.outputs.find((o) => o.name === name)!;
  return [...new Int32Array(t.data.buffer.slice(t.data.byteOffset, t.data.byteOffset + t.data.byteLength))];
};
const seqStep = (id: string, value: number, flags: { start?: boolean; end?: boolean } = {}): InferRequest => ({
  id: `${id}-${value}`,
  modelName: SEQUENCE,
  modelVersion: undefined,
  parameters: { sequence_id: id, ...(flags.start === true ? { sequence_start: true } : {}), ...(flags.end === true ? { sequence_end: true } : {}) },
  inputs: [{ name: 'INPUT', datatype: 'INT32', shape: [1], data: new Uint8Array(Int32Array.of(value).buffer), parameters: {} }],
  outputs: [],
});
/** The error a request fails with (it must fail). */
async function failure(p: Promise<unknown>): Promise<SwitchyardError> {
  try {
    await p;
  } catch (e) {
    expect(e).toBeInstanceOf(SwitchyardError);
    return e as SwitchyardError;
  }
  throw new Error('the request succeeded');
}
/** A string sequence id whose rendezvous choice among `instances` is `target`. */
function sequenceLandingOn(target: InstanceId, instances: InstanceId[], tag: string): string {
  for (let i = 0; ; i++) {
    const id = `${tag}-${i}`;
    if (rendezvousInstance(sequencePinKey(SEQUENCE, `s:${id}`), instances) === target) return id;
  }
}

describe('ClusterEngine: a tensor request whose worker dies', () => {
  it('a silent dead instance (lease still alive): the stall probe finds it dead and the request is re-sent to another instance', async () => {
    cluster = new MockCluster();
    const real = await cluster.addWorker({ llm: false, tensor: true });
    // a worker that took the request and died: it never answers, serves no health endpoint, its lease lives on
    const dead = cluster.store.connect();
    let received = 0;
    await cluster.routerRoles().requestPlane.serve(instanceAddress(endpointAddress(NS, 'backend', 'infer'), dead.instanceId), async function* () {
      received++;
      await new Promise(() => {});
    });
    const card = cluster.store.snapshot().get(modelKey(namespace(NS), modelName(TENSOR), real.node.instanceId as never)) as ModelCard;
    await dead.registerModel({ ...card, instanceId: dead.instanceId });
    router = await startRouterCore({ ...cluster.routerRoles(), routingTable: new MemoryRoutingTable(), namespace: NS, routerId: 't1', stallProbeMs: 100 });
    await waitFor(() => router!.registry.model(TENSOR)?.instances.size === 2, 5000, 'two instances');

    // least in flight: the two requests go to different instances, one of them to the dead one
    const t0 = Date.now();
    const [a, b] = await Promise.all([router.engine.infer(addSub('a')), router.engine.infer(addSub('b'))]);
    expect(Date.now() - t0).toBeLessThan(5000);
    expect(received).toBe(1);
    for (const r of [a, b]) {
      expect(int32s(r, 'OUTPUT0')).toEqual([11, 22, 33, 44]);
      expect(int32s(r, 'OUTPUT1')).toEqual([-9, -18, -27, -36]);
    }
    expect([a.id, b.id].sort()).toEqual(['a', 'b']);
    const s = router.stats();
    expect(s.stallProbeAborts).toBe(1);
    expect(s.migrations.ongoing_request).toBe(1);
    // inhibited: the next requests all go to the live instance
    for (let i = 0; i < 4; i++) expect(int32s(await router.engine.infer(addSub(`next-${i}`)), 'OUTPUT0')).toEqual([11, 22, 33, 44]);
    expect(received).toBe(1);
  });

  it('stall probe off: the dead instance leaving discovery (lease expired) aborts the request, which is re-sent', async () => {
    cluster = new MockCluster();
    const real = await cluster.addWorker({ llm: false, tensor: true });
    const dead = cluster.store.connect();
    await cluster.routerRoles().requestPlane.serve(instanceAddress(endpointAddress(NS, 'backend', 'infer'), dead.instanceId), async function* () {
      await new Promise(() => {});
    });
    const card = cluster.store.snapshot().get(modelKey(namespace(NS), modelName(TENSOR), real.node.instanceId as never)) as ModelCard;
    await dead.registerModel({ ...card, instanceId: dead.instanceId });
    router = await startRouterCore({ ...cluster.routerRoles(), routingTable: new MemoryRoutingTable(), namespace: NS, routerId: 't4', stallProbeMs: 0 });
    await waitFor(() => router!.registry.model(TENSOR)?.instances.size === 2, 5000, 'two instances');
    const pending = [router.engine.infer(addSub('a')), router.engine.infer(addSub('b'))];
    await new Promise((r) => setTimeout(r, 100));
    dead.expireLease();
    for (const r of await Promise.all(pending)) expect(int32s(r, 'OUTPUT0')).toEqual([11, 22, 33, 44]);
    expect(router.stats().instanceRemovalAborts).toBe(1);
    expect(router.stats().migrations.ongoing_request).toBe(1);
  });

  it('a worker that crashes with the request in flight: re-sent, answered by the other worker', async () => {
    cluster = new MockCluster();
    const workers = [await cluster.addWorker({ llm: false, tensor: true }), await cluster.addWorker({ llm: false, tensor: true })];
    router = await startRouterCore({ ...cluster.routerRoles(), routingTable: new MemoryRoutingTable(), namespace: NS, routerId: 't2' });
    await waitFor(() => router!.registry.model(TENSOR)?.instances.size === 2, 5000, 'two instances');
    const pending = [router.engine.infer(addSub('x')), router.engine.infer(addSub('y'))];
    workers[0]!.crash(); // one of the two requests is in flight there
    for (const r of await Promise.all(pending)) expect(int32s(r, 'OUTPUT0')).toEqual([11, 22, 33, 44]);
    expect(router.stats().migrations.ongoing_request + router.stats().migrations.new_request).toBe(1);
  });

  it('with migration off, a request whose worker died fails unavailable instead of being re-sent', async () => {
    cluster = new MockCluster();
    const workers = [await cluster.addWorker({ llm: false, tensor: true }), await cluster.addWorker({ llm: false, tensor: true })];
    router = await startRouterCore({ ...cluster.routerRoles(), routingTable: new MemoryRoutingTable(), namespace: NS, routerId: 't3', migrationLimit: 0 });
    await waitFor(() => router!.registry.model(TENSOR)?.instances.size === 2, 5000, 'two instances');
    const pending = [router.engine.infer(addSub('x')), router.engine.infer(addSub('y'))].map((p) => p.then(() => undefined, (e: unknown) => e));
    workers[0]!.crash();
    const outcomes = await Promise.all(pending);
    const errors = outcomes.filter((o): o is SwitchyardError => o !== undefined);
    expect(errors).toHaveLength(1);
    expect(errors[0]!.code).toBe('unavailable');
    expect(errors[0]!.message).toMatch(/^the worker serving the request \(instance .+\) failed during the request$/);
  });
});

describe('ClusterEngine: a decoupled request whose worker dies', () => {
  it('after some of its responses were delivered: unavailable (re-sending would repeat them), within the stall probe', async () => {
    cluster = new MockCluster();
    const real = await cluster.addWorker({ llm: false, extras: true });
    // a worker that sent one response and died (no health endpoint, lease alive)
    const dead = cluster.store.connect();
    await cluster.routerRoles().requestPlane.serve(instanceAddress(endpointAddress(NS, 'backend', 'infer'), dead.instanceId), async function* () {
      const out = { name: 'OUT', datatype: 'INT32' as const, shape: [1], data: new Uint8Array(Int32Array.of(1).buffer), parameters: {} };
      yield toJson(inferResponseToWire({ id: 'd', modelName: DECOUPLED_ERROR, modelVersion: '1', parameters: {}, outputs: [out] }));
      await new Promise(() => {});
    });
    const card = cluster.store.snapshot().get(modelKey(namespace(NS), modelName(DECOUPLED_ERROR), real.node.instanceId as never)) as ModelCard;
    await dead.registerModel({ ...card, instanceId: dead.instanceId });
    await real.node.drain(); // only the dead one serves the model
    router = await startRouterCore({ ...cluster.routerRoles(), routingTable: new MemoryRoutingTable(), namespace: NS, routerId: 'd1', stallProbeMs: 100 });
    await waitFor(() => [...(router!.registry.model(DECOUPLED_ERROR)?.instances.keys() ?? [])].join() === dead.instanceId, 5000, 'the dead instance only');
    const results: InferResult[] = [];
    const t0 = Date.now();
    await new Promise<void>((resolve) =>
      router!.engine.submit(
        { id: 'd', modelName: DECOUPLED_ERROR, modelVersion: undefined, parameters: {}, inputs: [{ name: 'IN', datatype: 'INT32', shape: [1], data: new Uint8Array(Int32Array.of(3).buffer), parameters: {} }], outputs: [] },
        (r) => {
          results.push(r);
          if (r.final) resolve();
        },
      ),
    );
    expect(Date.now() - t0).toBeLessThan(5000);
    expect(results).toHaveLength(2);
    expect(results[0]).toMatchObject({ final: false, response: { id: 'd' } });
    expect(results[1]!.final).toBe(true);
    expect(results[1]!.error?.code).toBe('unavailable');
    expect(results[1]!.error?.message).toBe(
      `the worker serving the request (instance ${dead.instanceId}) failed during the request after 1 of its responses were delivered; it cannot be re-sent without repeating them`,
    );
  });
});

describe('ClusterEngine: a sequence whose worker dies', () => {
  it('mid-sequence: unavailable at once, with a clear message, until the instance leaves discovery; a START is re-sent to another instance', async () => {
    cluster = new MockCluster();
    const workers: MockWorker[] = [await cluster.addWorker({ llm: false, extras: true }), await cluster.addWorker({ llm: false, extras: true })];
    router = await startRouterCore({ ...cluster.routerRoles(), routingTable: new MemoryRoutingTable(), namespace: NS, routerId: 's1' });
    await waitFor(() => router!.registry.model(SEQUENCE)?.instances.size === 2, 5000, 'two instances');
    const ids = workers.map((w) => w.node.instanceId as InstanceId);
    const [victim, survivor] = workers as [MockWorker, MockWorker];
    const lost = sequenceLandingOn(ids[0]!, ids, 'lost');
    const restarted = sequenceLandingOn(ids[0]!, ids, 'restart');
    const sum = async (r: Promise<InferResponse>): Promise<number> => int32s(await r, 'OUTPUT')[0]!;

    expect(await sum(router.engine.infer(seqStep(lost, 1, { start: true })))).toBe(1);
    expect(await sum(router.engine.infer(seqStep(lost, 2)))).toBe(3);
    // the worker holding the sequence dies with the next request in flight
    const inFlight = router.engine.infer(seqStep(lost, 3));
    victim.crash();
    const t0 = Date.now();
    const error = await failure(inFlight);
    expect(error.code).toBe('unavailable');
    expect([
      `inference request for sequence ${lost} to model '${SEQUENCE}' failed: the worker holding the sequence (instance ${ids[0]}) failed during the request; the sequence's state is lost, start it again with the START flag`,
      `inference request for sequence ${lost} to model '${SEQUENCE}' failed: the worker holding the sequence (instance ${ids[0]}) is unreachable; its state cannot move to another worker: retry later, or start the sequence again with the START flag`,
    ]).toContain(error.message);
    // the next request of the sequence: the worker is still in discovery (lease alive), no responders → the same, at once
    const next = await failure(router.engine.infer(seqStep(lost, 4)));
    expect(next.code).toBe('unavailable');
    expect(next.message).toBe(
      `inference request for sequence ${lost} to model '${SEQUENCE}' failed: the worker holding the sequence (instance ${ids[0]}) is unreachable; its state cannot move to another worker: retry later, or start the sequence again with the START flag`,
    );
    expect(Date.now() - t0).toBeLessThan(2000);

    // a START that lands on the dead instance (still in discovery) is re-sent to the survivor and pinned there
    expect(await sum(router.engine.infer(seqStep(restarted, 5, { start: true })))).toBe(5);
    expect(await sum(router.engine.infer(seqStep(restarted, 6, { end: true })))).toBe(11); // END frees the survivor's one sequence slot
    expect(router.stats().migrations.new_request).toBe(1);

    // once the dead instance left discovery: the worker's answer for a sequence it does not know
    victim.discovery.expireLease();
    await waitFor(() => router!.registry.model(SEQUENCE)?.instances.size === 1, 5000, 'dead instance gone');
    const gone = await failure(router.engine.infer(seqStep(lost, 7)));
    expect(gone.code).toBe('invalid_argument');
    expect(gone.message).toBe(`inference request for sequence ${lost} to model '${SEQUENCE}' must specify the START flag on the first request of the sequence`);
    // restarting the lost sequence works, on the survivor
    expect(await sum(router.engine.infer(seqStep(lost, 8, { start: true })))).toBe(8);
    expect(await sum(router.engine.infer(seqStep(lost, 9, { end: true })))).toBe(17);
  });
});

/** The `generate` requests a router plane sends (target instance, wire request), recorded in order. */
function recordGenerates(plane: RequestPlane): { instance: string; wire: WireGenerateRequest }[] {
  const sent: { instance: string; wire: WireGenerateRequest }[] = [];
  const request = plane.request.bind(plane);
  plane.request = (target, payload, options) => {
    if ('instanceId' in target && target.endpoint === 'generate') sent.push({ instance: target.instanceId, wire: payload as unknown as WireGenerateRequest });
    return request(target, payload, options);
  };
  return sent;
}

describe('ClusterEngine: KServe requests to an LLM whose worker dies', () => {
  async function start(): Promise<{ workers: MockWorker[]; sent: { instance: string; wire: WireGenerateRequest }[]; base: string }> {
    cluster = new MockCluster();
    // slow mocker: a 60-token generation lasts long enough to be cut
    const workers = [await cluster.addWorker({ speedup: 2 }), await cluster.addWorker({ speedup: 2 })];
    const roles = cluster.routerRoles();
    const sent = recordGenerates(roles.requestPlane);
    router = await startRouterCore({ ...roles, routingTable: new MemoryRoutingTable(), namespace: NS, routerId: 'l1' });
    await waitFor(() => router!.registry.model(LLM)?.instances.size === 2, 5000, 'two LLM instances');
    door = createHttpServer({ engine: router.engine, shm: new SharedMemoryManager({ enabled: false }), settings: new ServerSettings(), port: 0, host: '127.0.0.1' });
    return { workers, sent, base: `http://127.0.0.1:${await door.listen()}` };
  }
  /** What the mocker generates for the router request `id` (worker engine id `<id>#<id>`) from position `from` on. */
  const mockerText = (id: string, from: number, n: number): string => {
    const tokenizer = router!.registry.model(LLM)!.text!.tokenizer;
    const sim = new SimulatedExecutor({ vocabSize: tokenizer.vocabSize });
    return tokenizer.decode(Array.from({ length: n }, (_, i) => sim.tokenAt(`${id}#${id}`, from + i)), { skipSpecialTokens: true });
  };
  /** The worker generating (one request at a time in these tests). */
  const busy = (workers: MockWorker[]): MockWorker => workers.find((w) => w.engine.llmEndpoint(LLM)!.metrics().numRunning > 0)!;
  const generated = (workers: MockWorker[]): number => workers.reduce((n, w) => n + w.engine.llmEndpoint(LLM)!.metrics().generationTokens, 0);
  const PROMPT = 'The router resends a request whose worker died, with the tokens generated so far. '.repeat(2);

  it('generate_stream migrates: one uninterrupted stream of max_tokens, every token once, as an undisturbed run', async () => {
    const { workers, sent, base } = await start();
    const res = await fetch(`${base}/v2/models/${LLM}/generate_stream`, { method: 'POST', body: JSON.stringify({ text_input: PROMPT, parameters: { stream: true, max_tokens: 60, temperature: 0, ignore_eos: true } }) });
    expect(res.status).toBe(200);
    const events: Record<string, unknown>[] = [];
    const decoder = new TextDecoder();
    let buffered = '';
    let crashed: MockWorker | undefined;
    for await (const chunk of res.body!) {
      buffered += decoder.decode(chunk as Uint8Array, { stream: true });
      for (let i = buffered.indexOf('\n\n'); i >= 0; i = buffered.indexOf('\n\n')) {
        const line = buffered.slice(0, i);
        buffered = buffered.slice(i + 2);
        if (line.startsWith('data: ')) events.push(JSON.parse(line.slice(6)) as Record<string, unknown>);
      }
      if (crashed === undefined && events.length >= 5) {
        crashed = busy(workers);
        crashed.crash();
      }
    }
    expect(crashed).toBeDefined();
    expect(events.every((e) => e['error'] === undefined)).toBe(true);
    const last = events.at(-1)!;
    const promptTokens = sent[0]!.wire.promptTokenIds.length;
    expect(last).toMatchObject({ finish_reason: 'length', completion_tokens: 60, prompt_tokens: promptTokens });
    // resent to the other worker, under the same request id, with the prompt unchanged and the tokens
    // so far as output tokens (max_tokens counts them)
    expect(sent).toHaveLength(2);
    expect(sent[1]!.instance).not.toBe(sent[0]!.instance);
    expect(sent[1]!.wire.requestId).toBe(sent[0]!.wire.requestId);
    expect(sent[1]!.wire.promptTokenIds).toEqual(sent[0]!.wire.promptTokenIds);
    expect(sent[0]!.wire.outputTokenIds).toBeUndefined();
    expect(sent[1]!.wire.outputTokenIds!.length).toBeGreaterThanOrEqual(5);
    expect(sent[1]!.wire.sampling['max_tokens']).toBe(60);
    const text = events.map((e) => e['text_output']).join('');
    expect(text).toBe(mockerText(sent[0]!.wire.requestId, promptTokens, 60));
    expect(router!.stats().migrations.ongoing_request).toBe(1);
  });

  it('with migration off, a generation whose worker stops its endpoint without drain fails 503, not 400 cancelled', async () => {
    cluster = new MockCluster();
    const real = await cluster.addWorker();
    // a worker that stops its endpoint mid-stream without drain (lease lost, forced shutdown): a
    // `cancelled` error frame; its health endpoint still answers, so it is not taken for dead
    const stopping = cluster.store.connect();
    const plane = cluster.routerRoles().requestPlane;
    await plane.serve(instanceAddress(endpointAddress(NS, 'backend', 'generate'), stopping.instanceId), async function* () {
      yield { tokenIds: [1, 2, 3], finishReason: null, stopReason: null };
      throw cancelled('endpoint stopped');
    });
    await plane.serve(instanceAddress(endpointAddress(NS, 'backend', 'health'), stopping.instanceId), async function* () {
      yield { state: 'serving' };
    });
    const card = cluster.store.snapshot().get(modelKey(namespace(NS), modelName(LLM), real.node.instanceId as never)) as ModelCard;
    await stopping.registerModel({ ...card, instanceId: stopping.instanceId });
    await real.node.drain();
    router = await startRouterCore({ ...cluster.routerRoles(), routingTable: new MemoryRoutingTable(), namespace: NS, routerId: 'l2', migrationLimit: 0 });
    await waitFor(() => [...(router!.registry.model(LLM)?.instances.keys() ?? [])].join() === stopping.instanceId, 5000, 'the stopping instance only');
    door = createHttpServer({ engine: router.engine, shm: new SharedMemoryManager({ enabled: false }), settings: new ServerSettings(), port: 0, host: '127.0.0.1' });
    const res = await fetch(`http://127.0.0.1:${await door.listen()}/v2/models/${LLM}/generate`, { method: 'POST', body: JSON.stringify({ text_input: PROMPT, parameters: { max_tokens: 10 } }) });
    const body = (await res.json()) as { error: string };
    expect(res.status, body.error).toBe(503);
    expect(body.error).toBe(`instance ${stopping.instanceId} stopped serving during the request (migration limit 0 reached)`);
  });

  it('generate (one final response) and infer with stream=false migrate too: the whole text, prompt first', async () => {
    const { workers, sent, base } = await start();
    const pending = fetch(`${base}/v2/models/${LLM}/generate`, { method: 'POST', body: JSON.stringify({ text_input: PROMPT, parameters: { max_tokens: 60, ignore_eos: true } }) });
    await waitFor(() => generated(workers) >= 5, 5000, 'some tokens generated');
    busy(workers).crash();
    const res = await pending;
    const body = (await res.json()) as Record<string, unknown>;
    expect(res.status, JSON.stringify(body)).toBe(200);
    const promptTokens = sent[0]!.wire.promptTokenIds.length;
    expect(body).toMatchObject({ model_name: LLM, model_version: '1', finish_reason: 'length', completion_tokens: 60, prompt_tokens: promptTokens });
    expect(sent).toHaveLength(2);
    expect(body['text_output']).toBe(PROMPT + mockerText(sent[0]!.wire.requestId, promptTokens, 60));

    // the gRPC doors' path (engine.infer), on the surviving worker: the request id comes back
    const response = await router!.engine.infer({
      id: 'grpc-like',
      modelName: LLM,
      modelVersion: undefined,
      parameters: { max_tokens: 3, exclude_input_in_output: true, ignore_eos: true },
      inputs: [{ name: 'text_input', datatype: 'BYTES', shape: [1], data: serializeBytesElements([new TextEncoder().encode(PROMPT)]), parameters: {} }],
      outputs: [],
    });
    expect(response).toMatchObject({ id: 'grpc-like', modelName: LLM, modelVersion: '1' });
    expect(new TextDecoder().decode(deserializeBytesElements(response.outputs[0]!.data, 'text_output')[0])).toBe(mockerText(sent[2]!.wire.requestId, promptTokens, 3));
  });
});
