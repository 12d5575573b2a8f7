import { afterEach, describe, expect, it } from 'vitest';
import { MemoryRoutingTable } from '@switchyard/kv-router';
import type { EndpointAddress, InstanceAddress, Payload, RequestOptions, RequestPlane } from '@switchyard/runtime';
import { HEALTH_ENDPOINT } from '../protocols.js';
import { type RouterCore, startRouterCore } from './router-core.js';
import { MockCluster, NS, TENSOR, waitFor } from './test-support/mock-cluster.js';

let cluster: MockCluster | undefined;
let router: RouterCore | undefined;
afterEach(async () => {
  await router?.close();
  await cluster?.close();
  router = cluster = undefined;
});

/** The router's request plane, recording the instance of every health request it sends. */
function recordingHealth(plane: RequestPlane): { plane: RequestPlane; probed: string[] } {
  const probed: string[] = [];
  const request = (target: EndpointAddress | InstanceAddress, payload: Payload, options?: RequestOptions): AsyncIterable<Payload> => {
    if (target.endpoint === HEALTH_ENDPOINT && 'instanceId' in target) probed.push(target.instanceId);
    return plane.request(target, payload, options);
  };
  return { plane: new Proxy(plane, { get: (t, p, r) => (p === 'request' ? request : Reflect.get(t, p, r)) }), probed };
}

async function start(greetInstances: boolean): Promise<{ probed: string[] }> {
  cluster = new MockCluster();
  const roles = cluster.routerRoles();
  const { plane, probed } = recordingHealth(roles.requestPlane);
  router = await startRouterCore({ ...roles, requestPlane: plane, routingTable: new MemoryRoutingTable(), namespace: NS, routerId: 'greeter', greetInstances });
  return { probed };
}

describe('greetInstances', () => {
  it('probes each instance once as discovery first lists it, before any request, whatever models it serves', async () => {
    const { probed } = await start(true);
    const a = await cluster!.addWorker({ tensor: true });
    const b = await cluster!.addWorker({ tensor: true });
    await waitFor(() => router!.registry.model(TENSOR)?.instances.size === 2, 5000, 'both workers listed');
    await waitFor(() => probed.length >= 2, 5000, 'two probes');
    // each worker serves two models (two cards, two instance-added changes): still one probe each
    await new Promise((r) => setTimeout(r, 50));
    expect([...probed].sort()).toEqual([a.node.instanceId, b.node.instanceId].sort());
  });

  it('is off by default', async () => {
    const { probed } = await start(false);
    await cluster!.addWorker({ tensor: true });
    await waitFor(() => router!.registry.model(TENSOR)?.instances.size === 1, 5000, 'the worker listed');
    await new Promise((r) => setTimeout(r, 50));
    expect(probed).toEqual([]);
  });
});
