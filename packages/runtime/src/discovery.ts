/**
 * The Discovery role: who serves what. One per process, holding the process's one lease (etcd: TTL
 * 10 s, keep-alive every 5 s). Everything registered lives under that lease, so when the process dies
 * or loses the lease, all of its keys vanish together.
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
  | { readonly type: 'delete'; readonly key: string; readonly revision: number }
  | { readonly type: 'synced'; readonly revision: number };

/** Why the lease is gone: it expired (keep-alives failed) or was revoked from outside. */
export type LeaseLostListener = (cause: Error) => void;

export interface Discovery {
  /** This process's instance id (its lease id in hex). Constant for the object's life. */
  readonly instanceId: InstanceId;

  /**
   * Called by a worker once an endpoint is being served (after `RequestPlane.serve`), so routers never
   * see an instance that cannot answer yet. Create-if-absent: already_exists when the key holds a
   * different value; registering the same value again is a no-op. unavailable after the lease is lost.
   */
  registerInstance(info: InstanceInfo): Promise<void>;
  /** Called when a worker stops serving an endpoint (drain starts). Absent keys are not an error. */
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
   * The lease is gone and this process is no longer part of the cluster: its keys are deleted and
   * further registrations fail. Apps shut down (or re-join with a new Discovery). Returns unsubscribe.
   */
  onLeaseLost(listener: LeaseLostListener): () => void;

  /** Graceful leave: revoke the lease (all keys vanish at once) and end every watch. Idempotent. */
  close(): Promise<void>;
}
