import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { DEFAULT_DESCRIBE_MAX_LENGTH, DESCRIBE_MAX_DEPTH, describeValue } from './describe-value.js';

function deep(depth: number): unknown {
  let v: unknown = 0;
  for (let k = 0; k < depth; k++) v = [v];
  return v;
}

describe('describeValue', () => {
  it('writes what JSON.stringify writes for a small JSON value', () => {
    fc.assert(
      fc.property(fc.jsonValue({ maxDepth: DESCRIBE_MAX_DEPTH - 1 }), (v) => {
        const json = JSON.stringify(v);
        if (json.length <= DEFAULT_DESCRIBE_MAX_LENGTH) expect(describeValue(v)).toBe(json);
      }),
      { seed: 20_261_125, numRuns: 300 },
    );
    expect(describeValue({ a: [1, 'x', null, true], b: {} })).toBe('{"a":[1,"x",null,true],"b":{}}');
    expect(describeValue(-0)).toBe('0');
  });

  it('prints what JSON.stringify cannot: undefined, non-finite numbers, bigints, typed arrays', () => {
    expect(describeValue(undefined)).toBe('undefined');
    expect(describeValue(NaN)).toBe('NaN');
    expect(describeValue(-Infinity)).toBe('-Infinity');
    expect(describeValue(2n ** 64n - 1n)).toBe('18446744073709551615');
    expect(describeValue(new Uint8Array(7))).toBe('Uint8Array(7 bytes)');
  });

  it('describes an array nested 10^5 deep, where String (and JSON.stringify before Node 24) overflow the stack', () => {
    const v = deep(100_000);
    expect(() => String(v)).toThrow(RangeError);
    const inner = '['.repeat(DESCRIBE_MAX_DEPTH);
    expect(describeValue(v)).toBe(`${inner}[…]${']'.repeat(DESCRIBE_MAX_DEPTH)}`);
    let o: unknown = 1;
    for (let k = 0; k < 100_000; k++) o = { a: o };
    expect(describeValue(o)).toBe(`${'{"a":'.repeat(DESCRIBE_MAX_DEPTH)}{…}${'}'.repeat(DESCRIBE_MAX_DEPTH)}`);
  });

  it('bounds the text for a huge string, array or object, and ends a cut with an ellipsis', () => {
    const cases: unknown[] = ['x'.repeat(64 << 20), new Array(1_000_000).fill(7), Object.fromEntries(Array.from({ length: 100_000 }, (_, i) => [`k${i}`, i]))];
    for (const v of cases) {
      const d = describeValue(v);
      expect(d.length).toBe(DEFAULT_DESCRIBE_MAX_LENGTH);
      expect(d.endsWith('…')).toBe(true);
    }
    expect(describeValue('abcdef', 4)).toBe('"ab…');
    expect(describeValue([1, 2], 5)).toBe('[1,2]');
    expect(describeValue([1, 2, 3], 5)).toBe('[1,2…');
  });

  it('never ends a cut on half of a surrogate pair', () => {
    const d = describeValue('😀'.repeat(100), 11);
    expect(d).toBe(`"${'😀'.repeat(4)}…`);
  });
});
