/**
 * startRouterCore: everything a router process runs between its front doors and the cluster, wired
 * from the four roles (Discovery, RequestPlane, EventPlane, RoutingTable) the app builds:
 *
 *   ModelRegistry (discovery watch) ──► HealthProber ──► InstanceTracker (abort streams of dead instances that left)
 *          │                      └──► KvEventConsumer (resync / forget workers in the KvIndexer)
 *          ▼
 *   ClusterEngine (InferenceEngine for the doors) ──► RoutedLlmEndpoint per LLM (routing, migration)
 *          │  └──► HeldRequests (scale to zero: requests for a known model wait for its first worker)
 *                                                        └──► DisaggregatedPrefill (prefill pool, conditional disaggregation)
 *
 * Options follow the usual path: `RouterCoreOptions` (user, documented defaults) → `compileOptions`
 * (validated once) → the parts. Lifecycle: `startRouterCore` resolves once the registry has its first
 * discovery snapshot (the engine is ready) and the request figures for planners start going out
 * (RequestFiguresPublisher, every second); `close()` stops the watch and the subscriptions and waits
 * for them; it does not close the roles (the app owns them).
 */
import { randomUUID } from 'node:crypto';
import { type Logger, invalidArgument, silentLogger } from '@switchyard/common';
import { DEFAULT_OVERLAP_WEIGHT, DEFAULT_ROUTER_TEMPERATURE, KvIndexer, type RoutingTable, type WorkerId } from '@switchyard/kv-router';
import { DEFAULT_GENERATION_CONFIG_MODE, parseGenerationConfigMode, type GenerationConfigMode } from '@switchyard/llm';
import type { Discovery, EventPlane, InstanceId, Namespace, RequestPlane } from '@switchyard/runtime';
import { componentName, requestFiguresSubject, namespace as toNamespace } from '@switchyard/runtime';
import { ROUTER_COMPONENT } from '../protocols.js';
import { ClusterEngine } from './cluster-engine.js';
import { DEFAULT_PROBE_TIMEOUT_MS, HealthProber } from './health-prober.js';
import { DEFAULT_INHIBIT_MS, InstanceTracker } from './instance-tracker.js';
import { KvEventConsumer } from './kv-event-consumer.js';
import { DEFAULT_MAX_HELD_REQUESTS, DEFAULT_QUEUE_TIMEOUT_MS, HeldRequests } from './held-requests.js';
import { ModelRegistry } from './model-registry.js';
import { DEFAULT_DISAGG_MAX_PREFILL_QUEUE_TOKENS, DEFAULT_DISAGG_MIN_REMOTE_TOKENS } from './disagg-policy.js';
import { DEFAULT_PREFILL_TIMEOUT_MS, type DisaggOptions } from './disagg-prefill.js';
import { DEFAULT_MIGRATION_LIMIT, DEFAULT_STALL_PROBE_MS } from './routed-llm-endpoint.js';
import { type RouterMode, type RouterStats, RouterStatsRecorder } from './router-stats.js';
import { DEFAULT_REQUEST_FIGURES_INTERVAL_MS, RequestFiguresPublisher } from './request-figures.js';
import { DashboardFeed } from './dashboard-feed.js';

export const DEFAULT_ROUTER_MODE: RouterMode = 'kv';
/** The longest delay setTimeout honours (ms). */
export const MAX_TIMER_MS = 2 ** 31 - 1;
export const ROUTER_MODES: readonly RouterMode[] = ['kv', 'round-robin', 'random', 'least-loaded'];

export interface RouterCoreOptions {
  readonly discovery: Discovery;
  readonly requestPlane: RequestPlane;
  readonly eventPlane: EventPlane;
  readonly routingTable: RoutingTable;
  /** The cluster namespace the workers register in. */
  readonly namespace: string;
  /** Worker selection for LLMs; default 'kv'. */
  readonly mode?: RouterMode;
  /** Weight of uncached prefill blocks against active blocks (kv mode); default DEFAULT_OVERLAP_WEIGHT (1). */
  readonly overlapWeight?: number;
  /** 0 (default) = lowest cost wins; > 0 = softmax sampling over normalised costs. */
  readonly temperature?: number;
  /** Re-sends of one LLM request after worker failures; 0 = off; default DEFAULT_MIGRATION_LIMIT (3). */
  readonly migrationLimit?: number;
  /** How long an unreachable instance is skipped unless discovery removes it first; default 10 s. */
  readonly inhibitMs?: number;
  /** A generate stream silent this long probes its instance's health; dead → migrate. 0 = off; default 2000. */
  readonly stallProbeMs?: number;
  /** How long a health probe waits for the answer before calling the instance dead; default 1000. */
  readonly probeTimeoutMs?: number;
  /**
   * Probe each instance's health once when discovery first lists it (default false). For call-home: a
   * worker dials the router on the first request that names the router's address, so the probe opens
   * that connection before the instance's first request through this router, which then goes over it
   * (an LLM worker's KV snapshot fetch does the same already; a tensor-only worker's first requests
   * would otherwise cross NATS).
   */
  readonly greetInstances?: boolean;
  /**
   * `auto` (default): requests through this router take the sampling defaults each model's workers
   * publish (their generation config); `vllm`: vLLM's neutral defaults (the end ids apply either way).
   */
  readonly generationConfig?: GenerationConfigMode;
  /**
   * Conditional disaggregation (models with prefill workers; disagg-policy.ts): uncached prompt tokens at
   * or above which a prefill goes remote (default DEFAULT_DISAGG_MIN_REMOTE_TOKENS, 512; 0 = always),
   * queued prefill tokens at which a prefill worker is saturated (default
   * DEFAULT_DISAGG_MAX_PREFILL_QUEUE_TOKENS, 8192; 0 = never remote), and how long one prefill-only
   * request may take before it is retried elsewhere or done locally (default DEFAULT_PREFILL_TIMEOUT_MS).
   */
  readonly disagg?: Partial<DisaggOptions>;
  /**
   * Scale to zero (held-requests.ts): how long a request for a known model with no worker waits for
   * one to start; default DEFAULT_QUEUE_TIMEOUT_MS (0: it fails 503 at once).
   */
  readonly queueTimeoutMs?: number;
  /** Requests held at once waiting for workers, all models; default DEFAULT_MAX_HELD_REQUESTS (1024). */
  readonly maxHeldRequests?: number;
  /** Models known before any of their workers is seen (held for from the start); default none. */
  readonly models?: readonly string[];
  /** How often the per-model request figures for planners go out (default DEFAULT_REQUEST_FIGURES_INTERVAL_MS, 1000). */
  readonly requestFiguresIntervalMs?: number;
  /** Names this replica's durable consumers; default a random UUID (a restart replays retained events). */
  readonly routerId?: string;
  /** Reported in the server metadata (`GET /v2`). */
  readonly serverVersion?: string;
  readonly logger?: Logger;
}

export interface RouterCore {
  readonly engine: ClusterEngine;
  readonly registry: ModelRegistry;
  /** The live dashboard's data (workers, recent decisions, charts, planner decisions): dashboard-feed.ts. */
  readonly dashboard: DashboardFeed;
  stats(): RouterStats;
  /** Requests for `model` waiting now for a worker to start (scale to zero); 0 for any other model. */
  heldRequests(model: string): number;
  /** The same for every known model (configured, or that had a worker since start), sorted by name. */
  heldByModel(): [string, number][];
  /** Stop following discovery and the event plane. Idempotent. The roles stay open (the app closes them). */
  close(): Promise<void>;
}

interface CompiledRouterOptions {
  readonly namespace: Namespace;
  readonly mode: RouterMode;
  readonly overlapWeight: number;
  readonly temperature: number;
  readonly migrationLimit: number;
  readonly inhibitMs: number;
  readonly stallProbeMs: number;
  readonly probeTimeoutMs: number;
  readonly greetInstances: boolean;
  readonly generationConfig: GenerationConfigMode;
  readonly disagg: DisaggOptions;
  readonly queueTimeoutMs: number;
  readonly maxHeldRequests: number;
  readonly models: readonly string[];
  readonly routerId: string;
  readonly requestFiguresIntervalMs: number;
  readonly logger: Logger;
}

function compileOptions(o: RouterCoreOptions): CompiledRouterOptions {
  const mode = o.mode ?? DEFAULT_ROUTER_MODE;
  if (!ROUTER_MODES.includes(mode)) throw invalidArgument(`router mode must be one of ${ROUTER_MODES.join(', ')}, got '${String(mode)}'`);
  const overlapWeight = o.overlapWeight ?? DEFAULT_OVERLAP_WEIGHT;
  if (!Number.isFinite(overlapWeight) || overlapWeight < 0) throw invalidArgument(`overlapWeight must be a number >= 0, got ${overlapWeight}`);
  const temperature = o.temperature ?? DEFAULT_ROUTER_TEMPERATURE;
  if (!Number.isFinite(temperature) || temperature < 0) throw invalidArgument(`temperature must be a number >= 0, got ${temperature}`);
  const migrationLimit = o.migrationLimit ?? DEFAULT_MIGRATION_LIMIT;
  if (!Number.isSafeInteger(migrationLimit) || migrationLimit < 0) throw invalidArgument(`migrationLimit must be an integer >= 0, got ${migrationLimit}`);
  const inhibitMs = o.inhibitMs ?? DEFAULT_INHIBIT_MS;
  if (!Number.isFinite(inhibitMs) || inhibitMs < 0) throw invalidArgument(`inhibitMs must be a number >= 0, got ${inhibitMs}`);
  const stallProbeMs = o.stallProbeMs ?? DEFAULT_STALL_PROBE_MS;
  if (!Number.isFinite(stallProbeMs) || stallProbeMs < 0) throw invalidArgument(`stallProbeMs must be a number >= 0, got ${stallProbeMs}`);
  const probeTimeoutMs = o.probeTimeoutMs ?? DEFAULT_PROBE_TIMEOUT_MS;
  if (!Number.isFinite(probeTimeoutMs) || probeTimeoutMs <= 0) throw invalidArgument(`probeTimeoutMs must be a number > 0, got ${probeTimeoutMs}`);
  const generationConfig = parseGenerationConfigMode(o.generationConfig ?? DEFAULT_GENERATION_CONFIG_MODE, 'generationConfig');
  const minRemoteTokens = o.disagg?.minRemoteTokens ?? DEFAULT_DISAGG_MIN_REMOTE_TOKENS;
  if (!Number.isSafeInteger(minRemoteTokens) || minRemoteTokens < 0) throw invalidArgument(`disagg.minRemoteTokens must be an integer >= 0, got ${minRemoteTokens}`);
  const maxPrefillQueueTokens = o.disagg?.maxPrefillQueueTokens ?? DEFAULT_DISAGG_MAX_PREFILL_QUEUE_TOKENS;
  if (!Number.isSafeInteger(maxPrefillQueueTokens) || maxPrefillQueueTokens < 0) throw invalidArgument(`disagg.maxPrefillQueueTokens must be an integer >= 0, got ${maxPrefillQueueTokens}`);
  const prefillTimeoutMs = o.disagg?.prefillTimeoutMs ?? DEFAULT_PREFILL_TIMEOUT_MS;
  // setTimeout's ceiling (2^31 − 1 ms): a longer delay would fire at once
  if (!Number.isSafeInteger(prefillTimeoutMs) || prefillTimeoutMs < 1 || prefillTimeoutMs > MAX_TIMER_MS) {
    throw invalidArgument(`disagg.prefillTimeoutMs must be an integer in 1..${MAX_TIMER_MS}, got ${prefillTimeoutMs}`);
  }
  const queueTimeoutMs = o.queueTimeoutMs ?? DEFAULT_QUEUE_TIMEOUT_MS;
  if (!Number.isSafeInteger(queueTimeoutMs) || queueTimeoutMs < 0 || queueTimeoutMs > MAX_TIMER_MS) {
    throw invalidArgument(`queueTimeoutMs must be an integer in 0..${MAX_TIMER_MS}, got ${queueTimeoutMs}`);
  }
  const maxHeldRequests = o.maxHeldRequests ?? DEFAULT_MAX_HELD_REQUESTS;
  if (!Number.isSafeInteger(maxHeldRequests) || maxHeldRequests < 0) throw invalidArgument(`maxHeldRequests must be an integer >= 0, got ${maxHeldRequests}`);
  const requestFiguresIntervalMs = o.requestFiguresIntervalMs ?? DEFAULT_REQUEST_FIGURES_INTERVAL_MS;
  if (!Number.isFinite(requestFiguresIntervalMs) || requestFiguresIntervalMs <= 0 || requestFiguresIntervalMs > MAX_TIMER_MS) {
    throw invalidArgument(`requestFiguresIntervalMs must be a number in (0, ${MAX_TIMER_MS}], got ${requestFiguresIntervalMs}`);
  }
  return {
    namespace: toNamespace(o.namespace),
    queueTimeoutMs,
    maxHeldRequests,
    models: [...(o.models ?? [])],
    disagg: { minRemoteTokens, maxPrefillQueueTokens, prefillTimeoutMs },
    stallProbeMs,
    probeTimeoutMs,
    greetInstances: o.greetInstances ?? false,
    generationConfig,
    mode,
    overlapWeight,
    temperature,
    migrationLimit,
    inhibitMs,
    routerId: o.routerId ?? randomUUID(),
    requestFiguresIntervalMs,
    logger: o.logger ?? silentLogger,
  };
}

export async function startRouterCore(options: RouterCoreOptions): Promise<RouterCore> {
  const c = compileOptions(options);
  const logger = c.logger;
  const stats = new RouterStatsRecorder();
  const tracker = new InstanceTracker(c.inhibitMs);
  const registry = new ModelRegistry({ discovery: options.discovery, namespace: c.namespace, logger });

  const prober = new HealthProber(options.requestPlane, c.namespace, c.probeTimeoutMs, logger);

  // Instances that left discovery are no longer routed to (the registry dropped them). Dead or
  // draining? A draining worker still answers its health probe: its streams finish normally (the
  // request plane's idle timeout stays the backstop). A dead one does not: cut its streams now so they
  // migrate (before any idle timeout).
  const unsubscribeTracker = registry.onChange((change) => {
    if (change.type !== 'instance-removed') return;
    if (tracker.inflightCount(change.instanceId, change.model) === 0) {
      tracker.workerGone(change.instanceId, change.model);
      return;
    }
    void prober.probe(change.instanceId).then((health) => {
      if (health !== 'dead') {
        logger.info({ model: change.model, instance: change.instanceId, health }, 'router: instance left discovery but answers; letting its in-flight requests finish');
        return;
      }
      const aborted = tracker.workerGone(change.instanceId, change.model);
      if (aborted > 0) {
        stats.instanceRemovalAborts += aborted;
        logger.warn({ model: change.model, instance: change.instanceId, aborted }, 'router: instance left discovery and is dead; migrating its in-flight requests');
      }
    });
  });

  // An instance discovery lists for the first time: one health probe (greetInstances), whose request
  // names this router's call-home address when it has one, so the worker dials back now.
  const greeted = new Set<InstanceId>();
  const unsubscribeGreeter = c.greetInstances
    ? registry.onChange((change) => {
        if (change.type === 'instance-removed') greeted.delete(change.instanceId);
        if (change.type !== 'instance-added' || greeted.has(change.instanceId)) return;
        greeted.add(change.instanceId);
        void prober.probe(change.instanceId);
      })
    : () => {};

  // The consumer needs the indexer and the indexer fetches snapshots through the consumer.
  let consumer: KvEventConsumer | undefined;
  const indexer = new KvIndexer({
    table: options.routingTable,
    fetchSnapshot: (worker: WorkerId) => consumer!.fetchSnapshot(worker),
    logger,
  });
  consumer = new KvEventConsumer({
    eventPlane: options.eventPlane,
    requestPlane: options.requestPlane,
    registry,
    indexer,
    namespace: c.namespace,
    routerId: c.routerId,
    stats,
    logger,
  });
  const kv = consumer;

  const held = new HeldRequests({ registry, timeoutMs: c.queueTimeoutMs, maxHeld: c.maxHeldRequests, models: c.models, logger });
  const engine = new ClusterEngine({
    registry,
    held,
    requestPlane: options.requestPlane,
    tracker,
    stats,
    logger,
    ...(options.serverVersion !== undefined ? { serverVersion: options.serverVersion } : {}),
    llm: {
      registry,
      requestPlane: options.requestPlane,
      table: options.routingTable,
      tracker,
      stats,
      loadOf: (worker) => kv.loadOf(worker),
      prober,
      options: { mode: c.mode, overlapWeight: c.overlapWeight, temperature: c.temperature, migrationLimit: c.migrationLimit, stallProbeMs: c.stallProbeMs, disagg: c.disagg, generationConfig: c.generationConfig },
      logger,
    },
  });

  await registry.ready();
  const figures = new RequestFiguresPublisher({
    eventPlane: options.eventPlane,
    subject: requestFiguresSubject(c.namespace, componentName(ROUTER_COMPONENT)),
    routerId: c.routerId,
    recorder: stats.figures,
    // Known models include those with no worker now (scale to zero): their held requests are news.
    models: () => [...new Set([...registry.list().map((e) => e.name), ...held.heldByModel().map(([m]) => m)])],
    heldRequests: (model) => held.held(model),
    logger,
    intervalMs: c.requestFiguresIntervalMs,
  });
  figures.start();
  const dashboard = new DashboardFeed({
    state: stats.dashboard,
    registry,
    eventPlane: options.eventPlane,
    namespace: c.namespace,
    routerId: c.routerId,
    mode: c.mode,
    loadOf: (worker) => kv.loadOf(worker),
    decisionsOf: (worker) => stats.decisionsByWorker.get(worker) ?? 0,
    logger,
  });
  logger.info({ routerId: c.routerId, mode: c.mode, models: registry.list().map((e) => e.name) }, 'router core started');

  let closed: Promise<void> | undefined;
  return {
    engine,
    registry,
    dashboard,
    stats: () => stats.snapshot(c.routerId, c.mode, kv.allLoads()),
    heldRequests: (model) => held.held(model),
    heldByModel: () => held.heldByModel(),
    close: () =>
      (closed ??= (async () => {
        unsubscribeTracker();
        unsubscribeGreeter();
        await dashboard.close();
        await engine.shutdown();
        await figures.stop();
        await kv.close();
        await registry.close();
      })()),
  };
}
