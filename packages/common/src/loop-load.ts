/**
 * `LoopLoad`: whether this thread's event loop has been busy lately, from Node's event-loop
 * utilisation (`performance.eventLoopUtilization`: the share of time the loop spent running
 * callbacks rather than waiting for IO). For choices that trade the loop's time against a thread
 * hop's latency: an idle loop can take a little work itself and answer sooner, a busy one should
 * hand it off.
 *
 * - The utilisation is measured over windows of at least `windowMs`: `busy()` closes the current
 *   window when it is that old (one native call) and answers from the last closed one, so calls in
 *   between cost a clock read. A window is as long as the gap between calls, so after a quiet spell
 *   the loop reads idle.
 * - Busy means a utilisation of at least `busyAbove` (default 0.5).
 * - Before the first window closes, the loop counts as idle.
 */
import { performance } from 'node:perf_hooks';

/** Cumulative idle and active milliseconds of the loop (what `performance.eventLoopUtilization()` returns). */
export interface LoopTimes {
  readonly idle: number;
  readonly active: number;
}

export interface LoopLoadOptions {
  /** Shortest window (ms) a utilisation is measured over. Default 10. */
  readonly windowMs?: number;
  /** Utilisation (0..1) from which the loop counts as busy. Default 0.5. */
  readonly busyAbove?: number;
  /** The loop's cumulative times; default `performance.eventLoopUtilization()` (tests substitute it). */
  readonly times?: () => LoopTimes;
  /** A monotonic clock in ms; default `performance.now` (tests substitute it). */
  readonly now?: () => number;
}

export class LoopLoad {
  private readonly windowMs: number;
  private readonly busyAbove: number;
  private readonly times: () => LoopTimes;
  private readonly now: () => number;
  private last: LoopTimes;
  private windowStart: number;
  private utilization = 0;

  constructor(options: LoopLoadOptions = {}) {
    this.windowMs = options.windowMs ?? 10;
    this.busyAbove = options.busyAbove ?? 0.5;
    this.times = options.times ?? (() => performance.eventLoopUtilization());
    this.now = options.now ?? (() => performance.now());
    this.last = this.times();
    this.windowStart = this.now();
  }

  /** The loop's utilisation over the last closed window (0 before one closed). */
  get recentUtilization(): number {
    this.roll();
    return this.utilization;
  }

  /** Whether the loop was busy over the last closed window. */
  busy(): boolean {
    return this.recentUtilization >= this.busyAbove;
  }

  private roll(): void {
    const now = this.now();
    if (now - this.windowStart < this.windowMs) return;
    const times = this.times();
    const active = times.active - this.last.active;
    const total = active + (times.idle - this.last.idle);
    this.utilization = total > 0 ? Math.min(1, Math.max(0, active / total)) : 0;
    this.last = times;
    this.windowStart = now;
  }
}
