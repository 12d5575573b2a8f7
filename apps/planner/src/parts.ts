/**
 * The planner's parts, built from its options in one place: the leader election (etcd), the
 * observation source and the connector. Everything else in the app takes them as ports
 * (`LeaderElection`, `ObservationSource`, `Connector`), so wiring another implementation is a case
 * in `createConnector` / `createObservationSource` and a value in `CONNECTORS`.
 *
 * Built today:
 * - connector `memory`: replica counts held in this process, each pool starting at its
 *   `--*-min-replicas`; acting changes only those counts. For trying the planner (with `--dry-run`)
 *   and tests. The `local` (worker processes) and `kubernetes` (Deployment scale subresource)
 *   connectors plug in here.
 * - observation source: the memory source (`MemoryObservationSource`), which nothing feeds yet: the
 *   planner sees intervals without load reports and holds. The event-plane source (workers' load
 *   and forward-pass figures, routers' request figures from NATS) plugs in here.
 */
import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import type { Logger } from '@switchyard/common';
import { MemoryConnector, MemoryObservationSource, POOLS, type Connector, type ObservationSource, type PlannerConfig, type Pool } from '@switchyard/planner';
import { EtcdLeaderElection, type LeaderElection } from '@switchyard/runtime';

/** `--connector` values this build has. */
export const CONNECTORS = ['memory'] as const;
export type ConnectorKind = (typeof CONNECTORS)[number];
export const DEFAULT_CONNECTOR: ConnectorKind = 'memory';

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
}

export interface PlannerParts {
  readonly election: LeaderElection;
  readonly source: ObservationSource;
  readonly connector: Connector;
}

/** A candidate id that tells an operator which process leads: host, pid and a random suffix. */
export function candidateId(): string {
  return `${hostname().slice(0, 200)}-${process.pid}-${randomBytes(3).toString('hex')}`;
}

export function createConnector(options: PartsOptions): Connector {
  switch (options.connector) {
    case 'memory': {
      const initial: Partial<Record<Pool, number>> = {};
      for (const pool of POOLS) initial[pool] = options.config.bounds[pool].minReplicas;
      return new MemoryConnector(initial);
    }
  }
}

export function createObservationSource(_options: PartsOptions, logger: Logger): ObservationSource {
  logger.warn({}, 'no event-plane observation source in this build: the planner sees no load reports and holds every pool');
  return new MemoryObservationSource();
}

/** Connect the election (fails `unavailable` when etcd cannot be reached), then the source and connector. */
export async function buildParts(options: PartsOptions, logger: Logger): Promise<PlannerParts> {
  const election = await EtcdLeaderElection.connect({
    url: options.etcd,
    namespace: options.namespace,
    name: PLANNER_ELECTION,
    candidateId: candidateId(),
    leaseTtlSeconds: options.leaderLeaseTtlSecs,
    logger,
  });
  try {
    return { election, source: createObservationSource(options, logger), connector: createConnector(options) };
  } catch (err) {
    await election.close();
    throw err;
  }
}
