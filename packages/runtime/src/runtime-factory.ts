/**
 * One factory per role (STYLE.md habit 3): each `create*` picks the real implementation when its
 * server URL is configured and the in-memory twin otherwise, so an app (or a test) builds the same
 * cluster process on etcd + NATS + Redis or entirely in memory from one `RuntimeConfig`.
 *
 * In-process clusters (tests, the standalone mode) share one "server" between their processes by
 * passing the same memory stores — `MemoryDiscoveryStore`, `MemoryRequestBroker`, `MemoryEventStore`
 * and one `MemoryRoutingTable` — in every process's config. Without them each call makes a fresh,
 * private store. Giving both a URL and a memory store for one role is `invalid_argument`.
 *
 * The KV transfer plane has no server of its own: it is TCP (worker to worker) when the cluster is
 * real, i.e. `etcdUrl` is set (peers find each other's transfer address in etcd, from other
 * processes), and the memory twin on `memory.kvTransfer` otherwise. `connectRuntime` leaves it out:
 * only workers serve or pull blocks, and they build it with `createKvTransferPlane`.
 */
import { type Logger, invalidArgument, silentLogger } from '@switchyard/common';
import { MemoryRoutingTable, type RoutingTable } from '@switchyard/kv-router';
import { NAME_PATTERN } from './addressing.js';
import type { Discovery } from './discovery.js';
import { EtcdDiscovery } from './etcd-discovery.js';
import type { EventPlane } from './event-plane.js';
import type { KvTransferOptions } from './kv-transfer/kv-transfer-limits.js';
import type { KvTransferPlane } from './kv-transfer/kv-transfer-plane.js';
import { MemoryKvTransferNetwork, MemoryKvTransferPlane } from './kv-transfer/memory-kv-transfer-plane.js';
import { TcpKvTransferPlane } from './kv-transfer/tcp-kv-transfer-plane.js';
import { JetStreamEventPlane } from './jetstream-event-plane.js';
import { MemoryDiscoveryStore } from './memory-discovery.js';
import { MemoryEventPlane, MemoryEventStore } from './memory-event-plane.js';
import { MemoryRequestBroker, MemoryRequestPlane } from './memory-request-plane.js';
import { type CallHomeOffer, NatsRequestPlane } from './nats-request-plane.js';
import { RedisRoutingTable } from './redis-routing-table.js';
import type { RequestPlane } from './request-plane.js';

export interface RuntimeConfig {
  /** The Switchyard namespace (NAME_PATTERN); also names the Redis routing table (`{sy:<namespace>}:…`). */
  readonly namespace: string;
  /** etcd client URL(s) → EtcdDiscovery; absent → MemoryDiscovery. */
  readonly etcdUrl?: string;
  /** Optional etcd key prefix (EtcdDiscoveryOptions.namespace) isolating tests sharing one etcd. */
  readonly etcdKeyPrefix?: string;
  /** Discovery lease TTL in seconds (EtcdDiscovery only; default 10). */
  readonly leaseTtlSeconds?: number;
  /** NATS URL → NatsRequestPlane and JetStreamEventPlane (JetStream must be enabled); absent → memory. */
  readonly natsUrl?: string;
  /** JetStream event streams: drop messages older than this (`max_age`; 0 = no limit). Default 1 h. */
  readonly eventMaxAgeMs?: number;
  /** JetStream durables nobody pulls from for this long are deleted by the server (0 = never). Default 1 h. */
  readonly durableInactiveMs?: number;
  /** Redis URL → RedisRoutingTable; absent → MemoryRoutingTable. */
  readonly redisUrl?: string;
  /**
   * With `natsUrl`: take response streams over call-home connections the workers dial to this process
   * (call-home/call-home.ts; a caller's option: routers). Absent: every response travels over NATS.
   */
  readonly callHome?: CallHomeOffer;
  /** With `natsUrl`: false = never dial a caller's call-home address; its responses go over NATS (a worker's option; default true). */
  readonly answerCallHome?: boolean;
  /** Limits and chunking of the KV transfer plane (TCP when `etcdUrl` is set, memory otherwise). */
  readonly kvTransfer?: KvTransferOptions;
  /** Shared stores of an in-process cluster (each used only when the role's URL is absent). */
  readonly memory?: {
    readonly discovery?: MemoryDiscoveryStore;
    readonly requests?: MemoryRequestBroker;
    readonly events?: MemoryEventStore;
    /** One table shared by the cluster's routers (a MemoryRoutingTable, in practice). */
    readonly routingTable?: RoutingTable;
    /** The network the in-process workers' KV transfer planes share. */
    readonly kvTransfer?: MemoryKvTransferNetwork;
  };
  readonly logger?: Logger;
}

/** The four roles of one cluster process, closed together. */
export interface Runtime {
  readonly namespace: string;
  readonly discovery: Discovery;
  readonly requestPlane: RequestPlane;
  readonly eventPlane: EventPlane;
  readonly routingTable: RoutingTable;
  /** Close every role (routing table, event plane, request plane, then discovery, revoking its lease). Idempotent. */
  close(): Promise<void>;
}

/** Validate once; every factory goes through here. */
function check(config: RuntimeConfig): void {
  if (!NAME_PATTERN.test(config.namespace)) {
    throw invalidArgument(`invalid namespace '${config.namespace}' (must match ${String(NAME_PATTERN)})`);
  }
  const m = config.memory ?? {};
  const clash = (url: string | undefined, store: unknown, role: string): void => {
    if (url !== undefined && store !== undefined) throw invalidArgument(`${role}: both a URL and a memory store are configured`);
  };
  clash(config.etcdUrl, m.discovery, 'discovery');
  clash(config.natsUrl, m.requests, 'request plane');
  clash(config.natsUrl, m.events, 'event plane');
  clash(config.redisUrl, m.routingTable, 'routing table');
  clash(config.etcdUrl, m.kvTransfer, 'KV transfer plane');
}

export async function createDiscovery(config: RuntimeConfig): Promise<Discovery> {
  check(config);
  if (config.etcdUrl !== undefined) {
    return EtcdDiscovery.connect({
      url: config.etcdUrl,
      ...(config.etcdKeyPrefix !== undefined && { namespace: config.etcdKeyPrefix }),
      ...(config.leaseTtlSeconds !== undefined && { leaseTtlSeconds: config.leaseTtlSeconds }),
      logger: config.logger ?? silentLogger,
    });
  }
  return (config.memory?.discovery ?? new MemoryDiscoveryStore()).connect();
}

export async function createRequestPlane(config: RuntimeConfig): Promise<RequestPlane> {
  check(config);
  if (config.natsUrl !== undefined) {
    return NatsRequestPlane.connect({
      url: config.natsUrl,
      logger: config.logger ?? silentLogger,
      ...(config.callHome !== undefined ? { callHome: config.callHome } : {}),
      ...(config.answerCallHome === false ? { answerCallHome: false } : {}),
    });
  }
  return new MemoryRequestPlane(config.memory?.requests ?? new MemoryRequestBroker());
}

export async function createEventPlane(config: RuntimeConfig): Promise<EventPlane> {
  check(config);
  if (config.natsUrl !== undefined) {
    return JetStreamEventPlane.connect({
      url: config.natsUrl,
      logger: config.logger ?? silentLogger,
      ...(config.eventMaxAgeMs !== undefined ? { maxAgeMs: config.eventMaxAgeMs } : {}),
      ...(config.durableInactiveMs !== undefined ? { durableInactiveMs: config.durableInactiveMs } : {}),
    });
  }
  return new MemoryEventPlane(config.memory?.events ?? new MemoryEventStore());
}

export async function createRoutingTable(config: RuntimeConfig): Promise<RoutingTable> {
  check(config);
  if (config.redisUrl !== undefined) {
    return RedisRoutingTable.connect({ url: config.redisUrl, namespace: config.namespace, logger: config.logger ?? silentLogger });
  }
  return config.memory?.routingTable ?? new MemoryRoutingTable();
}

export async function createKvTransferPlane(config: RuntimeConfig): Promise<KvTransferPlane> {
  check(config);
  if (config.etcdUrl !== undefined) return new TcpKvTransferPlane(config.kvTransfer);
  return new MemoryKvTransferPlane(config.memory?.kvTransfer ?? new MemoryKvTransferNetwork(), config.kvTransfer);
}

/**
 * Build all four roles. If one fails, the ones already built are closed and the error (the first,
 * usually `unavailable`) is rethrown.
 */
export async function connectRuntime(config: RuntimeConfig): Promise<Runtime> {
  check(config);
  const settled = await Promise.allSettled([
    createDiscovery(config),
    createRequestPlane(config),
    createEventPlane(config),
    createRoutingTable(config),
  ] as const);
  const [d, r, e, t] = settled;
  if (d.status === 'rejected' || r.status === 'rejected' || e.status === 'rejected' || t.status === 'rejected') {
    const built = settled.flatMap((s) => (s.status === 'fulfilled' ? [s.value] : []));
    await Promise.allSettled(built.map((x) => x.close()));
    throw settled.find((s): s is PromiseRejectedResult => s.status === 'rejected')!.reason;
  }
  let closing: Promise<void> | null = null;
  return {
    namespace: config.namespace,
    discovery: d.value,
    requestPlane: r.value,
    eventPlane: e.value,
    routingTable: t.value,
    close: () =>
      (closing ??= (async () => {
        await Promise.allSettled([t.value.close(), e.value.close(), r.value.close()]);
        await d.value.close();
      })()),
  };
}
