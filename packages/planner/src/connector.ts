/**
 * The planner's two ports: where its observations come from and how it acts. The planner app wires
 * real ones (the event plane; local processes or a Kubernetes Deployment), the cluster simulator
 * virtual ones, unit tests the memory connector below. Nothing here does IO.
 */
import { invalidArgument, unavailable } from '@switchyard/common';
import type { Observations, Pool } from './observations.js';

/**
 * Acts on the pools. Called only by the leading planner, once per adjustment interval at most,
 * never concurrently with itself.
 */
export interface Connector {
  /**
   * Replicas each pool has now as the connector counts them: started and not yet told to drain
   * (a replica still starting counts; a draining one does not). Pools the connector does not manage
   * are absent.
   */
  replicas(): Promise<Partial<Record<Pool, number>>>;
  /**
   * Asks for `target` replicas of `pool` (0 allowed). Resolves once the change is under way, not
   * when it is complete. A scale-down is always a drain: the replica leaves discovery, finishes (or
   * hands over) its in-flight requests, then exits; it never cuts a request. Rejects with a
   * `SwitchyardError` (invalid_argument for an unmanaged pool or a bad target, unavailable when the
   * backend cannot be reached).
   */
  scale(pool: Pool, target: number): Promise<void>;
  /** Stops managing. Replicas keep running: a planner that stops leaves the cluster serving. Idempotent. */
  close(): Promise<void>;
}

/**
 * What the planner sees each interval. `collect` is called once per adjustment interval and returns
 * the figures gathered since the previous call (the first call: since the source started), with
 * `intervalSec` the real time they cover; `replicas` of each pool is filled in by the caller from
 * its connector.
 */
export interface ObservationSource {
  collect(): Observations;
  close(): Promise<void>;
}

/** The memory connector: replica counts in a map, scale applies at once. For unit tests and dry runs. */
export class MemoryConnector implements Connector {
  readonly calls: { pool: Pool; target: number }[] = [];
  private readonly counts: Partial<Record<Pool, number>>;
  private closed = false;

  constructor(initial: Partial<Record<Pool, number>>) {
    this.counts = { ...initial };
  }

  replicas(): Promise<Partial<Record<Pool, number>>> {
    return Promise.resolve({ ...this.counts });
  }

  scale(pool: Pool, target: number): Promise<void> {
    if (this.closed) return Promise.reject(unavailable('connector closed'));
    if (!(pool in this.counts)) return Promise.reject(invalidArgument(`pool ${pool} is not managed`));
    if (!Number.isInteger(target) || target < 0) return Promise.reject(invalidArgument(`bad target ${target}: a non-negative integer`));
    this.calls.push({ pool, target });
    this.counts[pool] = target;
    return Promise.resolve();
  }

  close(): Promise<void> {
    this.closed = true;
    return Promise.resolve();
  }
}
