/**
 * The execute path shared by every scheduler: run a batch of jobs on one backend instance,
 * record the execution in the statistics, and settle every job exactly once.
 *
 * Each job gets its response sender. A request the backend answered with a result is settled
 * here (one final response); a request marked `viaSender` stays open until its sender sends
 * the final flag, possibly after this function returned (the instance is free by then).
 * A thrown backend error fails every request of the batch that is still open (reason BACKEND);
 * a per-request error from the backend fails only that request.
 */
import { toSwitchyardError } from '@switchyard/common';
import type { BackendInstance, ExecutionTiming } from './backend.js';
import type { InferenceJob } from './inference-job.js';
import type { ModelStatsCollector } from './statistics.js';

export async function executeBatch(instance: BackendInstance, jobs: InferenceJob[], stats: ModelStatsCollector): Promise<void> {
  for (const job of jobs) job.markExecuting();
  const startNs = process.hrtime.bigint();
  const senders = jobs.map((job) => job.responseSender());
  try {
    const outcome = await instance.execute(
      jobs.map((j) => j.request),
      senders,
    );
    const { timing } = outcome;
    const batchSize = jobs.reduce((n, j) => n + j.batchElements, 0);
    stats.recordExecution(
      batchSize,
      timing.computeInputEndNs - timing.computeStartNs,
      timing.computeOutputStartNs - timing.computeInputEndNs,
      timing.computeEndNs - timing.computeOutputStartNs,
    );
    jobs.forEach((job, i) => {
      job.traceCompute(timing);
      const result = outcome.results[i];
      const viaSender = outcome.viaSender?.[i] === true;
      job.executionEnded(timing, viaSender);
      if (viaSender) return;
      if (result === undefined) job.fail(toSwitchyardError(new Error(`backend returned no result for request ${i}`)), 'BACKEND');
      else if ('error' in result) job.fail(result.error, 'BACKEND');
      else job.succeed(result.outputs, timing);
    });
  } catch (e) {
    const error = toSwitchyardError(e);
    const endNs = process.hrtime.bigint();
    const timing: ExecutionTiming = { computeStartNs: startNs, computeInputEndNs: startNs, computeOutputStartNs: endNs, computeEndNs: endNs };
    for (const job of jobs) {
      job.traceCompute(timing);
      job.executionEnded(timing, false);
      job.fail(error, 'BACKEND');
    }
  }
}
