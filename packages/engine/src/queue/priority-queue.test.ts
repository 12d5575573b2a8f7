import { describe, expect, it } from 'vitest';
import type { ModelDynamicBatching, ModelQueuePolicy } from '@switchyard/model-config';
import type { InferenceJob } from '../inference-job.js';
import { compileQueueLevels, effectiveTimeoutMs, PriorityQueue, priorityLevelOf, requestTimeoutMs, type QueueEntry } from './priority-queue.js';

const policy = (p: Partial<ModelQueuePolicy>): ModelQueuePolicy => ({
  timeout_action: 'REJECT',
  default_timeout_microseconds: 0,
  allow_timeout_override: false,
  max_queue_size: 0,
  ...p,
});

function batching(db: Partial<ModelDynamicBatching>): ModelDynamicBatching {
  return { preferred_batch_size: [], max_queue_delay_microseconds: 0, preserve_ordering: false, priority_levels: 0, default_priority_level: 0, priority_queue_policy: {}, ...db };
}

/** Entries carry a fake job: the queue only compares job identity. */
function entry(name: string, deadlineMs = Infinity): QueueEntry {
  return { job: { name } as unknown as InferenceJob, batchSize: 1, enqueuedMs: 0, deadlineMs, inputsKey: '' };
}
const names = (q: PriorityQueue): string[] => {
  const out: string[] = [];
  q.forEach((e) => {
    out.push((e.job as unknown as { name: string }).name);
    return true;
  });
  return out;
};

describe('queue levels and request parameters', () => {
  const levels = compileQueueLevels(
    batching({ priority_levels: 3, default_priority_level: 2, default_queue_policy: policy({ max_queue_size: 5 }), priority_queue_policy: { '1': policy({ max_queue_size: 1 }) } }),
  );

  it('maps priority 0, absent or above the levels to the default level', () => {
    expect(priorityLevelOf({}, levels)).toBe(2);
    expect(priorityLevelOf({ priority: 0 }, levels)).toBe(2);
    expect(priorityLevelOf({ priority: 4 }, levels)).toBe(2);
    expect(priorityLevelOf({ priority: 18446744073709551615n }, levels)).toBe(2);
    expect(priorityLevelOf({ priority: 1 }, levels)).toBe(1);
    expect(priorityLevelOf({ priority: 3n }, levels)).toBe(3);
  });

  it('without priority levels everything is level 0', () => {
    const single = compileQueueLevels(batching({}));
    expect(priorityLevelOf({ priority: 1 }, single)).toBe(0);
  });

  it('takes each level policy from priority_queue_policy, else default_queue_policy', () => {
    expect(levels.policyOf(1).maxQueueSize).toBe(1);
    expect(levels.policyOf(3).maxQueueSize).toBe(5);
  });

  it('reads the request timeout in microseconds; zero or negative means none', () => {
    expect(requestTimeoutMs({ timeout: 1500 })).toBe(1.5);
    expect(requestTimeoutMs({ timeout: 0 })).toBe(0);
    expect(requestTimeoutMs({ timeout: -1 })).toBe(0);
    expect(requestTimeoutMs({})).toBe(0);
  });

  it('lets a request shorten, never lengthen or create, its timeout (allow_timeout_override)', () => {
    const p = { timeoutAction: 'REJECT' as const, defaultTimeoutMs: 100, allowTimeoutOverride: true, maxQueueSize: 0 };
    expect(effectiveTimeoutMs(p, 50)).toBe(50);
    expect(effectiveTimeoutMs(p, 500)).toBe(100);
    expect(effectiveTimeoutMs(p, 0)).toBe(100);
    expect(effectiveTimeoutMs({ ...p, allowTimeoutOverride: false }, 50)).toBe(100);
    expect(effectiveTimeoutMs({ ...p, defaultTimeoutMs: 0 }, 50)).toBe(0);
  });
});

describe('PriorityQueue', () => {
  it('orders by level, then arrival; take removes in that order', () => {
    const q = new PriorityQueue(compileQueueLevels(batching({ priority_levels: 2, default_priority_level: 2 })));
    q.enqueue(2, entry('a'));
    q.enqueue(2, entry('b'));
    q.enqueue(1, entry('c'));
    expect(names(q)).toEqual(['c', 'a', 'b']);
    expect(q.take(2).map((e) => (e.job as unknown as { name: string }).name)).toEqual(['c', 'a']);
    expect(q.size).toBe(1);
    expect(names(q)).toEqual(['b']);
  });

  it('refuses a request when its level is at max_queue_size (a value, not an exception)', () => {
    const q = new PriorityQueue(
      compileQueueLevels(batching({ priority_levels: 2, default_priority_level: 2, priority_queue_policy: { '1': policy({ max_queue_size: 1 }) } })),
    );
    expect(q.enqueue(1, entry('a'))).toBe(true);
    expect(q.enqueue(1, entry('b'))).toBe(false);
    expect(q.enqueue(2, entry('c'))).toBe(true);
    expect(q.size).toBe(2);
  });

  it('REJECT: expired entries are removed and returned', () => {
    const q = new PriorityQueue(compileQueueLevels(batching({})));
    q.enqueue(0, entry('a', 10));
    q.enqueue(0, entry('b'));
    q.enqueue(0, entry('c', 20));
    expect(q.earliestDeadlineMs).toBe(10);
    expect(q.expire(9)).toEqual([]);
    expect(q.expire(10).map((e) => (e.job as unknown as { name: string }).name)).toEqual(['a']);
    expect(q.earliestDeadlineMs).toBe(20);
    expect(names(q)).toEqual(['b', 'c']);
    expect(q.size).toBe(2);
  });

  it('DELAY: expired entries move behind the unexpired ones of their level, and stay queued', () => {
    const q = new PriorityQueue(
      compileQueueLevels(batching({ priority_levels: 2, default_priority_level: 2, default_queue_policy: policy({ timeout_action: 'DELAY' }) })),
    );
    q.enqueue(1, entry('x', 5));
    q.enqueue(2, entry('a', 10));
    q.enqueue(2, entry('b'));
    expect(q.expire(10)).toEqual([]);
    expect(names(q)).toEqual(['x', 'b', 'a']);
    expect(q.earliestDeadlineMs).toBe(Infinity);
    expect(q.size).toBe(3);
    // Delayed entries count toward max_queue_size and are taken after the level's others.
    expect(q.take(3).map((e) => (e.job as unknown as { name: string }).name)).toEqual(['x', 'b', 'a']);
  });

  it('removes a cancelled entry wherever it is', () => {
    const q = new PriorityQueue(compileQueueLevels(batching({ default_queue_policy: policy({ timeout_action: 'DELAY' }) })));
    const a = entry('a', 1);
    const b = entry('b');
    q.enqueue(0, a);
    q.enqueue(0, b);
    q.expire(1);
    expect(q.remove(a.job)).toBe(true);
    expect(q.remove(a.job)).toBe(false);
    expect(q.remove(b.job)).toBe(true);
    expect(q.size).toBe(0);
  });
});
