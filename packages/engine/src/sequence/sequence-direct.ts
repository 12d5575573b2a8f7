/**
 * The `direct` sequence batching strategy for one instance (Triton's `DirectSequenceBatch`).
 *
 * The instance has `max(1, max_batch_size)` slots; each execution takes at most one request
 * from each slot, at the batch position equal to the slot index, so a model can keep per-slot
 * state in its own batch rows. Slots below the highest ready one that have nothing ready (or
 * whose request has input shapes that cannot join this batch) are filled with a copy of a ready
 * request whose READY control is false. One execution at a time: the next batch is formed when
 * the previous one returned, from whatever is queued by then.
 *
 * `max_queue_delay_microseconds` with `minimum_slot_utilization` (both non-zero) hold a batch back
 * until enough slots are ready (ready / max_batch_size ≥ utilization) or the oldest ready request
 * has waited the delay; with either at 0 a batch goes as soon as the instance is free.
 */
import type { ModelConfig, ModelSequenceBatching } from '@switchyard/model-config';
import type { InferenceJob } from '../inference-job.js';
import { compileBatchRule, inputsKey, type BatchRule } from '../queue/queue-batch-rule.js';
import { runSequenceBatch, type SequenceBatchItem } from './sequence-batch-runner.js';
import type { BatcherSetup, SlotBatcher, SlotEntry } from './sequence-slots.js';
import type { SequenceState } from './sequence-state.js';

type RequestEntry = Extract<SlotEntry, { kind: 'request' }>;

export class DirectSequenceBatcher implements SlotBatcher {
  /** Queue of each slot used so far (created on first use: nothing is allocated per slot up front). */
  private readonly queues = new Map<number, SlotEntry[]>();
  /** Implicit state of the sequence in each slot (absent until its first request is placed). */
  private readonly states = new Map<number, SequenceState>();
  private readonly rule: BatchRule;
  private readonly batched: boolean;
  private readonly maxBatch: number;
  private readonly delayMs: number;
  private readonly minUtilization: number;
  private executing: InferenceJob[] = [];
  private stepQueued = false;
  private cancelTimer: (() => void) | undefined;

  constructor(
    private readonly setup: BatcherSetup,
    config: ModelConfig,
  ) {
    const direct = (config.sequence_batching as ModelSequenceBatching).direct;
    this.rule = compileBatchRule(config);
    this.batched = config.max_batch_size > 0;
    this.maxBatch = Math.max(1, config.max_batch_size);
    this.delayMs = (direct?.max_queue_delay_microseconds ?? 0) / 1000;
    this.minUtilization = direct?.minimum_slot_utilization ?? 0;
  }

  enqueue(slot: number, entry: SlotEntry): void {
    this.queue(slot).push(entry);
    this.kick();
  }

  private queue(slot: number): SlotEntry[] {
    let queue = this.queues.get(slot);
    if (queue === undefined) this.queues.set(slot, (queue = []));
    return queue;
  }

  cancel(job: InferenceJob): boolean {
    for (const [slot, queue] of this.queues) {
      const i = queue.findIndex((e) => e.kind === 'request' && e.job === job);
      if (i < 0) continue;
      const [entry] = queue.splice(i, 1) as [RequestEntry];
      this.refill(slot, this.setup.owner.releaseSlot(this.setup.index, slot, queue, 'cancelled', entry.sequence.key));
      this.kick();
      this.setup.owner.workDone();
      return true;
    }
    return false;
  }

  pendingCount(): number {
    let n = 0;
    for (const q of this.queues.values()) for (const e of q) if (e.kind === 'request') n++;
    return n;
  }

  inflightCount(): number {
    return this.executing.length;
  }

  /** Form the next batch soon (coalescing requests that arrive in the same tick). */
  private kick(): void {
    if (this.stepQueued) return;
    this.stepQueued = true;
    queueMicrotask(() => {
      this.stepQueued = false;
      this.step();
    });
  }

  private refill(slot: number, entries: SlotEntry[] | undefined): void {
    if (entries !== undefined) this.queue(slot).push(...entries);
  }

  /** The state a request of `slot` runs with: a fresh one when its sequence starts. */
  private stateFor(slot: number, entry: RequestEntry, reset: Set<number>): SequenceState | undefined {
    if (this.setup.states.isEmpty) return undefined;
    if ((entry.sequence.start && !reset.has(slot)) || !this.states.has(slot)) {
      this.states.set(slot, this.setup.states.initialState());
      reset.add(slot);
    }
    return this.states.get(slot);
  }

  private step(): void {
    if (this.executing.length > 0) return;
    this.cancelTimer?.();
    this.cancelTimer = undefined;
    const { owner, index } = this.setup;

    // Release slots whose idle marker reached the front; find what is ready.
    let first = -1;
    let last = -1;
    let ready = 0;
    let oldestMs = Infinity;
    const slots = [...this.queues.keys()].sort((a, b) => a - b);
    for (const slot of slots) {
      const queue = this.queue(slot);
      while (queue[0]?.kind === 'release') {
        queue.shift();
        this.refill(slot, owner.releaseSlot(index, slot, queue, 'idle'));
      }
      const front = queue[0];
      if (front?.kind !== 'request') continue;
      if (first < 0) first = slot;
      last = slot;
      ready++;
      oldestMs = Math.min(oldestMs, front.enqueuedMs);
    }
    if (first < 0) {
      owner.workDone();
      return;
    }
    if (this.delayMs > 0 && this.minUtilization > 0) {
      const now = this.setup.clock.now();
      if (now < oldestMs + this.delayMs && ready / this.maxBatch < this.minUtilization) {
        this.cancelTimer = this.setup.clock.setTimer(oldestMs + this.delayMs, () => {
          this.cancelTimer = undefined;
          this.step();
        });
        return;
      }
    }

    // One request per slot from slot 0 to the last ready one; fillers keep the others in place.
    const reset = new Set<number>();
    const representative = this.queue(first)[0] as RequestEntry;
    const representativeState = this.stateFor(first, representative, reset);
    const key = inputsKey(this.rule, representative.job.request, this.batched);
    const items: SequenceBatchItem[] = [];
    for (let slot = 0; slot <= last; slot++) {
      const queue = this.queues.get(slot) ?? [];
      const front = queue[0];
      if (front?.kind !== 'request' || inputsKey(this.rule, front.job.request, this.batched) !== key) {
        items.push({ kind: 'filler', like: representative.job.request, state: representativeState });
        continue;
      }
      queue.shift();
      items.push({ kind: 'request', job: front.job, sequence: front.sequence, state: this.stateFor(slot, front, reset) });
      if (front.sequence.end) this.refill(slot, owner.releaseSlot(index, slot, queue, 'ended'));
    }

    const jobs = items.flatMap((item) => (item.kind === 'request' ? [item.job] : []));
    this.executing = jobs;
    void runSequenceBatch(this.setup.execution, this.setup.instance, items).finally(() => {
      this.executing = [];
      this.step();
      owner.workDone();
    });
  }
}
