/**
 * `LeaseKeeper`: keeps one etcd lease alive from a `worker_threads` thread
 * (`worker/lease-keeper-thread.mjs`) with its own etcd connection, off the main event loop. A long
 * synchronous step, a GC pause or a big JSON parse on the main loop then cannot starve the
 * keep-alives (which would let a healthy process's lease expire), and keep-alives never queue behind
 * request work.
 *
 * The thread writes a LeaseKeepAlive `{ ID }` every TTL/3 and reports back: `alive` per acknowledged
 * keep-alive, `lost` once etcd answers TTL 0 (revoked or expired) or no keep-alive was acknowledged
 * for longer than the TTL (counted from the send time of the last acknowledged one, so etcd's own
 * expiry is never earlier than ours). A thread that fails or exits on its own also counts as `lost`:
 * nobody keeps the lease alive any more. `lost` is reported once; `stop()` silences the keeper.
 *
 * Lifecycle: `spawn` (the thread loads etcd3 and dials while the caller grants the lease), `start`
 * (the lease id; the expiry bound counts from `grantedAt`), `firstAck`, ..., `stop`.
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
  | { readonly type: 'lost'; readonly reason: string };

export interface LeaseKeeperEvents {
  /** A keep-alive was acknowledged at `at` (ms epoch) with `ttl` seconds. */
  onAlive?(ttl: number, at: number): void;
  /** The lease is gone or can no longer be vouched for. Called at most once, never after `stop()`. */
  onLost?(reason: string): void;
}

export class LeaseKeeper {
  private stopped = false;
  private lostReason: string | undefined;
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
    worker.on('error', (e) => this.lose(`lease keeper thread failed: ${e.message}`));
    worker.on('exit', (code) => {
      this.exited = true;
      this.lose(`lease keeper thread exited (code ${code})`);
    });
    // The thread never keeps the process alive on its own: the owner's etcd connection decides.
    worker.unref();
  }

  /** Start the thread: it loads etcd3 and dials `hosts`; keep-alives begin with `start()`. */
  static spawn(data: LeaseKeeperData): LeaseKeeper {
    return new LeaseKeeper(new Worker(THREAD_URL, { workerData: { ...data, hosts: [...data.hosts] } }));
  }

  /** Keep lease `leaseId` (decimal) alive; `grantedAt` is when the grant was sent (ms epoch). */
  start(leaseId: string, grantedAt: number): void {
    this.post({ type: 'start', leaseId, grantedAt });
  }

  /** Resolves on the first acknowledged keep-alive; rejects on loss, or after `timeoutMs`. */
  firstAck(timeoutMs: number): Promise<void> {
    if (this.acked) return Promise.resolve();
    if (this.lostReason !== undefined) return Promise.reject(new Error(this.lostReason));
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
    } else {
      this.lose(msg.reason);
    }
  }

  private lose(reason: string): void {
    if (this.stopped || this.lostReason !== undefined) return;
    this.lostReason = reason;
    this.settleFirstAck(new Error(reason));
    this.events.onLost?.(reason);
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
