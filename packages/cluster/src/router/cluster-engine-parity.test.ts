/**
 * Parity: the same requests to a worker's own front door and to the router's (memory twins, two
 * workers with the same tensor models). The worker's answer is Triton's; the router must give it too.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MemoryRoutingTable } from '@switchyard/kv-router';
import type { InferRequest } from '@switchyard/kserve';
import type { InferenceEngine, InferResult } from '@switchyard/engine';
import { type HttpFrontDoor, ServerSettings, SharedMemoryManager, createHttpServer } from '@switchyard/server';
import type { InstanceId } from '@switchyard/runtime';
import { type RouterCore, startRouterCore } from './router-core.js';
import { rendezvousInstance, sequencePinKey } from './sequence-pins.js';
import { DECOUPLED_ERROR, MockCluster, type MockWorker, NS, SEQUENCE, TENSOR, waitFor } from './test-support/mock-cluster.js';

let cluster: MockCluster;
const workers: MockWorker[] = [];
let router: RouterCore;
let replica: RouterCore;
const doors: HttpFrontDoor[] = [];
let routerBase: string;
let workerBase: string;

async function serve(engine: InferenceEngine): Promise<string> {
  const door = createHttpServer({ engine, shm: new SharedMemoryManager({ enabled: false }), settings: new ServerSettings(), port: 0, host: '127.0.0.1' });
  doors.push(door);
  return `http://127.0.0.1:${await door.listen()}`;
}

beforeAll(async () => {
  cluster = new MockCluster();
  for (let i = 0; i < 2; i++) workers.push(await cluster.addWorker({ llm: false, tensor: true, extras: true }));
  router = await startRouterCore({ ...cluster.routerRoles(), routingTable: new MemoryRoutingTable(), namespace: NS, routerId: 'a' });
  replica = await startRouterCore({ ...cluster.routerRoles(), routingTable: new MemoryRoutingTable(), namespace: NS, routerId: 'b' });
  for (const r of [router, replica]) await waitFor(() => r.registry.model(SEQUENCE)?.instances.size === 2 && r.registry.model(TENSOR)?.instances.size === 2, 5000, 'models');
  routerBase = await serve(router.engine);
  workerBase = await serve(workers[0]!.engine);
});
afterAll(async () => {
  await Promise.all(doors.map((d) => d.close()));
  await replica?.close();
  await router?.close();
  await cluster?.close();
});

async function both(path: string, body?: unknown): Promise<{ worker: { status: number; text: string }; router: { status: number; text: string } }> {
  const call = async (base: string) => {
    const r = await fetch(base + path, body === undefined ? {} : { method: 'POST', body: JSON.stringify(body) });
    return { status: r.status, text: await r.text() };
  };
  return { worker: await call(workerBase), router: await call(routerBase) };
}

function submitAll(engine: InferenceEngine, request: InferRequest): Promise<InferResult[]> {
  return new Promise((resolve) => {
    const results: InferResult[] = [];
    engine.submit(request, (r) => {
      results.push(r);
      if (r.final) resolve(results);
    });
  });
}

const int32 = (xs: number[]) => new Uint8Array(new Int32Array(xs).buffer);
const ints = (data: Uint8Array) => [...new Int32Array(data.slice().buffer)];

describe('router parity with a worker', () => {
  it('server metadata: name and version are the worker\'s (Triton\'s)', async () => {
    const { worker, router: r } = await both('/v2');
    const w = JSON.parse(worker.text) as { name: string; version: string; extensions: string[] };
    expect(JSON.parse(r.text)).toMatchObject({ name: 'triton', version: w.version });
    expect(w.name).toBe('triton');
    expect(JSON.parse(r.text).extensions).toContain('classification');
  });

  it('classification outputs carry the labels of the card', async () => {
    const body = {
      inputs: [
        { name: 'INPUT0', datatype: 'INT32', shape: [4], data: [1, 2, 3, 4] },
        { name: 'INPUT1', datatype: 'INT32', shape: [4], data: [10, 20, 30, 40] },
      ],
      outputs: [{ name: 'OUTPUT0', parameters: { classification: 3 } }],
    };
    const { worker, router: r } = await both(`/v2/models/${TENSOR}/infer`, body);
    expect(worker.status).toBe(200);
    expect(worker.text).toContain(':3:fish');
    expect(r).toEqual(worker);
    expect(router.engine.classificationLabels!(TENSOR, 1).get('OUTPUT0')).toEqual(['cat', 'dog', 'bird', 'fish']);
    expect(router.engine.classificationLabels!(TENSOR, 2).size).toBe(0);
    expect(router.engine.classificationLabels!('nope', 1).size).toBe(0);
  });

  it('a decoupled stream goes on after an error response in the middle', async () => {
    const request: InferRequest = {
      id: 'd1', modelName: DECOUPLED_ERROR, modelVersion: undefined, parameters: {},
      inputs: [{ name: 'IN', datatype: 'INT32', shape: [1], data: int32([2]), parameters: {} }],
      outputs: [],
    };
    const shape = (results: InferResult[]) =>
      results.map((r) => ({ final: r.final, error: r.error && { code: r.error.code, message: r.error.message }, out: r.response && ints(r.response.outputs[0]!.data) }));
    const expected = shape(await submitAll(workers[0]!.engine, request));
    expect(expected).toEqual([
      { final: false, error: undefined, out: [1] },
      { final: false, error: { code: expect.any(String), message: expect.stringContaining('element 2 is bad') }, out: undefined },
      { final: true, error: undefined, out: [3] },
    ]);
    expect(shape(await submitAll(router.engine, request))).toEqual(expected);
    const stream = await both(`/v2/models/${DECOUPLED_ERROR}/generate_stream`, { IN: [2] });
    expect(stream.router).toEqual(stream.worker);
    expect(stream.router.text).toContain('element 2 is bad');
    expect(stream.router.text).toMatch(/"OUT":\[?3/);
  });

  it('statistics: an unknown model or version fails as on the worker', async () => {
    for (const path of ['/v2/models/nope/stats', `/v2/models/${TENSOR}/versions/7/stats`]) {
      const { worker, router: r } = await both(path);
      expect(worker.status).toBe(400);
      expect(r).toEqual(worker);
    }
  });

  it('statistics: the sum over the instances serving the model', async () => {
    const body = {
      inputs: [
        { name: 'INPUT0', datatype: 'INT32', shape: [4], data: [1, 2, 3, 4] },
        { name: 'INPUT1', datatype: 'INT32', shape: [4], data: [10, 20, 30, 40] },
      ],
    };
    for (let i = 0; i < 6; i++) expect((await fetch(`${routerBase}/v2/models/${TENSOR}/infer`, { method: 'POST', body: JSON.stringify(body) })).status).toBe(200);
    const own = await Promise.all(workers.map(async (w) => (await w.engine.modelStatistics(TENSOR))[0]!));
    const r = await fetch(`${routerBase}/v2/models/${TENSOR}/stats`);
    expect(r.status).toBe(200);
    const { model_stats } = (await r.json()) as { model_stats: Array<{ name: string; version: string; inference_count: number; execution_count: number; last_inference: number; inference_stats: { success: { count: number; ns: number } } }> };
    expect(model_stats).toHaveLength(1);
    const [s] = model_stats;
    expect(s).toMatchObject({ name: TENSOR, version: '1' });
    expect(s!.inference_count).toBe(own[0]!.inference_count + own[1]!.inference_count);
    expect(s!.inference_count).toBeGreaterThanOrEqual(7); // these six and the classification request
    expect(s!.inference_stats.success).toEqual({ count: own[0]!.inference_stats.success.count + own[1]!.inference_stats.success.count, ns: own[0]!.inference_stats.success.ns + own[1]!.inference_stats.success.ns });
    expect(s!.last_inference).toBe(Math.max(own[0]!.last_inference, own[1]!.last_inference));

    const everything = (await (await fetch(`${routerBase}/v2/models/stats`)).json()) as { model_stats: Array<{ name: string; version: string }> };
    expect(everything.model_stats.map((m) => `${m.name}/${m.version}`)).toEqual([`${TENSOR}/1`, `${DECOUPLED_ERROR}/1`, `${SEQUENCE}/1`]);
    expect((await fetch(`${routerBase}/v2/models/${TENSOR}/versions/1/stats`)).status).toBe(200);
  });

  it('sequences stick to one instance (integer and string ids), also through a replica that never saw the START', async () => {
    const step = async (base: string, id: number | string, value: number, flags: { start?: boolean; end?: boolean }) => {
      const parameters = { sequence_id: id, ...(flags.start ? { sequence_start: true } : {}), ...(flags.end ? { sequence_end: true } : {}) };
      const r = await fetch(`${base}/v2/models/${SEQUENCE}/infer`, {
        method: 'POST',
        body: JSON.stringify({ parameters, inputs: [{ name: 'INPUT', datatype: 'INT32', shape: [1], data: [value] }] }),
      });
      const json = (await r.json()) as { error?: string; outputs?: Array<{ data: number[] }> };
      expect(json.error, `sequence ${id}`).toBeUndefined();
      return json.outputs![0]!.data[0];
    };
    const replicaBase = await serve(replica.engine);
    const ids: Array<number | string> = [11, 12, 13, 14, 15, 'alpha', 'beta', 'gamma', 'delta', '15'];
    for (const id of ids) {
      expect(await step(routerBase, id, 1, { start: true })).toBe(1);
      expect(await step(routerBase, id, 2, {})).toBe(3);
      // the replica knows nothing of this sequence: the rendezvous hash sends it to the same instance
      expect(await step(replicaBase, id, 3, {})).toBe(6);
      expect(await step(routerBase, id, 4, { end: true })).toBe(10);
    }
  });

  it('a sequence whose instance left fails as the worker fails an unknown sequence; a new START goes elsewhere', async () => {
    const id = 77;
    const start = { parameters: { sequence_id: id, sequence_start: true }, inputs: [{ name: 'INPUT', datatype: 'INT32', shape: [1], data: [5] }] };
    expect((await both(`/v2/models/${SEQUENCE}/infer`, start)).router.status).toBe(200);
    const instances = [...router.registry.model(SEQUENCE)!.instances.keys()];
    const pinned = rendezvousInstance(sequencePinKey(SEQUENCE, `u:${id}`), instances) as InstanceId;
    const owner = workers.find((w) => w.node.instanceId === pinned)!;
    await owner.close();
    await waitFor(() => router.registry.model(SEQUENCE)?.instances.size === 1, 5000, 'instance gone');

    const next = { parameters: { sequence_id: id }, inputs: [{ name: 'INPUT', datatype: 'INT32', shape: [1], data: [1] }] };
    const r = await fetch(`${routerBase}/v2/models/${SEQUENCE}/infer`, { method: 'POST', body: JSON.stringify(next) });
    expect(r.status).toBe(400);
    expect(await r.json()).toEqual({ error: `inference request for sequence ${id} to model '${SEQUENCE}' must specify the START flag on the first request of the sequence` });
    const again = await fetch(`${routerBase}/v2/models/${SEQUENCE}/infer`, { method: 'POST', body: JSON.stringify(start) });
    expect(again.status).toBe(200);
  });
});
