/**
 * The memory ObservationSource: the figures of each interval are handed to it (`push`) instead of
 * read from the event plane. For unit tests of whatever drives the planner, and for a planner run
 * without an event plane. `collect` returns the oldest pushed figures (an interval without figures:
 * no pool reported, no request) with `intervalSec` measured on the injected clock since the previous
 * call (the first: since construction).
 */
import type { ObservationSource } from './connector.js';
import type { Observations } from './observations.js';

/** One interval's figures without its length (the source measures that). */
export type IntervalFigures = Omit<Observations, 'intervalSec'>;

/** Most figures held before the oldest are dropped: a source nobody collects from stays bounded. */
export const MAX_QUEUED_INTERVALS = 1024;

export class MemoryObservationSource implements ObservationSource {
  private readonly queue: IntervalFigures[] = [];
  private last: number;
  /** Figures dropped because the queue was full. */
  dropped = 0;

  /** `now`: the clock, ms (default Date.now). */
  constructor(private readonly now: () => number = Date.now) {
    this.last = now();
  }

  /** Queue the figures one coming `collect` returns. */
  push(figures: IntervalFigures): void {
    if (this.queue.length >= MAX_QUEUED_INTERVALS) {
      this.queue.shift();
      this.dropped++;
    }
    this.queue.push(figures);
  }

  collect(): Observations {
    const t = this.now();
    const intervalSec = Math.max(0, (t - this.last) / 1000);
    this.last = t;
    const figures = this.queue.shift() ?? { pools: {}, requests: { requests: 0 } };
    return { ...figures, intervalSec };
  }

  close(): Promise<void> {
    this.queue.length = 0;
    return Promise.resolve();
  }
}
