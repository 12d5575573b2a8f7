/**
 * What the sequence scheduler and its per-instance batchers share.
 *
 * Each instance has a batcher with a fixed number of batch slots (a bound: a slot's queue and state
 * are made when a sequence first takes it, so a huge count costs nothing); a sequence owns one slot
 * (on one instance) from its START until its END, its idle timeout or its cancellation, so its
 * requests run in order, one at a time, on one instance. The scheduler
 * (`SequenceBatchScheduler`) owns the sequence → slot map, the free slots and the backlog; a
 * batcher (`DirectSequenceBatcher`, `OldestSequenceBatcher`) owns its slot queues and decides
 * which queued requests execute together.
 *
 * Everything runs on the event loop: no method here is re-entered from another thread.
 */
import type { InferenceJob } from '../inference-job.js';
import type { SequenceBatchContext } from './sequence-batch-runner.js';
import type { RequestSequence } from './sequence-controls.js';
import type { ImplicitStateConfig } from './sequence-state.js';
import type { BackendInstance } from '../backend.js';
import type { QueueClock } from '../queue/queue-clock.js';

/**
 * An entry of a slot queue: a request of the sequence in that slot, or the idle reaper's marker
 * that releases the slot once every request queued before it has been placed.
 */
export type SlotEntry = { kind: 'request'; job: InferenceJob; sequence: RequestSequence; enqueuedMs: number } | { kind: 'release' };

/** Why a batcher gives a slot back. */
export type ReleaseReason = 'ended' | 'idle' | 'cancelled';

/** The scheduler side, as batchers see it. */
export interface SlotOwner {
  /**
   * The sequence in `slot` of batcher `batcher` is over: its END request was placed in a batch,
   * the idle marker was reached, or one of its requests was cancelled. `remaining` holds the
   * entries still queued on the slot; they are failed as cancelled (Triton's rule). `key`: the
   * cancelled sequence, which stops owning the slot (ended and idle sequences already do).
   * Returns the queued requests of a backlogged sequence that now owns the slot (the batcher
   * queues them on it), or undefined when the slot is free again.
   */
  releaseSlot(batcher: number, slot: number, remaining: SlotEntry[], reason: ReleaseReason, key?: string): SlotEntry[] | undefined;
  /** A batcher finished an execution (or dropped queued work): a pending `stop()` may now be drained. */
  workDone(): void;
}

/** One instance's batcher, as the scheduler sees it. */
export interface SlotBatcher {
  /** Queue an entry on a slot the scheduler assigned to the entry's sequence. */
  enqueue(slot: number, entry: SlotEntry): void;
  /** Remove a queued (not executing) job; the rest of its sequence is cancelled and its slot released. */
  cancel(job: InferenceJob): boolean;
  /** Requests queued on this batcher and not executing. */
  pendingCount(): number;
  /** Requests of this batcher's current execution(s). */
  inflightCount(): number;
}

/** What every batcher is built from. */
export interface BatcherSetup {
  /** Index of this batcher (its instance) in the scheduler. */
  index: number;
  instance: BackendInstance;
  slotCount: number;
  owner: SlotOwner;
  execution: SequenceBatchContext;
  states: ImplicitStateConfig;
  clock: QueueClock;
}

/** Fail every request entry of `entries` as cancelled (markers are dropped). */
export function cancelEntries(entries: readonly SlotEntry[]): void {
  for (const entry of entries) if (entry.kind === 'request') entry.job.failCancelled();
}
