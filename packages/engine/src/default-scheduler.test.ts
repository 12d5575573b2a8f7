import { describe, expect, it } from 'vitest';
import { silentLogger } from '@switchyard/common';
import type { BackendInstance, ExecutionOutcome } from './backend.js';
import { executeBatch } from './batch-executor.js';
import { DefaultScheduler, JobQueue } from './default-scheduler.js';
import { InferenceJob } from './inference-job.js';
import type { NormalizedRequest } from './request-normalizer.js';
import { ModelStatsCollector } from './statistics.js';
import type { InferResult } from './types.js';

/** An instance whose executions finish only when the test releases them. */
class ManualInstance implements BackendInstance {
  readonly started: string[] = [];
  private readonly waiting: (() => void)[] = [];
  constructor(
    readonly name: string,
    readonly pipelineDepth?: number,
  ) {}
  execute(requests: readonly NormalizedRequest[]): Promise<ExecutionOutcome> {
    this.started.push(requests.map((r) => r.request.id).join('+'));
    return new Promise((resolve) => {
      this.waiting.push(() => {
        const t = process.hrtime.bigint();
        resolve({ results: requests.map(() => ({ outputs: [] })), timing: { computeStartNs: t, computeInputEndNs: t, computeOutputStartNs: t, computeEndNs: t } });
      });
    });
  }
  finishOne(): void {
    this.waiting.shift()?.();
  }
  async release(): Promise<void> {}
}

const flush = () => new Promise((r) => setImmediate(r));

function makeJob(id: string, stats: ModelStatsCollector, results: Map<string, InferResult>): InferenceJob {
  const normalized: NormalizedRequest = {
    request: { id, modelName: 'm', modelVersion: undefined, parameters: {}, inputs: [], outputs: [] },
    batchSize: 2,
    inputs: [],
    requestedOutputs: [],
  };
  return new InferenceJob(normalized, 1, stats, process.hrtime.bigint(), (r) => results.set(id, r));
}

describe('JobQueue', () => {
  it('is FIFO and supports removal', () => {
    const stats = new ModelStatsCollector('m', 1);
    const results = new Map<string, InferResult>();
    const q = new JobQueue();
    const [a, b, c] = ['a', 'b', 'c'].map((id) => makeJob(id, stats, results));
    q.push(a!);
    q.push(b!);
    q.push(c!);
    expect(q.remove(b!)).toBe(true);
    expect(q.remove(b!)).toBe(false);
    expect(q.size).toBe(2);
    expect(q.shift()).toBe(a);
    expect(q.shift()).toBe(c);
    expect(q.shift()).toBeUndefined();
  });
});

describe('DefaultScheduler', () => {
  it('runs one request per execution on the next free instance, FIFO', async () => {
    const stats = new ModelStatsCollector('m', 1);
    const results = new Map<string, InferResult>();
    const i1 = new ManualInstance('i1');
    const i2 = new ManualInstance('i2');
    const scheduler = new DefaultScheduler('m', { instances: [i1, i2], run: (inst, jobs) => executeBatch(inst, jobs, stats), logger: silentLogger });
    for (const id of ['a', 'b', 'c', 'd']) scheduler.enqueue(makeJob(id, stats, results));
    expect(i1.started).toEqual(['a']);
    expect(i2.started).toEqual(['b']);
    expect(scheduler.inflightCount()).toBe(2);
    expect(scheduler.pendingCount()).toBe(2);
    i2.finishOne();
    await flush();
    expect(i2.started).toEqual(['b', 'c']);
    expect(results.get('b')?.response?.modelVersion).toBe('1');

    const stopped = scheduler.stop();
    let done = false;
    void stopped.then(() => (done = true));
    const late = makeJob('late', stats, results);
    scheduler.enqueue(late);
    expect(results.get('late')?.error?.code).toBe('unavailable');
    // Stop drains what was admitted before it.
    i1.finishOne();
    await flush();
    expect(i1.started).toEqual(['a', 'd']);
    i1.finishOne();
    i2.finishOne();
    await flush();
    await stopped;
    expect(done).toBe(true);
    const snap = stats.snapshot();
    expect(snap.execution_count).toBe(4);
    expect(snap.inference_count).toBe(8);
    expect(snap.batch_stats).toMatchObject([{ batch_size: 2, compute_infer: { count: 4 } }]);
    expect(stats.failureCounts().REJECTED).toBe(1);
  });

  it('hands an instance with a pipeline depth up to that many requests when it frees up, each its own execution', async () => {
    const stats = new ModelStatsCollector('m', 1);
    const results = new Map<string, InferResult>();
    const i1 = new ManualInstance('i1', 3);
    const scheduler = new DefaultScheduler('m', { instances: [i1], run: (inst, jobs) => executeBatch(inst, jobs, stats), logger: silentLogger });
    for (const id of ['a', 'b', 'c', 'd', 'e', 'f']) scheduler.enqueue(makeJob(id, stats, results));
    // Idle: the first request goes at once; the rest wait for the instance to free up.
    expect(i1.started).toEqual(['a']);
    i1.finishOne();
    await flush();
    expect(i1.started).toEqual(['a', 'b', 'c', 'd']);
    expect(scheduler.inflightCount()).toBe(3);
    expect(scheduler.pendingCount()).toBe(2);
    // Not free until all three ended: the next ones wait in the queue (still cancellable there).
    i1.finishOne();
    i1.finishOne();
    await flush();
    expect(i1.started).toEqual(['a', 'b', 'c', 'd']);
    expect([...results.keys()]).toEqual(['a', 'b', 'c']);
    i1.finishOne();
    await flush();
    expect(i1.started).toEqual(['a', 'b', 'c', 'd', 'e', 'f']);
    i1.finishOne();
    i1.finishOne();
    await flush();
    await scheduler.stop();
    expect([...results.keys()]).toEqual(['a', 'b', 'c', 'd', 'e', 'f']);
    expect(stats.snapshot().execution_count).toBe(6);
  });

  it('gives each instance at most its share of the queue, so requests still spread over instances', async () => {
    const stats = new ModelStatsCollector('m', 1);
    const results = new Map<string, InferResult>();
    const i1 = new ManualInstance('i1', 8);
    const i2 = new ManualInstance('i2', 8);
    const scheduler = new DefaultScheduler('m', { instances: [i1, i2], run: (inst, jobs) => executeBatch(inst, jobs, stats), logger: silentLogger });
    for (const id of ['a', 'b']) scheduler.enqueue(makeJob(id, stats, results));
    expect(i1.started).toEqual(['a']);
    expect(i2.started).toEqual(['b']);
    for (const id of ['c', 'd', 'e']) scheduler.enqueue(makeJob(id, stats, results));
    i1.finishOne();
    i2.finishOne();
    await flush();
    // i1 freed first and found three queued: it takes its share (two of three, two instances), i2 the rest.
    expect(i1.started).toEqual(['a', 'c', 'd']);
    expect(i2.started).toEqual(['b', 'e']);
    for (let k = 0; k < 2; k++) i1.finishOne();
    i2.finishOne();
    await scheduler.stop();
    expect(results.size).toBe(5);
  });

  it('fails a whole batch as BACKEND when the instance throws', async () => {
    const stats = new ModelStatsCollector('m', 1);
    const results = new Map<string, InferResult>();
    const broken: BackendInstance = { name: 'x', execute: () => Promise.reject(new Error('boom')), release: async () => {} };
    await executeBatch(broken, [makeJob('a', stats, results), makeJob('b', stats, results)], stats);
    expect(results.get('a')?.error).toMatchObject({ code: 'internal', message: 'boom' });
    expect(results.get('b')?.final).toBe(true);
    expect(stats.failureCounts().BACKEND).toBe(2);
    expect(stats.snapshot().inference_stats.fail.count).toBe(2);
  });
});
