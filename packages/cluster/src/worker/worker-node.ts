/**
 * A worker node: one engine joined to the cluster through the three runtime roles.
 *
 * Lifecycle (`WorkerNodeState`):
 * - starting: endpoints served on the request plane, then their instances registered, then one model
 *   card per READY model, KV events, load and forward-pass publishing started. `startWorkerNode` resolves here.
 * - serving: model changes (load / unload / poll) re-sync the cards (InferenceEngine.onModelChange;
 *   engines without it are polled every MODEL_POLL_MS) and re-attach KV and forward-pass publishing to new engines.
 * - draining (`drain()`): cards and instances leave Discovery first, so routers stop sending; then
 *   the endpoints stop with drain (in-flight requests finish); then, on a worker with a KV transfer
 *   server, the KV leases its prefills handed out get up to KV_LEASE_DRAIN_MS to be pulled and
 *   released; then queued KV events and forward-pass figures are flushed and load publishing stops. The engine itself keeps running: the app drains its front doors next.
 *   The `health` endpoint (not in Discovery) keeps answering `draining` until close: a router that
 *   sees the instance leave probes it and lets its streams finish instead of migrating them.
 * - closed (`close()`): drain if not yet, then close the KV transfer server and plane, Discovery
 *   (revokes the lease), the event plane and the request plane. The node owns the roles it was given.
 * - lease lost (etcd unreachable for longer than the lease TTL, or the lease expired): the node keeps
 *   serving and publishing — the request and event planes do not need etcd, and routers keep routing
 *   to the instances they know while their own etcd watch is down. Discovery restores the lease by
 *   itself once etcd answers (the same instance id, so NATS subjects, KV event ids and the routers'
 *   routing state stay valid) and re-registers what it held; then the node re-syncs its cards, so a
 *   model loaded or unloaded during the outage is announced right. `onLeaseLost` / `onLeaseRestored`
 *   tell the app (which only logs).
 */
import { silentLogger, type Logger } from '@switchyard/common';
import type { InferenceEngine } from '@switchyard/engine';
import type { LlmEndpoint } from '@switchyard/llm';
import {
  componentName,
  endpointAddress,
  forwardPassSubject,
  instanceAddress,
  kvEventsSubject,
  loadSubject,
  namespace as toNamespace,
  type Discovery,
  type EndpointHandler,
  type EventPlane,
  type InstanceId,
  type KvTransferPlane,
  type KvTransferServeOptions,
  type KvTransferServer,
  type RequestPlane,
  type ServedEndpoint,
} from '@switchyard/runtime';
import { GENERATE_ENDPOINT, HEALTH_ENDPOINT, INFER_ENDPOINT, KV_SNAPSHOT_ENDPOINT, STATS_ENDPOINT, WORKER_COMPONENT, type WireHealth, type WorkerRole } from '../protocols.js';
import { generateHandler, inferHandler, kvSnapshotHandler, statsHandler } from './endpoints.js';
import { engineKvBlockProvider, pinnedKvBlocks } from './kv-provider.js';
import { ForwardPassPublisher } from './forward-pass-publisher.js';
import { KvEventPublisher } from './kv-publisher.js';
import { LoadPublisher } from './load-publisher.js';
import { ModelCardRegistry } from './model-cards.js';

/** The cluster namespace a worker joins when none is given. */
export const DEFAULT_NAMESPACE = 'default';
/** How often an engine without `onModelChange` is polled for READY models. */
export const MODEL_POLL_MS = 1000;

export interface WorkerNodeOptions {
  readonly engine: InferenceEngine;
  readonly discovery: Discovery;
  readonly requestPlane: RequestPlane;
  readonly eventPlane: EventPlane;
  /** A NAME_PATTERN name; default DEFAULT_NAMESPACE. */
  readonly namespace?: string;
  readonly logger?: Logger;
  /** Load samples at most this often per model (default 1000 ms); a heartbeat goes out every 5 s anyway. */
  readonly loadIntervalMs?: number;
  /** An unchanged load sample goes out again this long after the last one (default LOAD_HEARTBEAT_MS, 5 s; never below loadIntervalMs). */
  readonly loadHeartbeatMs?: number;
  /** How often each LLM's forward-pass figures go out as one batch (default 1000 ms). */
  readonly forwardPassIntervalMs?: number;
  /** Least time between two KV event batches of one model (default KV_EVENTS_MIN_INTERVAL_MS, 10 ms; 0 = every macrotask). */
  readonly kvEventsIntervalMs?: number;
  /** Called when the lease is lost (the node keeps serving; Discovery restores the lease when etcd answers). */
  readonly onLeaseLost?: (cause: Error) => void;
  /** Called when the lease is restored and the model cards are re-synced. */
  readonly onLeaseRestored?: () => void;
  /**
   * Publish the LLM engines' KV events (default true). false: none are published and the cards say
   * `kvEvents: false`, so routers route these models in approximate mode (for engines whose events
   * cannot be trusted, or to compare routing with and without them).
   */
  readonly kvEvents?: boolean;
  /**
   * Disaggregation role of this worker's LLMs (on their cards; `prefill` serves only prefill-only
   * generate requests). Default 'aggregated'.
   */
  readonly role?: WorkerRole;
  /**
   * The KV transfer plane (owned by the node from now on: `close()` closes it). With it, the node
   * starts ONE transfer server for the process once it serves an LLM whose engine can transfer KV,
   * announces its address and layout on the LLM cards, hands out KV of prefill-only requests and
   * pulls KV for requests that bring a handle. Without it: none of that (aggregated only).
   */
  readonly kvTransferPlane?: KvTransferPlane;
  /** Where the transfer server listens and what it advertises (port 0: a free port). */
  readonly kvTransferServe?: KvTransferServeOptions;
  /**
   * The `host:port` to advertise instead of the server's own, when other workers reach it through a
   * port forward or proxy (`--kv-transfer-address host:port`). Default: the server's address.
   */
  readonly kvTransferAdvertisedAddress?: string;
  /** Called once the transfer server listens, with its advertised `host:port`. */
  readonly onKvTransferServing?: (address: string) => void;
}

/**
 * Drain of a worker with a transfer server: how long to wait for the KV leases it handed out to be
 * pulled and released (decode workers pull right after the prefill's last frame) before it stops
 * serving them.
 */
export const KV_LEASE_DRAIN_MS = 5000;

export type WorkerNodeState = 'serving' | 'draining' | 'closed';

export interface WorkerNode {
  /** This process's instance id (Discovery's lease id). */
  readonly instanceId: InstanceId;
  readonly state: WorkerNodeState;
  /** Names of the models with a registered card. */
  models(): string[];
  /** Leave Discovery, then finish in-flight requests. Idempotent. */
  drain(): Promise<void>;
  /**
   * drain() (when never started), then close Discovery (revoke the lease), the event plane and the
   * request plane. A drain still in progress is cut short: its remaining requests are cancelled.
   * Idempotent.
   */
  close(): Promise<void>;
}

export async function startWorkerNode(options: WorkerNodeOptions): Promise<WorkerNode> {
  const { engine, discovery, requestPlane, eventPlane } = options;
  const logger = (options.logger ?? silentLogger).child({ component: 'worker-node' });
  const ns = toNamespace(options.namespace ?? DEFAULT_NAMESPACE);
  const component = componentName(WORKER_COMPONENT);
  const id = discovery.instanceId;
  let state: WorkerNodeState = 'serving';

  const readyLlms = (): LlmEndpoint[] => engine.llmEndpoints?.() ?? [];
  // KV events are numbered per (worker, model) across engine reloads; kv_snapshot uses the same ids.
  const kvPublisher = new KvEventPublisher(eventPlane, kvEventsSubject(ns, component), id, logger, options.kvEventsIntervalMs);

  // KV transfer: one server per process, started when the first LLM that can transfer KV is announced
  const plane = options.kvTransferPlane;
  const role = options.role ?? 'aggregated';
  let transferServer: KvTransferServer | undefined;
  let advertised: string | undefined;
  let transferStarting: Promise<KvTransferServer> | undefined;
  const kvTransferAddress = async (): Promise<string | undefined> => {
    if (plane === undefined || state === 'closed') return undefined;
    transferStarting ??= plane.serve(engineKvBlockProvider(engine), options.kvTransferServe).then(
      (server) => {
        transferServer = server;
        advertised = options.kvTransferAdvertisedAddress ?? server.address;
        logger.info({ address: advertised, listening: server.address, role }, 'KV transfer server listening');
        options.onKvTransferServing?.(advertised);
        return server;
      },
      (err: unknown) => {
        transferStarting = undefined; // the next card sync tries again
        throw err;
      },
    );
    await transferStarting;
    return advertised;
  };

  // 1. serve, then register each instance (routers never see an instance that cannot answer yet)
  const generateOptions = {
    role,
    logger,
    ...(plane !== undefined ? { kvTransfer: { plane, address: () => advertised, instanceId: id } } : {}),
  };
  const handlers: Array<[string, EndpointHandler]> = [
    [GENERATE_ENDPOINT, generateHandler(engine, generateOptions)],
    [INFER_ENDPOINT, inferHandler(engine)],
    [KV_SNAPSHOT_ENDPOINT, kvSnapshotHandler(engine, (model, eventId) => kvPublisher.wireEventId(model, eventId))],
    [STATS_ENDPOINT, statsHandler(engine)],
  ];
  const served: ServedEndpoint[] = [];
  let health: ServedEndpoint | undefined;
  try {
    // health first: an instance in Discovery always answers its probe
    health = await requestPlane.serve(instanceAddress(endpointAddress(ns, component, HEALTH_ENDPOINT), id), async function* () {
      const answer: WireHealth = { state: state === 'serving' ? 'serving' : 'draining' };
      yield { ...answer };
    });
    for (const [name, handler] of handlers) {
      const endpoint = await requestPlane.serve(instanceAddress(endpointAddress(ns, component, name), id), handler);
      served.push(endpoint);
      await discovery.registerInstance({ v: 1, ...endpoint.address, subject: endpoint.subject, metadata: {} });
    }
    // a transfer server that cannot listen (port taken) fails the start, not a later card sync
    if (readyLlms().some((e) => e.kvTransfer !== undefined)) await kvTransferAddress();
  } catch (e) {
    await Promise.all([...served, ...(health ? [health] : [])].map((s) => s.stop({ drain: false }).catch(() => {})));
    await transferServer?.close().catch(() => {});
    throw e;
  }

  // 2. KV events and forward-pass figures: one subscription each per LLM engine, re-attached when a
  // reload replaces the engine
  const forwardPassPublisher = new ForwardPassPublisher({
    eventPlane,
    subject: forwardPassSubject(ns, component),
    instanceId: id,
    logger,
    ...(options.forwardPassIntervalMs !== undefined ? { intervalMs: options.forwardPassIntervalMs } : {}),
  });
  const attached = new Map<string, { endpoint: LlmEndpoint; detach: () => void }>();
  const syncKvAttachments = (): void => {
    const current = new Map(state === 'serving' ? readyLlms().map((e) => [e.card.name, e] as const) : []);
    for (const [name, a] of attached) {
      if (current.get(name) === a.endpoint) continue;
      a.detach();
      attached.delete(name);
    }
    for (const [name, endpoint] of current) {
      if (attached.has(name)) continue;
      const detachKv = endpoint.kv === undefined || options.kvEvents === false ? () => {} : kvPublisher.attach(name, endpoint.kv);
      const detachSteps = forwardPassPublisher.attach(name, endpoint);
      attached.set(name, {
        endpoint,
        detach: () => {
          detachKv();
          detachSteps();
        },
      });
    }
  };

  // 3. model cards, kept in sync with the engine
  const cards = new ModelCardRegistry(
    engine,
    discovery,
    { namespace: ns, instanceId: id, kvEvents: options.kvEvents !== false, role, ...(plane !== undefined ? { kvTransferAddress } : {}) },
    logger,
  );
  const onChange = (): void => {
    if (state !== 'serving') return;
    syncKvAttachments();
    cards.sync().catch((e: unknown) => logger.error({ err: e }, 'model card sync failed'));
  };
  let stopWatching: () => void;
  if (engine.onModelChange !== undefined) {
    stopWatching = engine.onModelChange(onChange);
  } else {
    const timer = setInterval(onChange, MODEL_POLL_MS);
    timer.unref();
    stopWatching = () => clearInterval(timer);
  }
  syncKvAttachments();
  await cards.sync();

  // 4. load
  const loadPublisher = new LoadPublisher({
    eventPlane,
    subject: loadSubject(ns, component),
    instanceId: id,
    logger,
    endpoints: readyLlms,
    ...(options.loadIntervalMs !== undefined ? { intervalMs: options.loadIntervalMs } : {}),
    ...(options.loadHeartbeatMs !== undefined ? { heartbeatMs: options.loadHeartbeatMs } : {}),
  });
  loadPublisher.start();
  forwardPassPublisher.start();

  const stopPublishing = async (): Promise<void> => {
    stopWatching();
    await loadPublisher.stop();
    for (const a of attached.values()) a.detach();
    attached.clear();
    await kvPublisher.close();
    await forwardPassPublisher.stop();
  };

  const unsubscribeLost = discovery.onLeaseLost((cause) => {
    if (state === 'closed') return;
    logger.warn({ err: cause, instanceId: id }, 'discovery lease lost: still serving; discovery registers this worker again when etcd answers');
    options.onLeaseLost?.(cause);
  });
  const unsubscribeRestored = discovery.onLeaseRestored(() => {
    if (state !== 'serving') return;
    // cards that failed to register (or changed) during the outage
    void cards
      .sync()
      .catch((e: unknown) => logger.error({ err: e }, 'model card sync failed'))
      .then(() => {
        logger.info({ instanceId: id, models: cards.models() }, 'discovery lease restored: this worker is registered again');
        options.onLeaseRestored?.();
      });
  });
  const unsubscribeLease = (): void => {
    unsubscribeLost();
    unsubscribeRestored();
  };

  // KV handed out by finished prefills is still pulled by decode workers after our endpoints drained
  const waitForLeases = async (): Promise<void> => {
    if (transferServer === undefined) return;
    const deadline = Date.now() + KV_LEASE_DRAIN_MS;
    while (pinnedKvBlocks(engine) > 0 && Date.now() < deadline && !closeRequested) await new Promise((r) => setTimeout(r, 20));
    const left = pinnedKvBlocks(engine);
    if (left > 0) logger.warn({ pinnedBlocks: left }, 'draining with KV blocks still pinned for decode workers: they prefill locally');
  };

  let closeRequested = false;
  let draining: Promise<void> | undefined;
  let drained = false;
  const drain = (): Promise<void> => {
    draining ??= (async () => {
      if (state === 'serving') state = 'draining';
      logger.info({ instanceId: id }, 'leaving discovery, draining cluster endpoints');
      stopWatching();
      await cards.unregisterAll();
      await Promise.all(
        served.map((s) => discovery.unregisterInstance(s.address).catch((e: unknown) => logger.warn({ err: e, endpoint: s.address.endpoint }, 'failed to unregister instance'))),
      );
      await Promise.all(served.map((s) => s.stop({ drain: true })));
      await waitForLeases();
      await stopPublishing();
      logger.info({ instanceId: id }, 'cluster endpoints drained');
    })().finally(() => (drained = true));
    return draining;
  };

  let closing: Promise<void> | undefined;
  const close = (): Promise<void> => {
    closing ??= (async () => {
      closeRequested = true;
      if (draining !== undefined && !drained) {
        // a drain is still waiting for requests (the caller's exit timeout ran out): abort them
        logger.warn({ instanceId: id }, 'closing with cluster requests in flight: cancelling them');
        await Promise.all(served.map((s) => s.stop({ drain: false }).catch(() => {})));
      }
      await drain().catch((e: unknown) => logger.error({ err: e }, 'drain failed'));
      unsubscribeLease();
      state = 'closed';
      await health!.stop({ drain: false }).catch(() => {});
      // after the drain: pulls of the leases handed out had their chance
      const server = await transferStarting?.catch(() => undefined);
      await server?.close().catch((e: unknown) => logger.warn({ err: e }, 'closing the KV transfer server failed'));
      await plane?.close().catch((e: unknown) => logger.warn({ err: e }, 'closing the KV transfer plane failed'));
      await discovery.close().catch((e: unknown) => logger.warn({ err: e }, 'closing discovery failed'));
      await eventPlane.close().catch((e: unknown) => logger.warn({ err: e }, 'closing the event plane failed'));
      await requestPlane.close().catch((e: unknown) => logger.warn({ err: e }, 'closing the request plane failed'));
    })();
    return closing;
  };

  logger.info({ namespace: ns, instanceId: id, models: cards.models() }, 'worker joined the cluster');
  return {
    instanceId: id,
    get state() {
      return state;
    },
    models: () => cards.models(),
    drain,
    close,
  };
}
