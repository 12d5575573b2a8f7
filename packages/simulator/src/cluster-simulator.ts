/**
 * The cluster simulator: a trace replayed in virtual time against N mocker engines behind the
 * router's selection policy, with the planner's `decide` sizing the pool — the project's own code
 * for all three, only the clock and the wires are simulated.
 *
 * - **Router**: `MemoryRoutingTable.selectAndReserve` (the KV-aware cost and selection of
 *   @switchyard/kv-router), called the way the cluster's `LlmWorkerChooser` calls it: candidates are
 *   the serving replicas in id order; `kv` / `least-loaded` score them all, `round-robin` / `random`
 *   pick one first and reserve on it; the prompt's blocks are `hashTokenBlocks` of its tokens;
 *   prefill done at the first token, release at the end; the engines' KV events feed the table.
 * - **Engines**: `SimReplica` (EngineCore + LlmScheduler + KvBlockManager + SimulatedExecutor).
 * - **Planner**: every adjustment interval, the interval's observations (per-second load samples of
 *   the serving replicas, the routers' request figures) go to `decide`; its target for the
 *   `aggregated` pool is applied: new replicas serve after the start-up delay, removed ones drain.
 *
 * One event at a time from an `EventQueue` (time, then insertion order); every await in the loop
 * resolves in microtasks, so a run is a pure function of the trace and the options (seeded).
 * Memory: one pending arrival, the requests in flight, the current interval's figures (reservoirs
 * of at most `MAX_INTERVAL_SAMPLES`), fixed-size latency histograms, and one timeline point per
 * `timelineMs`.
 *
 * A request is **within SLO** when its TTFT ≤ the TTFT objective and its mean inter-token latency
 * ≤ the ITL objective (a one-token output has no ITL and passes that half). Refused requests (longer
 * than the engine's context) and requests that found no replica within the queue timeout count as
 * missed. TTFT counts from arrival, so time held waiting for a replica is in it.
 */
import { hashTokenBlocks } from '@switchyard/llm';
import { MemoryRoutingTable } from '@switchyard/kv-router';
import { decide, INITIAL_PLANNER_STATE, type Decision, type LoadSample, type Observations, type PlannerState } from '@switchyard/planner';
import { EventQueue } from './event-queue.js';
import { LogHistogram } from './histogram.js';
import { compileSimulationOptions, type CompiledSimulation, type SimulationOptions } from './options.js';
import { promptTokens } from './prompt-tokens.js';
import { SeededRandom } from './random.js';
import { SimReplica } from './replica.js';
import type { TraceRequest, TraceSource } from './trace.js';

/** Most ISL / OSL / TTFT / ITL samples one interval hands the planner (a uniform reservoir beyond). */
export const MAX_INTERVAL_SAMPLES = 4096;

export interface TimelinePoint {
  /** Start of the point's window, s. */
  readonly tSec: number;
  /** Arrivals in the window per second. */
  readonly arrivalsPerSec: number;
  /** Replicas at the window's end, by state. */
  readonly serving: number;
  readonly starting: number;
  readonly draining: number;
  /** The planner's last target (undefined: static, or no decision yet). */
  readonly desired: number | undefined;
}

export interface LatencySummary {
  readonly p50: number | null;
  readonly p90: number | null;
  readonly p99: number | null;
  readonly mean: number | null;
}

export interface SimulationResult {
  /** From t = 0 to the last arrival or finish, s. */
  readonly durationSec: number;
  readonly requests: number;
  readonly finished: number;
  /** Longer than the engine's context (a worker would refuse them). */
  readonly refused: number;
  /** Found no serving replica within the queue timeout. */
  readonly timedOut: number;
  readonly withinSlo: number;
  readonly ttftWithinSlo: number;
  readonly itlWithinSlo: number;
  /** withinSlo / requests. */
  readonly sloAttainment: number;
  /** Requests within SLO per second. */
  readonly goodputRps: number;
  /** Σ over replicas of (stop − creation), start-up included: what the GPUs cost. */
  readonly workerSeconds: number;
  /** Requests within SLO per worker-hour. */
  readonly goodputPerWorkerHour: number;
  /** Prompt blocks found in an engine's prefix cache / looked up, over every replica. */
  readonly prefixHitRate: number;
  readonly ttftMs: LatencySummary;
  /** Every inter-token gap of every request. */
  readonly itlMs: LatencySummary;
  /** min / max: starting + serving replicas (the planner's count); mean: worker-seconds / duration (draining included). */
  readonly replicas: { readonly min: number; readonly max: number; readonly mean: number };
  readonly scaleUps: number;
  readonly scaleDowns: number;
  /** Requests finished on a replica after it was told to drain (scale-down never drops one). */
  readonly finishedWhileDraining: number;
  readonly slo: { readonly ttftMs: number; readonly itlMs: number };
  readonly timeline: readonly TimelinePoint[];
}

type SimEvent =
  | { readonly kind: 'arrival'; readonly request: TraceRequest; readonly index: number }
  | { readonly kind: 'stepEnd'; readonly replica: SimReplica }
  | { readonly kind: 'ready'; readonly replica: SimReplica }
  | { readonly kind: 'sample' }
  | { readonly kind: 'plan' }
  | { readonly kind: 'timeline' };

interface InFlight {
  readonly arrivalMs: number;
  readonly replica: SimReplica;
}

/** A uniform sample of at most `cap` values (Vitter's algorithm R), seeded. */
class Reservoir {
  values: number[] = [];
  private seen = 0;
  constructor(
    private readonly cap: number,
    private readonly rng: SeededRandom,
  ) {}
  add(x: number): void {
    this.seen++;
    if (this.values.length < this.cap) this.values.push(x);
    else {
      const j = Math.floor(this.rng.next() * this.seen);
      if (j < this.cap) this.values[j] = x;
    }
  }
  reset(): void {
    this.values = [];
    this.seen = 0;
  }
}

/** Where a run is, in virtual time: what `simulate`'s `onProgress` gets. */
export interface SimulationProgress {
  readonly simulatedMs: number;
  /** Requests that arrived so far, and those finished (served, refused or timed out). */
  readonly requests: number;
  readonly finished: number;
  readonly inFlight: number;
  /** Replicas alive (starting, serving or draining). */
  readonly replicas: number;
}

/**
 * Replay `source` under `options`. The source is read to its end and closed. `onProgress` is called
 * at every load sample (each `loadSampleSec` of virtual time) while work remains; it only watches
 * (the run's results do not depend on it) and the caller throttles it to wall time.
 */
export async function simulate(source: TraceSource, options: SimulationOptions, onProgress?: (p: SimulationProgress) => void): Promise<SimulationResult> {
  const sim = new Simulation(source, compileSimulationOptions(options), onProgress);
  try {
    return await sim.run();
  } finally {
    source.close();
  }
}

class Simulation {
  private readonly agenda = new EventQueue<SimEvent>();
  private readonly table = new MemoryRoutingTable();
  private readonly routeRng: SeededRandom;
  private readonly sampleRng: SeededRandom;
  private nowMs = 0;
  private lastWorkMs = 0;
  private sourceOpen = true;
  private readonly live: SimReplica[] = [];
  private nextReplica = 0;
  private rrCursor = 0;
  private readonly inFlight = new Map<string, InFlight>();
  private held: { request: TraceRequest; index: number; tokens: number[] }[] = [];
  private plannerState: PlannerState = INITIAL_PLANNER_STATE;
  private desired: number | undefined;
  // interval figures (planner)
  private intervalArrivals = 0;
  private readonly isl: Reservoir;
  private readonly osl: Reservoir;
  private readonly ttft: Reservoir;
  private readonly itl: Reservoir;
  private loadSamples: LoadSample[] = [];
  private intervalStartMs = 0;
  // timeline
  private readonly timeline: TimelinePoint[] = [];
  private timelineArrivals = 0;
  private timelineStartMs = 0;
  // results
  private requests = 0;
  private finished = 0;
  private refused = 0;
  private timedOut = 0;
  private withinSlo = 0;
  private ttftOk = 0;
  private itlOk = 0;
  private finishedWhileDraining = 0;
  private readonly ttftHist = new LogHistogram();
  private readonly itlHist = new LogHistogram();
  private workerMs = 0;
  private queried = 0;
  private hits = 0;
  private minReplicas = Infinity;
  private maxReplicas = 0;
  private scaleUps = 0;
  private scaleDowns = 0;

  constructor(
    private readonly source: TraceSource,
    private readonly o: CompiledSimulation,
    private readonly onProgress: ((p: SimulationProgress) => void) | undefined,
  ) {
    this.routeRng = new SeededRandom(o.seed * 4 + 1);
    this.sampleRng = new SeededRandom(o.seed * 4 + 2);
    const r = (): Reservoir => new Reservoir(MAX_INTERVAL_SAMPLES, this.sampleRng);
    this.isl = r();
    this.osl = r();
    this.ttft = r();
    this.itl = r();
  }

  async run(): Promise<SimulationResult> {
    for (let i = 0; i < this.o.initialReplicas; i++) this.addReplica(0);
    this.pullArrival(0);
    this.agenda.push(this.o.loadSampleMs, { kind: 'sample' });
    if (this.o.planner !== undefined) this.agenda.push(this.o.adjustmentIntervalMs, { kind: 'plan' });
    this.agenda.push(this.o.timelineMs, { kind: 'timeline' });
    this.countReplicas();
    for (let e = this.agenda.pop(); e !== undefined; e = this.agenda.pop()) {
      this.nowMs = e.atMs;
      await this.handle(e.event);
    }
    return this.result();
  }

  /** Work remains: more arrivals, requests in flight or held. Periodic events stop when it is false. */
  private get busy(): boolean {
    return this.sourceOpen || this.inFlight.size > 0 || this.held.length > 0;
  }

  private async handle(ev: SimEvent): Promise<void> {
    switch (ev.kind) {
      case 'arrival':
        this.lastWorkMs = this.nowMs;
        this.pullArrival(ev.index + 1);
        await this.arrive(ev.request, ev.index);
        return;
      case 'stepEnd':
        this.lastWorkMs = this.nowMs;
        await this.stepEnd(ev.replica);
        return;
      case 'ready':
        if (ev.replica.state !== 'starting') return;
        ev.replica.state = 'serving';
        await this.dispatchHeld();
        return;
      case 'sample':
        this.sample();
        this.onProgress?.({
          simulatedMs: this.nowMs,
          requests: this.requests,
          finished: this.finished + this.refused + this.timedOut,
          inFlight: this.inFlight.size,
          replicas: this.live.length,
        });
        if (this.busy) this.agenda.push(this.nowMs + this.o.loadSampleMs, { kind: 'sample' });
        return;
      case 'plan':
        await this.plan();
        if (this.busy) this.agenda.push(this.nowMs + this.o.adjustmentIntervalMs, { kind: 'plan' });
        return;
      case 'timeline':
        this.recordTimeline();
        if (this.busy) this.agenda.push(this.nowMs + this.o.timelineMs, { kind: 'timeline' });
        return;
    }
  }

  private pullArrival(index: number): void {
    if (!this.sourceOpen) return;
    const request = this.source.next();
    if (request === undefined) {
      this.sourceOpen = false;
      return;
    }
    // A source never goes back in time (JsonlTraceSource refuses it); equal times keep their order.
    this.agenda.push(Math.max(request.arrivalMs, this.nowMs), { kind: 'arrival', request, index });
  }

  private async arrive(request: TraceRequest, index: number): Promise<void> {
    this.requests++;
    this.intervalArrivals++;
    this.timelineArrivals++;
    this.isl.add(request.inputLength);
    this.osl.add(request.outputLength);
    if (request.inputLength + request.outputLength > this.o.mocker.maxModelLen) {
      this.refused++;
      return;
    }
    const tokens = promptTokens(request, index, this.o.traceBlockSize, this.o.mocker.vocabSize);
    if (this.serving().length === 0) {
      this.held.push({ request, index, tokens });
      return;
    }
    await this.route(request, index, tokens);
  }

  private serving(): SimReplica[] {
    return this.live.filter((r) => r.state === 'serving');
  }

  private async route(request: TraceRequest, index: number, tokens: number[]): Promise<void> {
    const candidates = this.serving().map((r) => r.id);
    const { mode, overlapWeight, temperature } = this.o.router;
    let pool = candidates;
    if (mode === 'round-robin') pool = [candidates[this.rrCursor++ % candidates.length]!];
    else if (mode === 'random') pool = [candidates[Math.floor(this.routeRng.next() * candidates.length) % candidates.length]!];
    const requestId = `r${index}`;
    const blockSize = this.o.mocker.blockSize;
    const decision = await this.table.selectAndReserve({
      requestId,
      blockHashes: hashTokenBlocks(tokens, blockSize).sequenceHashes,
      promptTokens: tokens.length,
      blockSize,
      candidates: pool,
      overlapWeight,
      scoring: mode === 'least-loaded' ? 'load' : 'kv',
      temperature,
      random: this.routeRng.next(),
      now: this.nowMs,
    });
    const replica = this.live.find((r) => r.id === decision.worker)!;
    replica.core.addRequest({ requestId, promptTokenIds: tokens, maxTokens: request.outputLength, arrivalTime: request.arrivalMs });
    replica.requests.add(requestId);
    replica.awaitingFirstToken.add(requestId);
    this.inFlight.set(requestId, { arrivalMs: request.arrivalMs, replica });
    await this.kick(replica);
  }

  private async kick(replica: SimReplica): Promise<void> {
    const end = await replica.step(this.nowMs);
    if (end !== undefined) this.agenda.push(end, { kind: 'stepEnd', replica });
  }

  private async stepEnd(replica: SimReplica): Promise<void> {
    const { result, events } = replica.finishStep();
    if (events.length > 0) await this.table.applyEvents(replica.id, events);
    for (const out of result.outputs) {
      const id = out.requestId;
      if (out.newTokenIds.length > 0 && replica.awaitingFirstToken.delete(id)) await this.table.markPrefillDone(id);
      if (out.finishReason === null) continue;
      await this.table.release(id);
      replica.requests.delete(id);
      replica.awaitingFirstToken.delete(id);
      this.inFlight.delete(id);
      if (replica.state === 'draining') this.finishedWhileDraining++;
      this.record(replica.core.takeRequestMetrics(id));
    }
    await this.kick(replica);
    if (replica.state === 'draining' && !replica.stepping && replica.requests.size === 0) await this.stop(replica);
  }

  private record(m: ReturnType<SimReplica['core']['takeRequestMetrics']>): void {
    if (m === undefined || m.firstTokenTime === null) return;
    this.finished++;
    const ttft = m.firstTokenTime - m.arrivalTime;
    this.ttftHist.add(ttft);
    this.ttft.add(ttft);
    let sum = 0;
    for (const gap of m.interTokenMs) {
      this.itlHist.add(gap);
      sum += gap;
    }
    const meanItl = m.interTokenMs.length > 0 ? sum / m.interTokenMs.length : undefined;
    if (meanItl !== undefined) this.itl.add(meanItl);
    const ttftOk = ttft <= this.o.slo.ttftMs;
    const itlOk = meanItl === undefined || meanItl <= this.o.slo.itlMs;
    if (ttftOk) this.ttftOk++;
    if (itlOk) this.itlOk++;
    if (ttftOk && itlOk) this.withinSlo++;
  }

  private async dispatchHeld(): Promise<void> {
    const held = this.held;
    this.held = [];
    for (const h of held) await this.route(h.request, h.index, h.tokens);
  }

  private addReplica(readyAtMs: number): void {
    const id = `w${String(this.nextReplica++).padStart(5, '0')}`;
    const replica = new SimReplica(id, this.nowMs, this.o.mocker, this.o.seed);
    this.live.push(replica);
    if (readyAtMs <= this.nowMs) replica.state = 'serving';
    else this.agenda.push(readyAtMs, { kind: 'ready', replica });
  }

  private async stop(replica: SimReplica): Promise<void> {
    replica.state = 'stopped';
    replica.stoppedMs = this.nowMs;
    this.workerMs += this.nowMs - replica.createdMs;
    const s = replica.kv.stats();
    this.queried += s.queriedBlocks;
    this.hits += s.hitBlocks;
    this.live.splice(this.live.indexOf(replica), 1);
    await this.table.removeWorker(replica.id);
  }

  /** Move the pool to `target` replicas (starting + serving). */
  private async scaleTo(target: number): Promise<void> {
    const active = this.live.filter((r) => r.state === 'starting' || r.state === 'serving');
    if (target > active.length) {
      for (let i = active.length; i < target; i++) this.addReplica(this.nowMs + this.o.startupDelayMs);
      this.scaleUps++;
    } else if (target < active.length) {
      this.scaleDowns++;
      let remove = active.length - target;
      // Replicas not serving yet go first (newest first): nothing to drain.
      const starting = active.filter((r) => r.state === 'starting').reverse();
      for (const r of starting) {
        if (remove === 0) break;
        await this.stop(r);
        remove--;
      }
      // Then the least busy serving replicas (the newest among equals): they drain.
      const serving = active.filter((r) => r.state === 'serving').sort((a, b) => a.outstanding - b.outstanding || b.createdMs - a.createdMs || (a.id < b.id ? 1 : -1));
      for (const r of serving.slice(0, remove)) {
        r.state = 'draining';
        if (!r.stepping && r.requests.size === 0) await this.stop(r);
      }
    }
    this.countReplicas();
  }

  /** Track the pool's size as the planner counts it: starting + serving (draining ones have left). */
  private countReplicas(): void {
    const n = this.live.filter((r) => r.state === 'starting' || r.state === 'serving').length;
    if (n < this.minReplicas) this.minReplicas = n;
    if (n > this.maxReplicas) this.maxReplicas = n;
  }

  private sample(): void {
    for (const r of this.live) {
      if (r.state !== 'serving') continue;
      const s = r.kv.stats();
      const sched = r.core.scheduler;
      this.loadSamples.push({
        instanceId: r.id,
        ts: this.nowMs,
        numRunning: sched.numRunning,
        numWaiting: sched.numWaiting,
        kvActiveBlocks: s.active,
        kvTotalBlocks: s.numBlocks,
        kvUsage: s.usage,
        prefixCacheQueries: s.queriedBlocks,
        prefixCacheHits: s.hitBlocks,
      });
    }
    const expired = this.held.filter((h) => this.nowMs - h.request.arrivalMs > this.o.queueTimeoutMs);
    if (expired.length > 0) {
      this.timedOut += expired.length;
      this.held = this.held.filter((h) => this.nowMs - h.request.arrivalMs <= this.o.queueTimeoutMs);
    }
  }

  private async plan(): Promise<void> {
    const config = this.o.planner!;
    const replicas = this.live.filter((r) => r.state === 'starting' || r.state === 'serving').length;
    const samples = (res: Reservoir): { kind: 'samples'; values: number[] } => ({ kind: 'samples', values: res.values });
    const obs: Observations = {
      intervalSec: (this.nowMs - this.intervalStartMs) / 1000,
      pools: { aggregated: { replicas, load: this.loadSamples } },
      requests: {
        requests: this.intervalArrivals,
        heldRequests: this.held.length,
        isl: samples(this.isl),
        osl: samples(this.osl),
        ttftMs: samples(this.ttft),
        itlMs: samples(this.itl),
      },
    };
    const { decisions, nextState } = decide(this.plannerState, obs, config);
    this.plannerState = nextState;
    const d: Decision | undefined = decisions.find((x) => x.pool === 'aggregated');
    this.intervalArrivals = 0;
    for (const r of [this.isl, this.osl, this.ttft, this.itl]) r.reset();
    this.loadSamples = [];
    this.intervalStartMs = this.nowMs;
    if (d === undefined) return;
    this.desired = d.to;
    await this.scaleTo(d.to);
  }

  private recordTimeline(): void {
    const count = (s: SimReplica['state']): number => this.live.filter((r) => r.state === s).length;
    const widthSec = (this.nowMs - this.timelineStartMs) / 1000;
    this.timeline.push({
      tSec: this.timelineStartMs / 1000,
      arrivalsPerSec: widthSec > 0 ? this.timelineArrivals / widthSec : 0,
      serving: count('serving'),
      starting: count('starting'),
      draining: count('draining'),
      desired: this.desired,
    });
    this.timelineArrivals = 0;
    this.timelineStartMs = this.nowMs;
  }

  private result(): SimulationResult {
    const endMs = this.lastWorkMs;
    let workerMs = this.workerMs;
    let queried = this.queried;
    let hits = this.hits;
    for (const r of this.live) {
      workerMs += Math.max(0, endMs - r.createdMs);
      const s = r.kv.stats();
      queried += s.queriedBlocks;
      hits += s.hitBlocks;
    }
    const durationSec = endMs / 1000;
    const workerSeconds = workerMs / 1000;
    const summary = (h: LogHistogram): LatencySummary => ({ p50: h.quantile(50) ?? null, p90: h.quantile(90) ?? null, p99: h.quantile(99) ?? null, mean: h.mean() ?? null });
    return {
      durationSec,
      requests: this.requests,
      finished: this.finished,
      refused: this.refused,
      timedOut: this.timedOut,
      withinSlo: this.withinSlo,
      ttftWithinSlo: this.ttftOk,
      itlWithinSlo: this.itlOk,
      sloAttainment: this.requests === 0 ? 1 : this.withinSlo / this.requests,
      goodputRps: durationSec > 0 ? this.withinSlo / durationSec : 0,
      workerSeconds,
      goodputPerWorkerHour: workerSeconds > 0 ? (this.withinSlo * 3600) / workerSeconds : 0,
      prefixHitRate: queried === 0 ? 0 : hits / queried,
      ttftMs: summary(this.ttftHist),
      itlMs: summary(this.itlHist),
      replicas: { min: Number.isFinite(this.minReplicas) ? this.minReplicas : 0, max: this.maxReplicas, mean: durationSec > 0 ? workerSeconds / durationSec : 0 },
      scaleUps: this.scaleUps,
      scaleDowns: this.scaleDowns,
      finishedWhileDraining: this.finishedWhileDraining,
      slo: this.o.slo,
      timeline: this.timeline,
    };
  }
}
