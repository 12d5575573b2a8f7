import { describe, expect, it } from 'vitest';
import { DEEP_NESTING, eachNodeReplaced, fc, fuzz, jsonText, nested, nestedText, objectWith, type JsonValue } from './fuzz.js';

describe('fuzz helpers', () => {
  it('jsonText writes what JSON.stringify writes, own __proto__ keys included', () => {
    fuzz(fc.jsonValue({ maxDepth: 4 }), (v) => {
      expect(jsonText(v as JsonValue)).toBe(JSON.stringify(v));
    });
    const hostile = objectWith([['__proto__', { a: [1, -0, 'x'] }], ['b', null]]);
    expect(jsonText(hostile)).toBe(JSON.stringify(hostile));
    expect(jsonText(undefined)).toBe('');
  });

  it('jsonText writes a value nested DEEP_NESTING deep, which JSON.stringify cannot before Node 24', () => {
    const deep = nested(DEEP_NESTING);
    expect(jsonText(deep)).toBe(nestedText(DEEP_NESTING));
  });

  it('eachNodeReplaced replaces every node once, the root included', () => {
    const texts = eachNodeReplaced({ a: [1, 2], b: { c: 'x' } }, '9');
    expect(texts.map((t) => [t.path, t.text])).toEqual([
      ['', '9'],
      ['a', '{"a":9,"b":{"c":"x"}}'],
      ['a.0', '{"a":[9,2],"b":{"c":"x"}}'],
      ['a.1', '{"a":[1,9],"b":{"c":"x"}}'],
      ['b', '{"a":[1,2],"b":9}'],
      ['b.c', '{"a":[1,2],"b":{"c":9}}'],
    ]);
  });

  it('fails a property with its seed and counterexample, even one nested too deeply for a recursive printer', () => {
    const deep = nested(DEEP_NESTING);
    let message = '';
    try {
      fuzz(fc.constant(deep), () => {
        throw new Error('refused the deep value');
      });
    } catch (e) {
      message = (e as Error).message;
    }
    expect(message).toMatch(/^Property failed after 1 tests\n\{ seed: -?\d+, path: "[0-9:]*" \}/);
    expect(message).toContain('Counterexample: (nested too deeply to print');
    expect(message).toContain('Got error: Error: refused the deep value');
    expect(() => fuzz(fc.integer({ min: 0, max: 9 }), (n) => expect(n).toBeLessThan(5))).toThrow(/Counterexample: \[5\]/);
  });

  it('bounds the CPU time of an input: over the bound twice fails, over it once (a pause) passes', () => {
    const spin = (ms: number): void => {
      const start = process.cpuUsage();
      for (;;) {
        const used = process.cpuUsage(start);
        if ((used.user + used.system) / 1000 >= ms) return;
      }
    };
    expect(() => fuzz(fc.constant(0), () => spin(30), { timeLimitMs: 10 })).toThrow(/took \d+ ms of CPU, twice \(limit 10 ms\)/);
    let calls = 0;
    expect(() => fuzz(fc.constant(0), () => spin(calls++ === 0 ? 30 : 0), { timeLimitMs: 10, scale: 0.005 })).not.toThrow();
    expect(calls).toBe(2);
  });
});
