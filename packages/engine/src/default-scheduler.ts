/**
 * Triton's default scheduler: one FIFO queue per model version; each request executes alone
 * on the next free instance. There is no cross-request batching (a client batch up to
 * max_batch_size is one request). The most recently freed instance takes the next request.
 * An instance with a `pipelineDepth` takes up to that many queued requests when it frees up,
 * each still its own execution (run in order, one after another): an ONNX Runtime instance
 * then pays one hop to its session thread for all of them. An instance takes at most its share
 * of the queue (queued requests / instances), so requests still spread over instances.
 */
import { unavailable } from '@switchyard/common';
import type { BackendInstance } from './backend.js';
import type { InferenceJob } from './inference-job.js';
import { requestPrefix } from './request-normalizer.js';
import type { Scheduler, SchedulerContext } from './scheduler.js';

/** A FIFO with O(1) push/shift and O(n) removal (cancellation is rare). */
export class JobQueue {
  private items: (InferenceJob | undefined)[] = [];
  private head = 0;
  private live = 0;

  get size(): number {
    return this.live;
  }

  push(job: InferenceJob): void {
    this.items.push(job);
    this.live++;
  }

  shift(): InferenceJob | undefined {
    while (this.head < this.items.length) {
      const job = this.items[this.head];
      this.items[this.head++] = undefined;
      if (job !== undefined) {
        this.live--;
        this.compact();
        return job;
      }
    }
    return undefined;
  }

  remove(job: InferenceJob): boolean {
    const i = this.items.indexOf(job, this.head);
    if (i < 0) return false;
    this.items[i] = undefined;
    this.live--;
    return true;
  }

  private compact(): void {
    if (this.head > 1024 && this.head * 2 > this.items.length) {
      this.items = this.items.slice(this.head);
      this.head = 0;
    }
  }
}

export class DefaultScheduler implements Scheduler {
  private readonly queue = new JobQueue();
  private readonly idle: BackendInstance[];
  /** Executions handed to each busy instance and not yet ended. */
  private readonly busy = new Map<BackendInstance, number>();
  private inflight = 0;
  private stopped = false;
  private drained: (() => void) | undefined;

  constructor(
    private readonly modelName: string,
    private readonly context: SchedulerContext,
  ) {
    // A stack: popped from the end, so seed it reversed to start with the first instance.
    this.idle = [...context.instances].reverse();
  }

  enqueue(job: InferenceJob): void {
    if (this.stopped) {
      job.fail(unavailable(`${requestPrefix(job.request.request.id)}Model '${this.modelName}' is unloading`), 'REJECTED');
      return;
    }
    this.queue.push(job);
    this.dispatch();
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
    if (this.queue.size === 0 && this.inflight === 0) return Promise.resolve();
    return new Promise((resolve) => {
      this.drained = resolve;
    });
  }

  private dispatch(): void {
    while (this.idle.length > 0 && this.queue.size > 0) {
      // Most recently freed first: a just-used session thread is still awake, and waking a
      // sleeping thread costs tens to hundreds of microseconds on a VM. Under load every
      // instance is busy anyway, so this only decides which idle one takes the next request.
      const instance = this.idle.pop() as BackendInstance;
      // At most its share of the queue, so instances freeing up next still find work.
      const share = Math.ceil(this.queue.size / this.context.instances.length);
      const take = Math.max(1, Math.min(instance.pipelineDepth ?? 1, share));
      this.busy.set(instance, take);
      for (let i = 0; i < take; i++) this.start(instance, this.queue.shift() as InferenceJob);
    }
  }

  private start(instance: BackendInstance, job: InferenceJob): void {
    job.markExecuting();
    this.inflight++;
    void this.context.run(instance, [job]).finally(() => this.ended(instance));
  }

  private ended(instance: BackendInstance): void {
    this.inflight--;
    const left = (this.busy.get(instance) as number) - 1;
    if (left > 0) {
      this.busy.set(instance, left);
    } else {
      this.busy.delete(instance);
      this.idle.push(instance);
      this.dispatch();
    }
    this.checkDrained();
  }

  private checkDrained(): void {
    if (this.stopped && this.queue.size === 0 && this.inflight === 0 && this.drained !== undefined) {
      const resolve = this.drained;
      this.drained = undefined;
      resolve();
    }
  }
}
