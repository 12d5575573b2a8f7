/**
 * Forward-pass figures of the worker's LLM engines → the event plane, as WireForwardPass batches (for
 * planners: Dynamo's ForwardPassMetrics).
 *
 * The engine calls the listener synchronously at the end of each step; the listener only adds the step
 * to its model's batch. Every `intervalMs` (default 1 s) each model with steps in the period gets one
 * message: at most `maxSteps` of them, a uniform sample of the period's steps (reservoir sampling), and
 * the number left out as `dropped`. So a fast engine (a mocker at 100× runs thousands of steps a
 * second) costs one bounded message per model per second, and the sample is not biased towards the
 * start of the second. A quiet engine sends nothing (its load heartbeat says it is alive).
 *
 * A failed publish is logged and the batch dropped: the next second's figures matter more than a
 * retried old one, and retrying could pile batches up behind an outage.
 */
import type { Logger } from '@switchyard/common';
import type { ForwardPassFigures, LlmEndpoint } from '@switchyard/llm';
import type { EventPlane, InstanceId } from '@switchyard/runtime';
import type { WireForwardPass, WireForwardPassStep } from '../protocols.js';
import { PeriodicRounds } from '../periodic-rounds.js';

export const DEFAULT_FORWARD_PASS_INTERVAL_MS = 1000;
/** Step samples per batch: enough to regress step time on tokens, ~5 KB of JSON. */
export const FORWARD_PASS_MAX_STEPS = 64;

export interface ForwardPassPublisherOptions {
  readonly eventPlane: EventPlane;
  readonly subject: string;
  readonly instanceId: InstanceId;
  readonly logger: Logger;
  /** Default DEFAULT_FORWARD_PASS_INTERVAL_MS. */
  readonly intervalMs?: number;
  /** Default FORWARD_PASS_MAX_STEPS (at most MAX_WIRE_FORWARD_PASS_STEPS). */
  readonly maxSteps?: number;
  /** Epoch ms; default Date.now. */
  readonly now?: () => number;
  /** Uniform [0, 1); default Math.random. */
  readonly random?: () => number;
}

/** One model's steps since its last batch. */
interface Batch {
  from: number;
  seen: number;
  steps: WireForwardPassStep[];
}

export class ForwardPassPublisher {
  private readonly batches = new Map<string, Batch>();
  private readonly attachedModels = new Map<string, number>();
  private readonly rounds: PeriodicRounds;
  private readonly intervalMs: number;
  private readonly maxSteps: number;
  private readonly now: () => number;
  private readonly random: () => number;
  /** Epoch ms the current period began (the last round, or construction). */
  private periodStart: number;

  constructor(private readonly options: ForwardPassPublisherOptions) {
    this.intervalMs = options.intervalMs ?? DEFAULT_FORWARD_PASS_INTERVAL_MS;
    if (!Number.isFinite(this.intervalMs) || this.intervalMs <= 0) throw new RangeError(`forward-pass interval must be > 0 ms, got ${this.intervalMs}`);
    this.rounds = new PeriodicRounds(this.intervalMs, () => this.round());
    this.maxSteps = options.maxSteps ?? FORWARD_PASS_MAX_STEPS;
    if (!Number.isSafeInteger(this.maxSteps) || this.maxSteps < 1) throw new RangeError(`forward-pass maxSteps must be an integer >= 1, got ${this.maxSteps}`);
    this.now = options.now ?? Date.now;
    this.random = options.random ?? Math.random;
    this.periodStart = this.now();
  }

  /** Batch `endpoint`'s steps under `model` from now on. Returns detach (steps already batched are still published). */
  attach(model: string, endpoint: LlmEndpoint): () => void {
    if (endpoint.onForwardPass === undefined) return () => {};
    this.attachedModels.set(model, (this.attachedModels.get(model) ?? 0) + 1);
    const unsubscribe = endpoint.onForwardPass((f) => this.record(model, f));
    let detached = false;
    return () => {
      if (detached) return;
      detached = true;
      unsubscribe();
      const n = (this.attachedModels.get(model) ?? 1) - 1;
      if (n > 0) this.attachedModels.set(model, n);
      else this.attachedModels.delete(model);
    };
  }

  /** One step of `model` (the engine's listener; also for tests). */
  record(model: string, f: ForwardPassFigures): void {
    const ts = this.now();
    let b = this.batches.get(model);
    if (b === undefined) {
      b = { from: this.periodStart, seen: 0, steps: [] };
      this.batches.set(model, b);
    }
    const step: WireForwardPassStep = { ts, wallMs: f.wallMs, prefillTokens: f.prefillTokens, decodeKvTokens: f.decodeKvTokens };
    b.seen++;
    if (b.steps.length < this.maxSteps) b.steps.push(step);
    else {
      // reservoir sampling: every step of the period is kept with the same probability
      const j = Math.floor(this.random() * b.seen);
      if (j < this.maxSteps) b.steps[j] = step;
    }
  }

  /** Publish every interval from now on. */
  start(): void {
    this.rounds.start();
  }

  /** Stops the timer and publishes what is batched. */
  stop(): Promise<void> {
    return this.rounds.stop();
  }

  /** Publishes each model's batch (the timer calls it; tests may too). Rounds never overlap: a call during a round returns that round. */
  tick(): Promise<void> {
    return this.rounds.tick();
  }

  private async round(): Promise<void> {
    const { eventPlane, subject, instanceId, logger } = this.options;
    const to = Math.max(this.now(), this.periodStart);
    this.periodStart = to;
    const due = [...this.batches].filter(([, b]) => b.seen > 0);
    for (const [model, b] of due) {
      this.batches.set(model, { from: to, seen: 0, steps: [] });
      const batch: WireForwardPass = { v: 1, instanceId, model, from: b.from, to, steps: b.steps, dropped: b.seen - b.steps.length };
      try {
        await eventPlane.publish(subject, batch);
      } catch (e) {
        logger.warn({ err: e, model, steps: b.seen }, 'failed to publish forward-pass figures; dropped');
      }
    }
    // models no engine feeds any more, with nothing left to send
    for (const [model, b] of [...this.batches]) if (b.seen === 0 && !this.attachedModels.has(model)) this.batches.delete(model);
  }
}
