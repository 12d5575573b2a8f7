/** A binary min-heap of (key, value) pairs: the lazy expiry queues of MemoryRoutingTable. */
export class MinHeap<T> {
  private readonly keys: number[] = [];
  private readonly values: T[] = [];

  get size(): number {
    return this.keys.length;
  }

  push(key: number, value: T): void {
    const keys = this.keys;
    const values = this.values;
    let i = keys.length;
    keys.push(key);
    values.push(value);
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (keys[p]! <= key) break;
      keys[i] = keys[p]!;
      values[i] = values[p]!;
      i = p;
    }
    keys[i] = key;
    values[i] = value;
  }

  peek(): { key: number; value: T } | undefined {
    return this.keys.length === 0 ? undefined : { key: this.keys[0]!, value: this.values[0]! };
  }

  pop(): { key: number; value: T } | undefined {
    const keys = this.keys;
    const values = this.values;
    if (keys.length === 0) return undefined;
    const top = { key: keys[0]!, value: values[0]! };
    const lastKey = keys.pop()!;
    const lastValue = values.pop()!;
    const n = keys.length;
    if (n > 0) {
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        if (l >= n) break;
        const r = l + 1;
        const c = r < n && keys[r]! < keys[l]! ? r : l;
        if (keys[c]! >= lastKey) break;
        keys[i] = keys[c]!;
        values[i] = values[c]!;
        i = c;
      }
      keys[i] = lastKey;
      values[i] = lastValue;
    }
    return top;
  }
}
