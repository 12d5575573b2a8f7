/**
 * `LeaseKeeper`: keeps one etcd lease alive from a `worker_threads` thread
 * (`worker/lease-keeper-thread.mjs`) with its own etcd connection, off the main event loop. A long
 * synchronous step, a GC pause or a big JSON parse on the main loop then cannot starve the
 * keep-alives (which would let a healthy process's lease expire), and keep-alives never queue behind
 * request work.
 *
 * The thread writes a LeaseKeepAlive `{ ID }` every TTL/3 and reports back: `alive` per acknowledged
 * keep-alive; `expired` once no keep-alive was acknowledged for longer than the TTL (counted from the
 * send time of the last acknowledged one, so etcd's own expiry is never earlier than ours) — the
 * thread keeps trying the same lease, since an etcd that restarts restores its leases with a fresh
 * TTL, and `alive` follows if etcd answers; `gone` once etcd answers TTL 0 (revoked or expired): the
 * thread goes idle until `start` is called with a new lease. A thread that fails or exits on its own
 * is `dead`: nobody keeps the lease alive any more, and the keeper is finished. `stop()` silences it.
 *
 * Lifecycle: `spawn` (the thread loads etcd3 and dials while the caller grants the lease), `start`
 * (the lease id; the expiry bound counts from `grantedAt`), `firstAck`, ..., [`gone` → `start` with a
 * new lease, `firstAck`, ...], `stop`.
 */
import { Worker } from 'node:worker_threads';

const THREAD_URL = new URL('../worker/lease-keeper-thread.mjs', import.meta.url);
/** How long `stop()` waits for the thread to close its connection before terminating it. */
const STOP_GRACE_MS = 1000;

export interface LeaseKeeperData {
  readonly hosts: readonly string[];
  readonly dialTimeoutMs: number;
  readonly ttlSeconds: number;
}

/** Main thread → keeper thread. */
export type ToLeaseKeeper = { readonly type: 'start'; readonly leaseId: string; readonly grantedAt: number } | { readonly type: 'stop' };

/** Keeper thread → main thread. */
export type FromLeaseKeeper =
  | { readonly type: 'alive'; readonly ttl: number; readonly at: number }
  | { readonly type: 'expired'; readonly reason: string }
  | { readonly type: 'gone'; readonly reason: string };

/** Never called after `stop()`. */
export interface LeaseKeeperEvents {
  /** A keep-alive was acknowledged at `at` (ms epoch) with `ttl` seconds. */
  onAlive?(ttl: number, at: number): void;
  /** No keep-alive acknowledged for longer than the TTL; the keeper keeps trying. Once per episode. */
  onExpired?(reason: string): void;
  /** etcd says the lease no longer exists; the keeper is idle until the next `start`. */
  onGone?(reason: string): void;
  /** The thread failed or exited: this keeper is finished (spawn another). Called at most once. */
  onDead?(reason: string): void;
}

export class LeaseKeeper {
  private stopped = false;
  private deadReason: string | undefined;
  private exited = false;
  private readonly exit: Promise<void>;
  private firstAckWaiters: { resolve: () => void; reject: (e: Error) => void }[] = [];
  private acked = false;
  /** ms epoch of the last acknowledged keep-alive (thread clock = this process's clock). */
  lastAliveAt: number | undefined;
  events: LeaseKeeperEvents = {};

  private constructor(private readonly worker: Worker) {
    this.exit = new Promise<void>((resolve) => worker.once('exit', () => resolve()));
    worker.on('message', (msg: FromLeaseKeeper) => this.onMessage(msg));
    worker.on('error', (e) => this.die(`lease keeper thread failed: ${e.message}`));
    worker.on('exit', (code) => {
      this.exited = true;
      this.die(`lease keeper thread exited (code ${code})`);
    });
    // The thread never keeps the process alive on its own: the owner's etcd connection decides.
    worker.unref();
  }

  /** Start the thread: it loads etcd3 and dials `hosts`; keep-alives begin with `start()`. */
  static spawn(data: LeaseKeeperData): LeaseKeeper {
    return new LeaseKeeper(new Worker(THREAD_URL, { workerData: { ...data, hosts: [...data.hosts] } }));
  }

  /**
   * Keep lease `leaseId` (decimal) alive, instead of any lease kept so far; `grantedAt` is when the
   * grant was sent (ms epoch).
   */
  start(leaseId: string, grantedAt: number): void {
    this.acked = false;
    this.settleFirstAck(new Error('another lease was started'));
    this.post({ type: 'start', leaseId, grantedAt });
  }

  /** Resolves on the first acknowledged keep-alive since `start`; rejects when the lease is gone, the thread dies, or after `timeoutMs`. */
  firstAck(timeoutMs: number): Promise<void> {
    if (this.acked) return Promise.resolve();
    if (this.deadReason !== undefined) return Promise.reject(new Error(this.deadReason));
    return new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => this.settleFirstAck(new Error(`no keep-alive acknowledged within ${timeoutMs} ms`)), timeoutMs);
      this.firstAckWaiters.push({
        resolve: () => {
          clearTimeout(timer);
          resolve();
        },
        reject: (e) => {
          clearTimeout(timer);
          reject(e);
        },
      });
    });
  }

  /** Stop keeping the lease alive: the thread closes its connection and exits (terminated if it lingers). */
  async stop(): Promise<void> {
    if (this.stopped) {
      await this.exit;
      return;
    }
    this.stopped = true;
    this.settleFirstAck(new Error('lease keeper stopped'));
    if (this.exited) return;
    this.post({ type: 'stop' });
    let timer: NodeJS.Timeout | undefined;
    const grace = new Promise<'timeout'>((resolve) => {
      timer = setTimeout(() => resolve('timeout'), STOP_GRACE_MS);
    });
    const r = await Promise.race([this.exit, grace]);
    clearTimeout(timer);
    if (r === 'timeout') {
      await this.worker.terminate();
      await this.exit;
    }
  }

  private onMessage(msg: FromLeaseKeeper): void {
    if (this.stopped) return;
    if (msg.type === 'alive') {
      this.lastAliveAt = msg.at;
      if (!this.acked) {
        this.acked = true;
        this.settleFirstAck(null);
      }
      this.events.onAlive?.(msg.ttl, msg.at);
    } else if (msg.type === 'expired') {
      this.events.onExpired?.(msg.reason);
    } else {
      this.settleFirstAck(new Error(msg.reason));
      this.events.onGone?.(msg.reason);
    }
  }

  private die(reason: string): void {
    if (this.stopped || this.deadReason !== undefined) return;
    this.deadReason = reason;
    this.settleFirstAck(new Error(reason));
    this.events.onDead?.(reason);
  }

  private settleFirstAck(error: Error | null): void {
    const waiters = this.firstAckWaiters;
    this.firstAckWaiters = [];
    for (const w of waiters) {
      if (error === null) w.resolve();
      else w.reject(error);
    }
  }

  private post(msg: ToLeaseKeeper): void {
    if (!this.exited) this.worker.postMessage(msg);
  }
}
