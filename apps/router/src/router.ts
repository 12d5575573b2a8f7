/**
 * Builds a router from options: connect the runtime (etcd discovery, NATS request plane, JetStream
 * events, Redis routing table), start the router core over it, and serve the core's engine through
 * the HTTP (KServe v2 + OpenAI /v1), gRPC and metrics front doors. Owns the order of start-up and
 * drain:
 *
 *   start: runtime → core → front doors (a door only opens once the core can answer; readiness,
 *          `/v2/health/ready`, follows `core.engine.isReady()`: true once discovery has synced).
 *   close: the dashboard's event streams end → front doors stop accepting and finish their in-flight
 *          requests (bounded by `--exit-timeout-secs`) → core.close() (stops routing, ends what is
 *          left) → runtime close.
 *
 * The HTTP door also serves the live dashboard (`/dashboard`, `/dashboard/events`: dashboard.ts).
 */
import { randomBytes } from 'node:crypto';
import { doorLimits, grpcThreads, httpThreads, levelFor, timestampFormat } from '@switchyard/cli';
import { startRouterCore, type RouterStats } from '@switchyard/cluster';
import type { Logger } from '@switchyard/common';
import { configureSharedPreprocessPool } from '@switchyard/llm';
import { NatsRequestPlane, type RequestPlane, connectRuntime } from '@switchyard/runtime';
import { type FrontDoorPorts, ServerSettings, SharedMemoryManager, createFrontDoors } from '@switchyard/server';
import { type RouterOptions, accessPolicy, outputParsing } from './options.js';
import { type CallHomeFigures, renderRouterMetrics } from './router-metrics.js';
import { createRouterDashboard } from './dashboard.js';

/** How long core.close() and the runtime's close() may take each once the doors are shut. */
const TEARDOWN_TIMEOUT_MS = 5_000;

export interface RunningRouter {
  readonly routerId: string;
  /** Bound ports (0 when the front door is disabled). */
  readonly ports: { http: number; grpc: number; metrics: number };
  stats(): RouterStats;
  /**
   * Requests for `model` waiting now for a worker to start (scale to zero, `--queue-timeout-secs`);
   * 0 for a model nobody waits for. For the planner's figures publisher.
   */
  heldRequests(model: string): number;
  /** The models discovery shows now, each with the instances serving it (for the start-up table). */
  models(): RouterModelRow[];
  /** Drain and stop (idempotent): see the module comment for the order. */
  close(): Promise<void>;
}

export interface RouterModelRow {
  name: string;
  kind: 'llm' | 'tensor';
  instances: string[];
}

export async function startRouter(options: RouterOptions, logger: Logger & { level?: string }): Promise<RunningRouter> {
  const routerId = randomBytes(8).toString('hex');
  configureSharedPreprocessPool({ threads: options.preprocessThreads, inlineChars: options.preprocessInlineChars });
  const runtime = await connectRuntime({
    namespace: options.namespace,
    etcdUrl: options.etcd,
    natsUrl: options.nats,
    redisUrl: options.redis,
    ...(options.callHome ? { callHome: { host: options.callHomeAddress, port: options.callHomePort, ...(options.callHomeAdvertise !== undefined ? { advertiseHost: options.callHomeAdvertise } : {}) } } : {}),
    logger: logger.child({ component: 'runtime' }),
  });
  let core: Awaited<ReturnType<typeof startRouterCore>>;
  try {
    core = await startRouterCore({
      discovery: runtime.discovery,
      requestPlane: runtime.requestPlane,
      eventPlane: runtime.eventPlane,
      routingTable: runtime.routingTable,
      namespace: options.namespace,
      mode: options.routerMode,
      overlapWeight: options.kvOverlapScoreWeight,
      temperature: options.routerTemperature,
      migrationLimit: options.migrationLimit,
      stallProbeMs: options.stallProbeMs,
      probeTimeoutMs: options.healthProbeTimeoutMs,
      // with call-home on, each new worker dials back before its first request through here
      greetInstances: offersCallHome(runtime.requestPlane),
      generationConfig: options.generationConfig,
      queueTimeoutMs: options.queueTimeoutSecs * 1000,
      maxHeldRequests: options.maxHeldRequests,
      models: options.models,
      disagg: { minRemoteTokens: options.disaggMinRemoteTokens, maxPrefillQueueTokens: options.disaggMaxPrefillQueueTokens, prefillTimeoutMs: options.disaggPrefillTimeoutMs },
      logger: logger.child({ component: 'router-core' }),
      routerId,
    });
  } catch (err) {
    await runtime.close();
    throw err;
  }
  const engine = core.engine;
  // Workers coming and going, as an operator follows them (the registry applies the change first).
  const unsubscribeRegistry = core.registry.onChange((change) => {
    if (change.type === 'instance-added') logger.info({ model: change.model, instanceId: change.instanceId }, 'worker serves model');
    else if (change.type === 'instance-removed') logger.info({ model: change.model, instanceId: change.instanceId }, 'worker no longer serves model');
  });

  const settings = new ServerSettings({ log_verbose_level: options.logVerbose, log_format: timestampFormat(options.logFormat) });
  settings.onLogSettingsChange((s) => {
    if ('level' in logger) logger.level = levelFor(s);
  });
  // Client shared memory cannot reach a worker on another host: the router never enables it.
  const shm = new SharedMemoryManager({ enabled: false });

  const dashboard = createRouterDashboard({ feed: core.dashboard });
  const limits = doorLimits(options);
  const doors = createFrontDoors({
    engine,
    shm,
    settings,
    logger,
    access: accessPolicy(options),
    ...(options.allowHttp ? { http: { port: options.httpPort, host: options.httpAddress, maxInputSize: options.httpMaxInputSize, ...limits.http, ...limits.httpInfer, outputParsing: outputParsing(options), appRoutes: dashboard.routes, threads: httpThreads(options, logger) } } : {}),
    ...(options.allowGrpc ? { grpc: { port: options.grpcPort, host: options.grpcAddress, ...limits.grpc, threads: grpcThreads(options, logger) } } : {}),
    ...(options.allowMetrics
      ? {
          metrics: {
            port: options.metricsPort,
            host: options.metricsAddress,
            ...limits.http,
            extraMetrics: () =>
              renderRouterMetrics(
                core.stats(),
                core.registry.list().map((m) => ({ name: m.name, workers: m.instances.size })),
                core.heldByModel(),
                callHomeFigures(runtime.requestPlane),
              ),
          },
        }
      : {}),
  });

  let ports: FrontDoorPorts;
  try {
    ports = await doors.listen();
  } catch (err) {
    unsubscribeRegistry();
    dashboard.close();
    await core.close();
    await runtime.close();
    shm.close();
    throw err;
  }
  logger.info(
    { ports, routerId, namespace: options.namespace, routerMode: options.routerMode, etcd: options.etcd, nats: options.nats, redis: options.redis },
    'router started',
  );

  let closing: Promise<void> | undefined;
  const close = (): Promise<void> => {
    closing ??= (async () => {
      logger.info('draining: no new requests, finishing in-flight ones');
      unsubscribeRegistry();
      dashboard.close();
      const doorsClosed = doors.close();
      if ((await within(doorsClosed, options.exitTimeoutSecs * 1000)) === 'timeout') {
        logger.warn({ exitTimeoutSecs: options.exitTimeoutSecs }, 'exit timeout reached with requests still in flight');
      }
      // The core ends whatever is still in flight (after a timeout) and stops its watches and
      // subscriptions; only then may the connections they use go.
      for (const [name, step] of [
        ['router core', () => core.close()],
        ['runtime', () => runtime.close()],
      ] as const) {
        try {
          if ((await within(step(), TEARDOWN_TIMEOUT_MS)) === 'timeout') logger.warn({ step: name }, 'shutdown step timed out');
        } catch (err) {
          logger.error({ err, step: name }, 'shutdown step failed');
        }
      }
      shm.close();
      logger.info('router stopped');
    })();
    return closing;
  };

  const models = (): RouterModelRow[] => core.registry.list().map((e) => ({ name: e.name, kind: e.kind, instances: [...e.instances.keys()] }));
  return { routerId, ports, stats: () => core.stats(), heldRequests: (model) => core.heldRequests(model), models, close };
}

/** Resolves 'done' when `p` settles within `ms`, else 'timeout' (p keeps running). Rejects with p's error. */
async function within(p: Promise<unknown>, ms: number): Promise<'done' | 'timeout'> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<'timeout'>((resolve) => {
    timer = setTimeout(() => resolve('timeout'), ms);
    timer.unref();
  });
  try {
    return await Promise.race([p.then(() => 'done' as const), timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** This router's request plane listens for call-home connections (off over an encrypted NATS). */
function offersCallHome(plane: RequestPlane): plane is NatsRequestPlane {
  return plane instanceof NatsRequestPlane && plane.callHomeAddress !== undefined;
}

/** The call-home listener's figures, when this router's request plane offers call-home. */
function callHomeFigures(plane: RequestPlane): CallHomeFigures | undefined {
  if (!offersCallHome(plane)) return undefined;
  return { connections: plane.callHomeConnections, frames: plane.callHomeFrames, requests: plane.callHomeRequests };
}
