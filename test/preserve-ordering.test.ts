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

/**
 * Send a slow request, then a fast one; return when each response arrived (ms after the slow one was
 * sent). Held responses are released together, on separate connections, so the client may read them
 * in either order: the tests compare arrival times with a margin, not the order of two reads.
 */
async function arrivals(model: string): Promise<{ slow: number; fast: number }> {
  const t0 = Date.now();
  const send = async (id: string, ms: number): Promise<number> => {
    const r = await post(`${worker.httpUrl}/v2/models/${model}/infer`, { id, inputs: [{ name: 'SLEEP_MS', shape: [1, 1], datatype: 'INT32', data: [ms] }] });
    expect(r.status, r.body.toString()).toBe(200);
    expect(r.json().id).toBe(id);
    return Date.now() - t0;
  };
  const slow = send('slow', 1500);
  // The slow one must reach the worker first and be executing on the first instance; on a loaded
  // 2-core machine (the whole suite runs in parallel) 100 ms of head start was sometimes not enough.
  await sleep(400);
  const fast = send('fast', 0); // runs on the second instance and finishes first
  const [slowAt, fastAt] = await Promise.all([slow, fast]);
  return { slow: slowAt, fast: fastAt };
}

describe('preserve_ordering', () => {
  it('without it, a later fast request is answered first', async () => {
    const t = await arrivals('unordered');
    expect(t.fast).toBeLessThan(t.slow - 500);
  });

  it('with it, responses come back in arrival order', async () => {
    const t = await arrivals('ordered');
    // the fast response is held until the slow one is released (the two leave together)
    expect(t.slow).toBeGreaterThanOrEqual(1500);
    expect(t.fast).toBeGreaterThan(t.slow - 100);
  });
});
