/**
 * `LoadSlots`: at most `size` model loads run at once (tritonserver's `--model-load-thread-count`);
 * further loads wait in arrival order. A load holds its slot only while it reads and builds one
 * model, never while it waits on another model, so nested loads (an ensemble's composing models)
 * cannot deadlock on slots.
 */
export class LoadSlots {
  private busy = 0;
  private readonly waiting: Array<() => void> = [];

  constructor(private readonly size: number) {
    if (!Number.isSafeInteger(size) || size < 1) throw new RangeError(`load slots must be a positive integer, got ${size}`);
  }

  /** Run `work` in a slot, waiting for one if all are taken. */
  async run<T>(work: () => Promise<T>): Promise<T> {
    if (this.busy >= this.size) await new Promise<void>((resolve) => this.waiting.push(resolve));
    else this.busy++;
    try {
      return await work();
    } finally {
      // hand the slot straight to the next load (busy stays the same), or free it
      const next = this.waiting.shift();
      if (next !== undefined) next();
      else this.busy--;
    }
  }
}
