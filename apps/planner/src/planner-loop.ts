/**
 * The planner's adjustment loop: what happens each interval, over its three ports (observations,
 * connector, leadership). No IO of its own and no timer: `tick()` is one interval, `runEvery` the
 * schedule, so tests drive it with memory twins and a fake clock.
 *
 * One interval (`tick`):
 *   1. collect the interval's observations — every planner does, leading or not, so the source's
 *      window stays one interval long and a new leader's first interval is a normal one;
 *   2. not leading → done (`following`);
 *   3. leading: read the replicas from the connector, put them into the observations (only pools
 *      the connector manages are decided), `decide`, log every decision as one JSON line with its
 *      inputs and reason (and hand it to `onDecision`: published for routers' dashboards), and — unless dry-run, and only while still leading — ask the connector
 *      for each changed pool's target.
 * A failing or hanging connector call is logged and counted, never fatal: the interval ends, the
 * next one tries again. A call still running when the next interval comes makes that interval skip
 * (the connector is never called concurrently with itself).
 *
 * `PlannerState` carries across intervals while leading. On gaining leadership it starts afresh, as
 * if every pool had just scaled up: a new leader does not know its predecessor's last scale-up, so it
 * holds decode and aggregated scale-downs for the cooldown (`decodeScaleDownCooldownIntervals`)
 * rather than shrink a pool that was grown a moment ago.
 */
import type { Logger } from '@switchyard/common';
import {
  POOLS,
  decide,
  type Connector,
  type Decision,
  type Direction,
  type ObservationSource,
  type Observations,
  type PlannerConfig,
  type PlannerState,
  type Pool,
  type PoolObservation,
  type PredictedDemand,
} from '@switchyard/planner';
import type { LeaderElection } from '@switchyard/runtime';

export type ConnectorOperation = 'replicas' | 'scale';

export interface PlannerLoopOptions {
  readonly config: PlannerConfig;
  readonly source: ObservationSource;
  readonly connector: Connector;
  readonly leadership: Pick<LeaderElection, 'isLeader' | 'onChange'>;
  /** Decide and report, never call `connector.scale`. */
  readonly dryRun: boolean;
  /** Longest wait for one connector call before the interval gives up on it (it keeps running). */
  readonly connectorTimeoutMs: number;
  readonly logger: Logger;
  /**
   * Called with each decision of a leading interval, right after it is logged (before acting), for
   * the event plane (routers' dashboards). Must not throw; the loop does not wait for it.
   */
  readonly onDecision?: (decision: Decision) => void;
}

/** How an interval ended. */
export type TickOutcome =
  | { readonly kind: 'following' }
  | { readonly kind: 'decided'; readonly decisions: readonly Decision[]; readonly acted: readonly Pool[] }
  | { readonly kind: 'skipped'; readonly reason: SkipReason };

export type SkipReason = 'busy' | 'observations_failed' | 'connector_failed' | 'connector_busy' | 'leadership_lost';

/** Cumulative since start, read at every metrics scrape. */
export interface PlannerStats {
  readonly leading: boolean;
  readonly intervals: Readonly<Record<TickOutcome['kind'], number>>;
  /**
   * Per pool: the last decision's target (`desired`) and the connector's count it started from
   * (`actual`); empty while following.
   */
  readonly replicas: Readonly<Partial<Record<Pool, { readonly desired: number; readonly actual: number }>>>;
  readonly decisions: readonly { readonly pool: Pool; readonly direction: Direction; readonly reason: string; readonly count: number }[];
  /** SLA mode: the last forecast (undefined while following). */
  readonly predicted: PredictedDemand | undefined;
  readonly connectorErrors: Readonly<Record<ConnectorOperation, number>>;
  readonly observationErrors: number;
}

/** `PlannerState` of a leader that just took over (see the module comment). */
export function leaderStartState(): PlannerState {
  return { interval: 0, lastScaleUp: { decode: -1, aggregated: -1 }, predictors: {} };
}

type CallResult<T> = { ok: true; value: T } | { ok: false; error: unknown; timedOut: boolean };

export class PlannerLoop {
  private state: PlannerState = leaderStartState();
  /** Leadership was (re)gained since the last leading interval: start from `leaderStartState`. */
  private freshLeader = true;
  private ticking = false;
  /** A connector call that outlived its interval (timed out) and has not settled yet. */
  private straggler: Promise<unknown> | undefined;
  private readonly unsubscribe: () => void;
  private readonly intervals = { following: 0, decided: 0, skipped: 0 };
  private readonly replicas: Partial<Record<Pool, { desired: number; actual: number }>> = {};
  private readonly decisionCounts = new Map<string, { pool: Pool; direction: Direction; reason: string; count: number }>();
  private predicted: PredictedDemand | undefined;
  private readonly connectorErrors: Record<ConnectorOperation, number> = { replicas: 0, scale: 0 };
  private observationErrors = 0;

  constructor(private readonly o: PlannerLoopOptions) {
    this.unsubscribe = o.leadership.onChange((ch) => {
      if (ch.leading) this.freshLeader = true;
    });
  }

  /** One adjustment interval (see the module comment). A call while one runs returns `busy`. */
  async tick(): Promise<TickOutcome> {
    if (this.ticking) return this.count({ kind: 'skipped', reason: 'busy' });
    this.ticking = true;
    try {
      return this.count(await this.step());
    } finally {
      this.ticking = false;
    }
  }

  stats(): PlannerStats {
    return {
      leading: this.o.leadership.isLeader(),
      intervals: { ...this.intervals },
      replicas: Object.fromEntries(Object.entries(this.replicas).map(([k, v]) => [k, { ...v }])),
      decisions: [...this.decisionCounts.values()].map((d) => ({ ...d })),
      predicted: this.predicted,
      connectorErrors: { ...this.connectorErrors },
      observationErrors: this.observationErrors,
    };
  }

  /** Stop listening to leadership changes. The loop's runner is stopped by its owner. */
  close(): void {
    this.unsubscribe();
  }

  private count(outcome: TickOutcome): TickOutcome {
    this.intervals[outcome.kind]++;
    return outcome;
  }

  private async step(): Promise<TickOutcome> {
    const { logger, connector, leadership } = this.o;
    let observed: Observations;
    try {
      observed = this.o.source.collect();
    } catch (err) {
      this.observationErrors++;
      logger.error({ err }, 'planner: collecting observations failed; interval skipped');
      return { kind: 'skipped', reason: 'observations_failed' };
    }
    if (!leadership.isLeader()) {
      // only the leader's gauges describe the pools: a follower's would be stale
      for (const pool of POOLS) delete this.replicas[pool];
      this.predicted = undefined;
      return { kind: 'following' };
    }
    if (this.straggler !== undefined) {
      logger.warn({}, 'planner: a connector call from an earlier interval is still running; interval skipped');
      return { kind: 'skipped', reason: 'connector_busy' };
    }
    if (this.freshLeader) {
      this.freshLeader = false;
      this.state = leaderStartState();
    }

    const counted = await this.call('replicas', () => connector.replicas());
    if (!counted.ok) return { kind: 'skipped', reason: 'connector_failed' };
    const bad = Object.entries(counted.value).filter(([, n]) => !Number.isSafeInteger(n) || n! < 0);
    if (bad.length > 0) {
      this.connectorErrors.replicas++;
      logger.error({ replicas: counted.value }, 'planner: the connector reported an invalid replica count; interval skipped');
      return { kind: 'skipped', reason: 'connector_failed' };
    }
    const obs = withReplicas(observed, counted.value);
    const result = decide(this.state, obs, this.o.config);
    this.state = result.nextState;
    if (result.predicted !== undefined) this.predicted = result.predicted;
    const interval = result.nextState.interval - 1;
    for (const d of result.decisions) {
      this.replicas[d.pool] = { desired: d.to, actual: d.from };
      const key = `${d.pool}\0${d.direction}\0${d.reason}`;
      const c = this.decisionCounts.get(key);
      if (c === undefined) this.decisionCounts.set(key, { pool: d.pool, direction: d.direction, reason: d.reason, count: 1 });
      else c.count++;
      logger.info(
        {
          event: 'planner_decision',
          interval,
          mode: this.o.config.mode,
          dryRun: this.o.dryRun,
          pool: d.pool,
          from: d.from,
          to: d.to,
          direction: d.direction,
          reason: d.reason,
          inputs: d.inputs,
          intervalSec: obs.intervalSec,
          ...(result.predicted === undefined ? {} : { predicted: result.predicted }),
        },
        'planner decision',
      );
      this.o.onDecision?.(d);
    }

    const acted: Pool[] = [];
    if (!this.o.dryRun) {
      for (const d of result.decisions) {
        if (d.to === d.from) continue;
        if (!leadership.isLeader()) {
          logger.warn({ pool: d.pool, from: d.from, to: d.to }, 'planner: leadership lost before acting; not scaling');
          return { kind: 'skipped', reason: 'leadership_lost' };
        }
        const r = await this.call('scale', () => connector.scale(d.pool, d.to), { pool: d.pool, target: d.to });
        if (r.ok) acted.push(d.pool);
        if (!r.ok && r.timedOut) break; // the call still runs: no other call until it settles
      }
    }
    return { kind: 'decided', decisions: result.decisions, acted };
  }

  /** One connector call, bounded by `connectorTimeoutMs`; failures are logged and counted. */
  private async call<T>(op: ConnectorOperation, fn: () => Promise<T>, context: object = {}): Promise<CallResult<T>> {
    let timer: NodeJS.Timeout | undefined;
    let p: Promise<T>;
    try {
      p = fn();
    } catch (error) {
      p = Promise.reject(error);
    }
    const timeout = new Promise<'timeout'>((resolve) => {
      timer = setTimeout(() => resolve('timeout'), this.o.connectorTimeoutMs);
    });
    let r: CallResult<T>;
    try {
      const v = await Promise.race([p.then((value) => ({ value })), timeout]);
      if (v === 'timeout') {
        const straggler: Promise<unknown> = p.then(
          () => undefined,
          () => undefined,
        );
        this.straggler = straggler;
        void straggler.then(() => {
          if (this.straggler === straggler) this.straggler = undefined;
        });
        r = { ok: false, error: new Error(`no answer within ${this.o.connectorTimeoutMs} ms`), timedOut: true };
      } else {
        r = { ok: true, value: v.value };
      }
    } catch (error) {
      r = { ok: false, error, timedOut: false };
    } finally {
      clearTimeout(timer);
    }
    if (!r.ok) {
      this.connectorErrors[op]++;
      this.o.logger.error({ ...context, operation: op, err: r.error }, `planner: connector ${op} failed`);
    }
    return r;
  }
}

/**
 * The observations with each managed pool's replica count from the connector. A pool the connector
 * manages but nothing reported on is present with no load samples (it may have 0 workers); a pool
 * the connector does not manage is left out (nothing could act on it).
 */
export function withReplicas(obs: Observations, counts: Partial<Record<Pool, number>>): Observations {
  const pools: Partial<Record<Pool, PoolObservation>> = {};
  for (const pool of POOLS) {
    const n = counts[pool];
    if (n === undefined) continue;
    const seen = obs.pools[pool];
    pools[pool] = { ...(seen ?? { load: [] }), replicas: n };
  }
  return { ...obs, pools };
}

/** Runs `step` every `intervalMs`, never two at once: the next starts `intervalMs` after the previous started, or at once if it overran. */
export interface Schedule {
  /** Stop scheduling and wait for a step in progress. Idempotent. */
  stop(): Promise<void>;
}

export function runEvery(intervalMs: number, step: () => Promise<unknown>, logger: Logger, now: () => number = Date.now): Schedule {
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<void> | undefined;
  const schedule = (delay: number): void => {
    if (stopped) return;
    timer = setTimeout(() => {
      const started = now();
      running = step()
        .then(
          () => undefined,
          (err: unknown) => logger.error({ err }, 'planner: interval failed'),
        )
        .finally(() => {
          running = undefined;
          const took = now() - started;
          if (took > intervalMs) logger.warn({ tookMs: took, intervalMs }, 'planner: interval overran; the next starts at once');
          schedule(Math.max(0, intervalMs - took));
        });
    }, delay);
  };
  schedule(intervalMs);
  return {
    stop: async () => {
      stopped = true;
      clearTimeout(timer);
      await running;
    },
  };
}
