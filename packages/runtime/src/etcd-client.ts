/**
 * The etcd3 client as this package uses it: tuned so that the cluster is whole again within seconds
 * of an etcd outage ending, however long the outage was. etcd3's defaults are made for short blips:
 *
 * - a **circuit breaker per host** refuses every call for 5 s after 3 consecutive failures, so the
 *   first calls after etcd returns may still be refused. Here calls always go through: the callers
 *   (snapshot retries, the lease keeper, the lease recovery loop) pace themselves.
 * - the **watch reconnect backoff** grows to 30 s (cockatiel's ExponentialBackoff), so after a long
 *   outage a watcher may reconnect half a minute after etcd is back. Here: 100 ms doubling to 1 s.
 * - **gRPC's reconnect backoff** grows to 120 s (grpc-js), the same problem one layer down. Here:
 *   250 ms growing to 1 s.
 *
 * The lease keeper thread (worker/lease-keeper-thread.mjs) builds its client with the same host
 * policy and gRPC options (it cannot import this file: keep the two alike).
 */
import { Etcd3, type IOptions } from 'etcd3';

/** Largest wait between two watch reconnect attempts (ms). */
export const WATCH_BACKOFF_MAX_MS = 1000;
const WATCH_BACKOFF_FIRST_MS = 100;

type FaultHandling = NonNullable<IOptions['faultHandling']>;
type HostPolicy = ReturnType<NonNullable<FaultHandling['host']>>;
type WatchBackoff = NonNullable<FaultHandling['watchBackoff']>;

/** A host policy that runs every call (no circuit breaker). */
const passThrough = {
  _altReturn: undefined as never,
  onSuccess: () => ({ dispose(): void {} }),
  onFailure: () => ({ dispose(): void {} }),
  execute: async <T>(fn: (context: { signal: AbortSignal }) => PromiseLike<T> | T, signal?: AbortSignal): Promise<T> =>
    fn({ signal: signal ?? new AbortController().signal }),
} as unknown as HostPolicy;

/** Backoff `n` of the watch manager: 100 ms, 200 ms, ... capped at WATCH_BACKOFF_MAX_MS. */
function watchBackoff(n: number): WatchBackoff {
  return { duration: Math.min(WATCH_BACKOFF_MAX_MS, WATCH_BACKOFF_FIRST_MS * 2 ** n), next: () => watchBackoff(n + 1) };
}

export function etcdClientOptions(hosts: readonly string[], dialTimeoutMs: number): IOptions {
  return {
    hosts: [...hosts],
    dialTimeout: dialTimeoutMs,
    grpcOptions: { 'grpc.initial_reconnect_backoff_ms': 250, 'grpc.max_reconnect_backoff_ms': 1000 },
    // the watch manager takes `next()` of this as its first backoff
    faultHandling: { host: () => passThrough, watchBackoff: watchBackoff(-1) },
  };
}

export function createEtcdClient(hosts: readonly string[], dialTimeoutMs: number): Etcd3 {
  return new Etcd3(etcdClientOptions(hosts, dialTimeoutMs));
}
