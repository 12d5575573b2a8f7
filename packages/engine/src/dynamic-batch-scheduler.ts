/**
 * Triton's dynamic batcher: requests from different clients are combined into one execution.
 *
 * - Queueing: a `PriorityQueue` (levels, `max_queue_size`, timeouts with REJECT / DELAY).
 *   A full level fails the request at once: `Exceeds maximum queue size` (unavailable, counted
 *   REJECTED). A REJECT timeout fails it when it expires, even while every instance is busy:
 *   `Request timeout expired` (unavailable, REJECTED).
 * - Batching: whenever an instance is free, `pickBatch` decides from the queue whether to send
 *   a batch now or to wait for the queue delay; batches go to any free instance, so a model
 *   with several instances has several batches in flight. The most recently freed instance
 *   goes first (its thread is still awake), as in the default scheduler.
 * - `preserve_ordering`: responses are released in the order requests entered batches, which
 *   is arrival order (the config allows one priority level and no DELAY with it).
 * - Stopping: new requests fail as unavailable; queued ones are sent without waiting for the
 *   queue delay; `stop()` resolves when nothing is queued or executing.
 *
 * Single-threaded: every method runs on the event loop. Delivering a result may synchronously
 * submit a new request (an ensemble step, a BLS call), so the scheduling loop is re-entrancy
 * safe: a nested call only asks the running loop for another pass.
 */
import { unavailable } from '@switchyard/common';
import type { ModelConfig } from '@switchyard/model-config';
import type { BackendInstance } from './backend.js';
import type { InferenceJob } from './inference-job.js';
import {
  compileQueueLevels,
  effectiveTimeoutMs,
  PriorityQueue,
  priorityLevelOf,
  requestTimeoutMs,
  type QueueEntry,
  type QueueLevels,
} from './queue/priority-queue.js';
import { compileBatchRule, inputsKey, pickBatch, type BatchRule } from './queue/queue-batch-rule.js';
import { realClock, type QueueClock } from './queue/queue-clock.js';
import { requestPrefix } from './request-normalizer.js';
import type { Scheduler, SchedulerContext } from './scheduler.js';

/** Upstream's message for a REJECT timeout (no request-id prefix: qa compares it exactly). */
export const TIMEOUT_EXPIRED_MESSAGE = 'Request timeout expired';
export const QUEUE_FULL_MESSAGE = 'Exceeds maximum queue size';

export class DynamicBatchScheduler implements Scheduler {
  private readonly rule: BatchRule;
  private readonly queue: PriorityQueue;
  private readonly levels: QueueLevels;
  private readonly batched: boolean;
  private readonly idle: BackendInstance[];
  private readonly order: ResponseOrder | undefined;
  private inflight = 0;
  private stopped = false;
  private drained: (() => void) | undefined;
  private pumping = false;
  private pumpAgain = false;
  private timerAtMs = Infinity;
  private cancelTimer: (() => void) | undefined;

  constructor(
    private readonly config: ModelConfig,
    private readonly context: SchedulerContext,
    private readonly clock: QueueClock = realClock,
  ) {
    const db = config.dynamic_batching;
    if (db === undefined) throw new Error(`DynamicBatchScheduler needs dynamic_batching in '${config.name}'`);
    this.rule = compileBatchRule(config);
    this.levels = compileQueueLevels(db);
    this.queue = new PriorityQueue(this.levels);
    this.batched = config.max_batch_size > 0;
    this.order = db.preserve_ordering ? new ResponseOrder() : undefined;
    // A stack: popped from the end, so seed it reversed to start with the first instance.
    this.idle = [...context.instances].reverse();
  }

  enqueue(job: InferenceJob): void {
    const { request } = job.request;
    if (this.stopped) {
      job.fail(unavailable(`${requestPrefix(request.id)}Model '${this.config.name}' is unloading`), 'REJECTED');
      return;
    }
    const now = this.clock.now();
    const level = priorityLevelOf(request.parameters, this.levels);
    const timeoutMs = effectiveTimeoutMs(this.queue.policyOf(level), requestTimeoutMs(request.parameters));
    const entry: QueueEntry = {
      job,
      batchSize: job.batchElements,
      enqueuedMs: now,
      deadlineMs: timeoutMs > 0 ? now + timeoutMs : Infinity,
      inputsKey: inputsKey(this.rule, job.request, this.batched),
    };
    if (!this.queue.enqueue(level, entry)) {
      job.fail(unavailable(`${requestPrefix(request.id)}${QUEUE_FULL_MESSAGE}`), 'REJECTED');
      return;
    }
    this.pump();
  }

  cancel(job: InferenceJob): boolean {
    const removed = this.queue.remove(job);
    if (removed) this.checkDrained();
    return removed;
  }

  pendingCount(): number {
    return this.queue.size;
  }

  inflightCount(): number {
    return this.inflight;
  }

  stop(): Promise<void> {
    this.stopped = true;
    this.pump();
    if (this.queue.size === 0 && this.inflight === 0) return Promise.resolve();
    return new Promise((resolve) => {
      this.drained = resolve;
    });
  }

  /** Run scheduling passes until one finds nothing more to do. */
  private pump(): void {
    if (this.pumping) {
      this.pumpAgain = true;
      return;
    }
    this.pumping = true;
    try {
      do {
        this.pumpAgain = false;
        this.pass();
      } while (this.pumpAgain);
    } finally {
      this.pumping = false;
    }
  }

  /** Fail expired requests, send every batch that is due to free instances, re-arm the timer. */
  private pass(): void {
    const now = this.clock.now();
    for (const entry of this.queue.expire(now)) entry.job.fail(unavailable(TIMEOUT_EXPIRED_MESSAGE), 'REJECTED');
    let wakeAtMs = Infinity;
    while (this.idle.length > 0 && this.queue.size > 0) {
      const pick = pickBatch(this.rule, (visit) => this.queue.forEach(visit), now, this.stopped);
      if (pick.count === 0) {
        wakeAtMs = pick.waitUntilMs;
        break;
      }
      this.launch(this.queue.take(pick.count).map((e) => e.job));
    }
    this.arm(Math.min(wakeAtMs, this.queue.earliestDeadlineMs));
    this.checkDrained();
  }

  private launch(jobs: InferenceJob[]): void {
    const instance = this.idle.pop() as BackendInstance;
    for (const job of jobs) job.markExecuting();
    this.inflight += jobs.length;
    const settle = this.order?.admit(jobs);
    void this.context.run(instance, settle?.jobs ?? jobs).finally(() => {
      settle?.release();
      this.inflight -= jobs.length;
      this.idle.push(instance);
      this.pump();
    });
  }

  /** Keep one timer, at the earliest time something may become due. */
  private arm(atMs: number): void {
    if (atMs === this.timerAtMs) return;
    this.cancelTimer?.();
    this.cancelTimer = undefined;
    this.timerAtMs = atMs;
    if (atMs === Infinity) return;
    this.cancelTimer = this.clock.setTimer(atMs, () => {
      this.cancelTimer = undefined;
      this.timerAtMs = Infinity;
      this.pump();
    });
  }

  private checkDrained(): void {
    if (!this.stopped || this.queue.size > 0 || this.inflight > 0 || this.drained === undefined) return;
    const resolve = this.drained;
    this.drained = undefined;
    this.arm(Infinity);
    resolve();
  }
}

/** A response slot of `ResponseOrder`: `deliver` is set once the job's result is known. */
interface Slot {
  done: boolean;
  deliver: () => void;
}

/**
 * `preserve_ordering`: results are delivered in the order jobs were admitted into batches.
 * The jobs handed to the execute path are proxies whose `succeed` / `fail` record the result;
 * it is delivered (through the real job, which does the statistics) once every earlier job's
 * result has been. Everything else on the proxy is the real job. At most the in-flight jobs
 * hold a slot, so the FIFO stays short.
 */
class ResponseOrder {
  private readonly slots: Slot[] = [];

  /** Slots for `jobs`, the proxies to execute, and `release()` for when their execution ends. */
  admit(jobs: InferenceJob[]): { jobs: InferenceJob[]; release: () => void } {
    const slots = jobs.map((): Slot => ({ done: false, deliver: () => undefined }));
    this.slots.push(...slots);
    const proxies = jobs.map((job, i) => {
      const slot = slots[i] as Slot;
      const hold: Pick<InferenceJob, 'succeed' | 'fail'> = {
        succeed: (...args: Parameters<InferenceJob['succeed']>) => this.settle(slot, () => job.succeed(...args)),
        fail: (...args: Parameters<InferenceJob['fail']>) => this.settle(slot, () => job.fail(...args)),
      };
      return new Proxy(job, {
        get(target, prop) {
          if (prop === 'succeed' || prop === 'fail') return hold[prop];
          const value: unknown = Reflect.get(target, prop, target);
          return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
        },
      });
    });
    // A slot the execute path never settled (a response streamed through the sender) must not
    // hold back later responses.
    const release = (): void => {
      for (const slot of slots) if (!slot.done) this.settle(slot, () => undefined);
    };
    return { jobs: proxies, release };
  }

  private settle(slot: Slot, deliver: () => void): void {
    if (slot.done) return;
    slot.done = true;
    slot.deliver = deliver;
    while (this.slots[0]?.done === true) (this.slots.shift() as Slot).deliver();
  }
}
