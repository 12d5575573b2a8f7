/**
 * When queued items leave: at once, or with the others of this event-loop turn. A sender that is idle
 * (nothing sent this turn or the last) sends an item the moment it is added, so it leaves while the
 * rest of the turn's work goes on (a router's bookkeeping after a request, a worker's next step) rather
 * than after it. While items keep coming turn after turn, those of one turn go together at its end, in
 * one `send` (one socket write for a call-home link, one nats.js flush for the NATS outbox). Two turns
 * without a send make the sender idle again. An item goes at once only when nothing is queued before
 * it, so items leave in the order they were added.
 *
 * Measured with two routers on one worker at c=1, one forced to batch always (a scratch switch): over
 * call-home, time to first token 58-130 µs sooner and tensor requests 1-9 µs; over NATS
 * (`--call-home=false`), 39-120 µs and 6-7 µs. At c=16 the router's CPU per tensor request stayed
 * within noise of batching always (call-home 112-115 µs both ways; NATS 134-145 against 153).
 */
export class TurnBatch<T> {
  private pending: T[] = [];
  private scheduled = false;
  /** Sent this turn or the last: items wait for the end of the turn. */
  private busy = false;
  private sentSinceCheck = false;
  private readonly flushBound = (): void => this.flush();
  private readonly checkIdleBound = (): void => this.checkIdle();

  /** `send` gets each batch in the order its items were added (never empty). */
  constructor(private readonly send: (items: readonly T[]) => void) {}

  add(item: T): void {
    this.addAll([item]);
  }

  /** Several items, kept together (one `send` when they go at once). */
  addAll(items: readonly T[]): void {
    if (items.length === 0) return;
    if (!this.busy && !this.scheduled) {
      this.busy = true;
      this.sent(items);
      setImmediate(this.checkIdleBound);
      return;
    }
    for (const item of items) this.pending.push(item);
    this.schedule();
  }

  /** Send what is queued now (a closing sender's last items). */
  flush(): void {
    this.scheduled = false;
    const pending = this.pending;
    if (pending.length === 0) return;
    this.pending = [];
    this.sent(pending);
  }

  private schedule(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    setImmediate(this.flushBound);
  }

  private sent(items: readonly T[]): void {
    this.sentSinceCheck = true;
    this.send(items);
  }

  /** Once a turn while busy: a turn with no send since the last check makes the sender idle. */
  private checkIdle(): void {
    if (this.sentSinceCheck) {
      this.sentSinceCheck = false;
      setImmediate(this.checkIdleBound);
      return;
    }
    this.busy = false;
  }
}
