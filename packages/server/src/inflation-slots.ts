/**
 * One process-wide bound on decompression for both doors: at most `MAX_CONCURRENT_INFLATIONS`
 * request bodies (HTTP `Content-Encoding`) or messages (gRPC `grpc-encoding`) inflate at once,
 * each up to its door's size limit; the others wait their turn holding only their compressed
 * bytes. Without it, N small compression bombs arriving together hold N × the limit (measured: 24
 * HTTP bombs, 1.7 GB of RSS). Node's zlib runs on libuv's 4 pool threads, so more at once would
 * not inflate faster anyway.
 */

/** How many bodies or messages may inflate at once in the process. */
export const MAX_CONCURRENT_INFLATIONS = 4;

/** A counting semaphore, FIFO. */
class Slots {
  #free: number;
  readonly #waiting: Array<() => void> = [];

  constructor(count: number) {
    this.#free = count;
  }

  /** Run `inflate` once a slot is free; the slot is released however it ends. */
  async run<T>(inflate: () => Promise<T>): Promise<T> {
    if (this.#free > 0) this.#free -= 1;
    else await new Promise<void>((resolve) => this.#waiting.push(resolve));
    try {
      return await inflate();
    } finally {
      const next = this.#waiting.shift();
      if (next !== undefined) next();
      else this.#free += 1;
    }
  }
}

export const inflationSlots = new Slots(MAX_CONCURRENT_INFLATIONS);
