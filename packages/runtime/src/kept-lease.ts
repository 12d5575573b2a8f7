/**
 * `connectKeptLease`: the one way this package opens an etcd connection that holds a lease: parse the
 * endpoints, dial, grant the lease and have a `LeaseKeeper` thread keep it alive, resolving once the
 * thread's first keep-alive is acknowledged. Discovery (one lease per process) and leader election
 * (one lease per candidate) both start this way; `grantLease` replaces a lease that etcd has forgotten.
 */
import { errorMessage, invalidArgument, unavailable } from '@switchyard/common';
import type { Etcd3, Lease, Namespace as EtcdNamespace } from 'etcd3';
import { DEFAULT_LEASE_TTL_MS } from './discovery.js';
import { createEtcdClient } from './etcd-client.js';
import { LeaseKeeper } from './lease-keeper.js';

export interface KeptLeaseOptions {
  /** etcd endpoint(s): a comma-separated string or a list. */
  readonly url: string | readonly string[];
  /** Lease TTL (default DEFAULT_LEASE_TTL_MS / 1000 = 10 s); an integer >= 1. */
  readonly leaseTtlSeconds?: number;
  /** Deadline of a connection attempt (ms, default 5000). */
  readonly dialTimeoutMs?: number;
  /** Key prefix every read and write of `kv` is under (none by default). */
  readonly keyPrefix?: string;
}

export interface KeptLease {
  readonly client: Etcd3;
  readonly kv: Etcd3 | EtcdNamespace;
  readonly lease: Lease;
  /** Decimal lease id. */
  readonly leaseId: string;
  readonly keeper: LeaseKeeper;
  readonly ttlSeconds: number;
  /** What another `LeaseKeeper.spawn` for this lease needs (a keeper thread that died is replaced). */
  readonly keeperData: { readonly hosts: readonly string[]; readonly dialTimeoutMs: number };
}

/** The lease TTL of `options`, checked: invalid_argument unless an integer >= 1. */
export function leaseTtlSeconds(options: Pick<KeptLeaseOptions, 'leaseTtlSeconds'>): number {
  const ttl = options.leaseTtlSeconds ?? DEFAULT_LEASE_TTL_MS / 1000;
  if (!Number.isInteger(ttl) || ttl < 1) throw invalidArgument(`leaseTtlSeconds must be an integer >= 1, got ${ttl}`);
  return ttl;
}

/**
 * Connect and hold a kept-alive lease. Fails invalid_argument on bad options, `unavailable` when etcd
 * does not grant the lease or the keeper thread's first keep-alive fails; nothing is left open then.
 */
export async function connectKeptLease(options: KeptLeaseOptions): Promise<KeptLease> {
  const ttlSeconds = leaseTtlSeconds(options);
  const hosts = typeof options.url === 'string' ? options.url.split(',').map((s) => s.trim()) : [...options.url];
  if (hosts.length === 0 || hosts.some((h) => h.length === 0)) throw invalidArgument(`invalid etcd url '${String(options.url)}'`);
  const dialTimeoutMs = options.dialTimeoutMs ?? 5000;
  const client = createEtcdClient(hosts, dialTimeoutMs);
  const kv = options.keyPrefix ? client.namespace(options.keyPrefix) : client;
  // The thread boots (loads etcd3, dials) while the lease is granted.
  const keeper = LeaseKeeper.spawn({ hosts, dialTimeoutMs, ttlSeconds });
  let granted: { lease: Lease; leaseId: string; grantedAt: number };
  try {
    granted = await grantLease(kv, ttlSeconds);
  } catch (err) {
    await keeper.stop();
    client.close();
    throw unavailable(`etcd lease grant failed at ${hosts.join(',')}: ${errorMessage(err)}`);
  }
  const { lease, leaseId, grantedAt } = granted;
  keeper.start(leaseId, grantedAt);
  try {
    await keeper.firstAck(ttlSeconds * 1000);
  } catch (err) {
    await keeper.stop();
    await lease.revoke().catch(() => {});
    client.close();
    throw unavailable(`etcd lease ${leaseId}: keep-alive thread failed: ${errorMessage(err)}`);
  }
  return { client, kv, lease, leaseId, keeper, ttlSeconds, keeperData: { hosts, dialTimeoutMs } };
}

/**
 * Grant a lease of `ttlSeconds` kept alive by no one yet (the caller starts its keeper with
 * `leaseId` and `grantedAt`). No etcd3 keep-alive: the keeper thread does it; without it the Lease
 * emits 'lost' only for a failed grant, which this reports as well. Throws what etcd3 throws.
 */
export async function grantLease(kv: Etcd3 | EtcdNamespace, ttlSeconds: number): Promise<{ lease: Lease; leaseId: string; grantedAt: number }> {
  const lease = kv.lease(ttlSeconds, { autoKeepAlive: false });
  const grantedAt = Date.now();
  const leaseId = await lease.grant();
  return { lease, leaseId, grantedAt };
}
