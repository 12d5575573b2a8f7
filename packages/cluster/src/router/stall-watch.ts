/**
 * watchStall: the stall probe of one attempt in flight to a worker instance, shared by every router
 * path that waits on a worker (RoutedLlmEndpoint's generate streams, ClusterEngine's KServe tensor
 * requests). When no frame came for `stallProbeMs` (the first one included: a worker killed before it
 * answered anything), the instance's `health` endpoint is probed (HealthProber); dead → the instance
 * is inhibited and the attempt aborted with an InstanceGoneReason, so its owner re-sends it or fails
 * it `unavailable`; alive (serving or draining) → watch again. A kill -9'ed worker's requests are
 * thus answered within stallProbeMs + one probe instead of after the lease TTL (~10 s) or the request
 * plane's idle timeout (30 s). A slow but live worker costs one probe per `stallProbeMs` per instance
 * (probes of one instance share one request while in flight).
 *
 * Every attempt watched with the same `stallProbeMs` shares one unref'd timer (IdleSweep: the
 * probe starts at the moment a timer of its own would have fired); `stop()` (call it in `finally`)
 * cancels everything, including a probe's result.
 */
import type { Logger } from '@switchyard/common';
import type { InstanceId } from '@switchyard/runtime';
import { IdleSweep } from '@switchyard/runtime/internal';
import type { HealthProber } from './health-prober.js';
import { type AttemptAbort, InstanceGoneReason, type InstanceTracker } from './instance-tracker.js';
import type { RouterStatsRecorder } from './router-stats.js';

export interface StallWatchDeps {
  readonly prober: HealthProber | undefined;
  /** No frame for this long → probe. 0 or absent = no watch. */
  readonly stallProbeMs: number | undefined;
  readonly tracker: InstanceTracker;
  readonly stats: RouterStatsRecorder;
  readonly logger: Logger;
}

export interface StallWatch {
  /** A frame arrived: the attempt is alive. */
  frame(): void;
  stop(): void;
}

const NO_WATCH: StallWatch = { frame: () => {}, stop: () => {} };

/** One attempt in a stall sweep: silent for the sweep's `stallProbeMs` → `probe`. */
interface Watched {
  lastActive: number;
  readonly probe: () => void;
}

/**
 * The sweeps, by stall probe length: every attempt in flight with the same `stallProbeMs` shares one
 * timer (IdleSweep) instead of arming and clearing one of its own per request. An attempt leaves its
 * sweep while its instance is probed, and comes back when the probe says alive.
 */
const sweeps = new Map<number, IdleSweep<Watched>>();

function sweepOf(ms: number): IdleSweep<Watched> {
  let sweep = sweeps.get(ms);
  if (sweep === undefined) {
    const made = new IdleSweep<Watched>(ms, (w) => {
      made.delete(w);
      w.probe();
    });
    sweeps.set(ms, (sweep = made));
  }
  return sweep;
}

/** Watch one attempt to `instance`; `attempt` is aborted with an InstanceGoneReason when the instance is found dead. */
export function watchStall(deps: StallWatchDeps, instance: InstanceId, attempt: AttemptAbort, requestId: string): StallWatch {
  const ms = deps.stallProbeMs ?? 0;
  const prober = deps.prober;
  if (ms <= 0 || prober === undefined) return NO_WATCH;
  const sweep = sweepOf(ms);
  let stopped = false;
  const watched: Watched = {
    lastActive: 0,
    probe: () => {
      void prober.probe(instance).then((health) => {
        if (stopped) return;
        if (health === 'dead') {
          deps.stats.stallProbeAborts++;
          deps.tracker.inhibit(instance); // still in discovery until its lease expires: route elsewhere
          deps.logger.warn({ requestId, instance, silentMs: Date.now() - watched.lastActive }, 'router: request silent and its instance is dead; re-sending or failing it');
          attempt.abort(new InstanceGoneReason(instance));
          return;
        }
        sweep.add(watched); // silent from now again
      });
    },
  };
  sweep.add(watched);
  return {
    frame: () => {
      watched.lastActive = Date.now();
    },
    stop: () => {
      stopped = true;
      sweep.delete(watched);
    },
  };
}
