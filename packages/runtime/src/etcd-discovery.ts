/**
 * Discovery on etcd (etcd3 client). One process = one `EtcdDiscovery` = one lease; the instance id is
 * the lease id in hex (`instanceIdFromLease`). Every registration is a create-if-absent transaction
 * (`create_revision(key) == 0`) that puts the key under the lease, so all of a process's keys vanish
 * together when the lease is revoked (`close()`) or expires.
 *
 * Semantics match `MemoryDiscovery`: registering the same value again (under this lease) is a no-op, a
 * different value is `already_exists`, and after the lease is lost registrations fail `unavailable`.
 * Unregister deletes the key only while it is still held by this process's lease.
 *
 * `watch(prefix)` reads the prefix at revision R, yields it as puts (through `WatchState.resync`), then
 * `synced`, then watches from R+1. When the etcd3 watcher reconnects (it resumes from its last seen
 * revision by itself), or fails (e.g. its start revision was compacted), the watch takes a fresh
 * snapshot at R' and yields `WatchState.resync` (deletes, puts, `synced`); replayed events at or
 * below R' are dropped, so the consumer never sees a gap or a stale flicker.
 *
 * Keep-alives run off this event loop: the lease is granted here with etcd3's auto keep-alive off, and
 * a `LeaseKeeper` thread with its own etcd connection keeps it alive (every TTL/3). A blocked or busy
 * main loop therefore cannot let a healthy process's lease expire.
 *
 * Lease loss is not terminal (an etcd outage must not take the cluster down with it):
 * - `active` → `lost` when the keeper reports `expired` (no keep-alive acknowledged for longer than
 *   the TTL: etcd unreachable) or `gone` (etcd answered TTL 0, or a transaction failed "lease not
 *   found"); `onLeaseLost` fires. Registrations fail `unavailable` while lost; watches go on.
 * - `lost` → `active` (`onLeaseRestored`) once etcd answers again: if the lease survived (an etcd that
 *   restarts restores its leases with a fresh TTL) keep-alives simply resume; if it is gone, a new
 *   lease is granted (retried every RECOVER_RETRY_MS). Either way every key this process holds is
 *   written again under the current lease before it is `active` (create-if-absent: a surviving key is
 *   a no-op), and keys unregistered meanwhile are deleted.
 * The **instance id stays the first lease's id** for the object's life: keys, NATS subjects, routing
 * state and KV event streams of the instance stay valid across a new lease. There is no duplicate-
 * registration race: a new lease is granted only after etcd said the old one (with its keys) is gone.
 */
import { SwitchyardError, alreadyExists, errorMessage, invalidArgument, silentLogger, unavailable, type Logger } from '@switchyard/common';
import { EtcdLeaseInvalidError, type Etcd3, type IKeyValue, type Lease, type Namespace as EtcdNamespace, type Watcher } from 'etcd3';
import {
  type InstanceAddress,
  type InstanceId,
  type ModelName,
  instanceIdFromLease,
  instanceKey,
  modelKey,
} from './addressing.js';
import { AsyncChannel } from './async-channel.js';
import { type Discovery, type LeaseLostListener, type LeaseRestoredListener, type WatchEvent } from './discovery.js';
import { connectKeptLease, grantLease } from './kept-lease.js';
import { LeaseKeeper } from './lease-keeper.js';
import type { LeaseState } from './memory-discovery.js';
import type { InstanceInfo, ModelCard } from './protocols.js';
import { WatchState } from './watch-state.js';

export interface EtcdDiscoveryOptions {
  /** etcd client URL(s), e.g. `http://127.0.0.1:2379`; several separated by commas. */
  readonly url: string | readonly string[];
  /**
   * Optional etcd key prefix under which every key lives (etcd3 `namespace`); keys in WatchEvents are
   * reported without it. Meant for isolating tests or tenants sharing one etcd. Default: none.
   */
  readonly namespace?: string;
  /** Lease TTL (default DEFAULT_LEASE_TTL_MS / 1000 = 10 s). */
  readonly leaseTtlSeconds?: number;
  readonly logger?: Logger;
  /** Deadline of a connection attempt (ms, default 5000). */
  readonly dialTimeoutMs?: number;
}

/** How long to wait between snapshot attempts while etcd is unreachable during a resync. */
const RESYNC_RETRY_MS = 500;
/** How long to wait between attempts to restore a lost lease (grant, re-register) while etcd refuses. */
export const RECOVER_RETRY_MS = 500;
/** Longest wait for etcd to revoke the lease on close() (etcd unreachable: the keys expire with the TTL). */
const REVOKE_TIMEOUT_MS = 2000;

/** What the keeper last said about the current lease. */
type KeeperStatus = 'alive' | 'expired' | 'gone';

type RawItem =
  | { readonly kind: 'put'; readonly key: string; readonly value: unknown; readonly revision: number }
  | { readonly kind: 'delete'; readonly key: string; readonly revision: number }
  | { readonly kind: 'reconnected' }
  | { readonly kind: 'failed'; readonly error: unknown };

interface OpenWatch {
  readonly raw: AsyncChannel<RawItem>;
}

export class EtcdDiscovery implements Discovery {
  private leaseState: LeaseState = 'active';
  private readonly listeners = new Set<LeaseLostListener>();
  private readonly restoredListeners = new Set<LeaseRestoredListener>();
  private readonly modelKeys = new Map<ModelName, string>();
  private readonly watches = new Set<OpenWatch>();
  /** key → JSON text of every key this process registered (written again under a new lease). */
  private readonly owned = new Map<string, string>();
  /** Keys unregistered while the lease was lost: deleted on restore if the old lease survived. */
  private readonly pendingDeletes = new Set<string>();
  private keeperStatus: KeeperStatus = 'alive';
  private recovery: Promise<void> | undefined;
  private keeper!: LeaseKeeper;

  private constructor(
    private readonly client: Etcd3,
    private readonly kv: EtcdNamespace,
    private lease: Lease,
    /** The current lease (decimal); the instance id stays the first one's. */
    private leaseId: string,
    keeper: LeaseKeeper,
    readonly instanceId: InstanceId,
    private readonly ttl: number,
    private readonly keeperData: { hosts: readonly string[]; dialTimeoutMs: number },
    private readonly logger: Logger,
  ) {
    this.attachKeeper(keeper);
  }

  /**
   * Connect, grant the process lease and start its keep-alive thread; resolves once the thread's
   * first keep-alive is acknowledged. Fails `unavailable` if etcd is unreachable.
   */
  static async connect(options: EtcdDiscoveryOptions): Promise<EtcdDiscovery> {
    const logger = (options.logger ?? silentLogger).child({ component: 'etcd-discovery' });
    const { client, kv, lease, leaseId, keeper, ttlSeconds, keeperData } = await connectKeptLease({ ...options, ...(options.namespace ? { keyPrefix: options.namespace } : {}) });
    const id = instanceIdFromLease(BigInt(leaseId));
    logger.info({ instanceId: id, ttl: ttlSeconds }, 'etcd lease granted, kept alive by its own thread');
    return new EtcdDiscovery(client, kv, lease, leaseId, keeper, id, ttlSeconds, keeperData, logger);
  }

  get state(): LeaseState {
    return this.leaseState;
  }

  /** Diagnostic: when (ms epoch) etcd last acknowledged a keep-alive of this process's lease. */
  get lastKeepAlive(): number | undefined {
    return this.keeper.lastAliveAt;
  }

  async registerInstance(info: InstanceInfo): Promise<void> {
    this.checkActive();
    this.checkOwned(info.instanceId);
    await this.create(instanceKey(info), info);
  }

  async unregisterInstance(address: InstanceAddress): Promise<void> {
    await this.unregister(instanceKey(address));
  }

  async registerModel(card: ModelCard): Promise<void> {
    this.checkActive();
    this.checkOwned(card.instanceId);
    const key = modelKey(card.namespace, card.model, card.instanceId);
    await this.create(key, card);
    this.modelKeys.set(card.model, key);
  }

  async unregisterModel(model: ModelName): Promise<void> {
    const key = this.modelKeys.get(model);
    if (key === undefined) return;
    this.modelKeys.delete(model);
    await this.unregister(key);
  }

  watch(prefix: string, signal?: AbortSignal): AsyncIterable<WatchEvent> {
    const owner = this;
    return {
      [Symbol.asyncIterator]: async function* () {
        if (owner.leaseState === 'closed' || signal?.aborted) return;
        const open: OpenWatch = { raw: new AsyncChannel<RawItem>() };
        owner.watches.add(open);
        const onAbort = (): void => open.raw.end();
        signal?.addEventListener('abort', onAbort, { once: true });
        const state = new WatchState();
        let watcher: Watcher | null = null;
        /** Events at or below this revision are already in the consumer's view (snapshot). */
        let floor = 0;
        /** The highest revision seen (snapshot or event): the resumed etcd3 watcher continues after it. */
        let seen = 0;
        try {
          // Snapshot, resync, then a fresh watcher from snapshot revision + 1.
          const restart = async (): Promise<WatchEvent[] | null> => {
            const old = watcher;
            watcher = null;
            if (old) void old.cancel().catch(() => {});
            const snap = await owner.snapshotUntilDone(prefix, open);
            if (snap === null) return null;
            floor = snap.revision;
            seen = snap.revision;
            const w = await owner.openWatcher(prefix, snap.revision + 1, open.raw);
            if (open.raw.closed) {
              void w.cancel().catch(() => {});
              return null;
            }
            watcher = w;
            return state.resync(snap.values, snap.revision);
          };
          const first = await restart();
          if (first === null) return;
          yield* first;
          for (;;) {
            const r = await open.raw.next();
            if (r.done) return;
            const item = r.value;
            if (item.kind === 'put' || item.kind === 'delete') {
              seen = Math.max(seen, item.revision);
              if (item.revision <= floor) continue;
              const ev: WatchEvent =
                item.kind === 'put'
                  ? { type: 'put', key: item.key, value: item.value, revision: item.revision }
                  : { type: 'delete', key: item.key, revision: item.revision };
              const out = state.apply(ev);
              if (out) yield out;
            } else if (item.kind === 'reconnected') {
              // etcd3 resumed the watch itself; realign with a fresh snapshot, drop replays <= it.
              owner.logger.debug({ prefix }, 'etcd watch reconnected: resync');
              const snap = await owner.snapshotUntilDone(prefix, open);
              if (snap === null) return;
              if (snap.revision < seen) {
                // The store went back in time: an etcd that lost its data (revisions start again
                // at 1). The resumed watcher waits for a revision past what it saw, which may never
                // come: watch afresh from this snapshot.
                owner.logger.warn({ prefix, revision: snap.revision, seen }, 'etcd revision went backwards (etcd lost its data): watching afresh');
                const evs = await restart();
                if (evs === null) return;
                yield* evs;
                continue;
              }
              floor = snap.revision;
              seen = snap.revision;
              yield* state.resync(snap.values, snap.revision);
            } else {
              owner.logger.warn({ prefix, err: errorMessage(item.error) }, 'etcd watch failed: re-creating it');
              const evs = await restart();
              if (evs === null) return;
              yield* evs;
            }
          }
        } finally {
          signal?.removeEventListener('abort', onAbort);
          owner.watches.delete(open);
          open.raw.end();
          const w = watcher as Watcher | null;
          if (w) await w.cancel().catch(() => {});
        }
      },
    };
  }

  onLeaseLost(listener: LeaseLostListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  onLeaseRestored(listener: LeaseRestoredListener): () => void {
    this.restoredListeners.add(listener);
    return () => this.restoredListeners.delete(listener);
  }

  async close(): Promise<void> {
    if (this.leaseState === 'closed') return;
    const mayBeAlive = this.keeperStatus !== 'gone';
    this.leaseState = 'closed';
    this.listeners.clear();
    this.restoredListeners.clear();
    for (const w of [...this.watches]) w.raw.end();
    this.watches.clear();
    // Stop the keep-alives first, so that nothing renews the lease while (or after) it is revoked.
    await this.keeper.stop();
    if (mayBeAlive) {
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`no answer within ${REVOKE_TIMEOUT_MS} ms`)), REVOKE_TIMEOUT_MS);
      });
      try {
        await Promise.race([this.lease.revoke(), timeout]);
      } catch (err) {
        this.logger.warn({ instanceId: this.instanceId, err: errorMessage(err) }, 'etcd lease revoke failed (keys expire with the TTL)');
      } finally {
        clearTimeout(timer);
      }
    } else {
      this.lease.release();
    }
    // a recovery still running finds the state closed (or the client closed) and ends
    this.client.close();
  }

  // ---- internals ---------------------------------------------------------------------------------

  private async create(key: string, value: unknown): Promise<void> {
    const text = JSON.stringify(value);
    await this.write(key, text);
    this.owned.set(key, text);
    this.pendingDeletes.delete(key);
  }

  /**
   * Create-if-absent under the current lease; the same value under it is a no-op. `raw`: etcd's
   * errors are thrown as they are (the recovery loop tells "lease not found" apart itself).
   */
  private async write(key: string, text: string, raw = false): Promise<void> {
    let res;
    try {
      res = await this.kv
        .if(key, 'Create', '==', 0)
        .then(this.kv.put(key).value(text).lease(this.leaseId))
        .else(this.kv.get(key))
        .commit();
    } catch (err) {
      throw raw ? err : this.mapError(err, `register '${key}'`);
    }
    if (res.succeeded) return;
    const kv = res.responses[0]?.response_range?.kvs[0];
    if (kv && kv.value.toString() === text && String(kv.lease) === this.leaseId) return;
    throw alreadyExists(`key '${key}' is already registered`);
  }

  private async unregister(key: string): Promise<void> {
    if (this.leaseState === 'closed') return;
    this.owned.delete(key);
    if (this.leaseState === 'lost') {
      // etcd may be unreachable; the key goes with a lease that is gone, or on restore if it survived
      this.pendingDeletes.add(key);
      return;
    }
    await this.deleteOwned(key);
  }

  private async deleteOwned(key: string, raw = false): Promise<void> {
    try {
      await this.kv.if(key, 'Lease', '==', this.leaseId).then(this.kv.delete().key(key)).commit();
    } catch (err) {
      throw raw ? err : this.mapError(err, `unregister '${key}'`);
    }
  }

  /** A consistent read of the prefix: its values and the store revision of the read. */
  private async snapshot(prefix: string): Promise<{ values: Map<string, unknown>; revision: number }> {
    const res = await this.kv.getAll().prefix(prefix).exec();
    const values = new Map<string, unknown>();
    for (const kv of res.kvs) {
      const parsed = parseValue(kv);
      if (parsed.ok) values.set(kv.key.toString(), parsed.value);
      else this.logger.warn({ key: kv.key.toString() }, 'etcd value is not JSON: skipped');
    }
    return { values, revision: Number(res.header.revision) };
  }

  /** Retry the snapshot while etcd is unreachable; null when the watch ended meanwhile. */
  private async snapshotUntilDone(prefix: string, open: OpenWatch): Promise<{ values: Map<string, unknown>; revision: number } | null> {
    for (;;) {
      if (open.raw.closed) return null;
      try {
        return await this.snapshot(prefix);
      } catch (err) {
        if (open.raw.closed) return null;
        this.logger.warn({ prefix, err: errorMessage(err) }, 'etcd snapshot failed: retrying');
        await new Promise((r) => setTimeout(r, RESYNC_RETRY_MS));
      }
    }
  }

  private async openWatcher(prefix: string, startRevision: number, raw: AsyncChannel<RawItem>): Promise<Watcher> {
    const w = await this.kv.watch().prefix(prefix).startRevision(String(startRevision)).create();
    let disconnected = false;
    w.on('put', (kv) => {
      const parsed = parseValue(kv);
      if (!parsed.ok) {
        this.logger.warn({ key: kv.key.toString() }, 'etcd value is not JSON: skipped');
        return;
      }
      raw.push({ kind: 'put', key: kv.key.toString(), value: parsed.value, revision: Number(kv.mod_revision) });
    });
    w.on('delete', (kv) => raw.push({ kind: 'delete', key: kv.key.toString(), revision: Number(kv.mod_revision) }));
    w.on('disconnected', () => {
      disconnected = true;
    });
    w.on('connected', () => {
      if (!disconnected) return;
      disconnected = false;
      raw.push({ kind: 'reconnected' });
    });
    w.on('error', (error) => raw.push({ kind: 'failed', error }));
    return w;
  }

  // ---- lease recovery ----------------------------------------------------------------------------

  private attachKeeper(keeper: LeaseKeeper): void {
    this.keeper = keeper;
    keeper.events = {
      onAlive: () => {
        if (this.keeper !== keeper) return;
        this.keeperStatus = 'alive';
        if (this.leaseState === 'lost') this.recover();
      },
      onExpired: (reason) => {
        if (this.keeper !== keeper) return;
        this.keeperStatus = 'expired';
        this.markLost(reason);
      },
      onGone: (reason) => {
        if (this.keeper !== keeper) return;
        this.keeperStatus = 'gone';
        this.markLost(reason);
        this.recover();
      },
      onDead: (reason) => {
        if (this.keeper !== keeper || this.leaseState === 'closed') return;
        // A bug, not an outage: keep the same lease alive from a new thread.
        this.logger.error({ instanceId: this.instanceId, reason }, 'etcd lease keeper thread died: starting another');
        this.keeperStatus = 'expired';
        this.markLost(reason);
        this.attachKeeper(LeaseKeeper.spawn({ ...this.keeperData, ttlSeconds: this.ttl }));
        this.keeper.start(this.leaseId, keeper.lastAliveAt ?? Date.now());
      },
    };
  }

  private markLost(reason: string): void {
    if (this.leaseState !== 'active') return;
    this.leaseState = 'lost';
    this.logger.warn({ instanceId: this.instanceId, reason }, 'etcd lease lost: still serving; registering again once etcd answers');
    const cause = unavailable(`lease ${this.instanceId} lost: ${reason}`);
    for (const l of [...this.listeners]) {
      try {
        l(cause);
      } catch (e) {
        this.logger.error({ err: errorMessage(e) }, 'lease-lost listener threw');
      }
    }
  }

  /** Start the recovery loop unless it runs. It ends `active` again, or when it must wait for the keeper. */
  private recover(): void {
    if (this.recovery !== undefined || this.leaseState !== 'lost') return;
    this.recovery = this.recoverLoop()
      .catch((e: unknown) => this.logger.error({ err: errorMessage(e) }, 'etcd lease recovery failed'))
      .finally(() => {
        this.recovery = undefined;
        // the keeper spoke while the loop was finishing
        if (this.leaseState === 'lost' && this.keeperStatus !== 'expired') this.recover();
      });
  }

  private async recoverLoop(): Promise<void> {
    for (let failures = 0; this.leaseState === 'lost'; failures++) {
      if (this.keeperStatus === 'expired') return; // etcd unreachable: the keeper says when it answers
      try {
        if (this.keeperStatus === 'gone') await this.grantNewLease();
        // The lease is alive: make etcd hold exactly what this process registered.
        for (const key of [...this.pendingDeletes]) {
          await this.deleteOwned(key, true);
          this.pendingDeletes.delete(key);
        }
        for (const [key, text] of [...this.owned]) {
          try {
            await this.write(key, text, true);
          } catch (err) {
            if (!(err instanceof SwitchyardError && err.code === 'already_exists')) throw err;
            // someone else holds the key now: it is theirs (never expected: keys carry our instance id)
            this.owned.delete(key);
            this.logger.error({ instanceId: this.instanceId, key }, 'etcd lease recovery: the key is held by another lease; not registered again');
          }
        }
        if ((this.leaseState as LeaseState) === 'closed' || this.keeperStatus !== 'alive') continue;
        this.leaseState = 'active';
        this.logger.info({ instanceId: this.instanceId, lease: BigInt(this.leaseId).toString(16), keys: this.owned.size }, 'etcd lease restored: registrations written again');
        for (const l of [...this.restoredListeners]) {
          try {
            l();
          } catch (e) {
            this.logger.error({ err: errorMessage(e) }, 'lease-restored listener threw');
          }
        }
        return;
      } catch (err) {
        if ((this.leaseState as LeaseState) === 'closed') return;
        if (err instanceof EtcdLeaseInvalidError) this.keeperStatus = 'gone';
        if (failures === 0 || failures % 20 === 0) {
          this.logger.warn({ instanceId: this.instanceId, err: errorMessage(err), attempt: failures + 1 }, 'etcd lease recovery: retrying');
        }
        await new Promise((r) => setTimeout(r, RECOVER_RETRY_MS));
      }
    }
  }

  /** Grant a lease to replace the gone one and have the keeper acknowledge it. Throws on failure. */
  private async grantNewLease(): Promise<void> {
    const { lease, leaseId, grantedAt } = await grantLease(this.kv, this.ttl);
    if ((this.leaseState as LeaseState) === 'closed') {
      await lease.revoke().catch(() => {});
      return;
    }
    this.lease.release();
    this.lease = lease;
    this.leaseId = leaseId;
    // the old lease's keys went with it; nothing left to delete
    this.pendingDeletes.clear();
    this.keeper.start(leaseId, grantedAt);
    await this.keeper.firstAck(this.ttl * 1000);
    this.keeperStatus = 'alive';
  }

  private mapError(err: unknown, what: string): Error {
    if (err instanceof EtcdLeaseInvalidError) {
      if (this.leaseState === 'active') {
        this.keeperStatus = 'gone';
        this.markLost(errorMessage(err));
        this.recover();
      }
      return unavailable(`${what}: lease ${this.instanceId} is lost`);
    }
    return unavailable(`${what}: etcd: ${errorMessage(err)}`);
  }

  private checkActive(): void {
    if (this.leaseState !== 'active') throw unavailable(`lease ${this.instanceId} is ${this.leaseState}`);
  }

  private checkOwned(id: InstanceId): void {
    if (id !== this.instanceId) {
      throw invalidArgument(`instance id ${id} is not this process's lease ${this.instanceId}`);
    }
  }
}

function parseValue(kv: IKeyValue): { ok: true; value: unknown } | { ok: false } {
  try {
    return { ok: true, value: JSON.parse(kv.value.toString()) as unknown };
  } catch {
    return { ok: false };
  }
}
