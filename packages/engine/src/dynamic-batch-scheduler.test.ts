import { describe, expect, it } from 'vitest';
import { silentLogger } from '@switchyard/common';
import type { Parameters } from '@switchyard/kserve';
import { normalizeModelConfig, parseModelConfigText } from '@switchyard/model-config';
import type { BackendInstance, ExecutionOutcome } from './backend.js';
import { executeBatch } from './batch-executor.js';
import { DynamicBatchScheduler } from './dynamic-batch-scheduler.js';
import { InferenceJob } from './inference-job.js';
import { ManualClock } from './queue/queue-clock.js';
import type { NormalizedRequest } from './request-normalizer.js';
import { ModelStatsCollector } from './statistics.js';
import type { InferResult } from './types.js';

/** An instance whose executions finish only when the test says so; records each batch's ids. */
class ManualInstance implements BackendInstance {
  readonly batches: string[] = [];
  private readonly waiting: (() => void)[] = [];
  constructor(readonly name: string) {}
  execute(requests: readonly NormalizedRequest[]): Promise<ExecutionOutcome> {
    this.batches.push(requests.map((r) => r.request.id).join('+'));
    return new Promise((resolve) => {
      this.waiting.push(() => {
        const t = process.hrtime.bigint();
        resolve({ results: requests.map(() => ({ outputs: [] })), timing: { computeStartNs: t, computeInputEndNs: t, computeOutputStartNs: t, computeEndNs: t } });
      });
    });
  }
  get busy(): boolean {
    return this.waiting.length > 0;
  }
  finish(): void {
    this.waiting.shift()?.();
  }
  async release(): Promise<void> {}
}

const flush = () => new Promise((r) => setImmediate(r));

const MODEL = `name: "m" backend: "onnxruntime"
  input [ { name: "I" data_type: TYPE_FP32 dims: [ 4 ] } ] output [ { name: "O" data_type: TYPE_FP32 dims: [ 4 ] } ]`;

interface Harness {
  scheduler: DynamicBatchScheduler;
  clock: ManualClock;
  stats: ModelStatsCollector;
  instances: ManualInstance[];
  results: Map<string, InferResult>;
  /** Result ids in delivery order. */
  delivered: string[];
  submit(id: string, opts?: { batch?: number; parameters?: Parameters; shape?: number[] }): InferenceJob;
}

function harness(configText: string, instanceCount = 1): Harness {
  const config = normalizeModelConfig(parseModelConfigText(configText), { modelName: 'm' });
  const clock = new ManualClock();
  const stats = new ModelStatsCollector('m', 1);
  const instances = Array.from({ length: instanceCount }, (_, i) => new ManualInstance(`i${i}`));
  const scheduler = new DynamicBatchScheduler(config, { instances, run: (inst, jobs) => executeBatch(inst, jobs, stats), logger: silentLogger }, clock);
  const results = new Map<string, InferResult>();
  const delivered: string[] = [];
  return {
    scheduler,
    clock,
    stats,
    instances,
    results,
    delivered,
    submit(id, opts = {}) {
      const batch = opts.batch ?? 1;
      const shape = opts.shape ?? [batch, 4];
      const normalized: NormalizedRequest = {
        request: { id, modelName: 'm', modelVersion: undefined, parameters: opts.parameters ?? {}, inputs: [], outputs: [] },
        batchSize: batch,
        inputs: [{ name: 'I', datatype: 'FP32', shape, originalShape: shape, data: new Uint8Array(4 * shape.reduce((a, b) => a * b, 1)) }],
        requestedOutputs: ['O'],
      };
      const job = new InferenceJob(normalized, 1, stats, process.hrtime.bigint(), (r) => {
        results.set(id, r);
        delivered.push(id);
      });
      scheduler.enqueue(job);
      return job;
    },
  };
}

const dyn = (body: string, maxBatch = 8, extra = '') => `${MODEL} max_batch_size: ${maxBatch} ${extra} dynamic_batching { ${body} }`;

describe('DynamicBatchScheduler: forming batches', () => {
  it('batches the requests that queued while the instance was busy (delay 0)', async () => {
    const h = harness(dyn(''));
    for (const id of ['a', 'b', 'c', 'd']) h.submit(id);
    const [i0] = h.instances;
    expect(i0!.batches).toEqual(['a']);
    expect(h.scheduler.pendingCount()).toBe(3);
    expect(h.scheduler.inflightCount()).toBe(1);
    i0!.finish();
    await flush();
    expect(i0!.batches).toEqual(['a', 'b+c+d']);
    expect(h.scheduler.inflightCount()).toBe(3);
    i0!.finish();
    await flush();
    const snap = h.stats.snapshot();
    expect(snap.execution_count).toBe(2);
    expect(snap.inference_count).toBe(4);
    expect(snap.inference_stats.success.count).toBe(4);
    expect(snap.inference_stats.queue.count).toBe(4);
    expect(snap.batch_stats.map((b) => [b.batch_size, b.compute_infer.count])).toEqual([
      [1, 1],
      [3, 1],
    ]);
  });

  it('sends at a preferred size at once, else waits for the oldest request to reach the delay', async () => {
    const h = harness(dyn('preferred_batch_size: [ 4 ] max_queue_delay_microseconds: 100000'));
    const [i0] = h.instances;
    for (const id of ['a', 'b', 'c']) h.submit(id);
    expect(i0!.batches).toEqual([]);
    h.submit('d');
    expect(i0!.batches).toEqual(['a+b+c+d']);
    i0!.finish();
    await flush();
    h.submit('e');
    h.clock.advance(60);
    h.submit('f');
    h.clock.advance(39.999);
    expect(i0!.batches).toEqual(['a+b+c+d']);
    h.clock.advance(0.001); // 100 ms after 'e', the oldest
    expect(i0!.batches).toEqual(['a+b+c+d', 'e+f']);
    expect(h.clock.pendingTimers).toBe(0);
  });

  it('honours max_batch_size across request batch sizes', async () => {
    const h = harness(dyn(''));
    const [i0] = h.instances;
    h.submit('busy');
    for (const id of ['a', 'b', 'c']) h.submit(id, { batch: 3 });
    i0!.finish();
    await flush();
    expect(i0!.batches).toEqual(['busy', 'a+b']);
    i0!.finish();
    await flush();
    expect(i0!.batches).toEqual(['busy', 'a+b', 'c']);
    i0!.finish();
    await flush();
    expect(h.stats.snapshot().batch_stats.map((b) => b.batch_size)).toEqual([1, 3, 6]);
  });

  it('keeps several batches in flight on several instances', async () => {
    const h = harness(dyn(''), 2);
    const [i0, i1] = h.instances;
    for (const id of ['a', 'b', 'c', 'd', 'e']) h.submit(id);
    expect([i0!.batches, i1!.batches]).toEqual([['a'], ['b']]);
    i1!.finish();
    await flush();
    expect(i1!.batches).toEqual(['b', 'c+d+e']);
    expect(h.scheduler.inflightCount()).toBe(4);
  });

  it('never batches requests whose variable-size inputs differ in shape', async () => {
    const h = harness(
      `name: "m" backend: "onnxruntime" max_batch_size: 8
       input [ { name: "I" data_type: TYPE_FP32 dims: [ -1 ] } ] output [ { name: "O" data_type: TYPE_FP32 dims: [ -1 ] } ]
       dynamic_batching { preferred_batch_size: [ 4 ] max_queue_delay_microseconds: 100000 }`,
    );
    const [i0] = h.instances;
    h.submit('a3', { shape: [1, 3] });
    h.submit('b3', { shape: [2, 3] });
    h.submit('c5', { shape: [1, 5] }); // closes the [.,3] batch: sent now
    expect(i0!.batches).toEqual(['a3+b3']);
    h.submit('d5', { shape: [1, 5] });
    i0!.finish();
    await flush();
    expect(i0!.batches).toEqual(['a3+b3']); // c5+d5 = 2 < 4: waits for the delay
    h.clock.advance(100);
    expect(i0!.batches).toEqual(['a3+b3', 'c5+d5']);
  });

  it('stop() sends queued requests without waiting, refuses new ones, resolves when drained', async () => {
    const h = harness(dyn('preferred_batch_size: [ 4 ] max_queue_delay_microseconds: 10000000'));
    const [i0] = h.instances;
    h.submit('a');
    let stopped = false;
    void h.scheduler.stop().then(() => (stopped = true));
    expect(i0!.batches).toEqual(['a']);
    h.submit('late');
    expect(h.results.get('late')?.error).toMatchObject({ code: 'unavailable', message: "[request id: late] Model 'm' is unloading" });
    await flush();
    expect(stopped).toBe(false);
    i0!.finish();
    await flush();
    expect(stopped).toBe(true);
    expect(h.clock.pendingTimers).toBe(0);
  });

  it('cancel() removes a queued request; an executing one stays', () => {
    const h = harness(dyn('max_queue_delay_microseconds: 1000'));
    const a = h.submit('a');
    const b = h.submit('b');
    expect(h.scheduler.cancel(b)).toBe(true);
    expect(h.scheduler.cancel(b)).toBe(false);
    expect(h.scheduler.pendingCount()).toBe(1);
    h.clock.advance(1);
    expect(h.instances[0]!.batches).toEqual(['a']);
    expect(h.scheduler.cancel(a)).toBe(false);
  });
});

describe('DynamicBatchScheduler: queue policy and priority', () => {
  it('rejects past max_queue_size with Triton’s message, as unavailable / REJECTED', () => {
    const h = harness(dyn('max_queue_delay_microseconds: 1000000 default_queue_policy { max_queue_size: 2 }'));
    h.submit('a');
    h.submit('b');
    h.submit('c');
    expect(h.results.get('c')?.error).toMatchObject({ code: 'unavailable', message: '[request id: c] Exceeds maximum queue size' });
    expect(h.results.has('a')).toBe(false);
    expect(h.stats.failureCounts().REJECTED).toBe(1);
    expect(h.scheduler.pendingCount()).toBe(2);
  });

  it('REJECT: fails a request when its timeout expires, even while every instance is busy', async () => {
    const h = harness(dyn('default_queue_policy { default_timeout_microseconds: 50000 }'));
    h.submit('a'); // runs at once: no timeout once executing
    h.submit('b');
    h.clock.advance(49);
    expect(h.results.has('b')).toBe(false);
    h.clock.advance(1);
    expect(h.results.get('b')?.error).toMatchObject({ code: 'unavailable', message: 'Request timeout expired' });
    expect(h.stats.failureCounts().REJECTED).toBe(1);
    h.instances[0]!.finish();
    await flush();
    expect(h.results.get('a')?.response).toBeDefined();
  });

  it('allow_timeout_override: a shorter request timeout wins, a longer one does not', () => {
    const h = harness(
      dyn('max_queue_delay_microseconds: 10000000 default_queue_policy { default_timeout_microseconds: 100000 allow_timeout_override: true }', 8),
    );
    h.submit('short', { parameters: { timeout: 10000 } });
    h.submit('long', { parameters: { timeout: 10000000 } });
    h.clock.advance(10);
    expect(h.results.get('short')?.error?.message).toBe('Request timeout expired');
    expect(h.results.has('long')).toBe(false);
    h.clock.advance(90);
    expect(h.results.get('long')?.error?.message).toBe('Request timeout expired');
  });

  it('DELAY: an expired request goes behind the others and still runs (qa test_policy_delay)', () => {
    const h = harness(
      dyn('preferred_batch_size: [ 4 ] max_queue_delay_microseconds: 1000000 default_queue_policy { timeout_action: DELAY default_timeout_microseconds: 100000 }'),
    );
    const [i0] = h.instances;
    h.submit('a');
    h.clock.advance(200);
    h.submit('b', { batch: 2 });
    h.submit('c', { batch: 2 });
    expect(i0!.batches).toEqual(['b+c']);
    expect(h.results.has('a')).toBe(false);
    expect(h.scheduler.pendingCount()).toBe(1);
  });

  it('priority levels: a higher-priority request joins the front of the queue (qa test_priority_levels)', () => {
    const h = harness(dyn('preferred_batch_size: [ 4 ] max_queue_delay_microseconds: 1000000 priority_levels: 2 default_priority_level: 2'));
    const [i0] = h.instances;
    h.submit('a', { batch: 2 });
    h.submit('b', { batch: 1 });
    expect(i0!.batches).toEqual([]);
    h.submit('c', { batch: 2, parameters: { priority: 1 } });
    // FIFO would send a+b (3, the next would pass the preferred 4); priority puts c first: c+a = 4.
    expect(i0!.batches).toEqual(['c+a']);
  });

  it('max_queue_size is per priority level', () => {
    const h = harness(
      dyn('max_queue_delay_microseconds: 1000000 priority_levels: 2 default_priority_level: 2 priority_queue_policy { key: 1 value { max_queue_size: 1 } }'),
    );
    h.submit('p1', { parameters: { priority: 1 } });
    h.submit('p1-full', { parameters: { priority: 1 } });
    h.submit('p2');
    expect(h.results.get('p1-full')?.error?.message).toBe('[request id: p1-full] Exceeds maximum queue size');
    expect(h.results.has('p2')).toBe(false);
  });
});

describe('DynamicBatchScheduler: preserve_ordering', () => {
  it('releases responses in the order requests entered batches', async () => {
    const h = harness(dyn('preserve_ordering: true'), 2);
    const [i0, i1] = h.instances;
    for (const id of ['a', 'b', 'c']) h.submit(id);
    expect([i0!.batches, i1!.batches]).toEqual([['a'], ['b']]);
    i1!.finish(); // b finishes first: held until a is out
    await flush();
    expect(h.delivered).toEqual([]);
    expect(i1!.batches).toEqual(['b', 'c']);
    i1!.finish(); // c too
    await flush();
    expect(h.delivered).toEqual([]);
    i0!.finish();
    await flush();
    expect(h.delivered).toEqual(['a', 'b', 'c']);
    expect(h.stats.snapshot().inference_stats.success.count).toBe(3);
  });

  it('holds a failure too, and a cancelled request behind it still goes out in order', async () => {
    const h = harness(dyn('preserve_ordering: true'), 2);
    const [i0, i1] = h.instances;
    const a = h.submit('a');
    h.submit('b');
    (i1 as unknown as { execute: () => Promise<never> }).execute = () => Promise.reject(new Error('boom'));
    h.submit('c'); // runs on i1 once b is done, and fails
    a.requestCancel();
    i1!.finish();
    await flush();
    await flush();
    expect(h.delivered).toEqual([]);
    i0!.finish();
    await flush();
    expect(h.delivered).toEqual(['a', 'b', 'c']);
    expect(h.results.get('a')?.error?.code).toBe('cancelled');
    expect(h.results.get('c')?.error).toMatchObject({ code: 'internal', message: 'boom' });
  });

  it('without it, responses go out as executions finish', async () => {
    const h = harness(dyn(''), 2);
    const [i0, i1] = h.instances;
    h.submit('a');
    h.submit('b');
    i1!.finish();
    await flush();
    i0!.finish();
    await flush();
    expect(h.delivered).toEqual(['b', 'a']);
  });
});
