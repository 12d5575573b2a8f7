/**
 * Starts a real worker process (`bin/switchyard.mjs worker`) for integration and end-to-end tests.
 *
 * Ports are chosen by the worker itself (port 0) and read back from its "worker started" log
 * line, so parallel test files never race for a port. The spawning, log parsing and stopping live in
 * `app-process.ts`.
 */
import { join } from 'node:path';
import { EPHEMERAL_PORT_ARGS, repoRoot, startAppProcess, type AppProcess, type AppProcessOptions } from './app-process.js';

export { repoRoot } from './app-process.js';

export interface WorkerProcessOptions extends AppProcessOptions {
  /** Model repository roots (absolute, or relative to the repository root). */
  modelRepositories: string[];
  /** Further worker flags, e.g. ['--model-control-mode=explicit']. */
  args?: string[];
}

/** A running worker; `output()` is everything the worker printed so far (stdout + stderr). */
export type WorkerProcess = AppProcess;

export async function startWorkerProcess(options: WorkerProcessOptions): Promise<WorkerProcess> {
  const root = repoRoot();
  const args: string[] = [];
  for (const r of options.modelRepositories) args.push(`--model-repository=${r.startsWith('/') ? r : join(root, r)}`);
  args.push(...EPHEMERAL_PORT_ARGS);
  args.push(...(options.args ?? []));
  return startAppProcess('worker', args, { env: options.env, startTimeoutMs: options.startTimeoutMs });
}
