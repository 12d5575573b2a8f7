/**
 * DashboardFeed: the IO side of the router's dashboard. Feeds `DashboardState` (pure, bounded) from
 * what the router core already follows, and builds the page's snapshots:
 *
 * - workers joining and leaving: the model registry's changes (the discovery watch);
 * - the planners' decisions: a durable `router_planner_<routerId>` on `plannerDecisionsSubject(ns,
 *   planner)`, new messages only (started again every second after a failure; undecodable messages
 *   acked, dropped and counted in `invalid`);
 * - routing decisions, TTFT, ITL, request arrivals, disaggregation paths: written by the router's
 *   parts through `RouterStatsRecorder` (router-stats.ts), which holds the state;
 * - per worker at snapshot time: discovery's instances and roles, the latest load sample the KV
 *   consumer keeps, this router's decision count.
 *
 * `version` goes up on every change the feed sees itself (worker events, planner decisions) and on
 * every routing decision, so a reader can push a snapshot only when something happened. Nothing in a
 * snapshot is a secret: instance ids, model names, figures; no URL, token or credential.
 */
import { type Logger, pauseUnlessAborted } from '@switchyard/common';
import type { WorkerId } from '@switchyard/kv-router';
import { type EventPlane, type Namespace, componentName, plannerDecisionsSubject } from '@switchyard/runtime';
import { PLANNER_COMPONENT, type WireLoad } from '../protocols.js';
import { decodeWirePlannerDecision } from '../wire-codec.js';
import type { DashboardSnapshot, DashboardState, DashboardWorker } from './dashboard-state.js';
import { workerId } from './llm-worker-chooser.js';
import { type ModelRegistry, instanceRole } from './model-registry.js';

const SUBSCRIBE_RETRY_MS = 1_000;
/**
 * Worker rows in one snapshot (instance × model): keeps a snapshot of a large cluster far below the
 * event stream's per-client buffer (a row is about 250 bytes of JSON); the rest are counted only.
 */
export const MAX_DASHBOARD_WORKERS = 512;

export interface DashboardFeedOptions {
  readonly state: DashboardState;
  readonly registry: ModelRegistry;
  readonly eventPlane: EventPlane;
  readonly namespace: Namespace;
  readonly routerId: string;
  readonly mode: string;
  /** The latest load sample of a worker (`<instanceId>/<model>`), if any. */
  readonly loadOf: (worker: WorkerId) => WireLoad | undefined;
  /** Routing decisions this router took for a worker since start. */
  readonly decisionsOf: (worker: WorkerId) => number;
  readonly logger: Logger;
  readonly now?: () => number;
}

export class DashboardFeed {
  /** Planner decisions that could not be decoded. */
  invalid = 0;
  private changes = 0;
  private readonly abort = new AbortController();
  private readonly unsubscribe: () => void;
  private readonly running: Promise<void>;
  private readonly now: () => number;

  constructor(private readonly o: DashboardFeedOptions) {
    this.now = o.now ?? Date.now;
    this.unsubscribe = o.registry.onChange((c) => {
      if (c.type !== 'instance-added' && c.type !== 'instance-removed') return;
      o.state.workerEvent({ ts: this.now(), type: c.type === 'instance-added' ? 'joined' : 'left', model: c.model, instanceId: c.instanceId });
      this.changes++;
    });
    this.running = this.keepSubscribed();
  }

  /** Goes up whenever something the page shows changed (see the module comment). */
  get version(): number {
    return this.changes + this.o.state.decisionsTotal;
  }

  snapshot(): DashboardSnapshot {
    const { registry, loadOf, decisionsOf } = this.o;
    const workers: DashboardWorker[] = [];
    let total = 0;
    for (const e of registry.list()) {
      for (const id of e.instances.keys()) {
        if (total++ >= MAX_DASHBOARD_WORKERS) continue;
        const worker = workerId(id, e.name);
        const load = e.kind === 'llm' ? loadOf(worker) : undefined;
        workers.push({
          instanceId: id,
          model: e.name,
          kind: e.kind,
          role: e.kind === 'llm' ? instanceRole(e, id) : 'tensor',
          load:
            load === undefined
              ? null
              : {
                  ts: load.ts,
                  running: load.numRunning,
                  waiting: load.numWaiting,
                  kvUsage: load.kvUsage,
                  prefixHitRate: load.prefixCacheQueries > 0 ? load.prefixCacheHits / load.prefixCacheQueries : null,
                },
          decisions: decisionsOf(worker),
        });
      }
    }
    return this.o.state.snapshot(this.now(), { routerId: this.o.routerId, mode: this.o.mode, namespace: this.o.namespace }, workers, total);
  }

  /** Stop following the registry and the planners. Idempotent. */
  async close(): Promise<void> {
    this.unsubscribe();
    this.abort.abort();
    await this.running;
  }

  private async keepSubscribed(): Promise<void> {
    const signal = this.abort.signal;
    for (let failures = 0; !signal.aborted; ) {
      try {
        await this.consume();
        if (signal.aborted) return;
        throw new Error('the subscription ended');
      } catch (err) {
        if (signal.aborted) return;
        if (failures++ === 0) this.o.logger.warn({ err }, `router: planner decisions subscription failed; retrying every ${SUBSCRIBE_RETRY_MS} ms`);
        await pauseUnlessAborted(SUBSCRIBE_RETRY_MS, signal);
      }
    }
  }

  private async consume(): Promise<void> {
    const { eventPlane, namespace, routerId, state, logger } = this.o;
    const durable = `router_planner_${routerId.toLowerCase().replace(/[^a-z0-9_-]/g, '_')}`.slice(0, 63);
    const subject = plannerDecisionsSubject(namespace, componentName(PLANNER_COMPONENT));
    for await (const msg of eventPlane.subscribe({ subject, durable, startAt: 'new', signal: this.abort.signal })) {
      try {
        const d = decodeWirePlannerDecision(msg.payload);
        state.plannerDecided({ ts: d.ts, plannerId: d.plannerId, model: d.model, pool: d.pool, from: d.from, to: d.to, direction: d.direction, reason: d.reason, dryRun: d.dryRun });
        this.changes++;
      } catch (err) {
        this.invalid++;
        logger.warn({ err, seq: msg.seq }, 'router: dropping an undecodable planner decision');
      }
      msg.ack();
    }
  }
}
