/**
 * Dynamic batching's `preserve_ordering` end to end: on a model with two instances, a request that
 * arrives later but finishes first is held until the earlier one has been answered.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startWorkerProcess, type WorkerProcess } from '@switchyard/testing';
import { post } from './lib/tensors.js';
import { sleep } from './lib/wait-for.js';

let worker: WorkerProcess;

beforeAll(async () => {
  worker = await startWorkerProcess({ modelRepositories: ['test/fixtures/ordering_repository'] });
});
afterAll(async () => {
  await worker?.stop();
});

/** Send a slow request, then a fast one; return the order in which their responses arrived. */
async function completionOrder(model: string): Promise<string[]> {
  const order: string[] = [];
  const send = (id: string, ms: number) =>
    post(`${worker.httpUrl}/v2/models/${model}/infer`, { id, inputs: [{ name: 'SLEEP_MS', shape: [1, 1], datatype: 'INT32', data: [ms] }] }).then((r) => {
      expect(r.status, r.body.toString()).toBe(200);
      order.push(r.json().id);
    });
  const slow = send('slow', 1500);
  // The slow one must reach the worker first and be executing on the first instance; on a loaded
  // 2-core machine (the whole suite runs in parallel) 100 ms of head start was sometimes not enough.
  await sleep(400);
  const fast = send('fast', 0); // runs on the second instance and finishes first
  await Promise.all([slow, fast]);
  return order;
}

describe('preserve_ordering', () => {
  it('without it, a later fast request is answered first', async () => {
    expect(await completionOrder('unordered')).toEqual(['fast', 'slow']);
  });

  it('with it, responses come back in arrival order', async () => {
    expect(await completionOrder('ordered')).toEqual(['slow', 'fast']);
  });
});
