// Executor: the role that runs one scheduled batch through a model (vLLM's ModelExecutor / Dynamo's
// engine). The scheduler decides WHAT to compute; an executor computes it and samples tokens.
// Implementations: SimulatedExecutor (no model, Dynamo mocker timing); an ONNX executor comes later.

import type { SchedulerOutput } from './llm-scheduler.js';

/** Result of one step. A value. */
export interface ExecutorOutput {
  /** One sampled token per scheduled entry whose `samples` is true, keyed by request id. */
  readonly sampledTokens: ReadonlyMap<string, number>;
  /** Natural-log probability of each sampled token, for requests whose sampling asked for logprobs. */
  readonly logprobs?: ReadonlyMap<string, number>;
  /** How long the step took (simulated or measured), in ms. */
  readonly elapsedMs: number;
}

export interface Executor {
  /**
   * Run one step. Called once per non-empty SchedulerOutput, after `schedule()` and before `update()`;
   * never concurrently. Must read the output's blocks/tokens during this call only.
   */
  execute(output: SchedulerOutput): Promise<ExecutorOutput>;
  /** A request finished or was aborted: drop any per-request state (sampler, ...). Optional. */
  release?(requestId: string): void;
}
