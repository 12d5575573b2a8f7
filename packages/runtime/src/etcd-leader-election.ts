/**
 * LeaderElection on etcd. One candidate = one `EtcdLeaderElection` = its own etcd connection and
 * lease (granted with etcd3's auto keep-alive off and kept alive by a `LeaseKeeper` thread, as
 * `EtcdDiscovery` does: a busy main loop cannot let the leader's lease expire).
 *
 * Campaigning is one serialised step, `attempt`, run at start and again whenever something may have
 * changed (the key deleted, the watch reconnected or failed, the lease back or replaced):
 *   1. a transaction: if the key does not exist (`create_revision == 0`), put it with our id under
 *      our lease; else read it. The key held under our own lease (the lease survived an outage)
 *      counts as won.
 *   2. watch the key from the transaction's revision + 1 (nothing between is missed), then lead or
 *      follow. A delete → step down if leading, and attempt again; a put under another lease while
 *      leading → step down.
 * A failed attempt (etcd unreachable) is retried every RETRY_MS.
 *
 * The lease, as the keeper reports it:
 * - `expired` (no keep-alive acknowledged for longer than the TTL, counted from the send time of the
 *   last acknowledged one, so never after etcd's own expiry): step down at once; once the keeper
 *   hears etcd again (`alive`), attempt again (a lease that survived still holds the key: lead again).
 * - `gone` (etcd says the lease does not exist: revoked or expired): step down at once, grant a new
 *   lease, campaign again.
 * Between keep-alives, `isLeader()` is already false once no keep-alive was acknowledged for
 * 2/3 of the TTL (LEADER_FRESHNESS), and while the key's watch has lost etcd and no attempt has read
 * the key since: a leader in doubt does not act, without waiting for `expired`. (An etcd that comes
 * back without its data holds neither our lease nor our key: the attempt after the watch reconnects
 * finds that out — our put fails "lease not found", or another candidate holds the key.)
 *
 * `close()` steps down, stops the keeper, revokes the lease (deleting the key, so a waiting candidate
 * takes over at once; bounded by REVOKE_TIMEOUT_MS, after which the key goes with the TTL) and
 * closes the connection.
 */
import { errorMessage, invalidArgument, silentLogger, type Logger } from '@switchyard/common';
import { EtcdLeaseInvalidError, type Etcd3, type IKeyValue, type Lease, type Namespace as EtcdNamespace, type Watcher } from 'etcd3';
import { electionKey, namespace } from './addressing.js';
import { connectKeptLease, grantLease, leaseTtlSeconds } from './kept-lease.js';
import { LeaseKeeper } from './lease-keeper.js';
import { MAX_CANDIDATE_ID_LENGTH, decodeElectionValue, notifyLeadership, type LeaderElection, type LeadershipListener } from './leader-election.js';

export interface EtcdLeaderElectionOptions {
  /** etcd client URL(s), e.g. `http://127.0.0.1:2379`; several separated by commas. */
  readonly url: string | readonly string[];
  /** The cluster namespace the election belongs to. */
  readonly namespace: string;
  /** The election's name within the namespace, e.g. `planner` (NAME_PATTERN). */
  readonly name: string;
  /** This candidate's id (the key's value while it leads): 1-256 characters. */
  readonly candidateId: string;
  /** Optional etcd key prefix (test isolation), as `EtcdDiscoveryOptions.namespace`. Default: none. */
  readonly keyPrefix?: string;
  /** Lease TTL: how long a dead leader keeps the others waiting (default 10 s). */
  readonly leaseTtlSeconds?: number;
  readonly logger?: Logger;
  /** Deadline of a connection attempt (ms, default 5000). */
  readonly dialTimeoutMs?: number;
}

/** Wait between campaign attempts while etcd refuses. */
export const RETRY_MS = 500;
/** Longest wait for etcd to revoke the lease on close(). */
const REVOKE_TIMEOUT_MS = 2000;
/** `isLeader()` holds only while the last acknowledged keep-alive is younger than this share of the TTL. */
export const LEADER_FRESHNESS = 2 / 3;

type LeaseStatus = 'alive' | 'expired' | 'gone';

export class EtcdLeaderElection implements LeaderElection {
  private readonly listeners = new Set<LeadershipListener>();
  private state: 'following' | 'leading' | 'closed' = 'following';
  private leaseStatus: LeaseStatus = 'alive';
  private holder: string | undefined;
  /**
   * false from the moment the key's watch loses etcd until an attempt has read the key again: a
   * leader that cannot see its key does not know it still holds it (an etcd that came back without
   * its data has neither our lease nor our key, and another candidate may already have won).
   */
  private confirmed = true;
  private watcher: Watcher | undefined;
  private running: Promise<void> | undefined;
  private again = false;
  private retryTimer: NodeJS.Timeout | undefined;
  private keeper!: LeaseKeeper;

  private constructor(
    private readonly client: Etcd3,
    private readonly kv: EtcdNamespace,
    private readonly key: string,
    readonly candidateId: string,
    private lease: Lease,
    private leaseId: string,
    keeper: LeaseKeeper,
    private readonly ttl: number,
    private readonly keeperData: { hosts: readonly string[]; dialTimeoutMs: number },
    private readonly logger: Logger,
  ) {
    this.attachKeeper(keeper);
  }

  /**
   * Connect, grant this candidate's lease, start its keep-alive thread and make the first attempt;
   * resolves once that attempt is done (leading or following). Fails `unavailable` if etcd is
   * unreachable, `invalid_argument` on bad options.
   */
  static async connect(options: EtcdLeaderElectionOptions): Promise<EtcdLeaderElection> {
    leaseTtlSeconds(options);
    const id = options.candidateId;
    if (typeof id !== 'string' || id.length === 0 || id.length > MAX_CANDIDATE_ID_LENGTH) throw invalidArgument(`candidate id must be 1-${MAX_CANDIDATE_ID_LENGTH} characters`);
    const key = electionKey(namespace(options.namespace), options.name);
    const logger = (options.logger ?? silentLogger).child({ component: 'leader-election', election: options.name });
    const { client, kv, lease, leaseId, keeper, ttlSeconds, keeperData } = await connectKeptLease(options);
    const e = new EtcdLeaderElection(client, kv, key, id, lease, leaseId, keeper, ttlSeconds, keeperData, logger);
    e.kick();
    await e.running;
    return e;
  }

  isLeader(): boolean {
    if (this.state !== 'leading' || this.leaseStatus !== 'alive' || !this.confirmed) return false;
    const at = this.keeper.lastAliveAt;
    return at !== undefined && Date.now() - at < this.ttl * 1000 * LEADER_FRESHNESS;
  }

  leader(): string | undefined {
    return this.state === 'leading' ? this.candidateId : this.holder;
  }

  /** Diagnostic (and tests): this candidate's current lease id, decimal. */
  get currentLeaseId(): string {
    return this.leaseId;
  }

  onChange(listener: LeadershipListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  async close(): Promise<void> {
    if (this.state === 'closed') return;
    if (this.state === 'leading') this.notify(false, 'closed');
    this.state = 'closed';
    this.listeners.clear();
    clearTimeout(this.retryTimer);
    const w = this.watcher;
    this.watcher = undefined;
    // not awaited: with etcd unreachable a cancel may wait for a connection; the client closes below
    if (w) void w.cancel().catch(() => {});
    await this.keeper.stop();
    if (this.leaseStatus !== 'gone') {
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`no answer within ${REVOKE_TIMEOUT_MS} ms`)), REVOKE_TIMEOUT_MS);
      });
      try {
        await Promise.race([this.lease.revoke(), timeout]);
      } catch (err) {
        this.logger.warn({ err: errorMessage(err) }, 'etcd lease revoke failed (the election key expires with the TTL)');
      } finally {
        clearTimeout(timer);
      }
    } else {
      this.lease.release();
    }
    // an attempt still in flight finds the state closed (or the client closed) and ends; one waiting
    // on an unreachable etcd is not waited for beyond the revoke bound
    if (this.running !== undefined) await within(this.running, REVOKE_TIMEOUT_MS);
    this.client.close();
  }

  // ---- campaigning -------------------------------------------------------------------------------

  /** Run `attempt` now, or once more after the one running. */
  private kick(): void {
    if (this.state === 'closed') return;
    if (this.running !== undefined) {
      this.again = true;
      return;
    }
    clearTimeout(this.retryTimer);
    this.running = this.campaign();
  }

  /**
   * Attempts until no kick came in meanwhile. `running` is cleared in the same step that reads
   * `again` for the last time, so a kick is never lost between the two.
   */
  private async campaign(): Promise<void> {
    try {
      do {
        this.again = false;
        await this.attempt();
      } while (this.again && this.state !== 'closed');
    } catch (err) {
      if (this.state === 'closed') return;
      if (err instanceof EtcdLeaseInvalidError) this.leaseLost('gone', errorMessage(err));
      this.logger.warn({ err: errorMessage(err) }, 'election attempt failed: retrying');
      this.retryTimer = setTimeout(() => this.kick(), RETRY_MS);
    } finally {
      this.running = undefined;
    }
  }

  private async attempt(): Promise<void> {
    if (this.state === 'closed' || this.leaseStatus === 'expired') return;
    if (this.leaseStatus === 'gone') await this.grantNewLease();
    const res = await this.kv
      .if(this.key, 'Create', '==', 0)
      .then(this.kv.put(this.key).value(JSON.stringify({ candidateId: this.candidateId })).lease(this.leaseId))
      .else(this.kv.get(this.key))
      .commit();
    if (this.isClosed()) return;
    const revision = Number(res.header.revision);
    let ours: boolean;
    if (res.succeeded) {
      ours = true;
      this.holder = this.candidateId;
    } else {
      const kv = res.responses[0]?.response_range?.kvs[0];
      ours = kv !== undefined && String(kv.lease) === this.leaseId;
      this.holder = kv === undefined ? undefined : holderOf(kv);
    }
    await this.watchFrom(revision + 1);
    if (this.isClosed()) return;
    this.confirmed = true;
    if (ours && this.leaseStatus === 'alive') {
      this.setLeading(true, 'elected');
    } else {
      this.setLeading(false, `following ${this.holder ?? '(none)'}`);
    }
  }

  /** Replace the watcher with one from `startRevision`. */
  private async watchFrom(startRevision: number): Promise<void> {
    const old = this.watcher;
    this.watcher = undefined;
    if (old) void old.cancel().catch(() => {});
    const w = await this.kv.watch().key(this.key).startRevision(String(startRevision)).create();
    if (this.state === 'closed') {
      void w.cancel().catch(() => {});
      return;
    }
    this.watcher = w;
    let disconnected = false;
    w.on('delete', () => {
      if (this.watcher !== w) return;
      this.holder = undefined;
      this.setLeading(false, 'election key deleted');
      this.kick();
    });
    w.on('put', (kv) => {
      if (this.watcher !== w) return;
      this.holder = holderOf(kv);
      if (String(kv.lease) !== this.leaseId) this.setLeading(false, `election key taken by ${this.holder ?? '(unknown)'}`);
    });
    w.on('disconnected', () => {
      disconnected = true;
      if (this.watcher === w) this.confirmed = false;
    });
    w.on('connected', () => {
      if (!disconnected || this.watcher !== w) return;
      disconnected = false;
      this.kick();
    });
    w.on('error', (err) => {
      if (this.watcher !== w) return;
      this.logger.warn({ err: errorMessage(err) }, 'election watch failed: campaigning again');
      this.kick();
    });
  }

  /** A method, not a field read: the state may change across an await. */
  private isClosed(): boolean {
    return this.state === 'closed';
  }

  private setLeading(leading: boolean, reason: string): void {
    if (this.state === 'closed' || (this.state === 'leading') === leading) return;
    this.state = leading ? 'leading' : 'following';
    this.notify(leading, reason);
  }

  private notify(leading: boolean, reason: string): void {
    this.logger.info({ candidateId: this.candidateId, leading, reason }, leading ? 'leading' : 'not leading');
    notifyLeadership(this.listeners, { leading, reason }, (err) => this.logger.error({ err: errorMessage(err) }, 'leadership listener threw'));
  }

  // ---- the lease ---------------------------------------------------------------------------------

  private leaseLost(status: 'expired' | 'gone', reason: string): void {
    this.leaseStatus = status;
    this.setLeading(false, `lease lost: ${reason}`);
  }

  private attachKeeper(keeper: LeaseKeeper): void {
    this.keeper = keeper;
    keeper.events = {
      onAlive: () => {
        if (this.keeper !== keeper || this.leaseStatus !== 'expired') return;
        this.leaseStatus = 'alive';
        this.kick();
      },
      onExpired: (reason) => {
        if (this.keeper !== keeper) return;
        this.leaseLost('expired', reason);
      },
      onGone: (reason) => {
        if (this.keeper !== keeper) return;
        this.leaseLost('gone', reason);
        this.kick();
      },
      onDead: (reason) => {
        if (this.keeper !== keeper || this.state === 'closed') return;
        // A bug, not an outage: keep the same lease alive from a new thread; lead again once it acks.
        this.logger.error({ reason }, 'election lease keeper thread died: starting another');
        this.leaseLost('expired', reason);
        this.attachKeeper(LeaseKeeper.spawn({ ...this.keeperData, ttlSeconds: this.ttl }));
        this.keeper.start(this.leaseId, keeper.lastAliveAt ?? Date.now());
      },
    };
  }

  /** Replace a gone lease (its key went with it) and have the keeper acknowledge it. Throws on failure. */
  private async grantNewLease(): Promise<void> {
    const { lease, leaseId, grantedAt } = await grantLease(this.kv, this.ttl);
    if (this.state === 'closed') {
      await lease.revoke().catch(() => {});
      return;
    }
    this.lease.release();
    this.lease = lease;
    this.leaseId = leaseId;
    this.keeper.start(leaseId, grantedAt);
    await this.keeper.firstAck(this.ttl * 1000);
    this.leaseStatus = 'alive';
  }
}

/** Waits for `p` (its outcome ignored) at most `ms`. */
async function within(p: Promise<unknown>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([p.catch(() => {}), new Promise<void>((r) => (timer = setTimeout(r, ms)))]);
  clearTimeout(timer);
}

function holderOf(kv: IKeyValue): string | undefined {
  try {
    return decodeElectionValue(JSON.parse(kv.value.toString()))?.candidateId;
  } catch {
    return undefined;
  }
}
