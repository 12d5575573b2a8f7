/**
 * `LoadSlots`: at most `size` model loads run at once (tritonserver's `--model-load-thread-count`);
 * further loads wait in arrival order. A load holds its slot only while it reads and builds one
 * model, never while it waits on another model, so nested loads (an ensemble's composing models)
 * cannot deadlock on slots. A load may also borrow slots nobody is using (`tryTake`, never waiting)
 * to create its instances side by side; a borrowed slot goes back, or to the next waiting load, once
 * its instance is built.
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
      this.free();
    }
  }

  /** A free slot, taken now (its release returned; call it once), or undefined when none is free. */
  tryTake(): (() => void) | undefined {
    if (this.busy >= this.size) return undefined;
    this.busy++;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.free();
    };
  }

  /** Hand the slot straight to the next load (busy stays the same), or free it. */
  private free(): void {
    const next = this.waiting.shift();
    if (next !== undefined) next();
    else this.busy--;
  }
}
