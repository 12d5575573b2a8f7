import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { WeakValueCache } from './weak-value-cache.js';

describe('WeakValueCache', () => {
  it('gives back the value held under a key, and only under that key', () => {
    const cache = new WeakValueCache<{ n: number }>();
    const a = cache.set('a', { n: 1 });
    expect(cache.get('a')).toBe(a);
    expect(cache.get('b')).toBeUndefined();
    let made = 0;
    expect(cache.getOrSet('a', () => ({ n: ++made }))).toBe(a);
    const b = cache.getOrSet('b', () => ({ n: ++made }));
    expect(b).toEqual({ n: 1 });
    expect(made).toBe(1);
    expect(cache.getOrSet('b', () => ({ n: ++made }))).toBe(b);
    expect(made).toBe(1);
  });

  it('any sequence of sets and gets reads the last value set per key', () => {
    fc.assert(
      fc.property(fc.array(fc.tuple(fc.constantFrom('x', 'y', 'z'), fc.boolean()), { maxLength: 40 }), (ops) => {
        const cache = new WeakValueCache<object>();
        const held = new Map<string, object>(); // keeps every value alive: nothing may be collected
        for (const [key, write] of ops) {
          if (write) held.set(key, cache.set(key, {}));
          else expect(cache.get(key)).toBe(held.get(key));
        }
      }),
    );
  });
});
