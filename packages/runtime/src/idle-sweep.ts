/**
 * IdleSweep: many "silent for `idleMs`" deadlines of one length, served by one timer instead of a
 * timer per entry. Used where every request in flight would otherwise arm (and clear) a timer of
 * its own: a caller's stream idle timeout and a worker's heartbeat (nats-request-plane.ts), the
 * router's stall probe (@switchyard/cluster stall-watch.ts).
 *
 * An entry is due once `now - entry.lastActive >= idleMs`; `onIdle(entry)` is then called, at the
 * same moment a timer of the entry's own would have fired (every entry has the same length, so the
 * earliest deadline is the oldest `lastActive`). `onIdle` decides what follows: it may `delete` the
 * entry (a timeout), set `lastActive` to now to be called again one `idleMs` later (a heartbeat), or
 * delete it and `add` it back later (a probe in flight). The timer is armed for the earliest
 * deadline, re-armed when it fires, and not re-armed when no entry is left; it is unref'd (what an
 * entry waits on keeps the process alive, not this timer).
 *
 * Who calls what: `add`, `touch` and `delete` from the owner of an entry, on the event loop; `onIdle`
 * runs from the timer, never inside `add` / `touch` / `delete`.
 */
export interface IdleEntry {
  /** Epoch ms of the entry's last sign of life (`add` and `touch` set it). */
  lastActive: number;
}

export class IdleSweep<E extends IdleEntry> {
  private readonly entries = new Set<E>();
  private timer: ReturnType<typeof setTimeout> | undefined;
  /** Epoch ms the timer fires at (meaningful while `timer` is set). */
  private timerAt = 0;

  /** `idleMs` > 0. */
  constructor(
    private readonly idleMs: number,
    private readonly onIdle: (entry: E) => void,
  ) {}

  /** Watch `entry`, silent from now. */
  add(entry: E): void {
    entry.lastActive = Date.now();
    this.entries.add(entry);
    // every deadline is at least this far away: a timer armed already fires no later than this one's
    if (this.timer === undefined) this.arm(this.idleMs, entry.lastActive + this.idleMs);
  }

  /** A sign of life: `entry`'s silence starts again now. */
  touch(entry: E): void {
    entry.lastActive = Date.now();
  }

  delete(entry: E): void {
    this.entries.delete(entry);
  }

  get size(): number {
    return this.entries.size;
  }

  /** Stop the timer and forget every entry (none is called). */
  clear(): void {
    this.entries.clear();
    clearTimeout(this.timer);
    this.timer = undefined;
  }

  private arm(delay: number, at: number): void {
    this.timerAt = at;
    this.timer = setTimeout(this.fire, delay);
    this.timer.unref();
  }

  private readonly fire = (): void => {
    this.timer = undefined;
    const now = Date.now();
    let next = Infinity;
    for (const e of this.entries) {
      if (now - e.lastActive >= this.idleMs) {
        this.onIdle(e);
        if (!this.entries.has(e)) continue;
      }
      next = Math.min(next, e.lastActive + this.idleMs);
    }
    // (onIdle may have added entries, and armed the timer for them)
    if (next === Infinity || (this.timer !== undefined && this.timerAt <= next)) return;
    clearTimeout(this.timer);
    // a deadline reached within the same millisecond (lastActive set to now by onIdle) waits one more
    this.arm(Math.max(1, next - now), next);
  };
}
