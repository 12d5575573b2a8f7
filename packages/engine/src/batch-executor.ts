/**
 * The execute path shared by every scheduler: run a batch of jobs on one backend instance,
 * record the execution in the statistics, and settle every job exactly once.
 * A thrown backend error fails the whole batch (reason BACKEND); a per-request error from the
 * backend fails only that request.
 */
import { toSwitchyardError } from '@switchyard/common';
import type { BackendInstance } from './backend.js';
import type { InferenceJob } from './inference-job.js';
import type { ModelStatsCollector } from './statistics.js';

export async function executeBatch(instance: BackendInstance, jobs: InferenceJob[], stats: ModelStatsCollector): Promise<void> {
  for (const job of jobs) job.markExecuting();
  try {
    const outcome = await instance.execute(jobs.map((j) => j.request));
    const { timing } = outcome;
    const batchSize = jobs.reduce((n, j) => n + j.batchElements, 0);
    stats.recordExecution(
      batchSize,
      timing.computeInputEndNs - timing.computeStartNs,
      timing.computeOutputStartNs - timing.computeInputEndNs,
      timing.computeEndNs - timing.computeOutputStartNs,
    );
    jobs.forEach((job, i) => {
      const result = outcome.results[i];
      if (result === undefined) job.fail(toSwitchyardError(new Error(`backend returned no result for request ${i}`)), 'BACKEND');
      else if ('error' in result) job.fail(result.error, 'BACKEND');
      else job.succeed(result.outputs, timing);
    });
  } catch (e) {
    const error = toSwitchyardError(e);
    for (const job of jobs) job.fail(error, 'BACKEND');
  }
}
