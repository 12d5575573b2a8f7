// EngineCore: the step loop tying LlmScheduler and an Executor together (vLLM v1 EngineCore), plus
// per-request latency metrics and an offline `replay` driver for a VirtualClock. No IO: LlmEngine
// (llm-engine.ts) serves it and streams SequenceOutputs to clients.
//
// One step = schedule() → executor.execute() → update(); steps never overlap (`step` is not re-entrant:
// the caller awaits each one). A rejected execute leaves the step pending until `discardFailedStep`.
// The executor's `release(id)` is called once per request when it leaves: finished in `update`,
// aborted, or discarded with a failed step. Timing is read from the injected clock after the executor
// returns, so a SimulatedExecutor on a VirtualClock gives exact simulated TTFT / ITL.

import { internal } from '@switchyard/common';
import type { Executor } from './executor.js';
import type { LlmScheduler, SchedulerOutput, SequenceOutput } from './llm-scheduler.js';
import type { LlmRequest } from './llm-sequence.js';
import type { Clock, VirtualClock } from './timing-model.js';
import type { TopLogprobs } from './sampling.js';

export interface RequestMetrics {
  readonly requestId: string;
  readonly arrivalTime: number;
  /** Clock time when the first token was sampled; null until then. */
  firstTokenTime: number | null;
  finishTime: number | null;
  numOutputTokens: number;
  /** Gaps between consecutive tokens, ms. */
  readonly interTokenMs: number[];
  lastTokenTime: number | null;
}

/**
 * One engine step's figures (Dynamo's ForwardPassMetrics): what a planner regresses step time on.
 * Only steps that scheduled work have them.
 */
export interface ForwardPassFigures {
  /** Clock ms (the engine's clock) when the step ended. */
  readonly endedAt: number;
  /** Duration of the step on the engine's clock (schedule + execute + update), ms. */
  readonly wallMs: number;
  /** Prompt (or recompute) tokens computed in the step. */
  readonly prefillTokens: number;
  /** KV tokens the step's decoding sequences attended: the sum of their context lengths. */
  readonly decodeKvTokens: number;
}

/** Receives every step's figures, synchronously at the end of the step; must not throw or block. */
export type ForwardPassSink = (figures: ForwardPassFigures) => void;

/** The figures of one scheduled step that took `wallMs` and ended at `endedAt`. */
export function forwardPassFigures(out: SchedulerOutput, wallMs: number, endedAt: number): ForwardPassFigures {
  let prefillTokens = 0;
  let decodeKvTokens = 0;
  for (const e of out.scheduled) {
    if (e.isPrefill) prefillTokens += e.numNewTokens;
    else decodeKvTokens += e.numComputedTokens + e.numNewTokens;
  }
  return { endedAt, wallMs: Math.max(0, wallMs), prefillTokens, decodeKvTokens };
}

export interface StepResult {
  readonly outputs: readonly SequenceOutput[];
  /** The executor's logprobs of this step's sampled tokens, by request id (only those that asked). */
  readonly logprobs?: ReadonlyMap<string, number>;
  /** The executor's top logprobs of this step's sampled positions, by request id (only those that asked). */
  readonly topLogprobs?: ReadonlyMap<string, TopLogprobs>;
  /** The executor's `seeds` of this step (samplers created in it). */
  readonly seeds?: ReadonlyMap<string, number>;
  readonly numScheduled: number;
  readonly elapsedMs: number;
  /** The step's figures; absent when nothing was scheduled. */
  readonly forwardPass?: ForwardPassFigures;
}

export class EngineCore {
  readonly scheduler: LlmScheduler;
  readonly executor: Executor;
  readonly clock: Clock;
  private readonly metrics = new Map<string, RequestMetrics>();
  private stepping = false;
  /** The output of a step whose executor failed, until discardFailedStep. */
  private failed: SchedulerOutput | null = null;

  constructor(scheduler: LlmScheduler, executor: Executor, clock: Clock) {
    this.scheduler = scheduler;
    this.executor = executor;
    this.clock = clock;
  }

  /** Queue a request; its arrival time defaults to now. Throws like LlmScheduler.addRequest. */
  addRequest(request: LlmRequest): void {
    const seq = this.scheduler.addRequest(request, this.clock.now());
    this.metrics.set(seq.requestId, {
      requestId: seq.requestId,
      arrivalTime: seq.arrivalTime,
      firstTokenTime: null,
      finishTime: null,
      numOutputTokens: 0,
      interTokenMs: [],
      lastTokenTime: null,
    });
  }

  /** True while a step runs (aborts must wait for its end). */
  get isStepping(): boolean {
    return this.stepping;
  }

  /** Finish a request early (between steps only); the executor drops its per-request state. */
  abort(requestId: string): boolean {
    this.executor.release?.(requestId);
    return this.scheduler.abort(requestId);
  }

  /**
   * After `step` rejected (the executor failed): finish the failed step's requests with 'abort' and
   * return their ids, so the caller can fail them and later steps can run.
   */
  discardFailedStep(): string[] {
    const out = this.failed;
    this.failed = null;
    if (out === null) return [];
    const ids = this.scheduler.discardStep(out);
    for (const id of ids) this.executor.release?.(id);
    return ids;
  }

  /** Run one step. Returns no outputs (and takes no time) when nothing is schedulable. */
  async step(): Promise<StepResult> {
    if (this.stepping) throw internal('EngineCore.step is not re-entrant');
    if (this.failed !== null) throw internal('EngineCore.step after a failed step: call discardFailedStep first');
    this.stepping = true;
    try {
      const startedAt = this.clock.now();
      const out = this.scheduler.schedule();
      if (out.scheduled.length === 0) {
        this.scheduler.update(out, new Map());
        return { outputs: [], numScheduled: 0, elapsedMs: 0 };
      }
      let res;
      try {
        res = await this.executor.execute(out);
      } catch (e) {
        this.failed = out;
        throw e;
      }
      const outputs = this.scheduler.update(out, res.sampledTokens);
      const now = this.clock.now();
      const metrics = this.metrics;
      for (let i = 0; i < outputs.length; i++) {
        const o = outputs[i]!;
        if (o.finishReason !== null) this.executor.release?.(o.requestId);
        const m = metrics.get(o.requestId);
        if (m === undefined) continue;
        if (m.firstTokenTime === null) m.firstTokenTime = now;
        else if (m.lastTokenTime !== null) m.interTokenMs.push(now - m.lastTokenTime);
        m.lastTokenTime = now;
        m.numOutputTokens++; // (one token per output: SequenceOutput.newTokenIds)
        if (o.finishReason !== null) m.finishTime = now;
      }
      const forwardPass = forwardPassFigures(out, now - startedAt, now);
      return { outputs, numScheduled: out.scheduled.length, elapsedMs: res.elapsedMs, logprobs: res.logprobs, topLogprobs: res.topLogprobs, seeds: res.seeds, forwardPass };
    } finally {
      this.stepping = false;
    }
  }

  /** Metrics of a request added to this engine (kept after it finishes, until `takeRequestMetrics`). */
  requestMetrics(requestId: string): RequestMetrics | undefined {
    return this.metrics.get(requestId);
  }

  /**
   * The metrics of a request, dropped from the engine: a caller that runs an unbounded stream of
   * requests (the cluster simulator) takes each one when it finishes, so memory stays bounded.
   */
  takeRequestMetrics(requestId: string): RequestMetrics | undefined {
    const m = this.metrics.get(requestId);
    this.metrics.delete(requestId);
    return m;
  }
}

/**
 * Offline replay on a virtual clock: requests are added when the clock reaches their `arrivalTime`
 * (default 0), steps run back to back, and the clock jumps over idle gaps. The engine's executor must
 * advance `clock` (SimulatedExecutor constructed with it). Returns the metrics of every request.
 * Throws internal if the engine stalls with work left (a scheduler bug).
 */
export async function replay(engine: EngineCore, clock: VirtualClock, requests: readonly LlmRequest[]): Promise<RequestMetrics[]> {
  const queue = [...requests].sort((a, b) => (a.arrivalTime ?? 0) - (b.arrivalTime ?? 0));
  let next = 0;
  while (next < queue.length || engine.scheduler.hasUnfinished()) {
    while (next < queue.length && (queue[next]!.arrivalTime ?? 0) <= clock.now()) engine.addRequest(queue[next++]!);
    if (!engine.scheduler.hasUnfinished()) {
      clock.advanceTo(queue[next]!.arrivalTime ?? 0);
      continue;
    }
    const r = await engine.step();
    // Nobody pulls KV in a replay: a prefill-only request's pinned prompt blocks go straight back.
    for (const o of r.outputs) if (o.pinnedBlocks !== undefined) engine.scheduler.freePinned(o.pinnedBlocks);
    if (r.numScheduled === 0) {
      if (next >= queue.length) throw internal('replay: engine stalled with unfinished requests');
      clock.advanceTo(queue[next]!.arrivalTime ?? 0);
    }
  }
  return requests.map((r) => engine.requestMetrics(r.requestId)!);
}
