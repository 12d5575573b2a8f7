/**
 * Builds a planner from options: the parts (election, observation source, connector; `parts.ts`),
 * the adjustment loop over them, its schedule and the metrics door. Owns the order of start-up and
 * shutdown:
 *
 *   start: parts (the election connects to etcd and campaigns) → loop → metrics door → schedule
 *          (the first interval ends one adjustment interval after start).
 *   close: schedule stops (an interval in progress finishes: nothing acts after this) → election
 *          closes (the lease is revoked: a waiting planner takes over at once) → source, connector
 *          (the workers keep running: a planner that stops leaves the cluster serving) → metrics door.
 */
import type { Logger } from '@switchyard/common';
import type { WirePlannerDecision } from '@switchyard/cluster';
import type { Decision, PlannerConfig } from '@switchyard/planner';
import { createMetricsDoor } from './metrics-server.js';
import type { PlannerAppOptions } from './options.js';
import { buildParts, type PlannerParts } from './parts.js';
import { PlannerLoop, runEvery, type PlannerStats } from './planner-loop.js';
import { renderPlannerMetrics } from './planner-metrics.js';

/** Longest a connector call may hold up its interval: the interval itself, at most a minute. */
export const MAX_CONNECTOR_TIMEOUT_MS = 60_000;

export interface RunningPlanner {
  readonly candidateId: string;
  readonly ports: { readonly metrics: number };
  stats(): PlannerStats;
  /** Stop (idempotent): see the module comment for the order. */
  close(): Promise<void>;
}

export async function startPlanner(
  options: PlannerAppOptions & { readonly config: PlannerConfig },
  logger: Logger,
  /** Parts built by the caller (tests); default: `buildParts` from the options. */
  given?: PlannerParts,
): Promise<RunningPlanner> {
  const parts = given ?? (await buildParts(options, logger));
  const { election, source, connector } = parts;
  const stopLeadershipLog = election.onChange((ch) => logger.info({ leading: ch.leading, reason: ch.reason, candidateId: election.candidateId }, ch.leading ? 'planner leading' : 'planner not leading'));
  const intervalMs = options.adjustmentIntervalSecs * 1000;
  const loop = new PlannerLoop({
    config: options.config,
    source,
    connector,
    leadership: election,
    dryRun: options.dryRun,
    connectorTimeoutMs: Math.min(intervalMs, MAX_CONNECTOR_TIMEOUT_MS),
    logger: logger.child({ component: 'planner-loop', model: options.model }),
    ...(parts.publishDecision === undefined ? {} : { onDecision: decisionPublisher(parts.publishDecision, election.candidateId, options, logger) }),
  });
  const door = createMetricsDoor({ port: options.metricsPort, host: options.metricsAddress, render: () => renderPlannerMetrics(loop.stats()), logger });
  const teardown = async (): Promise<void> => {
    loop.close();
    stopLeadershipLog();
    for (const [step, fn] of [
      ['election', () => election.close()],
      ['observation source', () => source.close()],
      ['connector', () => connector.close()],
      ['metrics door', () => door.close()],
    ] as const) {
      try {
        await fn();
      } catch (err) {
        logger.error({ err, step }, 'shutdown step failed');
      }
    }
  };
  let metricsPort: number;
  try {
    metricsPort = await door.listen();
  } catch (err) {
    await teardown();
    throw err;
  }
  const schedule = runEvery(intervalMs, () => loop.tick(), logger);
  logger.info(
    {
      ports: { metrics: metricsPort },
      candidateId: election.candidateId,
      leading: election.isLeader(),
      leader: election.leader(),
      namespace: options.namespace,
      model: options.model,
      mode: options.mode,
      connector: options.connector,
      dryRun: options.dryRun,
      adjustmentIntervalSecs: options.adjustmentIntervalSecs,
      bounds: options.config.bounds,
    },
    'planner started',
  );

  let closing: Promise<void> | undefined;
  return {
    candidateId: election.candidateId,
    ports: { metrics: metricsPort },
    stats: () => loop.stats(),
    close: () => {
      closing ??= (async () => {
        await schedule.stop();
        await teardown();
        logger.info({}, 'planner stopped');
      })();
      return closing;
    },
  };
}

/**
 * Decisions onto the event plane, fire and forget: a failed publish is logged (once per outage) and
 * dropped; while MAX_PENDING_DECISION_PUBLISHES are still waiting (NATS down), further ones are dropped.
 */
const MAX_PENDING_DECISION_PUBLISHES = 16;

function decisionPublisher(
  publish: (d: WirePlannerDecision) => Promise<void>,
  plannerId: string,
  options: { readonly model: string; readonly dryRun: boolean },
  logger: Logger,
): (d: Decision) => void {
  let pending = 0;
  let failing = false;
  return (d) => {
    if (pending >= MAX_PENDING_DECISION_PUBLISHES) return;
    pending++;
    const wire: WirePlannerDecision = { v: 1, plannerId, model: options.model, ts: Date.now(), pool: d.pool, from: d.from, to: d.to, direction: d.direction, reason: d.reason, dryRun: options.dryRun };
    publish(wire).then(
      () => {
        pending--;
        failing = false;
      },
      (err: unknown) => {
        pending--;
        if (!failing) logger.warn({ err }, 'planner: publishing a decision on the event plane failed; dropped');
        failing = true;
      },
    );
  };
}
