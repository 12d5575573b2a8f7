// Executor: the role that runs one scheduled batch through a model (vLLM's ModelExecutor / Dynamo's
// engine). The scheduler decides WHAT to compute; an executor computes it and samples tokens.
// Implementations: OnnxExecutor (a decoder in the Optimum with-past signature, KV in the engine's
// blocks) and SimulatedExecutor (no model, Dynamo mocker timing).
//
// KV contract (see llm-scheduler.ts): an entry's `blocks` cover its tokens up to the end of this step;
// the executor writes the KV of the tokens it computes only into the entry's partial blocks (full
// blocks hold valid KV, are immutable and may be shared) and reads the past from both. The scheduler
// promotes the filled partial blocks after `execute` resolves, so a failed step leaves no KV behind.

import type { SchedulerOutput } from './llm-scheduler.js';

/** Result of one step. A value. */
export interface ExecutorOutput {
  /** One sampled token per scheduled entry whose `samples` is true, keyed by request id. */
  readonly sampledTokens: ReadonlyMap<string, number>;
  /**
   * Natural-log probability of each sampled token, only for requests whose sampling asked for logprobs
   * (absent or without the id otherwise; executors that do not sample from a model never give one).
   */
  readonly logprobs?: ReadonlyMap<string, number>;
  /** How long the step took (simulated or measured), in ms. */
  readonly elapsedMs: number;
}

export interface Executor {
  /**
   * Run one step. Called once per non-empty SchedulerOutput, after `schedule()` and before `update()`;
   * never concurrently. Must read the output's blocks/tokens during this call only. Rejects with a
   * SwitchyardError when the model fails; the caller then discards the step (its requests abort).
   */
  execute(output: SchedulerOutput): Promise<ExecutorOutput>;
  /**
   * The request finished, was aborted, or its step failed: drop its per-request state (sampler, ...).
   * Called by EngineCore between steps, once per request, after its last `execute`; a request that
   * is only preempted is NOT released (its state must survive the recompute). Optional.
   */
  release?(requestId: string): void;
}
