/**
 * `WeakValueCache`: values by key, held weakly. An entry lives as long as something else holds its
 * value, so the cache shares what is already in memory and never keeps anything alive by itself.
 * Used to share what identical model-folder files produce (a parsed tokenizer.json, a `Tokenizer`)
 * between the models that read them: the second model with the same files costs a digest, not a
 * parse and a vocabulary build, and no second copy in memory.
 * Keys must name the value's whole input (content digests): a hit is used as is.
 */
export class WeakValueCache<V extends object> {
  private readonly entries = new Map<string, WeakRef<V>>();
  /** Drops an entry whose value was collected (unless the key holds a newer value by then). */
  private readonly finalizer = new FinalizationRegistry<{ key: string; ref: WeakRef<V> }>(({ key, ref }) => {
    if (this.entries.get(key) === ref) this.entries.delete(key);
  });

  /** The live value of `key`, or undefined. */
  get(key: string): V | undefined {
    return this.entries.get(key)?.deref();
  }

  /** Holds `value` under `key` (weakly) and returns it. */
  set(key: string, value: V): V {
    const ref = new WeakRef(value);
    this.entries.set(key, ref);
    this.finalizer.register(value, { key, ref });
    return value;
  }

  /** The live value of `key`, else `make()`'s, kept. */
  getOrSet(key: string, make: () => V): V {
    return this.get(key) ?? this.set(key, make());
  }

  /** Live and collected-but-not-yet-finalized entries (tests). */
  get size(): number {
    return this.entries.size;
  }
}
