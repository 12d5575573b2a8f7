/**
 * The `oldest` sequence batching strategy for one instance (Triton's `OldestSequenceBatch`).
 *
 * The instance has `max_candidate_sequences` slots (default `max(1, max_batch_size)`). Each
 * sequence in a slot has at most one request issued at a time: when a request is issued it joins
 * this instance's candidate queue, and the sequence's next request is issued only after that one
 * completed. Batches are formed from the candidate queue with the dynamic batcher's rules
 * (`pickBatch`: up to `max_batch_size`, a `preferred_batch_size` sends at once,
 * `max_queue_delay_microseconds` bounds the wait for a fuller batch, requests with different
 * variable-size input shapes do not share a batch), oldest candidate first, so the oldest
 * requests always run next. No filler slots: batch rows are not tied to slots, which is why
 * such models usually take the CORRID control to tell sequences apart.
 */
import type { ModelConfig, ModelSequenceBatching } from '@switchyard/model-config';
import type { InferenceJob } from '../inference-job.js';
import { compileBatchRule, inputsKey, pickBatch, type BatchRule } from '../queue/queue-batch-rule.js';
import { runSequenceBatch, type SequenceBatchItem } from './sequence-batch-runner.js';
import type { BatcherSetup, ReleaseReason, SlotBatcher, SlotEntry } from './sequence-slots.js';
import type { SequenceState } from './sequence-state.js';

type RequestEntry = Extract<SlotEntry, { kind: 'request' }>;

/** A request issued to the candidate queue. */
interface Candidate {
  slot: number;
  entry: RequestEntry;
  state: SequenceState | undefined;
  issuedMs: number;
  inputsKey: string;
}

export class OldestSequenceBatcher implements SlotBatcher {
  /** Queue of each slot used so far (created on first use: nothing is allocated per slot up front). */
  private readonly queues = new Map<number, SlotEntry[]>();
  /** Slots with a request of their sequence issued (a candidate or executing). */
  private readonly inFlight = new Set<number>();
  private readonly states = new Map<number, SequenceState>();
  private readonly rule: BatchRule;
  private readonly batched: boolean;
  private candidates: Candidate[] = [];
  private executing: Candidate[] = [];
  private stepQueued = false;
  private cancelTimer: (() => void) | undefined;

  constructor(
    private readonly setup: BatcherSetup,
    config: ModelConfig,
  ) {
    const oldest = (config.sequence_batching as ModelSequenceBatching).oldest;
    const base = compileBatchRule(config);
    const maxBatch = Math.max(1, config.max_batch_size);
    // Normalisation gives an empty preferred list [max_batch_size] when the model batches.
    const preferred = new Set(oldest?.preferred_batch_size.length ? oldest.preferred_batch_size : [maxBatch]);
    this.rule = {
      ...base,
      maxBatch,
      preferred,
      maxPreferred: [...preferred].reduce((a, b) => Math.max(a, b), 0),
      delayMs: (oldest?.max_queue_delay_microseconds ?? 0) / 1000,
    };
    this.batched = config.max_batch_size > 0;
  }

  enqueue(slot: number, entry: SlotEntry): void {
    this.queue(slot).push(entry);
    if (!this.inFlight.has(slot)) this.issueNext(slot);
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
      if (i >= 0) {
        const [entry] = queue.splice(i, 1) as [RequestEntry];
        this.release(slot, 'cancelled', entry.sequence.key);
        this.finish();
        return true;
      }
    }
    const c = this.candidates.findIndex((cand) => cand.entry.job === job);
    if (c < 0) return false;
    const [candidate] = this.candidates.splice(c, 1) as [Candidate];
    this.inFlight.delete(candidate.slot);
    // An END candidate already gave its slot back when it was issued.
    if (candidate.entry.sequence.end) this.issueNext(candidate.slot);
    else this.release(candidate.slot, 'cancelled', candidate.entry.sequence.key);
    this.finish();
    return true;
  }

  pendingCount(): number {
    let n = this.candidates.length;
    for (const q of this.queues.values()) for (const e of q) if (e.kind === 'request') n++;
    return n;
  }

  inflightCount(): number {
    return this.executing.length;
  }

  private finish(): void {
    this.kick();
    this.setup.owner.workDone();
  }

  /** Give the slot back (its queued entries are cancelled); queue a backlogged sequence on it. */
  private release(slot: number, reason: ReleaseReason, key?: string): void {
    const queue = this.queue(slot);
    const next = this.setup.owner.releaseSlot(this.setup.index, slot, queue, reason, key);
    if (next === undefined) return;
    queue.push(...next);
    if (!this.inFlight.has(slot)) this.issueNext(slot);
  }

  /**
   * The slot has nothing issued: issue its next queued request (Triton's CompleteAndNext). An END
   * request, or the idle marker, releases the slot at once; a backlogged sequence that takes it
   * over is issued as soon as the slot has nothing in flight.
   */
  private issueNext(slot: number): void {
    const entry = this.queue(slot).shift();
    if (entry === undefined) return;
    if (entry.kind === 'release') {
      this.release(slot, 'idle');
      return;
    }
    let state: SequenceState | undefined;
    if (!this.setup.states.isEmpty) {
      if (entry.sequence.start || !this.states.has(slot)) this.states.set(slot, this.setup.states.initialState());
      state = this.states.get(slot);
    }
    this.inFlight.add(slot);
    this.candidates.push({ slot, entry, state, issuedMs: this.setup.clock.now(), inputsKey: inputsKey(this.rule, entry.job.request, this.batched) });
    if (entry.sequence.end) this.release(slot, 'ended');
  }

  private kick(): void {
    if (this.stepQueued) return;
    this.stepQueued = true;
    queueMicrotask(() => {
      this.stepQueued = false;
      this.step();
    });
  }

  private step(): void {
    if (this.executing.length > 0 || this.candidates.length === 0) return;
    this.cancelTimer?.();
    this.cancelTimer = undefined;
    const now = this.setup.clock.now();
    const pick = pickBatch(
      this.rule,
      (visit) => {
        for (const c of this.candidates) if (!visit({ batchSize: 1, enqueuedMs: c.issuedMs, inputsKey: c.inputsKey })) break;
      },
      now,
    );
    if (pick.count === 0) {
      if (pick.waitUntilMs < Infinity) {
        this.cancelTimer = this.setup.clock.setTimer(pick.waitUntilMs, () => {
          this.cancelTimer = undefined;
          this.step();
        });
      }
      return;
    }
    const batch = this.candidates.splice(0, pick.count);
    this.executing = batch;
    const items: SequenceBatchItem[] = batch.map((c) => ({ kind: 'request', job: c.entry.job, sequence: c.entry.sequence, state: c.state }));
    void runSequenceBatch(this.setup.execution, this.setup.instance, items).finally(() => {
      this.executing = [];
      for (const c of batch) {
        this.inFlight.delete(c.slot);
        this.issueNext(c.slot);
      }
      this.step();
      this.setup.owner.workDone();
    });
  }
}
