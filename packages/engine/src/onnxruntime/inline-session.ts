/**
 * `InlineSession`: a second `InferenceSession` of a small CPU model on the server's main thread,
 * for executions so small that the hop to the instance's session thread (a structured-clone post
 * each way) costs more main-thread time than the run itself.
 *
 * Which executions run here (`OnnxRuntimeInstance` asks `admits`, then `runTimed`):
 * - the model's config parameter `enable_inline_execution` is not `false` (absent, the graph must do
 *   work that depends on its input shapes alone: see onnx-op-scan.ts), the model file is at
 *   most `maxModelBytes`, the instance is a CPU one and its session computes on the calling thread
 *   alone (`intraOpNumThreads` 1);
 * - the execution's inputs total at most `maxInputBytes` (a string tensor's BYTES bytes count; strings
 *   are converted as on the session thread, by @switchyard/ort's `bytesToStrings` / `stringsToBytes`);
 * - the model's recent `session.run` times are small: of the last `WINDOW` runs, at most
 *   `WINDOW_OVER` took longer than the gate's threshold (a high quantile, not a mean: one run a GC
 *   pause or a preemption stretched must not count as a slow model).
 *
 * Gate (per model, shared by its instances: they all run on the one main thread, so inline runs
 * never compute in parallel and are worth it only while tiny):
 * - Closed, the model's eligible executions run on the session threads, whose own stamps of each
 *   run are counted at no main-thread cost. After `PROBE_RUNS` such runs, once at most
 *   `WINDOW_OVER` of the last `WINDOW` took longer than `OPEN_FRACTION` of the bound (hysteresis:
 *   a thread run measures no faster than the same run inline, whose thread wakes from sleep), the
 *   gate opens; the main-thread session is created then, so a model whose runs are never tiny never
 *   pays for a second session.
 * - Open, each inline run is counted against the bound itself. When more than `WINDOW_OVER` of the
 *   last `WINDOW` went over it, or one run takes longer than `STALL_FACTOR` times the bound, the
 *   gate closes and the thread measurements start afresh: the main thread never probes a run the
 *   threads have not just shown to be tiny.
 *
 * Why not a mean: on a 2-core VM an MLP's inline runs read p50 85 us and p99 0.15-0.3 ms against a
 * 0.2 ms bound, and its thread runs (the thread waking per request at concurrency 1) p50 110 us:
 * an EWMA of them crossed the bound at every few-ms GC pause, and reopening below half the bound
 * took thousands of thread runs, so at concurrency 1 most runs paid the hop to the thread.
 *
 * Results are the session thread's exactly: the same model file and session options, the same
 * `@switchyard/ort` conversions, onnxruntime's own error messages, and the same time stamps (see
 * `runTimed`). onnxruntime-node's `run` computes in a `setImmediate` callback; `runTimed` queues
 * its own callback just before it, so the stamps bracket the computation itself.
 */
import type * as ort from 'onnxruntime-node';
import { bytesToStrings, fromOrtTensor, stringsToBytes, toOrtFeeds } from '@switchyard/ort';
import type { TimedRun, WireTensor } from './session-thread.js';

const now = (): bigint => process.hrtime.bigint();

export interface InlineLimits {
  /** Largest model file (bytes) given a main-thread session. */
  maxModelBytes: number;
  /** Largest total input bytes of an execution run inline. */
  maxInputBytes: number;
  /** Longest `session.run` time (ns) that counts as tiny: more than `WINDOW_OVER` of the last `WINDOW` runs over it close the gate. */
  maxRunNs: number;
}

export const DEFAULT_INLINE_LIMITS: InlineLimits = { maxModelBytes: 16 * 1024 * 1024, maxInputBytes: 64 * 1024, maxRunNs: 200_000 };

/** Runs the gate looks back on. */
export const WINDOW = 16;
/** Runs of the window that may go over the threshold (a quarter: the window's 75th percentile is under it). */
export const WINDOW_OVER = 4;
/** Thread-measured runs needed before the gate opens (again). */
export const PROBE_RUNS = WINDOW;
/** The threshold the thread's runs must keep to for the gate to open, as a fraction of the bound. */
export const OPEN_FRACTION = 0.75;
/** One inline run this many times the bound closes the gate at once. */
export const STALL_FACTOR = 5;

type State = 'probing' | 'opening' | 'open' | 'released';

export class InlineSession {
  private state: State = 'probing';
  /** Runs counted since the gate last changed state; the last WINDOW's over-threshold marks, newest in bit 0, and how many are set. */
  private samples = 0;
  private overBits = 0;
  private overCount = 0;
  private session: ort.InferenceSession | undefined;
  private creating: Promise<void> | undefined;
  private inFlight = 0;
  private idle: (() => void) | undefined;
  /** Inline runs so far and times the gate closed (for tests and benchmarks). */
  readonly counts = { inlineRuns: 0, closed: 0 };

  constructor(
    readonly modelFile: string,
    readonly options: ort.InferenceSession.SessionOptions,
    readonly limits: InlineLimits,
    private readonly onError: (message: string) => void = () => {},
  ) {}

  /** Whether the gate is open (the main-thread session exists and recent runs are tiny). */
  get open(): boolean {
    return this.state === 'open';
  }

  /** Settles when the main-thread session the opening gate asked for exists (or failed); at once when none was asked for. */
  async created(): Promise<void> {
    await this.creating;
  }

  /** Whether this execution may run inline now. */
  admits(feeds: Readonly<Record<string, WireTensor>>): boolean {
    return this.state === 'open' && this.eligible(feeds);
  }

  /** Whether an execution of these feeds would be eligible (their size), whatever the gate. */
  eligible(feeds: Readonly<Record<string, WireTensor>>): boolean {
    let bytes = 0;
    for (const name in feeds) bytes += feeds[name]!.data.byteLength;
    return bytes <= this.limits.maxInputBytes;
  }

  /** An eligible execution ran on a session thread and its `session.run` took `runNs`. */
  noteThreadRun(runNs: number): void {
    if (this.state !== 'probing') return;
    this.record(runNs > OPEN_FRACTION * this.limits.maxRunNs);
    if (this.samples >= PROBE_RUNS && this.overCount <= WINDOW_OVER) this.openGate();
  }

  /** An inline run's `session.run` took `runNs`: too slow (often of late, or this once by far) closes the gate. */
  noteInlineRun(runNs: number): void {
    if (this.state !== 'open') return;
    this.record(runNs > this.limits.maxRunNs);
    if (this.overCount > WINDOW_OVER || runNs > STALL_FACTOR * this.limits.maxRunNs) this.closeGate();
  }

  private record(over: boolean): void {
    const out = (this.overBits >>> (WINDOW - 1)) & 1;
    this.overBits = ((this.overBits << 1) | (over ? 1 : 0)) & ((1 << WINDOW) - 1);
    this.overCount += (over ? 1 : 0) - out;
    this.samples++;
  }

  private restartCounts(): void {
    this.samples = 0;
    this.overBits = 0;
    this.overCount = 0;
  }

  private openGate(): void {
    this.restartCounts();
    if (this.session !== undefined) {
      this.state = 'open';
      return;
    }
    this.state = 'opening';
    this.creating = (async () => {
      try {
        const ortModule = await import('onnxruntime-node');
        const session = await ortModule.InferenceSession.create(this.modelFile, this.options);
        if (this.state !== 'opening') {
          await session.release();
          return;
        }
        this.session = session;
        this.state = 'open';
      } catch (e) {
        // The thread's session loaded this file with these options: a failure here (memory) leaves
        // every execution on the thread.
        this.onError(e instanceof Error ? e.message : String(e));
        if (this.state === 'opening') this.state = 'released';
      }
    })();
  }

  private closeGate(): void {
    this.state = 'probing';
    this.restartCounts();
    this.counts.closed++;
  }

  /**
   * Run on the main thread. Stamps: `inferStartNs` in a callback queued just before onnxruntime's
   * own (both run in the same check phase, one after the other), `inferEndNs` when its promise
   * settles (the microtasks right after that callback); `startNs` is `inferStartNs` less the feed
   * conversion, `endNs` follows the output conversion, as on the thread.
   */
  async runTimed(feeds: Record<string, WireTensor>, fetches: readonly string[]): Promise<TimedRun> {
    const session = this.session;
    if (session === undefined || this.state === 'released') throw new Error('session released');
    this.inFlight++;
    this.counts.inlineRuns++;
    try {
      const convertStart = now();
      const ortFeeds = toOrtFeeds(stringsDecoded(feeds));
      const convertNs = now() - convertStart;
      let inferStartNs = 0n;
      setImmediate(() => {
        inferStartNs = now();
      });
      const produced = await session.run(ortFeeds, [...fetches]);
      const inferEndNs = now();
      const runNs = Number(inferEndNs - inferStartNs);
      this.noteInlineRun(runNs);
      const outputs: Record<string, WireTensor> = {};
      for (const name of fetches) {
        const tensor = produced[name];
        if (tensor === undefined) continue;
        const out = fromOrtTensor(tensor);
        const data = out.type === 'string' ? stringsToBytes(out.data as string[]) : (out.data as WireTensor['data']);
        outputs[name] = { type: out.type as ort.Tensor.Type, dims: out.dims, data };
      }
      return { outputs, times: { startNs: inferStartNs - convertNs, inferStartNs, inferEndNs, endNs: now() } };
    } finally {
      if (--this.inFlight === 0) this.idle?.();
    }
  }

  /** Release the main-thread session once its runs have settled. Idempotent. */
  async release(): Promise<void> {
    this.state = 'released';
    await this.creating;
    if (this.inFlight > 0) await new Promise<void>((resolve) => (this.idle = resolve));
    const session = this.session;
    this.session = undefined;
    await session?.release();
  }
}

/** `feeds` with each string tensor's BYTES bytes turned into strings (the rest as they are). */
function stringsDecoded(feeds: Record<string, WireTensor>): Record<string, WireTensor | { type: 'string'; dims: number[]; data: string[] }> {
  let out: Record<string, WireTensor | { type: 'string'; dims: number[]; data: string[] }> | undefined;
  for (const name in feeds) {
    const t = feeds[name]!;
    if (t.type !== 'string') continue;
    out ??= { ...feeds };
    out[name] = { type: 'string', dims: t.dims, data: bytesToStrings(t.data as Uint8Array) };
  }
  return out ?? feeds;
}
