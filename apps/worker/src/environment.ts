/**
 * Every environment variable the worker reads, read here and nowhere else (packages take options).
 *
 * - `CUDA_VISIBLE_DEVICES`: which GPUs this process may use and how CUDA numbers them (`gpus: [N]`
 *   in an instance group names the N-th visible one), as for any CUDA program; unset: all of them.
 * - `NO_COLOR`: set and not empty, human log lines on a terminal carry no colours (https://no-color.org).
 */
export interface WorkerEnvironment {
  /** `CUDA_VISIBLE_DEVICES` as set (the empty string hides every GPU); undefined when unset. */
  cudaVisibleDevices: string | undefined;
  noColor: boolean;
}

export function readWorkerEnvironment(env: NodeJS.ProcessEnv = process.env): WorkerEnvironment {
  return { cudaVisibleDevices: env['CUDA_VISIBLE_DEVICES'], noColor: (env['NO_COLOR'] ?? '') !== '' };
}
