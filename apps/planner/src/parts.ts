/**
 * The planner's parts, built from its options in one place: the leader election (etcd), the
 * observation source and the connector. Everything else in the app takes them as ports
 * (`LeaderElection`, `ObservationSource`, `Connector`), so wiring another implementation is a case
 * in `createConnector` / `createObservationSource` and a value in `CONNECTORS`.
 *
 * - observation source: `EventPlaneObservationSource` (@switchyard/cluster) on a Discovery (etcd) and
 *   an EventPlane (NATS JetStream) of its own: the workers' load and forward-pass figures and the
 *   routers' request figures for `--model`. It owns those roles (closed with it).
 * - connector (`--connector`):
 *   - `local` (default): `switchyard worker` processes on this machine from the per-pool templates
 *     (`createLocalConnector`, @switchyard/runtime); its drain choice asks `ReplicaLoads` for each
 *     replica's latest load sample;
 *   - `kubernetes`: each pool's Deployment through its scale subresource (`KubernetesConnector`);
 *   - `memory`: replica counts held in this process, each pool starting at its minimum; acting
 *     changes only those counts. For trying the planner without workers (with `--dry-run`) and tests.
 *   Every one is held by the leader only (`LeaderHeldConnector`): opened on the leader's first call,
 *   closed when leadership goes, so the local connector's state directory passes from a planner to
 *   the one that takes over, which adopts the running replicas.
 */
import { createHash, randomBytes } from 'node:crypto';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Logger } from '@switchyard/common';
import { EventPlaneObservationSource, PLANNER_COMPONENT, type WirePlannerDecision } from '@switchyard/cluster';
import { MemoryConnector, POOLS, type Connector, type ObservationSource, type PlannerConfig, type Pool } from '@switchyard/planner';
import {
  EtcdLeaderElection,
  componentName,
  createDiscovery,
  createEventPlane,
  createLocalConnector,
  type Discovery,
  type EventPlane,
  type LeaderElection,
  namespace,
  plannerDecisionsSubject,
} from '@switchyard/runtime';
import { LeaderHeldConnector } from './leader-connector.js';
import { ObservedSource, ReplicaLoads } from './replica-loads.js';

/** `--connector` values this build has. */
export const CONNECTORS = ['local', 'kubernetes', 'memory'] as const;
export type ConnectorKind = (typeof CONNECTORS)[number];
export const DEFAULT_CONNECTOR: ConnectorKind = 'local';

/** The election every planner of a namespace campaigns in. */
export const PLANNER_ELECTION = 'planner';

/** What `buildParts` needs from the options. */
export interface PartsOptions {
  readonly etcd: string;
  readonly nats: string;
  readonly namespace: string;
  readonly model: string;
  readonly connector: ConnectorKind;
  readonly leaderLeaseTtlSecs: number;
  readonly config: PlannerConfig;
  /** local */
  readonly workerTemplates: Partial<Record<Pool, readonly string[]>>;
  readonly stateDir: string | undefined;
  readonly drainTimeoutSecs: number;
  /** kubernetes */
  readonly kubeDeployments: Partial<Record<Pool, string>>;
  readonly kubeconfig: string | undefined;
  readonly kubeNamespace: string | undefined;
}

export interface PlannerParts {
  readonly election: LeaderElection;
  readonly source: ObservationSource;
  readonly connector: Connector;
  /**
   * Publishes one decision on the event plane (`plannerDecisionsSubject(ns, planner)`), for routers'
   * dashboards; rejects when it could not be stored. Absent: decisions are only logged and exported.
   */
  readonly publishDecision?: (decision: WirePlannerDecision) => Promise<void>;
}

/** A candidate id that tells an operator which process leads: host, pid and a random suffix. */
export function candidateId(): string {
  return `${hostname().slice(0, 200)}-${process.pid}-${randomBytes(3).toString('hex')}`;
}

/**
 * The local connector's state directory when `--state-dir` is not given: one per namespace and
 * model under the OS temporary directory, so planners of one machine that take over from each other
 * share it. `<tmpdir>/switchyard-planner/<namespace>/<model, path-safe>-<hash of the model>`.
 */
export function defaultStateDir(namespace: string, model: string): string {
  const safe = model.replace(/[^A-Za-z0-9._-]/g, '_').slice(0, 64);
  const hash = createHash('sha256').update(model).digest('hex').slice(0, 8);
  return join(tmpdir(), 'switchyard-planner', namespace, `${safe}-${hash}`);
}

/**
 * Opens the real connector (called by `LeaderHeldConnector` on the leader's first call). `loads`
 * answers the local connector's drain choice.
 */
export async function openConnector(options: PartsOptions, logger: Logger, loads?: ReplicaLoads): Promise<Connector> {
  switch (options.connector) {
    case 'memory': {
      const initial: Partial<Record<Pool, number>> = {};
      for (const pool of POOLS) initial[pool] = options.config.bounds[pool].minReplicas;
      return new MemoryConnector(initial);
    }
    case 'local': {
      const maxReplicas = Math.max(...Object.keys(options.workerTemplates).map((p) => options.config.bounds[p as Pool].maxReplicas));
      return createLocalConnector({
        stateDir: options.stateDir ?? defaultStateDir(options.namespace, options.model),
        pools: options.workerTemplates,
        maxReplicas,
        drainTimeoutMs: options.drainTimeoutSecs * 1000,
        ...(loads === undefined
          ? {}
          : {
              loadOf: (replica) => {
                const load = loads.loadOf(replica);
                logger.debug({ replica: replica.id, load: load ?? 'unknown' }, 'planner: replica load for the drain choice');
                return load;
              },
            }),
        logger: logger.child({ component: 'local-connector' }),
      });
    }
    case 'kubernetes':
      return kubernetesConnector(options, logger);
  }
}

/** The Kubernetes connector; its module (and @kubernetes/client-node) is loaded only for `--connector=kubernetes`. */
async function kubernetesConnector(options: PartsOptions, logger: Logger): Promise<Connector> {
  const { KubernetesConnector } = await import('@switchyard/runtime/kubernetes');
  return new KubernetesConnector({
    deployments: options.kubeDeployments,
    ...(options.kubeconfig === undefined ? {} : { kubeconfig: options.kubeconfig }),
    ...(options.kubeNamespace === undefined ? {} : { namespace: options.kubeNamespace }),
    logger: logger.child({ component: 'kubernetes-connector' }),
  });
}

/** The event-plane source on roles of its own (closed with it), plus the replica loads the local connector asks. */
export async function createObservationSource(
  options: PartsOptions,
  logger: Logger,
): Promise<{ source: ObservationSource; loads: ReplicaLoads | undefined; eventPlane: EventPlane }> {
  const config = { namespace: options.namespace, etcdUrl: options.etcd, natsUrl: options.nats, logger };
  let discovery: Discovery | undefined;
  let eventPlane: EventPlane | undefined;
  try {
    discovery = await createDiscovery(config);
    eventPlane = await createEventPlane(config);
    const source = await EventPlaneObservationSource.start({
      eventPlane,
      discovery,
      namespace: options.namespace,
      model: options.model,
      logger: logger.child({ component: 'observations' }),
    });
    const loads = options.connector === 'local' ? new ReplicaLoads(discovery, options.namespace, options.model, logger) : undefined;
    return { source: new ObservedSource(source, loads, [eventPlane, discovery]), loads, eventPlane };
  } catch (err) {
    await eventPlane?.close().catch(() => undefined);
    await discovery?.close().catch(() => undefined);
    throw err;
  }
}

/**
 * Connect the election (fails `unavailable` when etcd cannot be reached), then the source (etcd and
 * NATS) and the connector (a Kubernetes configuration is checked here, before the first interval).
 */
export async function buildParts(options: PartsOptions, logger: Logger): Promise<PlannerParts> {
  const election = await EtcdLeaderElection.connect({
    url: options.etcd,
    namespace: options.namespace,
    name: PLANNER_ELECTION,
    candidateId: candidateId(),
    leaseTtlSeconds: options.leaderLeaseTtlSecs,
    logger,
  });
  let source: ObservationSource | undefined;
  try {
    if (options.connector === 'kubernetes') await kubernetesConnector(options, logger); // checks the configuration; holds nothing
    const built = await createObservationSource(options, logger);
    source = built.source;
    const connector = new LeaderHeldConnector(() => openConnector(options, logger, built.loads), election, logger);
    const subject = plannerDecisionsSubject(namespace(options.namespace), componentName(PLANNER_COMPONENT));
    const publishDecision = async (d: WirePlannerDecision): Promise<void> => {
      await built.eventPlane.publish(subject, d);
    };
    return { election, source, connector, publishDecision };
  } catch (err) {
    await source?.close().catch(() => undefined);
    await election.close();
    throw err;
  }
}
