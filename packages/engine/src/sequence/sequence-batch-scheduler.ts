/**
 * Triton's sequence batcher (`sequence_batching`), for stateful models: every request carries a
 * correlation id and START / END flags; the requests of one sequence run in order in one batch
 * slot of one instance, with control tensors (and implicit state) supplied by the server.
 *
 * This class is the scheduler front (Triton's `SequenceBatchScheduler`): it checks each request,
 * maps sequences to slots, keeps the backlog of sequences waiting for a free slot, and reaps idle
 * sequences. Per-instance batchers decide what executes together: `DirectSequenceBatcher`
 * (`direct`, the default) or `OldestSequenceBatcher` (`oldest`).
 *
 * Rules (Triton's, with its messages):
 * - batch size must be 1; the id must be non-zero / non-empty;
 * - a request that does not START a sequence must belong to one that is active or backlogged,
 *   else INVALID_ARG "must specify the START flag on the first request of the sequence";
 * - a START on an id that is active logs a conflict warning and continues in the same slot: the
 *   old sequence's queued requests run first, then the new sequence (its START resets the state);
 * - free slots go to new sequences lowest slot index first (so sequences spread over instances);
 *   with none free the sequence waits in a FIFO backlog and takes the next slot released;
 * - a sequence whose last request arrived `max_sequence_idle_microseconds` ago (default 1 s)
 *   releases its slot once its queued requests are placed; its id is forgotten;
 * - a backlogged sequence whose request carried a `timeout` (µs) fails with UNAVAILABLE
 *   "timeout of the corresponding sequence has been expired" if it gets no slot in time;
 * - cancelling a queued request cancels the rest of its sequence and releases its slot;
 * - after `stop()`, a START is refused; requests of running sequences are still accepted.
 */
import { invalidArgument, unavailable, type SwitchyardError } from '@switchyard/common';
import type { ModelConfig, ModelSequenceBatching } from '@switchyard/model-config';
import type { InferenceJob } from '../inference-job.js';
import { realClock, type QueueClock } from '../queue/queue-clock.js';
import type { Scheduler, SchedulerContext } from '../scheduler.js';
import { SequenceControls, correlationText, inSequence, sequenceOf } from './sequence-controls.js';
import { DirectSequenceBatcher } from './sequence-direct.js';
import { OldestSequenceBatcher } from './sequence-oldest.js';
import { cancelEntries, type ReleaseReason, type SlotBatcher, type SlotEntry, type SlotOwner } from './sequence-slots.js';
import { ImplicitStateConfig } from './sequence-state.js';

/** How long the reaper waits before looking again at an idle sequence that is still in the backlog. */
const BACKLOG_IDLE_RECHECK_MS = 50;

export interface SequenceSchedulerOptions {
  /** Time source for idle reaping, backlog timeouts and queue delays. Default: the real clock. */
  clock?: QueueClock;
}

interface SlotRef {
  batcher: number;
  slot: number;
}

interface Backlog {
  key: string;
  entries: SlotEntry[];
  /** Clock time at which the backlogged sequence times out; Infinity without a request timeout. */
  expiresMs: number;
}

export class SequenceBatchScheduler implements Scheduler, SlotOwner {
  private readonly modelName: string;
  private readonly clock: QueueClock;
  private readonly maxIdleMs: number;
  private readonly batchers: SlotBatcher[];
  /** Slots given back after use. Slots never used yet are `fresh` onwards, in slot-major order. */
  private readonly free: SlotRef[] = [];
  /** Index (slot * instances + batcher) of the first never-used slot; nothing is allocated per slot up front. */
  private fresh = 0;
  private readonly totalSlots: number;
  /** Sequences that own a slot. A sequence whose END was queued is no longer here. */
  private readonly active = new Map<string, SlotRef>();
  private readonly backlog: Backlog[] = [];
  /** Backlogged sequences still collecting requests (not ended). */
  private readonly backlogByKey = new Map<string, Backlog>();
  /** Clock time of the last request of each known sequence, for the idle reaper. */
  private readonly lastSeen = new Map<string, number>();
  private timer: { atMs: number; cancel: () => void } | undefined;
  private stopped = false;
  private drained: (() => void) | undefined;

  constructor(
    config: ModelConfig,
    private readonly context: SchedulerContext,
    options: SequenceSchedulerOptions = {},
  ) {
    const sb = config.sequence_batching as ModelSequenceBatching;
    this.modelName = config.name;
    this.clock = options.clock ?? realClock;
    this.maxIdleMs = sb.max_sequence_idle_microseconds / 1000;
    if (sb.iterative_sequence) {
      context.logger.warn({ model: config.name }, 'iterative_sequence is not supported: requests are scheduled as ordinary sequences');
    }
    const states = new ImplicitStateConfig(config, context.modelPath);
    const controls = new SequenceControls(config);
    const execution = { run: context.run, controls, stateOutputs: states.outputNames() };
    const oldest = sb.oldest !== undefined;
    const slotCount = oldest && sb.oldest!.max_candidate_sequences > 0 ? sb.oldest!.max_candidate_sequences : Math.max(1, config.max_batch_size);
    this.batchers = context.instances.map((instance, index) => {
      const setup = { index, instance, slotCount, owner: this, execution, states, clock: this.clock };
      return oldest ? new OldestSequenceBatcher(setup, config) : new DirectSequenceBatcher(setup, config);
    });
    this.totalSlots = slotCount * this.batchers.length;
  }

  enqueue(job: InferenceJob): void {
    const model = this.modelName;
    const reject = (error: SwitchyardError): void => job.fail(error, 'REJECTED');
    if (job.request.batchSize > 1) {
      return reject(invalidArgument(`inference request to model '${model}' must specify batch-size 1 due to requirements of sequence batcher`));
    }
    const sequence = sequenceOf(job.request.request);
    if (!inSequence(sequence.id)) {
      return reject(invalidArgument(`inference request to model '${model}' must specify a non-zero or non-empty correlation ID`));
    }
    if (this.stopped && sequence.start) {
      return reject(unavailable('Server is stopping, scheduler for model has stopped accepting new inference requests'));
    }
    const { key } = sequence;
    const owned = this.active.get(key);
    const backlogged = this.backlogByKey.get(key);
    if (!sequence.start && owned === undefined && backlogged === undefined) {
      return reject(
        invalidArgument(
          `inference request for sequence ${correlationText(sequence.id)} to model '${model}' must specify the START flag on the first request of the sequence`,
        ),
      );
    }
    const now = this.clock.now();
    this.lastSeen.set(key, now);
    this.wakeAt(now + this.maxIdleMs);
    if (sequence.start && (owned !== undefined || backlogged !== undefined)) {
      this.context.logger.warn(
        { model, sequence: correlationText(sequence.id) },
        `sequence ${correlationText(sequence.id)} for model '${model}' has a conflict. The previous sequence did not end before this sequence start. Previous sequence will be terminated early.`,
      );
    }
    const entry: SlotEntry = { kind: 'request', job, sequence, enqueuedMs: now };
    let target = owned;
    if (target === undefined && backlogged !== undefined) {
      this.addToBacklog(backlogged, entry, now);
      if (sequence.end) this.backlogByKey.delete(key);
      return;
    }
    if (target === undefined) {
      target = this.takeFreeSlot();
      if (target === undefined) {
        const created: Backlog = { key, entries: [], expiresMs: Infinity };
        this.backlog.push(created);
        this.addToBacklog(created, entry, now);
        if (!sequence.end) this.backlogByKey.set(key, created);
        return;
      }
      this.active.set(key, target);
    }
    if (sequence.end) this.active.delete(key);
    (this.batchers[target.batcher] as SlotBatcher).enqueue(target.slot, entry);
  }

  cancel(job: InferenceJob): boolean {
    for (const batcher of this.batchers) {
      if (batcher.cancel(job)) return true;
    }
    const index = this.backlog.findIndex((b) => b.entries.some((e) => e.kind === 'request' && e.job === job));
    if (index < 0) return false;
    // Triton drops a backlogged sequence with a cancelled request as a whole.
    const [removed] = this.backlog.splice(index, 1) as [Backlog];
    if (this.backlogByKey.get(removed.key) === removed) this.backlogByKey.delete(removed.key);
    this.lastSeen.delete(removed.key);
    cancelEntries(removed.entries.filter((e) => !(e.kind === 'request' && e.job === job)));
    this.workDone();
    return true;
  }

  pendingCount(): number {
    let n = 0;
    for (const b of this.batchers) n += b.pendingCount();
    for (const b of this.backlog) n += b.entries.length;
    return n;
  }

  inflightCount(): number {
    let n = 0;
    for (const b of this.batchers) n += b.inflightCount();
    return n;
  }

  stop(): Promise<void> {
    this.stopped = true;
    if (this.isDrained()) {
      this.cancelTimer();
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      this.drained = resolve;
    });
  }

  releaseSlot(batcher: number, slot: number, remaining: SlotEntry[], reason: ReleaseReason, key?: string): SlotEntry[] | undefined {
    if (reason === 'cancelled' && key !== undefined) {
      const owner = this.active.get(key);
      if (owner !== undefined && owner.batcher === batcher && owner.slot === slot) this.active.delete(key);
      this.lastSeen.delete(key);
    }
    cancelEntries(remaining.splice(0));
    const next = this.backlog.shift();
    if (next !== undefined) {
      const last = next.entries[next.entries.length - 1];
      if (!(last?.kind === 'request' && last.sequence.end)) {
        if (this.backlogByKey.get(next.key) === next) this.backlogByKey.delete(next.key);
        this.active.set(next.key, { batcher, slot });
      }
      return next.entries;
    }
    this.free.push({ batcher, slot });
    return undefined;
  }

  workDone(): void {
    if (this.drained === undefined || !this.isDrained()) return;
    const resolve = this.drained;
    this.drained = undefined;
    this.cancelTimer();
    resolve();
  }

  private isDrained(): boolean {
    return this.backlog.length === 0 && this.pendingCount() === 0 && this.inflightCount() === 0;
  }

  /**
   * The free slot with the lowest slot index (then the lowest instance), Triton's order. A slot
   * given back always comes before the never-used ones (it was taken from them earlier).
   */
  private takeFreeSlot(): SlotRef | undefined {
    if (this.free.length === 0) {
      if (this.fresh >= this.totalSlots) return undefined;
      const n = this.batchers.length;
      const k = this.fresh++;
      return { batcher: k % n, slot: Math.floor(k / n) };
    }
    let best = 0;
    this.free.forEach((ref, i) => {
      const current = this.free[best]!;
      if (ref.slot < current.slot || (ref.slot === current.slot && ref.batcher < current.batcher)) best = i;
    });
    return this.free.splice(best, 1)[0];
  }

  private addToBacklog(backlog: Backlog, entry: SlotEntry, now: number): void {
    backlog.entries.push(entry);
    if (entry.kind !== 'request') return;
    const timeoutUs = Number(entry.job.request.request.parameters['timeout'] ?? 0);
    if (timeoutUs > 0) {
      backlog.expiresMs = Math.min(backlog.expiresMs, now + timeoutUs / 1000);
      this.wakeAt(backlog.expiresMs);
    }
  }

  /** Make sure the reaper runs at `atMs` or earlier. */
  private wakeAt(atMs: number): void {
    if (this.timer !== undefined && this.timer.atMs <= atMs) return;
    this.cancelTimer();
    const cancel = this.clock.setTimer(atMs, () => {
      this.timer = undefined;
      this.reap();
    });
    this.timer = { atMs, cancel };
  }

  private cancelTimer(): void {
    this.timer?.cancel();
    this.timer = undefined;
  }

  /** Release idle sequences (Triton's reaper thread) and reject expired backlogged sequences. */
  private reap(): void {
    const now = this.clock.now();
    let next = Infinity;
    // Decide first, release after: a backlogged sequence that inherits a released slot is
    // judged on the next pass, as in Triton (its reaper releases slots outside its lock).
    const released: SlotRef[] = [];
    for (const [key, seen] of this.lastSeen) {
      if (now < seen + this.maxIdleMs) {
        next = Math.min(next, seen + this.maxIdleMs);
        continue;
      }
      const owned = this.active.get(key);
      if (owned !== undefined) {
        this.active.delete(key);
        this.lastSeen.delete(key);
        released.push(owned);
      } else if (this.backlogByKey.has(key)) {
        next = Math.min(next, now + BACKLOG_IDLE_RECHECK_MS);
      } else {
        this.lastSeen.delete(key);
      }
    }
    for (let i = 0; i < this.backlog.length; ) {
      const b = this.backlog[i] as Backlog;
      if (b.expiresMs > now) {
        next = Math.min(next, b.expiresMs);
        i++;
        continue;
      }
      this.backlog.splice(i, 1);
      if (this.backlogByKey.get(b.key) === b) this.backlogByKey.delete(b.key);
      for (const e of b.entries) {
        if (e.kind === 'request') e.job.fail(unavailable('timeout of the corresponding sequence has been expired'), 'REJECTED');
      }
    }
    for (const ref of released) (this.batchers[ref.batcher] as SlotBatcher).enqueue(ref.slot, { kind: 'release' });
    if (next < Infinity) this.wakeAt(next);
    this.workDone();
  }
}
