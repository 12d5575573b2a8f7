/**
 * The local connector: the planner's `Connector` over `switchyard worker` processes on this machine.
 * Linux only (it identifies processes through `/proc`).
 *
 * - **Scale-up** spawns replicas from the pool's argument template (worker-template.ts), each with its
 *   own free ports, detached in its own session and process group, stdout and stderr appended to
 *   `<stateDir>/logs/<id>.log`: a planner that exits (or is killed) leaves its workers serving.
 * - **Scale-down is a drain**: the chosen replica (least loaded, then newest: `pickToDrain`) gets one
 *   SIGTERM — the worker leaves discovery, finishes its in-flight requests and exits 0 by itself — and
 *   only when it is still alive `drainTimeoutMs` later is its process group SIGKILLed. A draining
 *   replica no longer counts and is never picked again, so two drains never race for one process.
 * - **Adoption**: each replica has a record in `<stateDir>/replicas/` (replica-record.ts). A connector
 *   started on the same directory adopts every recorded replica that is still the same live process
 *   (pid + start ticks), serving or draining (a drain's deadline carries over), and forgets the rest.
 * - Replicas that exit on their own (crash, failed start, killed by someone else) are noticed — our own
 *   children at once, adopted ones by polling every `pollIntervalMs` — and simply stop counting; the
 *   planner's next interval restores the count.
 *
 * Concurrency: the planner calls `scale` / `replicas` one at a time; calls that overlap anyway run one
 * after the other. One connector per state directory (`connector.lock`; a lock whose process is gone is
 * taken over).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { closeSync, openSync } from 'node:fs';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describeValue, invalidArgument, silentLogger, unavailable, unsupported, type Logger } from '@switchyard/common';
import type { Connector, Pool } from '@switchyard/planner';
import { freePorts, hasProcTable, isSameProcess, signalProcess, startTicksOf } from './process-table.js';
import { pickToDrain, REPLICA_RECORD_VERSION, type ReplicaRecord } from './replica-record.js';
import { StateDir } from './state-dir.js';
import { expandWorkerTemplate, parseWorkerTemplate, type PortPlaceholder, type WorkerTemplate } from './worker-template.js';

/** Replicas per pool unless `maxReplicas` says otherwise. */
export const DEFAULT_LOCAL_MAX_REPLICAS = 16;
/** The hard cap on `maxReplicas`: a target above it is refused whatever the options say. */
export const MAX_LOCAL_REPLICAS = 256;
/** How long a drain may take before the replica is killed: well past the worker's own 30 s `--exit-timeout-secs`. */
export const DEFAULT_DRAIN_TIMEOUT_MS = 300_000;
export const DEFAULT_POLL_INTERVAL_MS = 1_000;
/** A replica's log is cut to its newest half (kept as `<id>.log.1`) once it grows past this. */
export const DEFAULT_MAX_LOG_BYTES = 16 * 1024 * 1024;
/** How long `loadOf` may take for one replica before its load counts as unknown. */
export const LOAD_QUERY_TIMEOUT_MS = 2_000;
/** Logs of replicas that are gone kept for the operator (the oldest are deleted beyond this). */
export const DEFAULT_KEEP_LOGS = 32;

const POOL_NAMES: readonly Pool[] = ['aggregated', 'prefill', 'decode'];

export interface LocalConnectorOptions {
  /** Where records, logs and the lock live; created if missing. */
  stateDir: string;
  /** Argument template per managed pool (what follows `command`). Pools absent here are not managed. */
  pools: Partial<Record<Pool, readonly string[]>>;
  /** The program and its leading arguments; default: this Node.js with the repository's `bin/switchyard.mjs worker`. */
  command?: readonly string[];
  /** Added to this process's environment for the replicas. */
  env?: Readonly<Record<string, string>>;
  /** Working directory of the replicas (default this process's). */
  cwd?: string;
  /** Per pool cap; default DEFAULT_LOCAL_MAX_REPLICAS, at most MAX_LOCAL_REPLICAS. */
  maxReplicas?: number;
  /** Default DEFAULT_DRAIN_TIMEOUT_MS; 0 kills at the first poll after the SIGTERM. */
  drainTimeoutMs?: number;
  /** Default DEFAULT_POLL_INTERVAL_MS (10 ms – 60 s). */
  pollIntervalMs?: number;
  /** Default DEFAULT_MAX_LOG_BYTES (at least 4 KiB). */
  maxLogBytes?: number;
  /** Default DEFAULT_KEEP_LOGS. */
  keepLogs?: number;
  /**
   * A replica's current load for the drain choice (e.g. requests running, read from its metrics port);
   * undefined, a rejection or no answer within LOAD_QUERY_TIMEOUT_MS: unknown (drained after the known ones).
   */
  loadOf?: (replica: LocalReplica) => number | undefined | Promise<number | undefined>;
  /** Called once for every replica that is gone, drained or not. */
  onExit?: (replica: LocalReplica, exit: ReplicaExit) => void;
  logger?: Logger;
}

/**
 * Lifecycle of a replica:
 *   serving  — spawned (maybe still starting) or adopted; counts toward its pool.
 *   draining — SIGTERM sent (at `drainingSince`); no longer counts; SIGKILLed past the drain timeout.
 * A replica that exits from either state is removed (its record deleted, `onExit` called).
 */
export type LocalReplicaState = 'serving' | 'draining';

export interface LocalReplica {
  readonly id: string;
  readonly pool: Pool;
  readonly pid: number;
  readonly ports: Readonly<Partial<Record<PortPlaceholder, number>>>;
  readonly startedAt: number;
  readonly state: LocalReplicaState;
  /** Started by an earlier connector on this state directory. */
  readonly adopted: boolean;
  /** Absolute path of its log file. */
  readonly logFile: string;
}

export interface ReplicaExit {
  /** Exit code and signal when the replica was this connector's child; both null for adopted ones (unknown). */
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  /** It was draining when it went (false: it exited on its own). */
  readonly drained: boolean;
  /** This connector SIGKILLed it at the drain timeout. */
  readonly killed: boolean;
}

interface Tracked {
  record: ReplicaRecord;
  adopted: boolean;
  child?: ChildProcess;
  killed: boolean;
}

interface Compiled {
  stateDir: string;
  templates: Map<Pool, WorkerTemplate>;
  command: readonly string[];
  env: NodeJS.ProcessEnv;
  cwd: string | undefined;
  maxReplicas: number;
  drainTimeoutMs: number;
  pollIntervalMs: number;
  maxLogBytes: number;
  keepLogs: number;
  loadOf: LocalConnectorOptions['loadOf'];
  onExit: LocalConnectorOptions['onExit'];
  log: Logger;
}

/** Checks the options (invalid_argument on any bad one); nothing is touched yet. */
export function compileLocalConnectorOptions(o: LocalConnectorOptions): Compiled {
  if (typeof o?.stateDir !== 'string' || o.stateDir === '') throw invalidArgument('local connector: stateDir is required');
  if (typeof o.pools !== 'object' || o.pools === null) throw invalidArgument('local connector: pools is required');
  const templates = new Map<Pool, WorkerTemplate>();
  for (const [pool, args] of Object.entries(o.pools)) {
    if (!POOL_NAMES.includes(pool as Pool)) throw invalidArgument(`local connector: unknown pool ${pool.slice(0, 40)} (aggregated, prefill, decode)`);
    if (args === undefined) continue;
    templates.set(pool as Pool, parseWorkerTemplate(args, `local connector: template of pool ${pool}`));
  }
  if (templates.size === 0) throw invalidArgument('local connector: no pool has a template');
  const int = (name: string, v: number | undefined, dflt: number, min: number, max: number): number => {
    const n = v ?? dflt;
    if (!Number.isInteger(n) || n < min || n > max) throw invalidArgument(`local connector: ${name} must be an integer in [${min}, ${max}], got ${describeValue(v, 40)}`);
    return n;
  };
  const command = o.command ?? [process.execPath, fileURLToPath(new URL('../../../../bin/switchyard.mjs', import.meta.url)), 'worker'];
  if (!Array.isArray(command) || command.length === 0 || !command.every((c) => typeof c === 'string' && c !== '' && !c.includes('\0'))) {
    throw invalidArgument('local connector: command must be a non-empty list of non-empty strings');
  }
  for (const [k, v] of Object.entries(o.env ?? {})) if (typeof v !== 'string' || k === '' || k.includes('=') || `${k}${v}`.includes('\0')) throw invalidArgument(`local connector: bad env entry ${k.slice(0, 40)}`);
  return {
    stateDir: resolve(o.stateDir),
    templates,
    command,
    env: { ...process.env, ...o.env },
    cwd: o.cwd,
    maxReplicas: int('maxReplicas', o.maxReplicas, DEFAULT_LOCAL_MAX_REPLICAS, 0, MAX_LOCAL_REPLICAS),
    drainTimeoutMs: int('drainTimeoutMs', o.drainTimeoutMs, DEFAULT_DRAIN_TIMEOUT_MS, 0, 24 * 3600_000),
    pollIntervalMs: int('pollIntervalMs', o.pollIntervalMs, DEFAULT_POLL_INTERVAL_MS, 10, 60_000),
    maxLogBytes: int('maxLogBytes', o.maxLogBytes, DEFAULT_MAX_LOG_BYTES, 4096, 2 ** 40),
    keepLogs: int('keepLogs', o.keepLogs, DEFAULT_KEEP_LOGS, 0, 100_000),
    loadOf: o.loadOf,
    onExit: o.onExit,
    log: o.logger ?? silentLogger,
  };
}

/**
 * Checks the options, takes the state directory and adopts the live replicas recorded in it. Rejects
 * with invalid_argument for bad options, unsupported off Linux, unavailable when another live connector
 * holds the directory or it cannot be written.
 */
export async function createLocalConnector(options: LocalConnectorOptions): Promise<LocalConnector> {
  const c = compileLocalConnectorOptions(options);
  if (!hasProcTable()) throw unsupported('local connector: needs /proc (Linux) to tell its replicas from recycled pids');
  const dir = StateDir.open(c.stateDir, c.log);
  try {
    return new LocalConnector(c, dir);
  } catch (err) {
    dir.release();
    throw err;
  }
}

export class LocalConnector implements Connector {
  private readonly replicasById = new Map<string, Tracked>();
  private readonly drainWaiters: Array<() => void> = [];
  private readonly timer: NodeJS.Timeout;
  private queue: Promise<unknown> = Promise.resolve();
  private closed = false;

  /** Use {@link createLocalConnector}: it takes the directory's lock first. Adopts the live recorded replicas, forgets the gone ones. */
  constructor(
    private readonly c: Compiled,
    private readonly dir: StateDir,
  ) {
    for (const record of dir.readRecords()) {
      const { id, pool, pid } = record;
      if (!c.templates.has(pool)) {
        c.log.info({ id, pool }, 'local connector: replica of an unmanaged pool left alone');
      } else if (!isSameProcess(pid, record.startTicks)) {
        c.log.info({ id, pid }, 'local connector: recorded replica is gone');
        dir.forget(id);
      } else {
        this.replicasById.set(id, { record, adopted: true, killed: false });
        c.log.info({ id, pool, pid, draining: record.drainingSince !== undefined }, 'local connector: replica adopted');
      }
    }
    dir.pruneLogs(new Set(this.replicasById.keys()), c.keepLogs);
    this.timer = setInterval(() => this.tick(), c.pollIntervalMs);
    this.timer.unref();
  }

  replicas(): Promise<Partial<Record<Pool, number>>> {
    return this.serialised(() => {
      this.refresh();
      const counts: Partial<Record<Pool, number>> = {};
      for (const pool of this.c.templates.keys()) counts[pool] = this.serving(pool).length;
      return counts;
    });
  }

  scale(pool: Pool, target: number): Promise<void> {
    if (this.closed) return Promise.reject(unavailable('local connector: closed'));
    const template = this.c.templates.get(pool);
    if (template === undefined) return Promise.reject(invalidArgument(`local connector: pool ${describeValue(pool, 40)} is not managed`));
    if (!Number.isInteger(target) || target < 0) return Promise.reject(invalidArgument(`local connector: bad target ${describeValue(target, 40)}: a non-negative integer`));
    if (target > this.c.maxReplicas) return Promise.reject(invalidArgument(`local connector: target ${target} for pool ${pool} is above the cap of ${this.c.maxReplicas}`));
    return this.serialised(async () => {
      if (this.closed) throw unavailable('local connector: closed');
      this.refresh();
      const serving = this.serving(pool);
      if (target < serving.length) {
        const loads = await Promise.all(serving.map((t) => this.loadOf(t)));
        const candidates = serving.map((t, i) => ({ id: t.record.id, startedAt: t.record.startedAt, load: loads[i] }));
        // a replica may have gone while the loads were asked for: drain() checks it is still there
        for (const id of pickToDrain(candidates, serving.length - target)) {
          const t = this.replicasById.get(id);
          if (t !== undefined) this.drain(t);
        }
      }
      for (let n = serving.length; n < target && !this.closed; n++) await this.spawnReplica(pool, template);
    });
  }

  /** Every replica tracked now (serving and draining). */
  list(): LocalReplica[] {
    return [...this.replicasById.values()].map((t) => this.view(t));
  }

  /** Resolves once no replica is draining (at once if none is), or when the connector closes. */
  drained(): Promise<void> {
    if (this.closed || ![...this.replicasById.values()].some((t) => t.record.drainingSince !== undefined)) return Promise.resolve();
    return new Promise((resolve) => this.drainWaiters.push(resolve));
  }

  /**
   * Stops managing: no more polls, the lock released. Replicas keep running, draining ones finish
   * their drain by themselves; a later connector on the directory adopts them (with the drain's
   * deadline). A scale under way finishes the spawn it is in and starts no more. Idempotent.
   */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    clearInterval(this.timer);
    await this.queue; // a scale under way stops after the replica it is spawning
    for (const t of this.replicasById.values()) t.child?.removeAllListeners('exit');
    for (const w of this.drainWaiters.splice(0)) w();
    this.dir.release();
  }

  private serialised<T>(fn: () => T | Promise<T>): Promise<T> {
    const run = this.queue.then(fn, fn);
    this.queue = run.catch(() => undefined);
    return run;
  }

  private serving(pool: Pool): Tracked[] {
    return [...this.replicasById.values()].filter((t) => t.record.pool === pool && t.record.drainingSince === undefined);
  }

  private async loadOf(t: Tracked): Promise<number | undefined> {
    if (this.c.loadOf === undefined) return undefined;
    let timer: NodeJS.Timeout | undefined;
    try {
      const timeout = new Promise<undefined>((resolve) => (timer = setTimeout(() => resolve(undefined), LOAD_QUERY_TIMEOUT_MS)));
      const load = await Promise.race([Promise.resolve().then(() => this.c.loadOf!(this.view(t))), timeout]);
      return typeof load === 'number' ? load : undefined;
    } catch (err) {
      this.c.log.warn({ err, id: t.record.id }, 'local connector: loadOf failed; load unknown');
      return undefined;
    } finally {
      clearTimeout(timer);
    }
  }

  private view(t: Tracked): LocalReplica {
    const r = t.record;
    return { id: r.id, pool: r.pool, pid: r.pid, ports: r.ports, startedAt: r.startedAt, state: r.drainingSince === undefined ? 'serving' : 'draining', adopted: t.adopted, logFile: this.dir.logFile(r.id) };
  }

  private async spawnReplica(pool: Pool, template: WorkerTemplate): Promise<void> {
    const id = `${pool}-${Date.now().toString(36)}-${randomBytes(4).toString('hex')}`;
    const avoid = new Set([...this.replicasById.values()].flatMap((t) => Object.values(t.record.ports)));
    let chosen: number[];
    try {
      chosen = await freePorts(template.ports.length, avoid);
    } catch (err) {
      throw unavailable(`local connector: no free ports for a ${pool} replica`, err);
    }
    const ports: Partial<Record<PortPlaceholder, number>> = {};
    template.ports.forEach((p, i) => (ports[p] = chosen[i]!));
    const args = expandWorkerTemplate(template, { replica: id, pool, ports });
    const argv = [...this.c.command, ...args];
    const logFile = this.dir.logFile(id);
    let fd: number;
    try {
      fd = openSync(logFile, 'a', 0o600);
    } catch (err) {
      throw unavailable(`local connector: cannot open ${logFile}`, err);
    }
    let child: ChildProcess;
    try {
      // own session and process group: no terminal signal or planner exit reaches it; output to the
      // file only, so nothing ties it to this process's pipes
      child = spawn(argv[0]!, argv.slice(1), { detached: true, stdio: ['ignore', fd, fd], env: this.c.env, cwd: this.c.cwd });
    } catch (err) {
      closeSync(fd);
      throw unavailable(`local connector: cannot start ${argv[0]}`, err);
    }
    closeSync(fd);
    const pid = child.pid;
    if (pid === undefined) {
      const err = await new Promise<unknown>((resolve) => child.once('error', resolve));
      throw unavailable(`local connector: cannot start ${argv[0]}`, err);
    }
    child.on('error', () => {}); // signalling errors are handled where we signal
    child.unref();
    // not yet reaped (we have not returned to the event loop), so this is the child's own entry
    const startTicks = startTicksOf(pid) ?? '0';
    const record: ReplicaRecord = { v: REPLICA_RECORD_VERSION, id, pool, pid, startTicks, startedAt: Date.now(), ports, argv };
    const tracked: Tracked = { record, adopted: false, child, killed: false };
    this.replicasById.set(id, tracked);
    child.once('exit', (code, signal) => this.gone(tracked, code, signal));
    try {
      this.dir.persist(record);
    } catch (err) {
      // an unrecorded replica could never be adopted: stop it rather than leak it
      signalProcess(pid, 'SIGKILL');
      throw unavailable(`local connector: cannot record replica ${id}`, err);
    }
    this.c.log.info({ id, pool, pid, ports, logFile }, 'local connector: replica started');
  }

  private drain(t: Tracked): void {
    if (t.record.drainingSince !== undefined) return;
    if (!isSameProcess(t.record.pid, t.record.startTicks)) return this.gone(t, null, null);
    t.record = { ...t.record, drainingSince: Date.now() };
    try {
      this.dir.persist(t.record);
    } catch (err) {
      this.c.log.warn({ err, id: t.record.id }, 'local connector: cannot record the drain (a restarted connector will see it as serving)');
    }
    this.c.log.info({ id: t.record.id, pool: t.record.pool, pid: t.record.pid }, 'local connector: draining replica (SIGTERM)');
    if (!signalProcess(t.record.pid, 'SIGTERM')) this.gone(t, null, null);
  }

  /** Notices adopted replicas that went, and kills drains past their deadline. */
  private refresh(): void {
    const now = Date.now();
    for (const t of [...this.replicasById.values()]) {
      const r = t.record;
      if (!isSameProcess(r.pid, r.startTicks)) {
        // our own child's exit event brings its code; an adopted one's status is unknown
        if (t.child === undefined || t.child.exitCode !== null || t.child.signalCode !== null) this.gone(t, t.child?.exitCode ?? null, t.child?.signalCode ?? null);
        continue;
      }
      if (r.drainingSince !== undefined && !t.killed && now - r.drainingSince >= this.c.drainTimeoutMs) {
        t.killed = true;
        this.c.log.warn({ id: r.id, pid: r.pid, drainTimeoutMs: this.c.drainTimeoutMs }, 'local connector: drain timed out, killing the replica (SIGKILL to its process group)');
        // detached: the replica leads its process group, whose id is its pid
        if (!signalProcess(-r.pid, 'SIGKILL')) signalProcess(r.pid, 'SIGKILL');
      }
    }
  }

  private tick(): void {
    if (this.closed) return;
    try {
      this.refresh();
      for (const t of this.replicasById.values()) this.dir.boundLog(t.record.id, this.c.maxLogBytes);
    } catch (err) {
      this.c.log.error({ err }, 'local connector: poll failed');
    }
  }

  private gone(t: Tracked, code: number | null, signal: NodeJS.Signals | null): void {
    const r = t.record;
    if (this.replicasById.get(r.id) !== t) return;
    this.replicasById.delete(r.id);
    this.dir.forget(r.id);
    const drained = r.drainingSince !== undefined;
    const fields = { id: r.id, pool: r.pool, pid: r.pid, code, signal, logFile: this.dir.logFile(r.id) };
    if (drained && (code === 0 || (code === null && signal === null))) this.c.log.info(fields, 'local connector: replica drained and exited');
    else this.c.log.warn(fields, drained ? 'local connector: draining replica ended abnormally' : 'local connector: replica exited on its own');
    try {
      this.c.onExit?.(this.view(t), { code, signal, drained, killed: t.killed });
    } catch (err) {
      this.c.log.error({ err }, 'local connector: onExit failed');
    }
    if (![...this.replicasById.values()].some((x) => x.record.drainingSince !== undefined)) for (const w of this.drainWaiters.splice(0)) w();
    this.dir.pruneLogs(new Set(this.replicasById.keys()), this.c.keepLogs);
  }
}
