/**
 * The Scheduler role: decides when, and on which instance, admitted requests execute.
 *
 * Who calls each method, and when:
 * - `enqueue(job)` — by the engine, after the request passed normalisation, on the event loop.
 *   Never throws; the job ends through its own `succeed`/`fail`.
 * - `cancel(job)` — by the engine when the client aborts. Returns true when the job was still
 *   queued (it is removed and the engine fails it as cancelled); false when it is already
 *   executing (the engine marks it, the result is discarded on completion).
 * - `pendingCount()` — by metrics at scrape time: queued, not executing.
 * - `inflightCount()` — requests handed to an instance and not yet completed.
 * - `stop()` — by the lifecycle when the version unloads: stop admitting (later `enqueue`s are
 *   failed as unavailable), let queued and in-flight requests finish, resolve when drained.
 *
 * This module is the role alone: implementations import it, it imports none of them.
 * `createScheduler` (`scheduler-factory.ts`) is the one place that picks a scheduler from the
 * model configuration.
 */
import type { Logger } from '@switchyard/common';
import type { BackendInstance } from './backend.js';
import type { InferenceJob } from './inference-job.js';

export interface Scheduler {
  enqueue(job: InferenceJob): void;
  cancel(job: InferenceJob): boolean;
  pendingCount(): number;
  inflightCount(): number;
  stop(): Promise<void>;
}

/**
 * Runs a batch of jobs on one instance and settles every job. Provided by the engine
 * (`executeBatch`); schedulers only decide what goes where. Never rejects.
 */
export type BatchRunner = (instance: BackendInstance, jobs: InferenceJob[]) => Promise<void>;

export interface SchedulerContext {
  instances: readonly BackendInstance[];
  run: BatchRunner;
  logger: Logger;
  /** The model folder, for schedulers that read files at load (sequence `initial_state` data). */
  modelPath?: string;
}
