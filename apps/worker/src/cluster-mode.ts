/**
 * Cluster mode (--etcd and --nats): the runtime roles and the worker node (@switchyard/cluster).
 * `worker.ts` imports this module only in cluster mode, so a standalone worker never loads the
 * cluster's clients (etcd, NATS, Redis, Kubernetes): about 0.55 s of CPU at every start-up.
 */
import { pinnedKvBlocks, startWorkerNode, type WorkerNode } from '@switchyard/cluster';
import { SwitchyardError, type Logger } from '@switchyard/common';
import type { Engine } from '@switchyard/engine';
import {
  createDiscovery,
  createKvTransferPlane,
  createEventPlane,
  createRequestPlane,
  type Discovery,
  type EventPlane,
  type KvTransferPlane,
  type RequestPlane,
  type RuntimeConfig,
} from '@switchyard/runtime';
import { DEFAULT_CLUSTER_NAMESPACE, DEFAULT_WORKER_ROLE, kvTransferAdvertise, type WorkerOptions } from './options.js';

export { createKvTransferPlane, pinnedKvBlocks };

/** The worker's hooks that cluster mode calls (`WorkerHooks`). */
export interface ClusterHooks {
  onLeaseLost?: (cause: Error) => void;
  onKvTransferServing?: (address: string) => void;
}

/** Cluster mode, etcd unreachable at start: wait this long between attempts to join. */
export const DISCOVERY_RETRY_MS = 1000;

/**
 * Connect Discovery, retrying while etcd is unreachable (`unavailable`): a worker started during an
 * etcd outage waits for etcd (logging the first failure and every 30th) instead of exiting, like
 * everything else in the cluster that outlives one. Anything else (a bad option) fails at once.
 */
async function connectDiscovery(config: RuntimeConfig, logger: Logger): Promise<Discovery> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await createDiscovery(config);
    } catch (err) {
      if (!(err instanceof SwitchyardError && err.code === 'unavailable')) throw err;
      if (attempt === 1 || attempt % 30 === 0) logger.warn({ err, attempt }, `etcd unreachable: retrying every ${DISCOVERY_RETRY_MS} ms`);
      await new Promise((r) => setTimeout(r, DISCOVERY_RETRY_MS));
    }
  }
}

/** The runtime's configuration in cluster mode. */
export function runtimeConfig(options: WorkerOptions, logger: Logger): RuntimeConfig & { namespace: string } {
  return {
    namespace: options.namespace ?? DEFAULT_CLUSTER_NAMESPACE,
    etcdUrl: options.etcd!,
    natsUrl: options.nats!,
    ...(options.leaseTtlSecs !== undefined ? { leaseTtlSeconds: options.leaseTtlSecs } : {}),
    ...(options.callHome === false ? { answerCallHome: false } : {}),
    logger: logger.child({ component: 'runtime' }),
  };
}

/**
 * Connect the runtime roles the worker needs (the runtime's role factories: etcd Discovery, NATS
 * request plane, JetStream event plane; no routing table, Redis is the routers'), build the KV
 * transfer plane (TCP, worker to worker; the node starts its server once it serves an LLM) and join
 * the cluster. The node owns them all from then on.
 */
export async function joinCluster(options: WorkerOptions, engine: Engine, logger: Logger, hooks: ClusterHooks, kvTransferPlane: KvTransferPlane): Promise<WorkerNode> {
  const config = runtimeConfig(options, logger);
  const ns = config.namespace;
  const discovery = await connectDiscovery(config, logger);
  const closeQuietly = (c: { close(): Promise<void> }) => c.close().catch(() => {});
  let requestPlane: RequestPlane | undefined;
  let eventPlane: EventPlane | undefined;
  try {
    requestPlane = await createRequestPlane(config);
    eventPlane = await createEventPlane(config);
    const advertise = kvTransferAdvertise(options);
    return await startWorkerNode({
      engine,
      discovery,
      requestPlane,
      eventPlane,
      namespace: ns,
      logger,
      role: options.role ?? DEFAULT_WORKER_ROLE,
      kvTransferPlane,
      kvTransferServe: {
        port: options.kvTransferPort ?? 0,
        ...(advertise.host !== undefined ? { advertiseHost: advertise.host } : {}),
      },
      ...(advertise.port !== undefined ? { kvTransferAdvertisedAddress: options.kvTransferAddress! } : {}),
      ...(hooks.onKvTransferServing !== undefined ? { onKvTransferServing: hooks.onKvTransferServing } : {}),
      ...(options.kvEvents === false ? { kvEvents: false } : {}),
      ...(hooks.onLeaseLost !== undefined ? { onLeaseLost: hooks.onLeaseLost } : {}),
    });
  } catch (err) {
    if (eventPlane !== undefined) await closeQuietly(eventPlane);
    if (requestPlane !== undefined) await closeQuietly(requestPlane);
    await closeQuietly(discovery);
    await closeQuietly(kvTransferPlane);
    throw err;
  }
}
