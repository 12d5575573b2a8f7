/**
 * PreciseTimer: sleeps that end close to their deadline, for the simulated engine's real-time clock.
 *
 * Why: Node.js timers count whole milliseconds. `setTimeout(f, 0.57)` and `setTimeout(f, 1.7)` both
 * fire after about 1.06 ms and `setTimeout(f, 2.5)` after 2.06 ms, so a mocker step the timing model
 * puts at 0.57 ms (a decode at `speedup_ratio` 10) took nearly twice that, and a 1.7 ms prefill took
 * less. Every time the mocker reported (time to first token, inter-token latency) was off by up to a
 * millisecond, more than a router hop costs.
 *
 * How: one thread of the process waits for the earliest deadline with `Atomics.wait` (whose timeout
 * is not rounded to milliseconds) and posts a message when it passes; the event loop then resolves
 * every sleep that is due. A sleep ends at or after its deadline, never before; measured on a 2-core
 * VM, 55-90 µs after it (the kernel's timer slack and the two wake-ups), where setTimeout was off by
 * up to a millisecond. No thread spins: between deadlines it sleeps in the kernel.
 *
 * Ownership and lifetime: `sharedPreciseTimer()` is the process's one timer. Its thread (about 9 MB
 * of RSS) is started at the first sleep, so only a process that runs a mocker in real time has one,
 * and is referenced only while a sleep is pending: pending sleeps keep the process alive as timers
 * do, and an idle timer never does. If the thread cannot start, or dies, the timer falls back to
 * setTimeout (what the clock did before) for the sleeps pending then and every sleep after, and says
 * so once (a process warning, code SWITCHYARD_PRECISE_TIMER).
 */
import { Worker } from 'node:worker_threads';

/** What the timer needs of a thread: Node's `Worker`, or a test's stand-in. */
export interface TimerThread {
  on(event: 'message', listener: () => void): unknown;
  on(event: 'error' | 'exit', listener: (arg: unknown) => void): unknown;
  ref(): void;
  unref(): void;
  terminate(): Promise<number>;
}

/** Starts the waiting thread over `shared` (the control word, then the deadline). */
export type TimerThreadFactory = (shared: SharedArrayBuffer) => TimerThread;

/**
 * The thread's body (CommonJS, evaluated; nothing of ours imported). Word 0 of the control array is the arming sequence: the event loop bumps it and
 * notifies after each change of the deadline. Float 1 is the deadline on the monotonic clock in ms
 * (Infinity: none). The thread posts once per arming whose deadline has passed, then waits for the
 * next arming.
 */
const THREAD_SOURCE = `
const { workerData, parentPort } = require('node:worker_threads');
const control = new Int32Array(workerData, 0, 1);
const deadline = new Float64Array(workerData, 8, 1);
const now = () => { const t = process.hrtime(); return t[0] * 1e3 + t[1] / 1e6; };
let posted = -1;
for (;;) {
  const armed = Atomics.load(control, 0);
  const wait = deadline[0] - now();
  if (wait > 0) {
    Atomics.wait(control, 0, armed, wait === Infinity ? undefined : wait);
  } else {
    if (posted !== armed) { posted = armed; parentPort.postMessage(0); }
    Atomics.wait(control, 0, armed);
  }
}
`;

/**
 * Node's Worker running THREAD_SOURCE. No inherited node flags: under `--input-type=module` (a script
 * run with `node -e`) the evaluated source would be read as a module, where `require` does not exist.
 */
export const startTimerThread: TimerThreadFactory = (shared) => new Worker(THREAD_SOURCE, { eval: true, workerData: shared, name: 'switchyard-timer', execArgv: [] });

/** Milliseconds on the monotonic clock both threads read (process.hrtime). */
function monotonicMs(): number {
  const t = process.hrtime();
  return t[0] * 1e3 + t[1] / 1e6;
}

interface Sleeper {
  /** On performance.now()'s clock. */
  readonly deadline: number;
  readonly resolve: () => void;
}

export class PreciseTimer {
  /** Pending sleeps, earliest deadline first. */
  private readonly sleepers: Sleeper[] = [];
  private readonly control: Int32Array;
  private readonly deadline: Float64Array;
  private readonly shared = new SharedArrayBuffer(16);
  private thread: TimerThread | undefined;
  /** The thread could not start or died: setTimeout from now on. */
  private fallback = false;
  private referenced = false;

  constructor(private readonly startThread: TimerThreadFactory = startTimerThread) {
    this.control = new Int32Array(this.shared, 0, 1);
    this.deadline = new Float64Array(this.shared, 8, 1);
    this.deadline[0] = Infinity;
  }

  /** Resolves `ms` from now (performance.now()), never earlier; `ms` <= 0 or NaN: at once. */
  sleep(ms: number): Promise<void> {
    return this.sleepUntil(performance.now() + (ms > 0 ? ms : 0));
  }

  /** Resolves once performance.now() has reached `deadline`, never earlier (at once if it has). */
  sleepUntil(deadline: number): Promise<void> {
    if (!(deadline > performance.now())) return Promise.resolve();
    return new Promise((resolve) => {
      if (this.fallback || !this.started()) {
        laterThan(deadline, resolve);
        return;
      }
      const sleepers = this.sleepers;
      let i = sleepers.length;
      while (i > 0 && sleepers[i - 1]!.deadline > deadline) i--;
      sleepers.splice(i, 0, { deadline, resolve });
      if (i === 0) this.arm();
    });
  }

  /** Sleeps pending (for tests). */
  get pending(): number {
    return this.sleepers.length;
  }

  /** Whether sleeps go to the thread (false once it could not start or died: setTimeout then). */
  get threaded(): boolean {
    return !this.fallback;
  }

  /** Stops the thread (tests); pending and later sleeps fall back to setTimeout. */
  async close(): Promise<void> {
    const thread = this.thread;
    this.failOver();
    await thread?.terminate();
  }

  /** Starts the thread at the first sleep; false when it cannot (fallback set). */
  private started(): boolean {
    if (this.thread !== undefined) return true;
    try {
      const thread = this.startThread(this.shared);
      thread.unref();
      thread.on('message', () => this.wake());
      thread.on('error', (err) => this.failOver(err));
      thread.on('exit', (code) => this.failOver(`it exited with code ${String(code)}`));
      this.thread = thread;
      return true;
    } catch (err) {
      this.fallback = true;
      warnFallback(err);
      return false;
    }
  }

  /** Tells the thread the earliest deadline (or none) and holds the process open while one is pending. */
  private arm(): void {
    const first = this.sleepers[0];
    // the two clocks are read one after the other: 2 µs of margin keeps the thread from firing early
    this.deadline[0] = first === undefined ? Infinity : monotonicMs() + (first.deadline - performance.now()) + 0.002;
    Atomics.add(this.control, 0, 1);
    Atomics.notify(this.control, 0);
    const want = first !== undefined;
    if (want !== this.referenced && this.thread !== undefined) {
      this.referenced = want;
      if (want) this.thread.ref();
      else this.thread.unref();
    }
  }

  /** The thread saw the deadline pass: resolve what is due, arm the next. */
  private wake(): void {
    const now = performance.now();
    const sleepers = this.sleepers;
    let due = 0;
    while (due < sleepers.length && sleepers[due]!.deadline <= now) due++;
    const done = sleepers.splice(0, due);
    this.arm();
    for (const s of done) s.resolve();
  }

  /** No thread any more: every pending sleep moves to setTimeout. `why`: absent when closed on purpose. */
  private failOver(why?: unknown): void {
    if (this.fallback) return;
    this.fallback = true;
    this.thread = undefined;
    if (why !== undefined) warnFallback(why);
    for (const s of this.sleepers.splice(0)) laterThan(s.deadline, s.resolve);
  }
}

/** Once per timer that loses its thread: the simulated steps' timing is coarser from then on. */
function warnFallback(why: unknown): void {
  const reason = why instanceof Error ? why.message : String(why);
  process.emitWarning(`the precise timer's thread is gone (${reason}): simulated engine steps now wait on setTimeout, in whole milliseconds`, { code: 'SWITCHYARD_PRECISE_TIMER' });
}

/**
 * setTimeout's way, never before `deadline`: setTimeout counts whole milliseconds from the event loop's
 * cached clock, which can be most of a millisecond behind, so it may fire early; then it waits again.
 */
function laterThan(deadline: number, resolve: () => void): void {
  const wait = deadline - performance.now();
  if (!(wait > 0)) return resolve();
  setTimeout(() => laterThan(deadline, resolve), Math.ceil(wait));
}

let shared: PreciseTimer | undefined;

/** The process's one PreciseTimer (the simulated engine's real-time clock sleeps on it). */
export function sharedPreciseTimer(): PreciseTimer {
  shared ??= new PreciseTimer();
  return shared;
}
