/**
 * Builds a worker from options: the engine over the model repositories, and the HTTP, gRPC and
 * metrics front doors over the engine; in cluster mode (--etcd and --nats) also the runtime roles
 * and a worker node (@switchyard/cluster) that joins the cluster. Owns the order of start-up and drain.
 */
import { pinnedKvBlocks, startWorkerNode, type WorkerNode } from '@switchyard/cluster';
import { doorLimits } from '@switchyard/cli';
import { SwitchyardError, type Logger } from '@switchyard/common';
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
import { createEngine, type Engine } from '@switchyard/engine';
import { type FrontDoorPorts, ServerSettings, SharedMemoryManager, createFrontDoors } from '@switchyard/server';
import { DEFAULT_CLUSTER_NAMESPACE, DEFAULT_WORKER_ROLE, accessPolicy, outputParsing, isClusterMode, kvTransferAdvertise, openModelControlDoors, responseCacheByteSize, type WorkerOptions } from './options.js';
import { levelFor } from './logger.js';
import { renderWorkerMetrics } from './worker-metrics.js';

/** The version reported by server metadata: Triton's protocol version this worker follows. */
export const SERVER_VERSION = '2.73.0';

export interface RunningWorker {
  readonly engine: Engine;
  /** The cluster instance id in cluster mode, else undefined. */
  readonly instanceId: string | undefined;
  /** Bound ports (0 when the front door is disabled). */
  readonly ports: { http: number; grpc: number; metrics: number };
  /** Stop accepting, finish in-flight requests (up to the exit timeout), unload models. */
  close(): Promise<void>;
}

export interface WorkerHooks {
  /**
   * Cluster mode: the etcd lease was lost (etcd unreachable for longer than the lease TTL, or the lease
   * expired). The worker keeps serving; it registers again by itself once etcd answers.
   */
  onLeaseLost?: (cause: Error) => void;
  /** Cluster mode: the KV transfer server listens; `address` is what other workers are told. */
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
function runtimeConfig(options: WorkerOptions, logger: Logger): RuntimeConfig & { namespace: string } {
  return {
    namespace: options.namespace ?? DEFAULT_CLUSTER_NAMESPACE,
    etcdUrl: options.etcd!,
    natsUrl: options.nats!,
    ...(options.leaseTtlSecs !== undefined ? { leaseTtlSeconds: options.leaseTtlSecs } : {}),
    logger: logger.child({ component: 'runtime' }),
  };
}

/**
 * Connect the runtime roles the worker needs (the runtime's role factories: etcd Discovery, NATS
 * request plane, JetStream event plane; no routing table, Redis is the routers'), build the KV
 * transfer plane (TCP, worker to worker; the node starts its server once it serves an LLM) and join
 * the cluster. The node owns them all from then on.
 */
async function joinCluster(options: WorkerOptions, engine: Engine, logger: Logger, hooks: WorkerHooks, kvTransferPlane: KvTransferPlane): Promise<WorkerNode> {
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

export async function startWorker(options: WorkerOptions, logger: Logger & { level?: string }, hooks: WorkerHooks = {}): Promise<RunningWorker> {
  if (options.responseCacheByteSize !== undefined) {
    const size = options.responseCacheByteSize;
    logger.warn(`'--response-cache-byte-size' is deprecated: use the equivalent '--cache-config=local,size=${size}'`);
  }
  const engine = await createEngine({
    modelRepositories: options.modelRepositories,
    controlMode: options.controlMode,
    startupModels: options.startupModels,
    strictModelConfig: options.strictModelConfig,
    pollIntervalSecs: options.repositoryPollSecs,
    responseCacheByteSize: responseCacheByteSize(options),
    kvTransferTtlMs: options.kvTransferTtlSecs * 1000,
    kvTransferGbps: options.kvTransferGbps,
    serverVersion: SERVER_VERSION,
    logger: logger.child({ component: 'engine' }),
  });

  const settings = new ServerSettings({
    log_verbose_level: options.logVerbose,
    log_format: options.logFormat,
  });
  settings.onLogSettingsChange((s) => {
    if ('level' in logger) logger.level = levelFor(s);
  });
  const shm = new SharedMemoryManager({ enabled: options.allowClientShm });

  // cluster mode: KV moves worker to worker over TCP (disaggregated prefill/decode); standalone: none
  const kvTransferPlane = isClusterMode(options) ? await createKvTransferPlane(runtimeConfig(options, logger)) : undefined;
  const limits = doorLimits(options);
  const doors = createFrontDoors({
    engine,
    shm,
    settings,
    logger,
    access: accessPolicy(options),
    ...(options.allowHttp ? { http: { port: options.httpPort, host: options.httpAddress, maxInputSize: options.httpMaxInputSize, ...limits.http, outputParsing: outputParsing(options) } } : {}),
    ...(options.allowGrpc ? { grpc: { port: options.grpcPort, host: options.grpcAddress, ...limits.grpc } } : {}),
    ...(options.allowMetrics
      ? {
          metrics: {
            port: options.metricsPort,
            host: options.metricsAddress,
            ...limits.http,
            ...(kvTransferPlane !== undefined ? { extraMetrics: () => renderWorkerMetrics({ kvTransfer: kvTransferPlane.counters(), pinnedBlocks: pinnedKvBlocks(engine) }) } : {}),
          },
        }
      : {}),
  });

  let ports: FrontDoorPorts;
  let node: WorkerNode | undefined;
  let kvTransferAddress: string | undefined;
  try {
    ports = await doors.listen();
    if (kvTransferPlane !== undefined) {
      node = await joinCluster(options, engine, logger, { ...hooks, onKvTransferServing: (address) => ((kvTransferAddress = address), hooks.onKvTransferServing?.(address)) }, kvTransferPlane);
    }
  } catch (err) {
    await kvTransferPlane?.close().catch(() => {});
    await doors.close();
    await engine.shutdown();
    shm.close();
    throw err;
  }
  const cluster =
    node === undefined
      ? undefined
      : { namespace: options.namespace ?? DEFAULT_CLUSTER_NAMESPACE, instanceId: node.instanceId, models: node.models(), role: options.role ?? DEFAULT_WORKER_ROLE, kvTransferAddress };
  logger.info({ ports, modelRepositories: options.modelRepositories, controlMode: options.controlMode, cluster }, 'worker started');
  const openDoors = openModelControlDoors(options);
  if (openDoors.length > 0) {
    logger.warn(
      { doors: openDoors, controlMode: options.controlMode },
      'the model repository API (load, unload, file upload) is open to every client: restrict it with --http-restricted-api=model-repository:<header>=<value> and --grpc-restricted-protocol=model-repository:<key>=<value>',
    );
  }

  let closing: Promise<void> | undefined;
  const close = (): Promise<void> => {
    closing ??= (async () => {
      logger.info('draining: no new requests, finishing in-flight ones');
      const drain = (async () => {
        // Cluster first: leave discovery so routers stop sending, finish the cluster's in-flight
        // requests. Then the front doors stop accepting and wait for theirs; then the engine drains
        // whatever is still queued and releases the models.
        await node?.drain().catch((err: unknown) => logger.error({ err }, 'cluster drain failed'));
        await doors.close();
        await engine.shutdown();
      })();
      const timeout = new Promise<'timeout'>((resolve) => {
        const t = setTimeout(() => resolve('timeout'), options.exitTimeoutSecs * 1000);
        t.unref();
      });
      if ((await Promise.race([drain.then(() => 'done' as const), timeout])) === 'timeout') {
        logger.warn({ exitTimeoutSecs: options.exitTimeoutSecs }, 'exit timeout reached with requests still in flight');
      }
      // revoke the lease (no-op if the drain did not finish: keys vanish with it), close NATS
      await node?.close();
      shm.close();
      logger.info('worker stopped');
    })();
    return closing;
  };

  return { engine, instanceId: node?.instanceId, ports, close };
}
