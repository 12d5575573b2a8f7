/**
 * The form of a forwarded `infer` request on the wire (memory twins): raw tensor bytes in a binary
 * payload to a worker whose card says `binaryTensors`, base64 JSON to a worker whose card does not (a
 * worker from before binary payloads, which cannot read a binary message) — a mixed-version cluster
 * keeps serving.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { MemoryRoutingTable } from '@switchyard/kv-router';
import { BinaryPayload, type ModelCard } from '@switchyard/runtime';
import { decodeWireInferRequest, inferRequestFromWire } from '../wire-codec.js';
import { type RouterCore, startRouterCore } from './router-core.js';
import { FakeLlmWorker, decodeOk, llmCard } from './test-support/fake-llm-worker.js';
import { LLM, MockCluster, NS, waitFor } from './test-support/mock-cluster.js';

let cluster: MockCluster | undefined;
let router: RouterCore | undefined;
afterEach(async () => {
  await router?.close();
  await cluster?.close();
  router = undefined;
  cluster = undefined;
});

/** One worker with `card`, a router, and one forwarded infer (a tensor the router does not parse itself). */
async function forwardedInfer(form: (card: ModelCard) => ModelCard): Promise<unknown> {
  cluster = new MockCluster();
  const card = await llmCard(cluster);
  expect((card.metadata as { binaryTensors?: unknown }).binaryTensors).toBe(true);
  const worker = await FakeLlmWorker.start(cluster, form(card), undefined, decodeOk());
  router = await startRouterCore({ ...cluster.routerRoles(), routingTable: new MemoryRoutingTable(), namespace: NS, routerId: 'p1' });
  await waitFor(() => router!.registry.model(LLM)?.instances.size === 1, 5000, 'the scripted instance');
  const data = Uint8Array.from([1, 0, 0, 0, 2, 0, 0, 0]);
  // the scripted worker refuses every infer: what matters is what reached it
  await router.engine.infer({ id: 'f', modelName: LLM, modelVersion: undefined, parameters: {}, inputs: [{ name: 'other', datatype: 'INT32', shape: [2], data, parameters: {} }], outputs: [] }).catch(() => {});
  expect(worker.infers).toHaveLength(1);
  const payload = worker.infers[0];
  expect([...inferRequestFromWire(decodeWireInferRequest(payload)).inputs[0]!.data]).toEqual([...data]);
  return payload;
}

describe('the form of a forwarded infer request', () => {
  it('is a binary payload (raw tensor bytes) for a worker whose card says binaryTensors', async () => {
    const payload = await forwardedInfer((card) => card);
    expect(payload).toBeInstanceOf(BinaryPayload);
    expect((payload as BinaryPayload).blobs).toHaveLength(1);
  });

  it('is base64 JSON for a worker whose card does not (a worker from before binary payloads)', async () => {
    const payload = await forwardedInfer((card) => {
      const { binaryTensors: _, ...metadata } = card.metadata as { [k: string]: unknown };
      return { ...card, metadata } as ModelCard;
    });
    expect(payload).not.toBeInstanceOf(BinaryPayload);
    expect((payload as { inputs: Array<{ data: unknown }> }).inputs[0]!.data).toBe('AQAAAAIAAAA=');
  });
});
