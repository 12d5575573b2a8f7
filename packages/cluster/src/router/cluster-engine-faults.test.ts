/**
 * KServe tensor requests through the router when their worker dies (memory twins): a stateless
 * request is re-sent to another instance (stall probe of a silent dead instance; a crashed stream);
 * a request in the middle of a sequence fails `unavailable` at once with a clear message, and so do
 * the next ones until the dead instance leaves discovery; a sequence START is re-sent.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { SwitchyardError } from '@switchyard/common';
import { MemoryRoutingTable } from '@switchyard/kv-router';
import type { InferRequest, InferResponse } from '@switchyard/kserve';
import { type InstanceId, type ModelCard, endpointAddress, instanceAddress, modelKey, modelName, namespace } from '@switchyard/runtime';
import { type RouterCore, startRouterCore } from './router-core.js';
import { rendezvousInstance, sequencePinKey } from './sequence-pins.js';
import { MockCluster, type MockWorker, NS, SEQUENCE, TENSOR, waitFor } from './test-support/mock-cluster.js';

let cluster: MockCluster | undefined;
let router: RouterCore | undefined;
afterEach(async () => {
  await router?.close();
  await cluster?.close();
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
    expect(error.message).toBe(
      `inference request for sequence ${lost} to model '${SEQUENCE}' failed: the worker holding the sequence (instance ${ids[0]}) ${error.message.includes('is unreachable') ? 'is unreachable' : 'failed during the request'}; the sequence's state is lost, start it again with the START flag`,
    );
    // the next request of the sequence: the worker is still in discovery (lease alive), no responders → the same, at once
    const next = await failure(router.engine.infer(seqStep(lost, 4)));
    expect(next.code).toBe('unavailable');
    expect(next.message).toContain(`inference request for sequence ${lost} to model '${SEQUENCE}' failed: the worker holding the sequence (instance ${ids[0]}) is unreachable`);
    expect(Date.now() - t0).toBeLessThan(2000);

    // a START that lands on the dead instance (still in discovery) is re-sent to the survivor and pinned there
    expect(await sum(router.engine.infer(seqStep(restarted, 5, { start: true })))).toBe(5);
    expect(await sum(router.engine.infer(seqStep(restarted, 6)))).toBe(11);
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
