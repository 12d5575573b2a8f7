/**
 * Starts a real project process (`bin/switchyard.mjs worker`, `router` or `planner`) for
 * integration and end-to-end tests: collects its output, parses its JSON log lines and waits for the
 * `<command> started` log line that reports the ports it bound.
 *
 * Callers pass port 0 everywhere (see {@link EPHEMERAL_PORT_ARGS}) so the process chooses its own
 * ports and parallel test files never race for a port.
 */
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The `bin/switchyard.mjs` subcommands this harness can start. */
export type AppCommand = 'worker' | 'router' | 'planner';

export interface AppProcessOptions {
  env?: Record<string, string>;
  /** How long to wait for the process to report its ports (default 60 s). */
  startTimeoutMs?: number;
}

export interface AppPorts {
  http: number;
  grpc: number;
  metrics: number;
}

export interface AppProcess {
  readonly pid: number;
  readonly httpUrl: string;
  readonly grpcAddress: string;
  readonly metricsUrl: string;
  readonly ports: AppPorts;
  /** Everything the process printed so far (stdout + stderr). */
  output(): string;
  /** Parsed JSON log lines so far. */
  logs(): Array<Record<string, unknown>>;
  /** Send a signal (default SIGTERM) and resolve with how the process ended. */
  stop(signal?: NodeJS.Signals): Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/** Port 0 on every listener, all bound to 127.0.0.1. */
export const EPHEMERAL_PORT_ARGS: readonly string[] = [
  '--http-port=0',
  '--grpc-port=0',
  '--metrics-port=0',
  '--http-address=127.0.0.1',
  '--grpc-address=127.0.0.1',
  '--metrics-address=127.0.0.1',
];

/** The repository root: the folder holding `bin/switchyard.mjs`. */
export function repoRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    if (existsSync(join(dir, 'bin', 'switchyard.mjs'))) return dir;
    const parent = dirname(dir);
    if (parent === dir) throw new Error('repoRoot: bin/switchyard.mjs not found above ' + fileURLToPath(import.meta.url));
    dir = parent;
  }
}

/**
 * Runs `node bin/switchyard.mjs <command> ...args` from the repository root and resolves once its
 * `<command> started` log line has arrived. Throws (with everything the process printed) when it exits
 * first, or kills it with SIGKILL and throws when the line does not arrive within `startTimeoutMs`.
 */
export async function startAppProcess(command: AppCommand, args: readonly string[], options: AppProcessOptions = {}): Promise<AppProcess> {
  const root = repoRoot();
  const readyMsg = `${command} started`;
  const timeoutMs = options.startTimeoutMs ?? 60_000;

  const child = spawn(process.execPath, [join(root, 'bin', 'switchyard.mjs'), command, ...args], {
    cwd: root,
    env: { ...process.env, ...options.env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let partial = '';
  const parsed: Array<Record<string, unknown>> = [];
  child.stdout.on('data', (chunk: Buffer) => {
    const text = chunk.toString('utf8');
    out += text;
    partial += text;
    let nl: number;
    while ((nl = partial.indexOf('\n')) !== -1) {
      const line = partial.slice(0, nl);
      partial = partial.slice(nl + 1);
      try {
        parsed.push(JSON.parse(line) as Record<string, unknown>);
      } catch {
        /* not a JSON log line */
      }
    }
  });
  child.stderr.on('data', (chunk: Buffer) => {
    out += chunk.toString('utf8');
  });
  let exited = false;
  const exit = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    child.once('exit', (code, signal) => {
      exited = true;
      resolve({ code, signal });
    });
  });

  const deadline = Date.now() + timeoutMs;
  let ports: AppPorts | undefined;
  while (ports === undefined) {
    const started = parsed.find((l) => l['msg'] === readyMsg);
    if (started) ports = started['ports'] as AppPorts;
    else if (exited) throw new Error(`${command} exited before it started:\n${out}`);
    else if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`${command} did not start within ${timeoutMs} ms:\n${out}`);
    } else await new Promise((r) => setTimeout(r, 25));
  }
  return {
    pid: child.pid!,
    ports,
    httpUrl: `http://127.0.0.1:${ports.http}`,
    grpcAddress: `127.0.0.1:${ports.grpc}`,
    metricsUrl: `http://127.0.0.1:${ports.metrics}`,
    output: () => out,
    logs: () => parsed,
    stop: async (signal: NodeJS.Signals = 'SIGTERM') => {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      return exit;
    },
  };
}
