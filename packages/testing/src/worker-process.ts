/**
 * Starts a real worker process (`bin/switchyard.mjs worker`) for integration and end-to-end tests.
 *
 * Ports are chosen by the worker itself (port 0) and read back from its "worker started" log
 * line, so parallel test files never race for a port.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export interface WorkerProcessOptions {
  /** Model repository roots (absolute, or relative to the repository root). */
  modelRepositories: string[];
  /** Further worker flags, e.g. ['--model-control-mode=explicit']. */
  args?: string[];
  env?: Record<string, string>;
  /** How long to wait for the worker to report its ports (default 60 s). */
  startTimeoutMs?: number;
}

export interface WorkerProcess {
  readonly pid: number;
  readonly httpUrl: string;
  readonly grpcAddress: string;
  readonly metricsUrl: string;
  readonly ports: { http: number; grpc: number; metrics: number };
  /** Everything the worker printed so far (stdout + stderr). */
  output(): string;
  /** Parsed JSON log lines so far. */
  logs(): Array<Record<string, unknown>>;
  /** Send a signal (default SIGTERM) and resolve with how the process ended. */
  stop(signal?: NodeJS.Signals): Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

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

export async function startWorkerProcess(options: WorkerProcessOptions): Promise<WorkerProcess> {
  const root = repoRoot();
  const args = [join(root, 'bin', 'switchyard.mjs'), 'worker'];
  for (const r of options.modelRepositories) args.push(`--model-repository=${r.startsWith('/') ? r : join(root, r)}`);
  args.push('--http-port=0', '--grpc-port=0', '--metrics-port=0', '--http-address=127.0.0.1', '--grpc-address=127.0.0.1', '--metrics-address=127.0.0.1');
  args.push(...(options.args ?? []));

  const child = spawn(process.execPath, args, {
    cwd: root,
    env: { ...process.env, ...options.env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  const parsed: Array<Record<string, unknown>> = [];
  let partial = '';
  child.stdout!.on('data', (chunk: Buffer) => {
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
  child.stderr!.on('data', (chunk: Buffer) => {
    out += chunk.toString('utf8');
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    child.once('exit', (code, signal) => resolve({ code, signal }));
  });

  const ports = await waitForPorts(child, parsed, () => out, exited, options.startTimeoutMs ?? 60_000);
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
      return exited;
    },
  };
}

async function waitForPorts(
  child: ChildProcess,
  parsed: Array<Record<string, unknown>>,
  output: () => string,
  exited: Promise<unknown>,
  timeoutMs: number,
): Promise<{ http: number; grpc: number; metrics: number }> {
  const deadline = Date.now() + timeoutMs;
  let done = false;
  void exited.then(() => (done = true));
  while (Date.now() < deadline) {
    const started = parsed.find((l) => l['msg'] === 'worker started');
    if (started) return started['ports'] as { http: number; grpc: number; metrics: number };
    if (done) throw new Error(`worker exited before it started:\n${output()}`);
    await new Promise((r) => setTimeout(r, 25));
  }
  child.kill('SIGKILL');
  throw new Error(`worker did not start within ${timeoutMs} ms:\n${output()}`);
}
