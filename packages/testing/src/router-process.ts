/**
 * Starts a real router process (`bin/switchyard.mjs router`) for end-to-end tests, against the
 * etcd, NATS and Redis the test started (never the system servers on the standard ports: the
 * caller passes their URLs).
 *
 * Ports are chosen by the router itself (port 0) and read back from its "router started" log line,
 * so parallel test files never race for a port. The spawning, log parsing and stopping live in
 * `app-process.ts`.
 */
import { EPHEMERAL_PORT_ARGS, startAppProcess, type AppProcess, type AppProcessOptions } from './app-process.js';

export interface RouterProcessOptions extends AppProcessOptions {
  etcd: string;
  nats: string;
  redis: string;
  namespace?: string;
  /** Further router flags, e.g. ['--router-mode=round-robin']. */
  args?: string[];
}

/** A running router; `output()` is everything the router printed so far (stdout + stderr). */
export type RouterProcess = AppProcess;

export async function startRouterProcess(options: RouterProcessOptions): Promise<RouterProcess> {
  const args = [`--etcd=${options.etcd}`, `--nats=${options.nats}`, `--redis=${options.redis}`];
  if (options.namespace !== undefined) args.push(`--namespace=${options.namespace}`);
  args.push(...EPHEMERAL_PORT_ARGS);
  args.push(...(options.args ?? []));
  return startAppProcess('router', args, { env: options.env, startTimeoutMs: options.startTimeoutMs });
}
