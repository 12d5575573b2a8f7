/**
 * The clock a scheduler measures queue delays and request timeouts with, and its one-shot
 * timers. Injected so unit tests drive time by hand (`ManualClock`) instead of sleeping;
 * `realClock` is the production one.
 *
 * Times are milliseconds as fractional numbers on a monotonic scale (`performance.now()`), so
 * microsecond settings such as `max_queue_delay_microseconds: 100` keep their precision.
 */

export interface QueueClock {
  /** Monotonic time in (fractional) milliseconds. */
  now(): number;
  /**
   * Call `fire` once, at or after clock time `atMs` (never before). Returns a function that
   * cancels the timer if it has not fired yet; cancelling twice is harmless.
   */
  setTimer(atMs: number, fire: () => void): () => void;
}

/** Longer waits are split into steps: setTimeout holds a signed 32-bit millisecond count. */
const MAX_TIMEOUT_MS = 2 ** 31 - 1;
/** Below this many ms left, wait by yielding to the event loop instead of setTimeout (1 ms grain). */
const FINE_WAIT_MS = 1.5;

/**
 * The production clock: `performance.now()`, and timers that are precise below a millisecond.
 * setTimeout rounds to whole milliseconds (and may fire up to ~1 ms late), so a timer sleeps
 * with setTimeout until about 1.5 ms before its time and then re-checks on each event-loop turn
 * (setImmediate), which lets sockets keep being served meanwhile.
 */
export const realClock: QueueClock = {
  now: () => performance.now(),
  setTimer(atMs: number, fire: () => void): () => void {
    let cancelled = false;
    let timeout: NodeJS.Timeout | undefined;
    let immediate: NodeJS.Immediate | undefined;
    // Never fires synchronously inside setTimer, even when `atMs` has already passed.
    const wait = (): void => {
      const left = atMs - performance.now();
      if (left <= FINE_WAIT_MS) immediate = setImmediate(check);
      else timeout = setTimeout(check, Math.min(Math.floor(left - 1), MAX_TIMEOUT_MS));
    };
    const check = (): void => {
      timeout = undefined;
      immediate = undefined;
      if (cancelled) return;
      if (performance.now() < atMs) return wait();
      cancelled = true;
      fire();
    };
    wait();
    return () => {
      cancelled = true;
      if (timeout !== undefined) clearTimeout(timeout);
      if (immediate !== undefined) clearImmediate(immediate);
    };
  },
};

/**
 * The in-memory twin for tests: time stands still until `advance` moves it, and timers fire
 * synchronously inside `advance`, earliest first (ties in the order they were set).
 */
export class ManualClock implements QueueClock {
  private time: number;
  private timers: { atMs: number; seq: number; fire: () => void }[] = [];
  private seq = 0;

  constructor(startMs = 1000) {
    this.time = startMs;
  }

  now(): number {
    return this.time;
  }

  setTimer(atMs: number, fire: () => void): () => void {
    const timer = { atMs, seq: this.seq++, fire };
    this.timers.push(timer);
    return () => {
      this.timers = this.timers.filter((t) => t !== timer);
    };
  }

  /** Timers not yet fired or cancelled. */
  get pendingTimers(): number {
    return this.timers.length;
  }

  /** Move time forward by `ms`, firing every timer that falls due on the way. */
  advance(ms: number): void {
    const end = this.time + ms;
    for (;;) {
      const due = this.timers.filter((t) => t.atMs <= end).sort((a, b) => a.atMs - b.atMs || a.seq - b.seq)[0];
      if (due === undefined) break;
      this.timers = this.timers.filter((t) => t !== due);
      this.time = Math.max(this.time, due.atMs);
      due.fire();
    }
    this.time = end;
  }
}
