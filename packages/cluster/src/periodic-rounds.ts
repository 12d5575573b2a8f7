/**
 * A round of work every `intervalMs` that never overlaps itself: the figure publishers' schedule.
 * A round still running (a publish waiting out an outage) absorbs the timer's calls meanwhile, so
 * an outage leaves no backlog. The timer does not hold the process open.
 */
export class PeriodicRounds {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;

  constructor(
    private readonly intervalMs: number,
    private readonly round: () => Promise<void>,
  ) {}

  start(): void {
    if (this.timer !== undefined) return;
    this.timer = setInterval(() => void this.tick(), this.intervalMs);
    this.timer.unref();
  }

  /** Stops the timer, waits for a round under way, then runs one last round. */
  async stop(): Promise<void> {
    if (this.timer !== undefined) clearInterval(this.timer);
    this.timer = undefined;
    await this.running;
    await this.tick();
  }

  /** One round now; a call during a round returns that round. */
  tick(): Promise<void> {
    if (this.running !== undefined) return this.running;
    this.running = this.round().finally(() => (this.running = undefined));
    return this.running;
  }
}
