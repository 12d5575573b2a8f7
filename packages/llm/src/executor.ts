// Executor: the role that runs one scheduled batch through a model (vLLM's ModelExecutor / Dynamo's
// engine). The scheduler decides WHAT to compute; an executor computes it and samples tokens.
// Implementations: OnnxExecutor (a decoder in the Optimum with-past signature, KV in the engine's
// blocks) and SimulatedExecutor (no model, Dynamo mocker timing).
//
// KV contract (see llm-scheduler.ts): an entry's `blocks` cover its tokens up to the end of this step;
// the executor writes the KV of the tokens it computes only into the entry's partial blocks (full
// blocks hold valid KV, are immutable and may be shared) and reads the past from both. The scheduler
// promotes the filled partial blocks after `execute` resolves, so a failed step leaves no KV behind.

import type { KvLayout } from './kv-transfer.js';
import type { SchedulerOutput } from './llm-scheduler.js';
import type { TopLogprobs } from './sampling.js';

/** Result of one step. A value. */
export interface ExecutorOutput {
  /** One sampled token per scheduled entry whose `samples` is true, keyed by request id. */
  readonly sampledTokens: ReadonlyMap<string, number>;
  /**
   * Natural-log probability of each sampled token, only for requests whose sampling asked for logprobs
   * (absent or without the id otherwise; executors that do not sample from a model never give one).
   */
  readonly logprobs?: ReadonlyMap<string, number>;
  /** The most likely tokens at each sampled position, only for requests whose sampling.top_logprobs > 0. */
  readonly topLogprobs?: ReadonlyMap<string, TopLogprobs>;
  /** How long the step took (simulated or measured), in ms. */
  readonly elapsedMs: number;
  /**
   * The seed of every request whose sampler was created in this step (its first sample): the
   * request's own, or the one the executor drew for it. A prefill-only request's lease carries it.
   */
  readonly seeds?: ReadonlyMap<string, number>;
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
  /**
   * True when `execute` honours `sampling.guided_decoding` (it samples from logits and knows the
   * tokenizer's token bytes); absent or false: the engine refuses such requests.
   */
  readonly guidedDecoding?: boolean;

  // KV transfer (kv-transfer.ts). An executor that can move blocks implements all of `kvLayout`,
  // `checkBlock`, `readBlock` and `writeBlock`; the engine calls them between or during steps, always
  // on slots it holds a reference on (pinned or freshly allocated), never on a slot a step writes.

  /** Layout of this executor's blocks; undefined (or absent): it cannot transfer KV. */
  kvLayout?(): KvLayout | undefined;
  /** Why `data` cannot be the payload of block `hash` here (size, content), else undefined. Pure. */
  checkBlock?(hash: string, data: Uint8Array): string | undefined;
  /** The payload of the block with sequence hash `hash` kept in `slot` (a fresh copy). */
  readBlock?(slot: number, hash: string): Uint8Array;
  /** Make `slot` hold block `hash` from a payload `checkBlock` accepted. */
  writeBlock?(slot: number, hash: string, data: Uint8Array): void;
  /** Simulated executors: ms on the engine's clock that moving `blocks` blocks would take; absent: 0. */
  simulatedTransferMs?(blocks: number): number;
}
