import { describe, expect, it } from 'vitest';
import { SwitchyardError } from '@switchyard/common';
import { fc, fuzz, withBigIntLimit } from '@switchyard/testing/fuzz';
import { formatDouble, hasDoubleLiteral, isDoubleLiteralMember, JsonDoubles, JsonIntegers, parseJson, stringifyJson, type JsonObject, type JsonValue } from './http-json.js';

function err(fn: () => unknown): SwitchyardError {
  try {
    fn();
  } catch (e) {
    if (e instanceof SwitchyardError) return e;
    throw e;
  }
  throw new Error('expected a throw');
}

describe('parseJson', () => {
  it('parses documents like JSON.parse', () => {
    const doc = '{"a":[1,-2,3.5,true,false,null,"x\\n\\u00e9\\ud83d\\ude00"],"b":{},"c":[]}';
    expect(parseJson(doc)).toEqual(JSON.parse(doc));
    expect(parseJson(new TextEncoder().encode(' [ 1 , 2 ] '))).toEqual([1, 2]);
  });

  it('keeps 64-bit integers exact and marks integral double literals', () => {
    const v = parseJson('{"big":18446744073709551615,"neg":-9223372036854775808,"d":1.0,"i":1,"arr":[1,2.0],"ok":[1,2]}') as JsonObject;
    expect(v.big).toBe(18446744073709551615n);
    expect(v.neg).toBe(-9223372036854775808n);
    expect(isDoubleLiteralMember(v, 'd')).toBe(true);
    expect(isDoubleLiteralMember(v, 'i')).toBe(false);
    expect(hasDoubleLiteral(v.arr as never)).toBe(true);
    expect(hasDoubleLiteral(v.ok as never)).toBe(false);
    expect(parseJson('-0')).toBe(0);
    expect(parseJson('123456789012345678901234')).toBe(1.2345678901234568e23);
  });

  it('reads long flat number arrays (the native path) exactly as short ones', () => {
    // Past NUMBER_ARRAY_MIN_CHARS an array of numbers is read natively; every rule still holds.
    const pad = Array.from({ length: 12 }, (_, k) => `0.${k + 1}25`).join(',');
    const read = (items: string) => parseJson(`{"data":[${items},${pad}]}`) as { data: JsonValue[] };
    const plain = read('1,-2,3.5');
    expect(plain.data.slice(0, 3)).toEqual([1, -2, 3.5]);
    expect(hasDoubleLiteral(plain.data)).toBe(false);
    expect(hasDoubleLiteral(read('1,2.0,3').data)).toBe(true);
    expect(hasDoubleLiteral(read('1,2e3,3').data)).toBe(true);
    expect(hasDoubleLiteral(read('1,2.5e1 ,3').data)).toBe(true);
    expect(hasDoubleLiteral(read('1, 2 ,\n3').data)).toBe(false);
    const zeros = read('-0,-0.0').data;
    expect(Object.is(zeros[0], 0)).toBe(true);
    expect(Object.is(zeros[1], -0)).toBe(true);
    expect(hasDoubleLiteral(zeros)).toBe(true);
    expect(read('18446744073709551615').data[0]).toBe(18446744073709551615n);
    expect(read('9007199254740993').data[0]).toBe(9007199254740993n);
    expect(read('1234567890123456').data[0]).toBe(1234567890123456);
    expect(read('123456789012345678901234').data[0]).toBe(1.2345678901234568e23);
    expect(read('1,"a",true,null,{}').data.slice(0, 5)).toEqual([1, 'a', true, null, {}]);
    expect(read('[1,2],[3]').data.slice(0, 2)).toEqual([[1, 2], [3]]);
    expect(err(() => read('1e400'))).toMatchObject({ code: 'internal', message: 'failed to parse the request JSON buffer: Number too big to be stored in double. at 9' });
    expect(err(() => read('1,,2')).message).toBe('failed to parse the request JSON buffer: Invalid value. at 11');
    expect(err(() => read('01')).message).toBe("failed to parse the request JSON buffer: Missing a comma or ']' after an array element. at 10");
    expect(err(() => parseJson(`[${pad}`)).message).toMatch(/^failed to parse the request JSON buffer: Missing a comma or '\]' after an array element\. at \d+$/);
  });

  it('reads a flat array natively exactly as the general loop does (property)', () => {
    // A null element sends the same literals through the general loop: values (-0 kept or not),
    // the double-literal mark and any error must agree, wherever the integral values, booleans,
    // strings (escapes, brackets and commas inside) and whitespace fall.
    const number = fc.oneof(
      fc.integer({ min: -1_000_000, max: 1_000_000 }).map(String),
      fc.constantFrom('0', '-0', '-0.0', '0.0', '1.0', '2e3', '2E3', '-2.5e1', '1.0000000000000001', '0.000', '1e-7', '5e-324'),
      fc.double({ noNaN: true, noDefaultInfinity: true }).map(String),
      fc.float({ noNaN: true, noDefaultInfinity: true }).map((v) => String(Math.fround(v))),
    );
    const text = fc.oneof(
      fc.string({ maxLength: 12 }).map((t) => JSON.stringify(t)),
      fc.constantFrom('"[CLS]"', '"a,b"', '"x]"', '"\\ud83d\\ude00"', '"\\ud800"', '"\\udc00"', '"tab\\t"', '"é"'),
    );
    const literal = fc.oneof({ weight: 4, arbitrary: number }, { weight: 1, arbitrary: fc.constantFrom('true', 'false') }, { weight: 2, arbitrary: text });
    const spaced = fc.tuple(fc.constantFrom('', ' ', '\n', ' \t'), literal, fc.constantFrom('', ' ', '\r\n')).map(([a, l, b]) => `${a}${l}${b}`);
    const read = (doc: string): JsonValue[] | SwitchyardError => {
      try {
        return (parseJson(doc) as { data: JsonValue[] }).data;
      } catch (e) {
        if (e instanceof SwitchyardError) return e;
        throw e;
      }
    };
    // (the padding makes the array long enough for the native path; before the items or after them)
    fuzz(fc.tuple(fc.array(spaced, { minLength: 1, maxLength: 40 }), fc.boolean(), fc.boolean()), ([items, padFirst, padStrings]) => {
      const pad = padStrings ? '"pad","ding","long","enough","to try"' : '0.125,0.25,0.375,0.5,0.625,0.75,0.875';
      const list = padFirst ? `${pad},${items.join(',')}` : `${items.join(',')},${pad}`;
      const native = read(`{"data":[${list}]}`);
      const general = read(`{"data":[${list},null]}`);
      if (general instanceof SwitchyardError) {
        expect(native).toBeInstanceOf(SwitchyardError);
        return;
      }
      expect(native).not.toBeInstanceOf(SwitchyardError);
      const values = native as JsonValue[];
      expect(values.length).toBe(general.length - 1);
      for (let k = 0; k < values.length; k++) expect(Object.is(values[k], general[k]), `${k}: ${String(values[k])} vs ${String(general[k])}`).toBe(true);
      expect(hasDoubleLiteral(values)).toBe(hasDoubleLiteral(general));
    });
  });

  it('refuses bytes that are not UTF-8 instead of replacing them, naming the first bad byte', () => {
    const doc = (bytes: number[]) => Uint8Array.from([...new TextEncoder().encode('{"data":["'), ...bytes, ...new TextEncoder().encode('"]}')]);
    expect(parseJson(doc([0xc3, 0xa9, 0xf0, 0x9f, 0x98, 0x80]))).toEqual({ data: ['é😀'] });
    for (const bad of [[0xff], [0x61, 0xc3], [0xc0, 0xaf], [0xed, 0xa0, 0x80], [0xf4, 0x90, 0x80, 0x80], [0xe2, 0x82]]) {
      const e = err(() => parseJson(doc(bad)));
      const at = 10 + (bad[0] === 0x61 ? 1 : 0);
      expect([e.code, e.message], JSON.stringify(bad)).toEqual(['internal', `failed to parse the request JSON buffer: Invalid encoding in string. at ${at}`]);
    }
  });

  it('keeps the first of duplicate keys and treats __proto__ as data', () => {
    const v = parseJson('{"a":1,"a":2,"__proto__":{"x":1}}') as JsonObject;
    expect(v.a).toBe(1);
    expect(Object.getPrototypeOf(v)).toBe(Object.prototype);
    expect(v.__proto__).toEqual({ x: 1 });
  });

  it('reports RapidJSON messages and byte offsets as internal errors', () => {
    const cases: Array<[string, string]> = [
      ['', 'The document is empty. at 0'],
      ['AAAA', 'Invalid value. at 0'],
      ['[1,]', 'Invalid value. at 3'],
      ['[1 2]', "Missing a comma or ']' after an array element. at 3"],
      ['{"a" 1}', 'Missing a colon after a name of object member. at 5'],
      ['{1:2}', 'Missing a name for object member. at 1'],
      ['{"a":1 "b":2}', "Missing a comma or '}' after an object member. at 7"],
      ['"abc', 'Missing a closing quotation mark in string. at 0'],
      ['"\\x"', 'Invalid escape character in string. at 2'],
      ['1.', 'Miss fraction part in number. at 2'],
      ['1e', 'Miss exponent in number. at 2'],
      ['1e400', 'Number too big to be stored in double. at 0'],
      ['{} x', 'The document root must not be followed by other values. at 3'],
      ['"é" x', 'The document root must not be followed by other values. at 5'],
    ];
    for (const [text, msg] of cases) {
      const e = err(() => parseJson(text));
      expect(e.code).toBe('internal');
      expect(e.message).toBe(`failed to parse the request JSON buffer: ${msg}`);
    }
  });

  it('survives hostile nesting without recursion', () => {
    const depth = 200000;
    const v = parseJson('['.repeat(depth) + '1' + ']'.repeat(depth));
    expect(Array.isArray(v)).toBe(true);
  });
  it('reads a long integer literal without BigInt (found by http-codec.fuzz.test.ts)', () => {
    // BigInt's decimal parse is superlinear: 4·10^6 digits took seconds before the 20-digit cut-off.
    const literal = `9${'0'.repeat(1_000_000)}`;
    expect(withBigIntLimit(() => err(() => parseJson(literal))).message).toBe('failed to parse the request JSON buffer: Number too big to be stored in double. at 0');
    expect(withBigIntLimit(() => parseJson('184467440737095516150'))).toBe(184467440737095516150);
    expect(withBigIntLimit(() => parseJson('18446744073709551615'))).toBe(18446744073709551615n);
  });
});

describe('stringifyJson', () => {
  it('writes bigints exactly and doubles like RapidJSON', () => {
    expect(stringifyJson({ a: 18446744073709551615n, b: [1, 'x', true, null], c: new JsonDoubles(new Float64Array([1, 0.5, 1e21, -0])) })).toBe(
      '{"a":18446744073709551615,"b":[1,"x",true,null],"c":[1.0,0.5,1e21,-0.0]}',
    );
    expect(formatDouble(1e-7)).toBe('1e-7');
    expect(formatDouble(Math.fround(0.1))).toBe('0.10000000149011612');
  });

  it('writes a list natively only where JSON.stringify writes every element as the general path does (property)', () => {
    const element = fc.oneof(
      fc.double(),
      fc.integer(),
      fc.boolean(),
      fc.string({ maxLength: 8 }),
      fc.bigInt({ min: -(2n ** 64n), max: 2n ** 64n }),
      fc.constantFrom(null, -0, NaN, Infinity, -Infinity, 1e21, 5e-324),
    );
    const general = (v: unknown): string => (Array.isArray(v) ? `[${v.map(general).join(',')}]` : stringifyJson(v));
    fuzz(fc.array(element, { maxLength: 20 }), (list) => {
      expect(stringifyJson(list)).toBe(general(list));
    });
  });

  it('writes integer tensor data in decimal, 64-bit values exactly', () => {
    expect(stringifyJson(new JsonIntegers(new Int32Array([-2147483648, 0, 7])))).toBe('[-2147483648,0,7]');
    expect(stringifyJson(new JsonIntegers(new BigUint64Array([18446744073709551615n, 1n])))).toBe('[18446744073709551615,1]');
    expect(stringifyJson(new JsonIntegers(new BigInt64Array([-9223372036854775808n])))).toBe('[-9223372036854775808]');
    expect(stringifyJson(new JsonIntegers(new Uint8Array(0)))).toBe('[]');
    // 64-bit values through their 32-bit words where safe, as bigints where not: the digits of each
    fuzz(fc.array(fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n }), { maxLength: 20 }), (list) => {
      expect(stringifyJson(new JsonIntegers(BigInt64Array.from(list)))).toBe(`[${list.join(',')}]`);
      const unsigned = list.map((v) => BigInt.asUintN(64, v));
      expect(stringifyJson(new JsonIntegers(BigUint64Array.from(unsigned)))).toBe(`[${unsigned.join(',')}]`);
    });
    const edges = [0n, -1n, 2n ** 53n - 1n, -(2n ** 53n) + 1n, 2n ** 53n, -(2n ** 53n), 2n ** 53n + 1n, -(2n ** 53n) - 1n, 2n ** 32n, -(2n ** 32n), 2n ** 63n - 1n, -(2n ** 63n)];
    expect(stringifyJson(new JsonIntegers(BigInt64Array.from(edges)))).toBe(`[${edges.join(',')}]`);
  });
});
