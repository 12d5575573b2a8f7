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
});
