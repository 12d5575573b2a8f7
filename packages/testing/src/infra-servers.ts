/**
 * Starts real etcd, NATS (optionally with JetStream), Redis and Prometheus processes for integration
 * and end-to-end tests, each on private free ports and in its own temporary data dir.
 *
 * Never touches servers already running on the standard ports (6379, 4222, 2379): every call
 * starts its own process, on ports the kernel reports free. Missing binaries are installed from
 * Debian once per machine (see apt.ts). Each process leads its own process group; stop() kills
 * the group and removes the data dir.
 *
 * Leaks: a test that never calls stop() must not leave servers behind. Where util-linux `setpriv`
 * exists (always on Debian) the server gets a parent-death signal, so it dies with the test
 * process however that ends (vitest may end its workers without an 'exit' event). Data dirs are
 * named after the owning pid; a later start sweeps those whose owner is gone.
 *
 * Lifecycle of a server handle:
 *   running    — the process answered its readiness probe; url/port are usable.
 *   restarting — restart() is between killing the old process and the new one answering.
 *   stopped    — stop() ran: process gone, data dir removed. Final; restart() then throws.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { createConnection, createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { deadlineExceeded, invalidArgument, unavailable } from '@switchyard/common';
import { ensureBinaries, ETCD_BINARY, findBinary, NATS_BINARY, PROMETHEUS_BINARY, REDIS_BINARY, tail, type DebianBinary } from './apt.js';

/** How long a server may take to answer its readiness probe (default 20 s). */
export const DEFAULT_START_TIMEOUT_MS = 20_000;
/** How long stop() waits after SIGTERM before SIGKILL (default 5 s). */
export const DEFAULT_STOP_TIMEOUT_MS = 5_000;
/** How many times a start is retried on fresh ports when a port was taken meanwhile. */
const PORT_ATTEMPTS = 4;
/** How many lines of the server's output an error message carries. */
const ERROR_TAIL_LINES = 30;
/** Output kept per process (bytes of text); older output is dropped. */
const OUTPUT_LIMIT = 64 * 1024;

export type InfraServerState = 'running' | 'restarting' | 'stopped';

export interface InfraServerOptions {
  /** Readiness deadline per start or restart (default DEFAULT_START_TIMEOUT_MS). */
  startTimeoutMs?: number;
  /** Extra command-line flags appended to the harness's own. */
  args?: string[];
}

export interface NatsServerOptions extends InfraServerOptions {
  /** Enable JetStream, storing into the data dir (default false). */
  jetstream?: boolean;
  /** Require TLS with this certificate and key (PEM files); the URL is then `tls://`. Default: plain. */
  tls?: { readonly certFile: string; readonly keyFile: string };
}

export interface RedisServerOptions extends InfraServerOptions {
  /** Append-only file in the data dir, so data survives restart() (default false: no persistence). */
  persistence?: boolean;
}

export interface InfraServer {
  /** `redis://`, `nats://` or `http://` + `127.0.0.1:<port>`. */
  readonly url: string;
  /** The client port; the same across restart(). */
  readonly port: number;
  /** Private temporary folder; kept across restart(), removed by stop(). */
  readonly dataDir: string;
  /** Pid of the current process (changes on restart()). */
  readonly pid: number;
  readonly state: InfraServerState;
  /** The current process's output so far (stdout + stderr, last 64 KiB). */
  output(): string;
  /** Kill the process group and remove the data dir. Idempotent. */
  stop(): Promise<void>;
  /**
   * Stop the process and start it again on the same ports, keeping the data dir — or, with `wipe`,
   * emptying it first (a server that lost its disk). With `downMs` the server stays down that long
   * before it starts again (an outage); state is `restarting` meanwhile.
   */
  restart(options?: { wipe?: boolean; downMs?: number }): Promise<void>;
}

export interface NatsServer extends InfraServer {
  /** The HTTP monitoring endpoint (`/healthz`, `/varz`, `/jsz`). */
  readonly monitorUrl: string;
  readonly jetstream: boolean;
}

export interface PrometheusServerOptions extends InfraServerOptions {
  /**
   * The body of `prometheus.yml` (YAML or JSON text), written into the data dir; relative paths in
   * it (`rule_files`) are read from there, so pass absolute ones.
   */
  config: string;
}

export interface PrometheusServer extends InfraServer {
  /** `http://127.0.0.1:<port>`: the HTTP API (`/api/v1/...`) and `/-/ready`. */
  readonly url: string;
  /** Where the config was written (`<dataDir>/prometheus.yml`). */
  readonly configPath: string;
}

export type EtcdServer = InfraServer;
export type RedisServer = InfraServer;

/** What differs between the three servers. */
interface ServerSpec {
  readonly name: string;
  readonly binary: DebianBinary;
  /** Ports needed; the first is the client port. */
  readonly portCount: number;
  readonly scheme: string;
  args(ports: readonly number[], dataDir: string): string[];
  /** Writes the files the server reads (its config) into the fresh data dir, before the first start. */
  prepare?(dataDir: string): void;
  /** One readiness probe: resolves true when the server answers as ready. Must not throw. */
  probe(ports: readonly number[]): Promise<boolean>;
}

export async function startEtcd(options: InfraServerOptions = {}): Promise<EtcdServer> {
  return startServer(
    {
      name: 'etcd',
      binary: ETCD_BINARY,
      portCount: 2,
      scheme: 'http',
      args: ([client, peer], dataDir) => [
        '--name=switchyard',
        `--data-dir=${join(dataDir, 'etcd')}`,
        `--listen-client-urls=http://127.0.0.1:${client}`,
        `--advertise-client-urls=http://127.0.0.1:${client}`,
        `--listen-peer-urls=http://127.0.0.1:${peer}`,
        `--initial-advertise-peer-urls=http://127.0.0.1:${peer}`,
        `--initial-cluster=switchyard=http://127.0.0.1:${peer}`,
        '--initial-cluster-state=new',
      ],
      probe: ([client]) => httpProbe(`http://127.0.0.1:${client}/health`, (body) => (JSON.parse(body) as { health?: unknown }).health === 'true'),
    },
    options,
  ).then((s) => s.handle);
}

export async function startNats(options: NatsServerOptions = {}): Promise<NatsServer> {
  const jetstream = options.jetstream ?? false;
  const server = await startServer(
    {
      name: 'nats-server',
      binary: NATS_BINARY,
      portCount: 2,
      scheme: options.tls === undefined ? 'nats' : 'tls',
      args: ([client, monitor], dataDir) => [
        '-a', '127.0.0.1',
        '-p', String(client),
        '-m', String(monitor),
        ...(jetstream ? ['-js', '-sd', join(dataDir, 'jetstream')] : []),
        ...(options.tls === undefined ? [] : ['--tls', '--tlscert', options.tls.certFile, '--tlskey', options.tls.keyFile]),
      ],
      probe: async ([client, monitor]) =>
        (await tcpProbe(client!, null, (text) => text.startsWith('INFO ') && text.includes('\r\n'))) &&
        (await httpProbe(`http://127.0.0.1:${monitor}/healthz`, () => true)),
    },
    options,
  );
  const monitorUrl = `http://127.0.0.1:${server.ports[1]}`;
  return Object.assign(server.handle, { monitorUrl, jetstream });
}

export async function startRedis(options: RedisServerOptions = {}): Promise<RedisServer> {
  const persistence = options.persistence ?? false;
  return startServer(
    {
      name: 'redis-server',
      binary: REDIS_BINARY,
      portCount: 1,
      scheme: 'redis',
      args: ([port], dataDir) => [
        '--port', String(port),
        '--bind', '127.0.0.1',
        '--dir', dataDir,
        '--save', '',
        '--appendonly', persistence ? 'yes' : 'no',
        '--daemonize', 'no',
        '--logfile', '',
      ],
      probe: ([port]) => tcpProbe(port!, '*1\r\n$4\r\nPING\r\n', (text) => text.startsWith('+PONG\r\n')),
    },
    options,
  ).then((s) => s.handle);
}

/**
 * A Prometheus server (Debian's `prometheus`) on a private port, its TSDB in the data dir, with the
 * scrape and rule configuration the caller gives. Ready when `/-/ready` answers 200 (config and rule
 * files loaded, TSDB open). restart() keeps the TSDB.
 */
export async function startPrometheus(options: PrometheusServerOptions): Promise<PrometheusServer> {
  const server = await startServer(
    {
      name: 'prometheus',
      binary: PROMETHEUS_BINARY,
      portCount: 1,
      scheme: 'http',
      prepare: (dataDir) => writeFileSync(join(dataDir, 'prometheus.yml'), options.config),
      args: ([port], dataDir) => [
        `--config.file=${join(dataDir, 'prometheus.yml')}`,
        `--storage.tsdb.path=${join(dataDir, 'tsdb')}`,
        `--web.listen-address=127.0.0.1:${port}`,
        '--log.level=warn',
      ],
      probe: ([port]) => httpProbe(`http://127.0.0.1:${port}/-/ready`, () => true),
    },
    options,
  );
  return Object.assign(server.handle, { configPath: join(server.handle.dataDir, 'prometheus.yml') });
}

// ---------------------------------------------------------------------------------------------

/** Every process group this module started and has not yet reaped, killed on process exit. */
const liveGroups = new Set<number>();
const liveDataDirs = new Set<string>();
let exitHookInstalled = false;

function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.once('exit', () => {
    for (const pid of liveGroups) killGroup(pid, 'SIGKILL');
    for (const dir of liveDataDirs) rmSync(dir, { recursive: true, force: true });
  });
}

interface Launched {
  readonly child: ChildProcess;
  readonly exited: Promise<void>;
  output(): string;
}

async function startServer<S extends ServerSpec>(
  spec: S,
  options: InfraServerOptions,
): Promise<{ handle: InfraServer; ports: readonly number[] }> {
  const timeoutMs = options.startTimeoutMs ?? DEFAULT_START_TIMEOUT_MS;
  if (!(timeoutMs > 0)) throw invalidArgument(`${spec.name}: startTimeoutMs must be > 0, got ${timeoutMs}`);
  const binaryPath = (await ensureBinaries([spec.binary])).get(spec.binary.binary)!;
  installExitHook();
  sweepStaleDataDirs();
  const dataDir = mkdtempSync(join(tmpdir(), `${DATA_DIR_PREFIX}${spec.name}-${process.pid}-`));
  liveDataDirs.add(dataDir);
  try {
    spec.prepare?.(dataDir);
  } catch (err) {
    rmSync(dataDir, { recursive: true, force: true });
    liveDataDirs.delete(dataDir);
    throw err;
  }
  const argsFor = (ports: readonly number[]): string[] => [...spec.args(ports, dataDir), ...(options.args ?? [])];

  let ports: readonly number[] = [];
  let current: Launched | undefined;
  try {
    for (let attempt = 1; ; attempt++) {
      ports = await freePorts(spec.portCount);
      const result = await launchUntilReady(spec, binaryPath, argsFor(ports), dataDir, ports, timeoutMs);
      if (result.ok) {
        current = result.launched;
        break;
      }
      if (!(result.portInUse && attempt < PORT_ATTEMPTS)) throw result.error;
    }
  } catch (err) {
    rmSync(dataDir, { recursive: true, force: true });
    liveDataDirs.delete(dataDir);
    throw err;
  }

  let state: InfraServerState = 'running';
  let stopping: Promise<void> | undefined;
  const handle: InfraServer = {
    url: `${spec.scheme}://127.0.0.1:${ports[0]}`,
    port: ports[0]!,
    dataDir,
    get pid() {
      return current?.child.pid ?? -1;
    },
    get state() {
      return state;
    },
    output: () => current?.output() ?? '',
    stop: () => {
      stopping ??= (async () => {
        state = 'stopped';
        if (current) await terminate(current);
        rmSync(dataDir, { recursive: true, force: true });
        liveDataDirs.delete(dataDir);
      })();
      return stopping;
    },
    restart: async (restartOptions?: { wipe?: boolean; downMs?: number }) => {
      if (state !== 'running') throw invalidArgument(`${spec.name}: restart() while ${state}`);
      state = 'restarting';
      if (current) await terminate(current);
      current = undefined;
      if (restartOptions?.downMs !== undefined && restartOptions.downMs > 0) await sleep(restartOptions.downMs);
      if ((state as InfraServerState) === 'stopped') return; // stop() ran during the outage
      if (restartOptions?.wipe === true) {
        for (const entry of readdirSync(dataDir)) rmSync(join(dataDir, entry), { recursive: true, force: true });
      }
      // The same ports: a port may linger briefly after the old process exits, so retry on it.
      for (let attempt = 1; ; attempt++) {
        const result = await launchUntilReady(spec, binaryPath, argsFor(ports), dataDir, ports, timeoutMs);
        if (result.ok) {
          current = result.launched;
          break;
        }
        if ((state as InfraServerState) === 'stopped') return; // stop() ran meanwhile
        if (!(result.portInUse && attempt < PORT_ATTEMPTS)) {
          state = 'stopped';
          rmSync(dataDir, { recursive: true, force: true });
          liveDataDirs.delete(dataDir);
          throw result.error;
        }
        await sleep(250);
      }
      // stop() during the restart found no process to kill: kill the new one here.
      if ((state as InfraServerState) === 'stopped') {
        await terminate(current!);
        return;
      }
      state = 'running';
    },
  };
  return { handle, ports };
}

type LaunchResult = { ok: true; launched: Launched } | { ok: false; portInUse: boolean; error: Error };

async function launchUntilReady(
  spec: ServerSpec,
  binaryPath: string,
  args: string[],
  cwd: string,
  ports: readonly number[],
  timeoutMs: number,
): Promise<LaunchResult> {
  const launched = launch(binaryPath, args, cwd);
  const deadline = Date.now() + timeoutMs;
  let exited = false;
  void launched.exited.then(() => (exited = true));
  const describe = (): string =>
    `${binaryPath} ${args.join(' ')}\n--- last output ---\n${tail(launched.output(), ERROR_TAIL_LINES) || '(none)'}`;
  for (;;) {
    if (exited) {
      const out = launched.output();
      return {
        ok: false,
        portInUse: /address already in use/i.test(out),
        error: unavailable(`${spec.name} exited (code ${launched.child.exitCode}, signal ${launched.child.signalCode}) before it became ready: ${describe()}`),
      };
    }
    if (await spec.probe(ports)) return { ok: true, launched };
    if (Date.now() > deadline) {
      const error = deadlineExceeded(`${spec.name} did not become ready within ${timeoutMs} ms: ${describe()}`);
      await terminate(launched);
      return { ok: false, portInUse: false, error };
    }
    await sleep(50);
  }
}

function launch(binaryPath: string, args: string[], cwd: string): Launched {
  // detached: the server leads its own process group, so stop() can kill everything it forked.
  // setpriv execs the server (same pid) after arranging SIGKILL on the death of this process.
  const setpriv = findBinary('setpriv');
  const child =
    setpriv === null
      ? spawn(binaryPath, args, { cwd, detached: true, stdio: ['ignore', 'pipe', 'pipe'] })
      : spawn(setpriv, ['--pdeathsig', 'KILL', '--', binaryPath, ...args], { cwd, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  const append = (chunk: Buffer): void => {
    out += chunk.toString('utf8');
    if (out.length > OUTPUT_LIMIT * 2) out = out.slice(-OUTPUT_LIMIT);
  };
  child.stdout!.on('data', append);
  child.stderr!.on('data', append);
  const exited = new Promise<void>((resolve) => {
    child.once('error', (err) => {
      out += `\nspawn error: ${String(err)}\n`;
      resolve();
    });
    child.once('exit', () => resolve());
  });
  const pid = child.pid;
  if (pid !== undefined) {
    liveGroups.add(pid);
    void exited.then(() => {
      killGroup(pid, 'SIGKILL'); // anything the leader left behind
      liveGroups.delete(pid);
    });
  }
  return { child, exited, output: () => out };
}

const DATA_DIR_PREFIX = 'switchyard-infra-';
let swept = false;

/** Once per process: remove data dirs left by test processes that died without stop(). */
function sweepStaleDataDirs(): void {
  if (swept) return;
  swept = true;
  const pattern = new RegExp(`^${DATA_DIR_PREFIX}[a-z-]+?-(\\d+)-`);
  let names: string[];
  try {
    names = readdirSync(tmpdir());
  } catch {
    return;
  }
  for (const name of names) {
    const owner = pattern.exec(name)?.[1];
    if (owner === undefined || Number(owner) === process.pid || processAlive(Number(owner))) continue;
    rmSync(join(tmpdir(), name), { recursive: true, force: true });
  }
}

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code !== 'ESRCH';
  }
}

/** SIGTERM the group, SIGKILL it if it has not exited within DEFAULT_STOP_TIMEOUT_MS. */
async function terminate(launched: Launched): Promise<void> {
  const pid = launched.child.pid;
  if (pid === undefined || launched.child.exitCode !== null || launched.child.signalCode !== null) return launched.exited;
  killGroup(pid, 'SIGTERM');
  const timer = setTimeout(() => killGroup(pid, 'SIGKILL'), DEFAULT_STOP_TIMEOUT_MS);
  await launched.exited;
  clearTimeout(timer);
}

function killGroup(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pid, signal);
  } catch {
    /* ESRCH: the group is gone */
  }
}

/**
 * `count` distinct ports that were free a moment ago (bound on 127.0.0.1 port 0, then closed).
 * Another process may take one before the server binds it; callers retry on EADDRINUSE.
 */
export async function freePorts(count: number): Promise<number[]> {
  const servers: Server[] = [];
  try {
    const ports: number[] = [];
    for (let i = 0; i < count; i++) {
      const server = createServer();
      servers.push(server);
      await new Promise<void>((resolve, reject) => {
        server.once('error', reject);
        server.listen(0, '127.0.0.1', () => resolve());
      });
      const address = server.address();
      if (address === null || typeof address === 'string') throw new Error('freePorts: no port');
      ports.push(address.port);
    }
    return ports;
  } finally {
    await Promise.all(servers.map((s) => new Promise<void>((resolve) => s.close(() => resolve()))));
  }
}

/** Connect, optionally send `request`, and resolve whether the reply satisfies `accept` within 1 s. */
function tcpProbe(port: number, request: string | null, accept: (text: string) => boolean): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = createConnection({ host: '127.0.0.1', port });
    let text = '';
    const finish = (ok: boolean): void => {
      clearTimeout(timer);
      socket.destroy();
      resolve(ok);
    };
    const timer = setTimeout(() => finish(false), 1_000);
    socket.once('connect', () => {
      if (request !== null) socket.write(request);
    });
    socket.on('data', (chunk: Buffer) => {
      text += chunk.toString('utf8');
      if (accept(text)) finish(true);
    });
    socket.once('error', () => finish(false));
    socket.once('close', () => finish(false));
  });
}

async function httpProbe(url: string, accept: (body: string) => boolean): Promise<boolean> {
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(1_000) });
    const body = await res.text();
    return res.ok && accept(body);
  } catch {
    return false;
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
