/**
 * DashboardState: what the router's live dashboard (`GET /dashboard`) shows, kept in bounded memory.
 * Pure: no IO, no timer; every call takes the time (`now`, epoch ms) from its caller, so tests drive it
 * with a fake clock. The router core writes into it (dashboard-feed.ts); the app's HTTP edge reads
 * `snapshot()` and streams it to browsers.
 *
 * Bounds (all fixed at construction, nothing grows with traffic):
 * - routing decisions, planner decisions and worker join / leave events: one ring buffer each
 *   (`maxDecisions`, `maxPlannerDecisions`, `maxWorkerEvents`); the oldest entry goes first;
 * - request rate, TTFT and ITL: `windowMs / bucketMs` buckets (default 60 of 5 s = the last five
 *   minutes), each a request count and two fixed-bound histograms (figure-histogram.ts), reused in a
 *   ring as time moves on; percentiles are read from those histograms (interpolated inside a bucket);
 * - the disaggregation split: one counter pair per model, at most `maxModels` models (further models
 *   are counted under no model: their requests still show in the rate).
 */
import { FigureHistogram, ITL_MS_BOUNDS, TTFT_MS_BOUNDS } from '../figure-histogram.js';

/** A fixed-capacity FIFO: `push` past the capacity drops the oldest entry. */
export class RingBuffer<T> {
  private readonly items: (T | undefined)[];
  private next = 0;
  private stored = 0;
  /** Entries ever pushed (also those dropped since). */
  total = 0;

  constructor(readonly capacity: number) {
    if (!Number.isSafeInteger(capacity) || capacity < 1) throw new RangeError(`ring buffer capacity must be an integer >= 1, got ${capacity}`);
    this.items = new Array<T | undefined>(capacity);
  }

  push(item: T): void {
    this.items[this.next] = item;
    this.next = (this.next + 1) % this.capacity;
    if (this.stored < this.capacity) this.stored++;
    this.total++;
  }

  get size(): number {
    return this.stored;
  }

  /** Oldest first. */
  toArray(): T[] {
    const out: T[] = [];
    const start = (this.next - this.stored + this.capacity) % this.capacity;
    for (let i = 0; i < this.stored; i++) out.push(this.items[(start + i) % this.capacity] as T);
    return out;
  }
}

/**
 * The `q`-quantile (0..1) of a fixed-bound histogram: linear inside the bucket that holds it (from the
 * previous bound, or 0, to its own bound); the overflow bucket answers the last bound. null when empty.
 */
export function histogramQuantile(bounds: readonly number[], counts: readonly number[], q: number): number | null {
  let total = 0;
  for (const c of counts) total += c;
  if (total === 0) return null;
  const rank = Math.min(Math.max(q, 0), 1) * total;
  let seen = 0;
  for (let i = 0; i < counts.length; i++) {
    const c = counts[i]!;
    if (c === 0) continue;
    if (seen + c >= rank) {
      if (i >= bounds.length) return bounds[bounds.length - 1]!;
      const lower = i === 0 ? 0 : bounds[i - 1]!;
      const upper = bounds[i]!;
      return lower + (upper - lower) * Math.max(0, Math.min(1, (rank - seen) / c));
    }
    seen += c;
  }
  return bounds[bounds.length - 1]!;
}

/** One routing decision, as the dashboard lists it. */
export interface DashboardDecision {
  readonly ts: number;
  readonly model: string;
  /** `decode` (whole requests, aggregated or decode workers) or `prefill` (the prefill half of a disaggregated request). */
  readonly pool: 'decode' | 'prefill';
  /** The router mode that decided. */
  readonly mode: string;
  /** The chosen worker's instance id. */
  readonly instanceId: string;
  /** Leading prompt blocks the chosen worker holds. */
  readonly overlapBlocks: number;
  /** The chosen worker's cost (overlap weight × prefill blocks + decode blocks); null when the table was not asked. */
  readonly cost: number | null;
  /** Workers that were candidates. */
  readonly candidates: number;
  readonly promptTokens: number;
  /** The routing table was unavailable: round-robin without it. */
  readonly fallback: boolean;
}

/** One planner decision, as the planner published it (wire: WirePlannerDecision). */
export interface DashboardPlannerDecision {
  readonly ts: number;
  readonly plannerId: string;
  readonly model: string;
  readonly pool: string;
  readonly from: number;
  readonly to: number;
  readonly direction: string;
  readonly reason: string;
  readonly dryRun: boolean;
}

export interface DashboardWorkerEvent {
  readonly ts: number;
  readonly type: 'joined' | 'left';
  readonly model: string;
  readonly instanceId: string;
}

/** One worker (instance × model) as the dashboard lists it; built by the feed from discovery and load samples. */
export interface DashboardWorker {
  readonly instanceId: string;
  readonly model: string;
  readonly kind: 'llm' | 'tensor';
  /** `aggregated`, `prefill` or `decode` (LLMs); `tensor` for tensor models. */
  readonly role: string;
  /** From the worker's latest load sample; null when none arrived (tensor models publish none). */
  readonly load: {
    readonly ts: number;
    readonly running: number;
    readonly waiting: number;
    readonly kvUsage: number;
    readonly prefixHitRate: number | null;
  } | null;
  /** Routing decisions this router took for it since it started. */
  readonly decisions: number;
}

export interface DashboardPoint {
  /** Start of the bucket, epoch ms. */
  readonly t: number;
  /** Requests that arrived in the bucket, per second. */
  readonly rate: number;
  readonly ttftP50: number | null;
  readonly ttftP90: number | null;
  readonly itlP50: number | null;
  readonly itlP90: number | null;
}

export interface DashboardDisagg {
  readonly model: string;
  readonly remote: number;
  readonly local: number;
  readonly fallback: number;
}

export interface DashboardSnapshot {
  readonly now: number;
  readonly routerId: string;
  readonly mode: string;
  readonly namespace: string;
  readonly bucketMs: number;
  readonly workers: readonly DashboardWorker[];
  /** Workers the cluster has (instance × model); more than `workers` when the caller capped the list. */
  readonly workersTotal: number;
  readonly series: readonly DashboardPoint[];
  /** Newest first. */
  readonly decisions: readonly DashboardDecision[];
  /** Routing decisions since start (also those no longer in the ring). */
  readonly decisionsTotal: number;
  readonly disagg: readonly DashboardDisagg[];
  /** Newest first. */
  readonly plannerDecisions: readonly DashboardPlannerDecision[];
  /** Newest first. */
  readonly workerEvents: readonly DashboardWorkerEvent[];
}

export interface DashboardStateOptions {
  /** Routing decisions kept; default 100. */
  readonly maxDecisions?: number;
  /** Planner decisions kept; default 50. */
  readonly maxPlannerDecisions?: number;
  /** Worker join / leave events kept; default 50. */
  readonly maxWorkerEvents?: number;
  /** Width of one chart point, ms; default 5000. */
  readonly bucketMs?: number;
  /** How far back the charts go, ms (a multiple of bucketMs); default 300 000 (five minutes). */
  readonly windowMs?: number;
  /** Models with their own disaggregation counters; default 64. */
  readonly maxModels?: number;
}

export const DASHBOARD_DEFAULTS = {
  maxDecisions: 100,
  maxPlannerDecisions: 50,
  maxWorkerEvents: 50,
  bucketMs: 5_000,
  windowMs: 300_000,
  maxModels: 64,
} as const;

interface Bucket {
  /** Bucket index (floor(ts / bucketMs)); -1 = unused. */
  index: number;
  requests: number;
  readonly ttft: FigureHistogram;
  readonly itl: FigureHistogram;
}

export class DashboardState {
  readonly bucketMs: number;
  private readonly buckets: Bucket[];
  private readonly decisions: RingBuffer<DashboardDecision>;
  private readonly plannerDecisions: RingBuffer<DashboardPlannerDecision>;
  private readonly workerEvents: RingBuffer<DashboardWorkerEvent>;
  private readonly disagg = new Map<string, { remote: number; local: number; fallback: number }>();
  private readonly maxModels: number;

  constructor(options: DashboardStateOptions = {}) {
    const o = { ...DASHBOARD_DEFAULTS, ...options };
    for (const [name, v] of Object.entries(o)) {
      if (!Number.isSafeInteger(v) || v < 1) throw new RangeError(`${name} must be an integer >= 1, got ${v}`);
    }
    if (o.windowMs % o.bucketMs !== 0) throw new RangeError(`windowMs (${o.windowMs}) must be a multiple of bucketMs (${o.bucketMs})`);
    this.bucketMs = o.bucketMs;
    this.buckets = Array.from({ length: o.windowMs / o.bucketMs }, () => ({ index: -1, requests: 0, ttft: new FigureHistogram(TTFT_MS_BOUNDS), itl: new FigureHistogram(ITL_MS_BOUNDS) }));
    this.decisions = new RingBuffer(o.maxDecisions);
    this.plannerDecisions = new RingBuffer(o.maxPlannerDecisions);
    this.workerEvents = new RingBuffer(o.maxWorkerEvents);
    this.maxModels = o.maxModels;
  }

  /** A request arrived (once per request, not per migration attempt). */
  arrived(now: number): void {
    this.bucket(now).requests++;
  }

  /** A request's first token reached the router `ms` after it arrived. */
  firstToken(now: number, ms: number): void {
    this.bucket(now).ttft.observe(ms);
  }

  /** `count` tokens arrived together `gapMs` after the previous ones: `count` gaps of gapMs / count. */
  laterTokens(now: number, gapMs: number, count: number): void {
    if (count > 0) this.bucket(now).itl.observe(gapMs / count, count);
  }

  decided(d: DashboardDecision): void {
    this.decisions.push(d);
  }

  /** Routing decisions recorded since start. */
  get decisionsTotal(): number {
    return this.decisions.total;
  }

  plannerDecided(d: DashboardPlannerDecision): void {
    this.plannerDecisions.push(d);
  }

  workerEvent(e: DashboardWorkerEvent): void {
    this.workerEvents.push(e);
  }

  /** A request of a disaggregated model was prefilled on a prefill worker (`remote`), by its decode worker (`local`), or both (`fallback`). */
  disaggPath(model: string, path: 'remote' | 'local' | 'fallback'): void {
    let m = this.disagg.get(model);
    if (m === undefined) {
      if (this.disagg.size >= this.maxModels) return;
      m = { remote: 0, local: 0, fallback: 0 };
      this.disagg.set(model, m);
    }
    m[path]++;
  }

  /**
   * Everything the page shows at `now`. `workers` and the header fields come from the caller (they are
   * discovery's and the load samples' state, not kept here).
   */
  snapshot(now: number, header: { routerId: string; mode: string; namespace: string }, workers: readonly DashboardWorker[], workersTotal = workers.length): DashboardSnapshot {
    const current = Math.floor(now / this.bucketMs);
    const n = this.buckets.length;
    const series: DashboardPoint[] = [];
    for (let index = current - n + 1; index <= current; index++) {
      const b = this.buckets[mod(index, n)]!;
      const live = b.index === index;
      const ttft = live ? b.ttft.toWire().counts : undefined;
      const itl = live ? b.itl.toWire().counts : undefined;
      // the current bucket has lasted only since its start: its rate is over the time elapsed
      const seconds = index === current ? Math.max(1, now - index * this.bucketMs) / 1000 : this.bucketMs / 1000;
      series.push({
        t: index * this.bucketMs,
        rate: live ? b.requests / seconds : 0,
        ttftP50: ttft === undefined ? null : histogramQuantile(TTFT_MS_BOUNDS, ttft, 0.5),
        ttftP90: ttft === undefined ? null : histogramQuantile(TTFT_MS_BOUNDS, ttft, 0.9),
        itlP50: itl === undefined ? null : histogramQuantile(ITL_MS_BOUNDS, itl, 0.5),
        itlP90: itl === undefined ? null : histogramQuantile(ITL_MS_BOUNDS, itl, 0.9),
      });
    }
    return {
      now,
      ...header,
      bucketMs: this.bucketMs,
      workers,
      workersTotal,
      series,
      decisions: this.decisions.toArray().reverse(),
      decisionsTotal: this.decisions.total,
      disagg: [...this.disagg].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([model, m]) => ({ model, ...m })),
      plannerDecisions: this.plannerDecisions.toArray().reverse(),
      workerEvents: this.workerEvents.toArray().reverse(),
    };
  }

  /** The bucket of `now`, emptied first if it last held an older period. */
  private bucket(now: number): Bucket {
    const index = Math.floor(now / this.bucketMs);
    const b = this.buckets[mod(index, this.buckets.length)]!;
    if (b.index !== index) {
      b.index = index;
      b.requests = 0;
      b.ttft.reset();
      b.itl.reset();
    }
    return b;
  }
}

function mod(a: number, n: number): number {
  return ((a % n) + n) % n;
}
