/**
 * The simulator's agenda: events ordered by time, ties in insertion order (so a run is a pure
 * function of its inputs). A binary heap.
 */
export interface Scheduled<E> {
  readonly atMs: number;
  readonly seq: number;
  readonly event: E;
}

export class EventQueue<E> {
  private readonly heap: Scheduled<E>[] = [];
  private seq = 0;

  get size(): number {
    return this.heap.length;
  }

  push(atMs: number, event: E): void {
    const h = this.heap;
    h.push({ atMs, seq: this.seq++, event });
    let i = h.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!before(h[i]!, h[parent]!)) break;
      [h[i], h[parent]] = [h[parent]!, h[i]!];
      i = parent;
    }
  }

  pop(): Scheduled<E> | undefined {
    const h = this.heap;
    const top = h[0];
    const last = h.pop();
    if (top === undefined || last === undefined || h.length === 0) return top;
    h[0] = last;
    let i = 0;
    for (;;) {
      const l = 2 * i + 1;
      const r = l + 1;
      let m = i;
      if (l < h.length && before(h[l]!, h[m]!)) m = l;
      if (r < h.length && before(h[r]!, h[m]!)) m = r;
      if (m === i) break;
      [h[i], h[m]] = [h[m]!, h[i]!];
      i = m;
    }
    return top;
  }
}

function before<E>(a: Scheduled<E>, b: Scheduled<E>): boolean {
  return a.atMs < b.atMs || (a.atMs === b.atMs && a.seq < b.seq);
}
