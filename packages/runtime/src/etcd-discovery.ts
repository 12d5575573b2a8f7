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
 * main loop therefore cannot let a healthy process's lease expire. The keeper reports `lost` when etcd
 * answers TTL 0 or no keep-alive was acknowledged for longer than the TTL; that (or a transaction
 * failing with "lease not found") fires `onLeaseLost`, and the loss is terminal, as before.
 */
import { alreadyExists, invalidArgument, silentLogger, unavailable, type Logger } from '@switchyard/common';
import { Etcd3, EtcdLeaseInvalidError, type IKeyValue, type Lease, type Namespace as EtcdNamespace, type Watcher } from 'etcd3';
import {
  type InstanceAddress,
  type InstanceId,
  type ModelName,
  instanceIdFromLease,
  instanceKey,
  modelKey,
} from './addressing.js';
import { AsyncChannel } from './async-channel.js';
import { DEFAULT_LEASE_TTL_MS, type Discovery, type LeaseLostListener, type WatchEvent } from './discovery.js';
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
  private readonly modelKeys = new Map<ModelName, string>();
  private readonly watches = new Set<OpenWatch>();

  private constructor(
    private readonly client: Etcd3,
    private readonly kv: EtcdNamespace,
    private readonly lease: Lease,
    private readonly leaseId: string,
    private readonly keeper: LeaseKeeper,
    readonly instanceId: InstanceId,
    private readonly logger: Logger,
  ) {
    keeper.events = { onLost: (reason) => this.handleLost(new Error(reason)) };
  }

  /**
   * Connect, grant the process lease and start its keep-alive thread; resolves once the thread's
   * first keep-alive is acknowledged. Fails `unavailable` if etcd is unreachable.
   */
  static async connect(options: EtcdDiscoveryOptions): Promise<EtcdDiscovery> {
    const ttl = options.leaseTtlSeconds ?? DEFAULT_LEASE_TTL_MS / 1000;
    if (!Number.isInteger(ttl) || ttl < 1) throw invalidArgument(`leaseTtlSeconds must be an integer >= 1, got ${ttl}`);
    const hosts = typeof options.url === 'string' ? options.url.split(',').map((s) => s.trim()) : [...options.url];
    if (hosts.length === 0 || hosts.some((h) => h.length === 0)) throw invalidArgument(`invalid etcd url '${String(options.url)}'`);
    const logger = (options.logger ?? silentLogger).child({ component: 'etcd-discovery' });
    const dialTimeoutMs = options.dialTimeoutMs ?? 5000;
    const client = new Etcd3({ hosts, dialTimeout: dialTimeoutMs });
    const kv = options.namespace ? client.namespace(options.namespace) : client;
    // The thread boots (loads etcd3, dials) while the lease is granted.
    const keeper = LeaseKeeper.spawn({ hosts, dialTimeoutMs, ttlSeconds: ttl });
    const grantedAt = Date.now();
    // No etcd3 keep-alive: the keeper thread does it. Without it the Lease emits 'lost' only for a
    // failed grant, which grant() reports here as well.
    const lease = kv.lease(ttl, { autoKeepAlive: false });
    let leaseId: string;
    try {
      leaseId = await lease.grant();
    } catch (err) {
      await keeper.stop();
      client.close();
      throw unavailable(`etcd lease grant failed at ${hosts.join(',')}: ${errorMessage(err)}`);
    }
    const id = instanceIdFromLease(BigInt(leaseId));
    keeper.start(leaseId, grantedAt);
    try {
      await keeper.firstAck(ttl * 1000);
    } catch (err) {
      await keeper.stop();
      await lease.revoke().catch(() => {});
      client.close();
      throw unavailable(`etcd lease ${id}: keep-alive thread failed: ${errorMessage(err)}`);
    }
    logger.info({ instanceId: id, ttl }, 'etcd lease granted, kept alive by its own thread');
    return new EtcdDiscovery(client, kv, lease, leaseId, keeper, id, logger);
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
    await this.deleteOwned(instanceKey(address));
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
    await this.deleteOwned(key);
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
        try {
          // Snapshot, resync, then a fresh watcher from snapshot revision + 1.
          const restart = async (): Promise<WatchEvent[] | null> => {
            const old = watcher;
            watcher = null;
            if (old) void old.cancel().catch(() => {});
            const snap = await owner.snapshotUntilDone(prefix, open);
            if (snap === null) return null;
            floor = snap.revision;
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
              floor = Math.max(floor, snap.revision);
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

  async close(): Promise<void> {
    if (this.leaseState === 'closed') return;
    const wasActive = this.leaseState === 'active';
    this.leaseState = 'closed';
    this.listeners.clear();
    for (const w of [...this.watches]) w.raw.end();
    this.watches.clear();
    // Stop the keep-alives first, so that nothing renews the lease while (or after) it is revoked.
    await this.keeper.stop();
    if (wasActive) {
      try {
        await this.lease.revoke();
      } catch (err) {
        this.logger.warn({ instanceId: this.instanceId, err: errorMessage(err) }, 'etcd lease revoke failed (keys expire with the TTL)');
      }
    } else {
      this.lease.release();
    }
    this.client.close();
  }

  // ---- internals ---------------------------------------------------------------------------------

  private async create(key: string, value: unknown): Promise<void> {
    const text = JSON.stringify(value);
    let res;
    try {
      res = await this.kv
        .if(key, 'Create', '==', 0)
        .then(this.kv.put(key).value(text).lease(this.leaseId))
        .else(this.kv.get(key))
        .commit();
    } catch (err) {
      throw this.mapError(err, `register '${key}'`);
    }
    if (res.succeeded) return;
    const kv = res.responses[0]?.response_range?.kvs[0];
    if (kv && kv.value.toString() === text && String(kv.lease) === this.leaseId) return;
    throw alreadyExists(`key '${key}' is already registered`);
  }

  private async deleteOwned(key: string): Promise<void> {
    if (this.leaseState === 'closed') return;
    try {
      await this.kv.if(key, 'Lease', '==', this.leaseId).then(this.kv.delete().key(key)).commit();
    } catch (err) {
      throw this.mapError(err, `unregister '${key}'`);
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

  private handleLost(err: unknown): void {
    if (this.leaseState !== 'active') return;
    this.leaseState = 'lost';
    void this.keeper.stop();
    this.logger.warn({ instanceId: this.instanceId, err: errorMessage(err) }, 'etcd lease lost');
    const cause = unavailable(`lease ${this.instanceId} lost: ${errorMessage(err)}`);
    for (const l of [...this.listeners]) {
      try {
        l(cause);
      } catch (e) {
        this.logger.error({ err: errorMessage(e) }, 'lease-lost listener threw');
      }
    }
  }

  private mapError(err: unknown, what: string): Error {
    if (err instanceof EtcdLeaseInvalidError) {
      this.handleLost(err);
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

function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
