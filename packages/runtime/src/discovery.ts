/**
 * The Discovery role: who serves what. One per process, holding the process's one lease (etcd: TTL
 * 10 s, keep-alive every TTL/3). Everything registered lives under that lease, so when the process
 * dies or loses the lease, all of its keys vanish together.
 *
 * Losing the lease is not the end: an etcd outage longer than the TTL loses every lease of the
 * cluster at once, while the request plane still works. The Discovery keeps trying and, once etcd
 * answers, resumes the lease (if it survived) or takes a new one, and writes every registration again
 * under it, with the same instance id (`onLeaseRestored`).
 */
import type { InstanceAddress, InstanceId, ModelName } from './addressing.js';
import type { InstanceInfo, ModelCard } from './protocols.js';

export const DEFAULT_LEASE_TTL_MS = 10_000;

/**
 * One change under a watched prefix. `value` is parsed JSON; decode it with `decodeInstanceInfo` /
 * `decodeModelCard` after `parseKey(key)` says which it is.
 * `synced` marks the end of a snapshot: after it the consumer's view equals the store's (at start,
 * and again after a resync following a reconnect).
 */
export type WatchEvent =
  | { readonly type: 'put'; readonly key: string; readonly value: unknown; readonly revision: number }
  | {
      readonly type: 'delete';
      readonly key: string;
      readonly revision: number;
      /**
       * true: the key was missing from the fresh snapshot of a resync (after a reconnect), not seen
       * deleted live. It went while the watch was away — or etcd lost its data, and its owner is
       * about to register it again (a consumer may give it a moment before acting on it).
       */
      readonly resync?: true;
    }
  | { readonly type: 'synced'; readonly revision: number };

/** Why the lease is gone: it expired (keep-alives failed) or was revoked from outside. */
export type LeaseLostListener = (cause: Error) => void;
/** The process is registered again (same instance id, every key it held) under a live lease. */
export type LeaseRestoredListener = () => void;

export interface Discovery {
  /**
   * This process's instance id (its first lease's id in hex). Constant for the object's life, also
   * when a lost lease is replaced by a new one: keys, subjects and routing state stay valid.
   */
  readonly instanceId: InstanceId;

  /**
   * Called by a worker once an endpoint is being served (after `RequestPlane.serve`), so routers never
   * see an instance that cannot answer yet. Create-if-absent: already_exists when the key holds a
   * different value; registering the same value again is a no-op. unavailable while the lease is lost
   * (register again after `onLeaseRestored`).
   */
  registerInstance(info: InstanceInfo): Promise<void>;
  /**
   * Called when a worker stops serving an endpoint (drain starts). Absent keys are not an error. While
   * the lease is lost this does not wait for etcd: the key is not written again on restore.
   */
  unregisterInstance(address: InstanceAddress): Promise<void>;

  /** Called by a worker after its model is ready and its endpoint registered. Same rules as above. */
  registerModel(card: ModelCard): Promise<void>;
  unregisterModel(model: ModelName): Promise<void>;

  /**
   * Called by routers (and planners) at start. Yields the current keys under `prefix` as puts, then
   * `synced`, then every later put/delete in revision order. After a reconnect the implementation
   * resyncs by diffing a fresh snapshot against what it has yielded (deletes for vanished keys, puts for
   * new or changed ones, then `synced`), so consumers never see a gap. Ends when `signal` aborts or the
   * discovery is closed.
   */
  watch(prefix: string, signal?: AbortSignal): AsyncIterable<WatchEvent>;

  /**
   * The lease can no longer be vouched for (etcd unreachable for longer than the TTL) or is gone
   * (expired, revoked): routers may drop this process's keys, and registrations fail `unavailable`
   * until `onLeaseRestored`. The process keeps serving (requests still reach it over the request
   * plane from routers that know it). Called once per loss. Returns unsubscribe.
   */
  onLeaseLost(listener: LeaseLostListener): () => void;

  /**
   * After a loss: the process holds a live lease again and every key it had registered (and not
   * unregistered meanwhile) is back in discovery. Registrations that failed meanwhile must be retried
   * by their callers now. Returns unsubscribe.
   */
  onLeaseRestored(listener: LeaseRestoredListener): () => void;

  /** Graceful leave: revoke the lease (all keys vanish at once) and end every watch. Idempotent. */
  close(): Promise<void>;
}
