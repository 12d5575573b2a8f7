/**
 * InstanceTracker: router-local facts about worker instances that discovery does not (yet) know.
 *
 * - **Inhibition** (Dynamo's `report_instance_down`): an instance whose request reached nobody or whose
 *   stream died is skipped by every routing decision of this router at once, instead of receiving
 *   traffic until its lease expires (up to 10 s). It is un-inhibited when discovery removes it (it is
 *   gone anyway; if it comes back, it is a new registration) or after `inhibitMs`. Inhibition is a
 *   preference, not a ban: when every instance left is inhibited (all of them failed during a NATS
 *   outage, say), routing tries them anyway rather than fail the request unseen (`preferUninhibited`).
 * - **In-flight requests** per instance: the count drives tensor-model selection (least in-flight),
 *   and the abort handles let the router cut every stream to an instance the moment discovery says it
 *   left (Dynamo PR #13095), so they migrate without waiting for an idle timeout.
 *
 * Single-threaded (the event loop); no method awaits.
 */
import type { InstanceId } from '@switchyard/runtime';

/** How long an instance stays inhibited when discovery does not remove it first (≈ one lease TTL). */
export const DEFAULT_INHIBIT_MS = 10_000;

/** How an attempt in flight is cut: its `AbortController` or `Cancellation`. */
export interface AttemptAbort {
  abort(reason?: unknown): void;
}

/** The reason an in-flight attempt's AbortController is aborted with when its instance left discovery. */
export class InstanceGoneReason extends Error {
  constructor(readonly instanceId: InstanceId) {
    super(`instance ${instanceId} left discovery`);
    this.name = 'InstanceGoneReason';
  }
}

export class InstanceTracker {
  /** instance → epoch ms until which it is inhibited. */
  private readonly inhibited = new Map<InstanceId, number>();
  /** `<instanceId>/<model>` → attempts in flight. */
  private readonly inflight = new Map<string, Set<AttemptAbort>>();

  constructor(
    private readonly inhibitMs: number = DEFAULT_INHIBIT_MS,
    private readonly now: () => number = Date.now,
  ) {}

  inhibit(id: InstanceId): void {
    this.inhibited.set(id, this.now() + this.inhibitMs);
  }

  isInhibited(id: InstanceId): boolean {
    const until = this.inhibited.get(id);
    if (until === undefined) return false;
    if (until > this.now()) return true;
    this.inhibited.delete(id);
    return false;
  }

  /** `ids` without the inhibited ones; all of `ids` when every one is inhibited. */
  preferUninhibited<T extends InstanceId>(ids: readonly T[]): T[] {
    const live = ids.filter((id) => !this.isInhibited(id));
    return live.length > 0 ? live : [...ids];
  }

  /** Instances currently inhibited (expired entries dropped). */
  inhibitedInstances(): InstanceId[] {
    return [...this.inhibited.keys()].filter((id) => this.isInhibited(id));
  }

  /**
   * Register an attempt in flight to `model` on instance `id`; the returned function unregisters it
   * (call it in `finally`).
   */
  track(id: InstanceId, model: string, abort: AttemptAbort): () => void {
    const key = `${id}/${model}`;
    let set = this.inflight.get(key);
    if (set === undefined) this.inflight.set(key, (set = new Set()));
    set.add(abort);
    return () => {
      const s = this.inflight.get(key);
      if (s === undefined) return;
      s.delete(abort);
      if (s.size === 0) this.inflight.delete(key);
    };
  }

  inflightCount(id: InstanceId, model: string): number {
    return this.inflight.get(`${id}/${model}`)?.size ?? 0;
  }

  /**
   * Discovery removed the instance's card of `model`: forget the instance's inhibition and abort every
   * attempt in flight to that model there with an `InstanceGoneReason` (their owners migrate them).
   * Returns how many were aborted.
   */
  workerGone(id: InstanceId, model: string): number {
    this.inhibited.delete(id);
    const key = `${id}/${model}`;
    const set = this.inflight.get(key);
    if (set === undefined) return 0;
    this.inflight.delete(key);
    for (const a of set) a.abort(new InstanceGoneReason(id));
    return set.size;
  }
}
