/**
 * The dynamic batcher's queue: Triton's `PriorityQueue` of per-level `PolicyQueue`s
 * (`scheduler_utils.cc`), as a pure data structure (no timers, no IO; time is passed in).
 *
 * - `priority_levels` = N gives levels 1..N, 1 the highest; N = 0 gives the single level 0. A
 *   request's `priority` parameter picks its level; 0 or anything above N means
 *   `default_priority_level`.
 * - Each level has the policy `priority_queue_policy[level]`, else `default_queue_policy`:
 *   `max_queue_size` (0 = unbounded) caps the level's queued requests; a request's timeout is
 *   `default_timeout_microseconds`, or its own `timeout` parameter when `allow_timeout_override`
 *   is set and that is non-zero and smaller (so a zero default ignores request timeouts, as
 *   upstream does). 0 = no timeout.
 * - On expiry, `REJECT` removes the request (the caller fails it); `DELAY` moves it behind the
 *   level's unexpired requests, where it no longer expires.
 * - Scheduling order: levels ascending; within a level, unexpired requests in arrival order,
 *   then delayed ones in the order they expired.
 *
 * A full level is a value (`enqueue` returns false), not an exception.
 */
import type { ModelDynamicBatching, ModelQueuePolicy } from '@switchyard/model-config';
import type { Parameters } from '@switchyard/kserve';
import type { InferenceJob } from '../inference-job.js';

/** One queued request and what the batcher needs to know about it. */
export interface QueueEntry {
  readonly job: InferenceJob;
  /** Batch elements it contributes (at least 1). */
  readonly batchSize: number;
  /** Clock time it joined the queue (ms). */
  readonly enqueuedMs: number;
  /** Clock time its timeout expires (ms); Infinity = never (no timeout, or already delayed). */
  deadlineMs: number;
  /** Inputs that must agree for two requests to share a batch (see `inputsKey`); '' when unchecked. */
  readonly inputsKey: string;
}

/** A level's policy in the units the queue works in. */
export interface LevelPolicy {
  timeoutAction: 'REJECT' | 'DELAY';
  /** 0 = no default timeout. */
  defaultTimeoutMs: number;
  allowTimeoutOverride: boolean;
  /** 0 = unbounded. */
  maxQueueSize: number;
}

const DEFAULT_POLICY: ModelQueuePolicy = { timeout_action: 'REJECT', default_timeout_microseconds: 0, allow_timeout_override: false, max_queue_size: 0 };

function compilePolicy(p: ModelQueuePolicy | undefined): LevelPolicy {
  const policy = p ?? DEFAULT_POLICY;
  return {
    timeoutAction: policy.timeout_action,
    defaultTimeoutMs: policy.default_timeout_microseconds / 1000,
    allowTimeoutOverride: policy.allow_timeout_override,
    maxQueueSize: policy.max_queue_size,
  };
}

/** Levels and policies from a (validated, normalised) `dynamic_batching` section. */
export interface QueueLevels {
  /** `priority_levels`; 0 = a single level 0. */
  levels: number;
  defaultLevel: number;
  policyOf(level: number): LevelPolicy;
}

export function compileQueueLevels(db: ModelDynamicBatching): QueueLevels {
  const fallback = compilePolicy(db.default_queue_policy);
  const byLevel = new Map(Object.entries(db.priority_queue_policy).map(([level, p]) => [Number(level), compilePolicy(p)]));
  const levels = db.priority_levels;
  return {
    levels,
    defaultLevel: levels === 0 ? 0 : db.default_priority_level,
    policyOf: (level) => byLevel.get(level) ?? fallback,
  };
}

/** The level a request runs at: its `priority` parameter when within 1..levels, else the default. */
export function priorityLevelOf(parameters: Parameters, levels: QueueLevels): number {
  const p = parameters['priority'];
  if ((typeof p !== 'number' && typeof p !== 'bigint') || levels.levels === 0) return levels.defaultLevel;
  if (p <= 0 || p > levels.levels) return levels.defaultLevel;
  return Number(p);
}

/** A request's own `timeout` parameter in ms; 0 when absent, zero or negative (an int64 over gRPC). */
export function requestTimeoutMs(parameters: Parameters): number {
  const t = parameters['timeout'];
  if (typeof t !== 'number' && typeof t !== 'bigint') return 0;
  return t > 0 ? Number(t) / 1000 : 0;
}

/** The timeout a policy gives a request (ms, 0 = none), with upstream's override rule. */
export function effectiveTimeoutMs(policy: LevelPolicy, requestMs: number): number {
  if (policy.allowTimeoutOverride && requestMs !== 0 && requestMs < policy.defaultTimeoutMs) return requestMs;
  return policy.defaultTimeoutMs;
}

/** A FIFO of entries with O(1) push/shift/at and O(n) removal (cancellation is rare). */
class EntryList {
  private items: QueueEntry[] = [];
  private head = 0;

  get length(): number {
    return this.items.length - this.head;
  }

  at(i: number): QueueEntry {
    return this.items[this.head + i] as QueueEntry;
  }

  push(entry: QueueEntry): void {
    this.items.push(entry);
  }

  shift(): QueueEntry | undefined {
    if (this.head >= this.items.length) return undefined;
    const entry = this.items[this.head++];
    if (this.head > 1024 && this.head * 2 > this.items.length) {
      this.items = this.items.slice(this.head);
      this.head = 0;
    }
    return entry;
  }

  /** Remove and return the entries matching `drop`, keeping the others in order. */
  extract(drop: (entry: QueueEntry) => boolean): QueueEntry[] {
    const kept: QueueEntry[] = [];
    const dropped: QueueEntry[] = [];
    for (let i = this.head; i < this.items.length; i++) {
      const entry = this.items[i] as QueueEntry;
      (drop(entry) ? dropped : kept).push(entry);
    }
    if (dropped.length > 0) {
      this.items = kept;
      this.head = 0;
    }
    return dropped;
  }
}

class LevelQueue {
  readonly main = new EntryList();
  readonly delayed = new EntryList();

  constructor(
    readonly level: number,
    readonly policy: LevelPolicy,
  ) {}

  get size(): number {
    return this.main.length + this.delayed.length;
  }
}

export class PriorityQueue {
  /** Levels in use, sorted ascending (created on first use, never removed: few distinct levels). */
  private readonly queues: LevelQueue[] = [];
  private count = 0;
  /** A lower bound on the earliest deadline of a queued entry (Infinity = none). */
  private nextDeadline = Infinity;

  constructor(private readonly levels: QueueLevels) {}

  get size(): number {
    return this.count;
  }

  /** Clock time the next timeout may expire (ms), or Infinity. May be early, never late. */
  get earliestDeadlineMs(): number {
    return this.nextDeadline;
  }

  /** The policy requests at `level` are queued under. */
  policyOf(level: number): LevelPolicy {
    return this.levels.policyOf(level);
  }

  /** Queue `entry` at `level`; false (and nothing queued) when that level is at `max_queue_size`. */
  enqueue(level: number, entry: QueueEntry): boolean {
    const queue = this.levelQueue(level);
    if (queue.policy.maxQueueSize > 0 && queue.size >= queue.policy.maxQueueSize) return false;
    queue.main.push(entry);
    this.count++;
    if (entry.deadlineMs < this.nextDeadline) this.nextDeadline = entry.deadlineMs;
    return true;
  }

  /**
   * Apply timeouts at `nowMs`: DELAY entries move behind their level's unexpired ones, REJECT
   * entries are removed and returned (in queue order) for the caller to fail.
   */
  expire(nowMs: number): QueueEntry[] {
    if (nowMs < this.nextDeadline) return [];
    const rejected: QueueEntry[] = [];
    let next = Infinity;
    for (const queue of this.queues) {
      const expired = queue.main.extract((e) => e.deadlineMs <= nowMs);
      for (const entry of expired) {
        if (queue.policy.timeoutAction === 'DELAY') {
          entry.deadlineMs = Infinity;
          queue.delayed.push(entry);
        } else {
          rejected.push(entry);
          this.count--;
        }
      }
      for (let i = 0; i < queue.main.length; i++) next = Math.min(next, queue.main.at(i).deadlineMs);
    }
    this.nextDeadline = next;
    return rejected;
  }

  /**
   * Visit entries in scheduling order until `visit` returns false. The queue must not be
   * changed during the visit.
   */
  forEach(visit: (entry: QueueEntry) => boolean): void {
    for (const queue of this.queues) {
      for (let i = 0; i < queue.main.length; i++) if (!visit(queue.main.at(i))) return;
      for (let i = 0; i < queue.delayed.length; i++) if (!visit(queue.delayed.at(i))) return;
    }
  }

  /** Remove and return the first `n` entries in scheduling order. */
  take(n: number): QueueEntry[] {
    const out: QueueEntry[] = [];
    for (const queue of this.queues) {
      while (out.length < n) {
        const entry = queue.main.length > 0 ? queue.main.shift() : queue.delayed.shift();
        if (entry === undefined) break;
        out.push(entry);
      }
      if (out.length === n) break;
    }
    this.count -= out.length;
    if (this.count === 0) this.nextDeadline = Infinity;
    return out;
  }

  /** Remove the entry of `job` (cancellation). False when it is not queued. */
  remove(job: InferenceJob): boolean {
    for (const queue of this.queues) {
      for (const list of [queue.main, queue.delayed]) {
        if (list.extract((e) => e.job === job).length > 0) {
          if (--this.count === 0) this.nextDeadline = Infinity;
          return true;
        }
      }
    }
    return false;
  }

  private levelQueue(level: number): LevelQueue {
    let lo = 0;
    let hi = this.queues.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if ((this.queues[mid] as LevelQueue).level < level) lo = mid + 1;
      else hi = mid;
    }
    const found = this.queues[lo];
    if (found !== undefined && found.level === level) return found;
    const queue = new LevelQueue(level, this.levels.policyOf(level));
    this.queues.splice(lo, 0, queue);
    return queue;
  }
}
