/**
 * The pure half of the planner's event-plane observation source: decoded wire figures of one model in,
 * one interval's `Observations` (the planner's input) out. No IO, no clock: every call that depends on
 * time is given `now` (epoch ms of the collector), so tests drive it by hand.
 *
 * What it keeps, and for how long:
 * - **Roles** of the model's instances, from their model cards (`setInstance` / `removeInstance`): a
 *   card's role decides its pool (absent = aggregated), and the instances with a card are the pool's
 *   replicas as discovery sees them. A removal seen in a discovery resync (`removeInstance(id, now,
 *   true)`) waits `resyncGraceMs` for the card to come back, as the router's registry does, so an etcd
 *   that lost its data does not empty every pool for a moment.
 * - **Load**: the latest sample per instance (by the worker's `ts`; a redelivered older one is
 *   ignored), across intervals, placed in its pool at `collect` by the instance's card (none: left out): workers publish only on change (and a heartbeat every 5 s), so a quiet
 *   worker's last sample is still its load. A sample not renewed for `staleLoadMs` (received time) is
 *   dropped, and so is the sample of an instance whose card is gone (it is draining or dead: not capacity).
 * - **Forward-pass steps** received in the interval, per pool (classified when they arrive), at most
 *   `maxForwardPassSamples` per pool; beyond that, and steps the workers themselves left out of their
 *   batches, are counted in `counters().forwardPassDropped`.
 * - **Request figures** received in the interval, merged over routers: counts added, histograms added
 *   bucket by bucket (re-binned when a router's bounds differ), held requests summed over each router's
 *   latest report.
 *
 * Bounded whatever arrives: instances tracked at most `maxInstances`, routers per interval at most
 * `maxRouters` (more are dropped and counted), histograms at most MAX_WIRE_HISTOGRAM_BOUNDS + 1 buckets.
 * Messages for another model are ignored (the subjects carry every model of the namespace).
 */
import type { Distribution, ForwardPassSample, LoadSample, Observations, Pool, PoolObservation, RequestFigures } from '@switchyard/planner';
import { addHistogram } from '../figure-histogram.js';
import type { WireForwardPass, WireHistogram, WireLoad, WireRequestFigures, WorkerRole } from '../protocols.js';

/** A worker's load sample older than this (received time) is no longer its load: 3 load heartbeats. */
export const DEFAULT_STALE_LOAD_MS = 15_000;
export const DEFAULT_MAX_FORWARD_PASS_SAMPLES = 4096;
export const DEFAULT_MAX_INSTANCES = 4096;
export const DEFAULT_MAX_ROUTERS = 1024;
/** As the router's registry: a card missing from a resync snapshot counts as gone after this long. */
export const DEFAULT_OBSERVATION_RESYNC_GRACE_MS = 3000;

export interface ObservationAccumulatorOptions {
  readonly model: string;
  /** Epoch ms the first interval starts. */
  readonly start: number;
  readonly staleLoadMs?: number;
  readonly maxForwardPassSamples?: number;
  readonly maxInstances?: number;
  readonly maxRouters?: number;
  readonly resyncGraceMs?: number;
}

/** What was received and what was left out (cumulative). */
export interface ObservationCounters {
  readonly loads: number;
  readonly forwardPassBatches: number;
  readonly requestFigures: number;
  /** Step samples not in any observation: over the per-pool cap, or left out by the worker (`dropped`). */
  readonly forwardPassDropped: number;
  /** Forward-pass batches of instances without a card for the model (left out), messages over `maxInstances` / `maxRouters`. */
  readonly unplaced: number;
}

interface Histograms {
  isl?: { bounds: readonly number[]; counts: number[] };
  osl?: { bounds: readonly number[]; counts: number[] };
  ttftMs?: { bounds: readonly number[]; counts: number[] };
  itlMs?: { bounds: readonly number[]; counts: number[] };
}
type HistogramKind = keyof Histograms;
const HISTOGRAM_KINDS: readonly HistogramKind[] = ['isl', 'osl', 'ttftMs', 'itlMs'];

export const poolOf = (role: WorkerRole): Pool => role;

export class ObservationAccumulator {
  readonly model: string;
  private readonly staleLoadMs: number;
  private readonly maxForwardPassSamples: number;
  private readonly maxInstances: number;
  private readonly maxRouters: number;
  private readonly resyncGraceMs: number;
  private intervalStart: number;
  /** Instances with a card for the model → role; `goneAt` marks a resync removal waiting out its grace. */
  private readonly instances = new Map<string, { role: WorkerRole; goneAt?: number }>();
  /** Pools an instance of the model was ever in: reported (with 0 replicas) after their last instance left. */
  private readonly knownPools = new Set<Pool>();
  private readonly loads = new Map<string, { sample: LoadSample; receivedAt: number }>();
  private forwardPass = new Map<Pool, ForwardPassSample[]>();
  private requests = 0;
  private readonly heldByRouter = new Map<string, { held: number; to: number }>();
  private histograms: Histograms = {};
  private counts = { loads: 0, forwardPassBatches: 0, requestFigures: 0, forwardPassDropped: 0, unplaced: 0 };

  constructor(options: ObservationAccumulatorOptions) {
    this.model = options.model;
    this.intervalStart = options.start;
    this.staleLoadMs = options.staleLoadMs ?? DEFAULT_STALE_LOAD_MS;
    this.maxForwardPassSamples = options.maxForwardPassSamples ?? DEFAULT_MAX_FORWARD_PASS_SAMPLES;
    this.maxInstances = options.maxInstances ?? DEFAULT_MAX_INSTANCES;
    this.maxRouters = options.maxRouters ?? DEFAULT_MAX_ROUTERS;
    this.resyncGraceMs = options.resyncGraceMs ?? DEFAULT_OBSERVATION_RESYNC_GRACE_MS;
  }

  counters(): ObservationCounters {
    return { ...this.counts };
  }

  /** An instance's card for the model (put or changed): its role. */
  setInstance(instanceId: string, role: WorkerRole): void {
    if (!this.instances.has(instanceId) && this.instances.size >= this.maxInstances) {
      this.counts.unplaced++;
      return;
    }
    this.instances.set(instanceId, { role });
    this.knownPools.add(poolOf(role));
  }

  /** An instance's card is gone; `resync`: seen missing from a resync snapshot (waits out the grace at `now`). */
  removeInstance(instanceId: string, now: number, resync = false): void {
    const i = this.instances.get(instanceId);
    if (i === undefined) return;
    if (resync && this.resyncGraceMs > 0) {
      i.goneAt ??= now;
      return;
    }
    this.instances.delete(instanceId);
    this.loads.delete(instanceId);
  }

  private roleOf(instanceId: string): WorkerRole | undefined {
    return this.instances.get(instanceId)?.role;
  }

  addLoad(load: WireLoad, now: number): void {
    if (load.model !== this.model) return;
    this.counts.loads++;
    const prev = this.loads.get(load.instanceId);
    // kept even before the instance's card is seen (the watch may lag the event plane); placed at collect
    if (prev === undefined && this.loads.size >= this.maxInstances) {
      this.counts.unplaced++;
      return;
    }
    if (prev !== undefined && prev.sample.ts > load.ts) return; // a redelivery of an older sample
    const { v: _v, model: _m, ...sample } = load;
    this.loads.set(load.instanceId, { sample, receivedAt: now });
  }

  addForwardPass(batch: WireForwardPass): void {
    if (batch.model !== this.model) return;
    this.counts.forwardPassBatches++;
    const role = this.roleOf(batch.instanceId);
    if (role === undefined) {
      this.counts.unplaced++;
      this.counts.forwardPassDropped += batch.steps.length + batch.dropped;
      return;
    }
    this.counts.forwardPassDropped += batch.dropped;
    let list = this.forwardPass.get(poolOf(role));
    if (list === undefined) this.forwardPass.set(poolOf(role), (list = []));
    for (const s of batch.steps) {
      if (list.length >= this.maxForwardPassSamples) {
        this.counts.forwardPassDropped++;
        continue;
      }
      list.push({ instanceId: batch.instanceId, ts: s.ts, wallMs: s.wallMs, prefillTokens: s.prefillTokens, decodeKvTokens: s.decodeKvTokens });
    }
  }

  addRequestFigures(f: WireRequestFigures): void {
    if (f.model !== this.model) return;
    this.counts.requestFigures++;
    const held = this.heldByRouter.get(f.routerId);
    if (held === undefined && this.heldByRouter.size >= this.maxRouters) {
      this.counts.unplaced++;
      return;
    }
    if (held === undefined || held.to <= f.to) this.heldByRouter.set(f.routerId, { held: f.heldRequests, to: f.to });
    this.requests += f.requests;
    for (const kind of HISTOGRAM_KINDS) mergeInto(this.histograms, kind, f[kind]);
  }

  /**
   * The interval since the previous call (the first: since `start`) as Observations, and the start of
   * the next one. `replicas` of a pool: its instances with a card. A pool appears once any instance
   * of the model had a card in it (so a pool scaled to zero shows with 0 replicas), or when it has a
   * forward-pass step.
   */
  collect(now: number): Observations {
    // resync removals past their grace, then load samples that went stale
    for (const [id, i] of this.instances) {
      if (i.goneAt !== undefined && now - i.goneAt >= this.resyncGraceMs) {
        this.instances.delete(id);
        this.loads.delete(id);
      }
    }
    for (const [id, l] of this.loads) if (now - l.receivedAt > this.staleLoadMs) this.loads.delete(id);

    const pools: Partial<Record<Pool, { replicas: number; load: LoadSample[] }>> = {};
    const pool = (p: Pool) => (pools[p] ??= { replicas: 0, load: [] });
    for (const i of this.instances.values()) pool(poolOf(i.role)).replicas++;
    for (const [id, l] of this.loads) {
      const role = this.roleOf(id);
      if (role !== undefined) pool(poolOf(role)).load.push(l.sample);
    }
    for (const p of this.forwardPass.keys()) pool(p);
    // a pool scaled to zero is still a pool: held requests for it must be able to start a worker
    for (const p of this.knownPools) pool(p);
    const out: Partial<Record<Pool, PoolObservation>> = {};
    for (const [p, o] of Object.entries(pools) as [Pool, { replicas: number; load: LoadSample[] }][]) {
      const steps = this.forwardPass.get(p);
      out[p] = { replicas: o.replicas, load: o.load, ...(steps !== undefined && steps.length > 0 ? { forwardPass: steps } : {}) };
    }

    let heldRequests = 0;
    for (const h of this.heldByRouter.values()) heldRequests += h.held;
    const requests: { -readonly [K in keyof RequestFigures]: RequestFigures[K] } = { requests: this.requests, heldRequests };
    for (const kind of HISTOGRAM_KINDS) {
      const d = distribution(this.histograms[kind]);
      if (d !== undefined) requests[kind] = d;
    }

    const intervalSec = Math.max(0, now - this.intervalStart) / 1000;
    this.intervalStart = now;
    this.forwardPass = new Map();
    this.requests = 0;
    this.heldByRouter.clear();
    this.histograms = {};
    return { intervalSec, pools: out, requests };
  }
}

/** Adds `h` into the interval's histogram of `kind`, whose bounds are those of the first histogram that counted something. */
function mergeInto(into: Histograms, kind: HistogramKind, h: WireHistogram): void {
  let target = into[kind];
  const counted = (c: readonly number[]) => c.some((x) => x > 0);
  if (target === undefined || (!counted(target.counts) && counted(h.counts))) into[kind] = target = { bounds: h.bounds, counts: new Array<number>(h.bounds.length + 1).fill(0) };
  addHistogram(target, h);
}

/** The planner's histogram Distribution (overflow bound Infinity), or undefined when it counted nothing. */
function distribution(h: { bounds: readonly number[]; counts: number[] } | undefined): Distribution | undefined {
  if (h === undefined || !h.counts.some((c) => c > 0)) return undefined;
  return { kind: 'histogram', bounds: [...h.bounds, Number.POSITIVE_INFINITY], counts: [...h.counts] };
}
