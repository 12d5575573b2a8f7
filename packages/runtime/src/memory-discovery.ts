/**
 * In-memory Discovery: `MemoryDiscoveryStore` plays etcd (keys, revisions, leases, watches) for every
 * "process" of a test or of the standalone worker; each `MemoryDiscovery` is one process's client with
 * its own lease. Semantics follow the etcd implementation: create-if-absent registration, one lease
 * whose loss deletes every key of the process, snapshot-then-watch, resync after a (simulated)
 * reconnect. Values are copied through JSON so nobody shares objects with the store.
 */
import { alreadyExists, invalidArgument, unavailable } from '@switchyard/common';
import {
  type InstanceAddress,
  type InstanceId,
  type ModelName,
  instanceIdFromLease,
  instanceKey,
  modelKey,
} from './addressing.js';
import { AsyncChannel } from './async-channel.js';
import type { Discovery, LeaseLostListener, LeaseRestoredListener, WatchEvent } from './discovery.js';
import type { InstanceInfo, ModelCard } from './protocols.js';
import { WatchState } from './watch-state.js';

interface Entry {
  readonly text: string;
  readonly lease: InstanceId;
}

interface Watcher {
  readonly prefix: string;
  readonly state: WatchState;
  readonly channel: AsyncChannel<WatchEvent>;
  readonly owner: MemoryDiscovery;
}

/** The shared store (etcd stand-in). */
export class MemoryDiscoveryStore {
  private readonly entries = new Map<string, Entry>();
  private readonly watchers = new Set<Watcher>();
  private revision = 0;
  private nextLease = 1n;
  /** Watches are disconnected (test hook): events are not delivered until `reconnectWatches`. */
  private disconnected = false;

  /** Join the cluster as a new process: grants a lease. */
  connect(): MemoryDiscovery {
    return new MemoryDiscovery(this, instanceIdFromLease(this.nextLease++));
  }

  /** Current keys and values under a prefix (for assertions). */
  snapshot(prefix = ''): Map<string, unknown> {
    const out = new Map<string, unknown>();
    for (const [k, e] of this.entries) if (k.startsWith(prefix)) out.set(k, JSON.parse(e.text) as unknown);
    return out;
  }

  /** Test hook: watch streams break (as on an etcd connection loss); changes go unseen. */
  disconnectWatches(): void {
    this.disconnected = true;
  }

  /** Test hook: watch streams reconnect; each watcher resyncs against a fresh snapshot. */
  reconnectWatches(): void {
    this.disconnected = false;
    for (const w of this.watchers) {
      for (const ev of w.state.resync(this.snapshot(w.prefix), this.revision)) w.channel.push(ev);
    }
  }

  /** @internal create-if-absent, or validate-equal. */
  create(key: string, value: unknown, lease: InstanceId): void {
    const text = JSON.stringify(value);
    const existing = this.entries.get(key);
    if (existing) {
      if (existing.text === text && existing.lease === lease) return;
      throw alreadyExists(`key '${key}' is already registered`);
    }
    this.entries.set(key, { text, lease });
    this.emit({ type: 'put', key, value: JSON.parse(text) as unknown, revision: ++this.revision });
  }

  /** @internal */
  delete(key: string, lease: InstanceId): void {
    const existing = this.entries.get(key);
    if (!existing || existing.lease !== lease) return;
    this.entries.delete(key);
    this.emit({ type: 'delete', key, revision: ++this.revision });
  }

  /** @internal drop every key of a lease (expiry or revoke): one revision for all, as etcd's revoke txn. */
  dropLease(lease: InstanceId): void {
    const keys = [...this.entries].filter(([, e]) => e.lease === lease).map(([key]) => key);
    if (keys.length === 0) return;
    const revision = ++this.revision;
    for (const key of keys) {
      this.entries.delete(key);
      this.emit({ type: 'delete', key, revision });
    }
  }

  /** @internal snapshot + register, atomically (nothing can happen in between). */
  openWatch(prefix: string, owner: MemoryDiscovery): Watcher {
    const w: Watcher = { prefix, state: new WatchState(), channel: new AsyncChannel<WatchEvent>(), owner };
    for (const ev of w.state.resync(this.snapshot(prefix), this.revision)) w.channel.push(ev);
    this.watchers.add(w);
    return w;
  }

  /** @internal */
  closeWatch(w: Watcher): void {
    this.watchers.delete(w);
    w.channel.end();
  }

  /** @internal */
  closeWatchesOf(owner: MemoryDiscovery): void {
    for (const w of [...this.watchers]) if (w.owner === owner) this.closeWatch(w);
  }

  private emit(ev: WatchEvent & { key: string }): void {
    if (this.disconnected) return;
    for (const w of this.watchers) {
      if (!ev.key.startsWith(w.prefix)) continue;
      const out = w.state.apply(ev);
      if (out) w.channel.push(out);
    }
  }
}

/**
 * Lease lifecycle of one process:
 * - `active`: registrations allowed;
 * - `lost`: the lease expired or cannot be vouched for; registrations fail unavailable, watches go on.
 *   Back to `active` once the lease is restored (the same instance id, every key written again);
 * - `closed`: `close()` revoked the lease and ended the watches. Terminal.
 */
export type LeaseState = 'active' | 'lost' | 'closed';

/** One process's Discovery client over a MemoryDiscoveryStore. */
export class MemoryDiscovery implements Discovery {
  private leaseState: LeaseState = 'active';
  private readonly listeners = new Set<LeaseLostListener>();
  private readonly restoredListeners = new Set<LeaseRestoredListener>();
  /** key → value of every key this process registered (written again by `restoreLease`). */
  private readonly owned = new Map<string, unknown>();
  /** Keys this process registered, for unregister by address/model. */
  private readonly modelKeys = new Map<ModelName, string>();

  constructor(
    private readonly store: MemoryDiscoveryStore,
    readonly instanceId: InstanceId,
  ) {}

  get state(): LeaseState {
    return this.leaseState;
  }

  async registerInstance(info: InstanceInfo): Promise<void> {
    this.checkActive();
    this.checkOwned(info.instanceId);
    this.store.create(instanceKey(info), info, this.instanceId);
    this.owned.set(instanceKey(info), info);
  }

  async unregisterInstance(address: InstanceAddress): Promise<void> {
    this.owned.delete(instanceKey(address));
    this.store.delete(instanceKey(address), this.instanceId);
  }

  async registerModel(card: ModelCard): Promise<void> {
    this.checkActive();
    this.checkOwned(card.instanceId);
    const key = modelKey(card.namespace, card.model, card.instanceId);
    this.store.create(key, card, this.instanceId);
    this.owned.set(key, card);
    this.modelKeys.set(card.model, key);
  }

  async unregisterModel(model: ModelName): Promise<void> {
    const key = this.modelKeys.get(model);
    if (key === undefined) return;
    this.modelKeys.delete(model);
    this.owned.delete(key);
    this.store.delete(key, this.instanceId);
  }

  watch(prefix: string, signal?: AbortSignal): AsyncIterable<WatchEvent> {
    const store = this.store;
    const owner = this;
    return {
      [Symbol.asyncIterator]: async function* () {
        if (owner.leaseState === 'closed') return;
        if (signal?.aborted) return;
        const w = store.openWatch(prefix, owner);
        const onAbort = (): void => store.closeWatch(w);
        signal?.addEventListener('abort', onAbort, { once: true });
        try {
          for (;;) {
            const r = await w.channel.next();
            if (r.done) return;
            yield r.value;
          }
        } finally {
          signal?.removeEventListener('abort', onAbort);
          store.closeWatch(w);
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
    this.leaseState = 'closed';
    this.store.dropLease(this.instanceId);
    this.store.closeWatchesOf(this);
    this.listeners.clear();
    this.restoredListeners.clear();
  }

  /** Test hook: the lease expires (keep-alives failed for a TTL): keys vanish, listeners hear about it. */
  expireLease(): void {
    if (this.leaseState !== 'active') return;
    this.leaseState = 'lost';
    this.store.dropLease(this.instanceId);
    const cause = unavailable(`lease ${this.instanceId} expired`);
    for (const l of [...this.listeners]) l(cause);
  }

  /**
   * Test hook: etcd answers again after `expireLease`: a new lease, every key this process still
   * holds written again under the same instance id, then the restored listeners.
   */
  restoreLease(): void {
    if (this.leaseState !== 'lost') return;
    for (const [key, value] of this.owned) this.store.create(key, value, this.instanceId);
    this.leaseState = 'active';
    for (const l of [...this.restoredListeners]) l();
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
