/**
 * A single-consumer async queue: producers `push` synchronously, the consumer awaits `next()`.
 * `end()` finishes it after the buffered items; `fail(e)` makes the next `next()` throw right away
 * (buffered items are dropped: failure is for cancellation and lost connections).
 * Used by the memory twins to stand in for sockets; not a public API.
 */
export class AsyncChannel<T> {
  private readonly buffer: T[] = [];
  private waiter: { resolve: (r: IteratorResult<T>) => void; reject: (e: unknown) => void } | null = null;
  private ended = false;
  private error: { e: unknown } | null = null;

  get closed(): boolean {
    return this.ended || this.error !== null;
  }

  push(item: T): void {
    if (this.closed) return;
    if (this.waiter) {
      const w = this.waiter;
      this.waiter = null;
      w.resolve({ value: item, done: false });
    } else {
      this.buffer.push(item);
    }
  }

  end(): void {
    if (this.closed) return;
    this.ended = true;
    if (this.waiter && this.buffer.length === 0) {
      const w = this.waiter;
      this.waiter = null;
      w.resolve({ value: undefined, done: true });
    }
  }

  fail(e: unknown): void {
    if (this.closed) return;
    this.error = { e };
    this.buffer.length = 0;
    if (this.waiter) {
      const w = this.waiter;
      this.waiter = null;
      w.reject(e);
    }
  }

  next(): Promise<IteratorResult<T>> {
    if (this.error) return Promise.reject(this.error.e);
    if (this.buffer.length > 0) return Promise.resolve({ value: this.buffer.shift() as T, done: false });
    if (this.ended) return Promise.resolve({ value: undefined, done: true });
    if (this.waiter) return Promise.reject(new Error('AsyncChannel has one consumer'));
    return new Promise((resolve, reject) => {
      this.waiter = { resolve, reject };
    });
  }
}
