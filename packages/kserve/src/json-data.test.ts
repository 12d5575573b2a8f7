import { describe, expect, it } from 'vitest';
import { SwitchyardError } from '@switchyard/common';
import { fc, fuzz } from '@switchyard/testing/fuzz';
import { parseJson, stringifyJson, type JsonObject } from './http-json.js';
import { jsonToTensorData, tensorDataToJson } from './json-data.js';
import type { DataType } from './protocols.js';
import { deserializeBytesElements, serializeBytesElements, typedView } from './tensor.js';

function err(fn: () => unknown): SwitchyardError {
  try {
    fn();
  } catch (e) {
    if (e instanceof SwitchyardError) return e;
    throw e;
  }
  throw new Error('expected a throw');
}
const data = (text: string) => (parseJson(`{"d":${text}}`) as JsonObject).d;

describe('jsonToTensorData: a flat list reads as the general walk does', () => {
  // literals as clients write them: integers (signed, past 32 bits, past 2^53), integral and other
  // doubles, -0, booleans, strings, null, nested lists
  const literal = fc.oneof(
    fc.integer({ min: -300, max: 300 }).map(String),
    fc.constantFrom('0', '-0', '1.0', '0.0', '-0.0', '2e3', '1.5', '-2.25', '1e-3', '4294967296', '-2147483649', '9007199254740993', '-9223372036854775808', '18446744073709551615', '1e300'),
    fc.constantFrom('true', 'false', '"a"', 'null', '[1]', '[]', '{}'),
  );
  const datatypes: DataType[] = ['BOOL', 'UINT8', 'UINT16', 'UINT32', 'UINT64', 'INT8', 'INT16', 'INT32', 'INT64', 'FP32', 'FP64'];
  const outcome = (fn: () => Uint8Array): string => {
    try {
      return `ok ${Buffer.from(fn()).toString('hex')}`;
    } catch (e) {
      if (!(e instanceof SwitchyardError)) throw e;
      return `${e.code}: ${e.message}`;
    }
  };

  it('the same bytes, or the same error, as the list nested one level deeper', () => {
    fuzz(fc.tuple(fc.constantFrom(...datatypes), fc.array(literal, { minLength: 1, maxLength: 12 })), ([dt, literals]) => {
      const list = data(`[${literals.join(',')}]`);
      const n = literals.length;
      expect(outcome(() => jsonToTensorData('X', dt, [n], list))).toBe(outcome(() => jsonToTensorData('X', dt, [1, n], data(`[[${literals.join(',')}]]`))));
    });
  });

  it('reads plain flat lists (64-bit, truncated, floats) and refuses 1.0 among integers and negatives for unsigned types with Triton\'s messages', () => {
    expect([...typedView('INT64', jsonToTensorData('X', 'INT64', [3], data('[-1, 4294967296, 9007199254740991]')))]).toEqual([-1n, 4294967296n, 9007199254740991n]);
    expect([...typedView('UINT8', jsonToTensorData('X', 'UINT8', [2], data('[256, 7]')))]).toEqual([0, 7]);
    expect([...typedView('FP32', jsonToTensorData('X', 'FP32', [3], data('[1.0, 0.5, 0]')))]).toEqual([1, 0.5, 0]);
    expect(err(() => jsonToTensorData('X', 'INT32', [2], data('[1.0, 2]'))).message).toBe("Unable to parse 'data': attempt to access JSON non-signed-integer as signed-integer");
    expect(err(() => jsonToTensorData('X', 'UINT32', [2], data('[1, -2]'))).message).toBe("Unable to parse 'data': attempt to access JSON non-unsigned-integer as unsigned-integer");
  });
});

describe('jsonToTensorData / tensorDataToJson round trips', () => {
  const cases: Array<[DataType, string, number[]]> = [
    ['BOOL', '[true,false,true,true]', [true, false, true, true] as never],
    ['UINT8', '[0,255,7,1]', [0, 255, 7, 1]],
    ['UINT16', '[0,65535,7,1]', [0, 65535, 7, 1]],
    ['UINT32', '[0,4294967295,7,1]', [0, 4294967295, 7, 1]],
    ['INT8', '[-128,127,0,-1]', [-128, 127, 0, -1]],
    ['INT16', '[-32768,32767,0,-1]', [-32768, 32767, 0, -1]],
    ['INT32', '[-2147483648,2147483647,0,-1]', [-2147483648, 2147483647, 0, -1]],
    ['FP32', '[0.5,-1.25,3,1e10]', [0.5, -1.25, 3, 1e10]],
    ['FP64', '[0.1,-1.25,3,1e300]', [0.1, -1.25, 3, 1e300]],
  ];
  for (const [dt, json, expected] of cases) {
    it(`${dt}: nested and flat`, () => {
      const flat = jsonToTensorData('X', dt, [4], data(json));
      const nested = jsonToTensorData('X', dt, [2, 2], data(`[${json.slice(1, -1).split(',').slice(0, 2).join(',')}],[${json.slice(1, -1).split(',').slice(2).join(',')}]]`.replace(/^/, '[')));
      expect([...nested]).toEqual([...flat]);
      const back = tensorDataToJson('X', dt, [4], flat);
      const values = Array.isArray(back) ? back : Array.from(back.values as ArrayLike<number>);
      expect(values).toEqual(expected);
    });
  }

  it('INT64 / UINT64 keep full precision', () => {
    const i = jsonToTensorData('X', 'INT64', [3], data('[-9223372036854775808,9223372036854775807,5]'));
    expect([...(typedView('INT64', i) as BigInt64Array)]).toEqual([-9223372036854775808n, 9223372036854775807n, 5n]);
    expect(stringifyJson(tensorDataToJson('X', 'INT64', [3], i))).toBe('[-9223372036854775808,9223372036854775807,5]');
    const u = jsonToTensorData('X', 'UINT64', [2], data('[18446744073709551615,1]'));
    expect(stringifyJson(tensorDataToJson('X', 'UINT64', [2], u))).toBe('[18446744073709551615,1]');
  });

  it('INT64 / UINT64 from safe integers and bigints: the values exactly (property)', () => {
    const safe = fc.oneof(fc.integer(), fc.maxSafeInteger(), fc.constantFrom(0, -1, 2 ** 32, -(2 ** 32), 2 ** 32 - 1, Number.MIN_SAFE_INTEGER, Number.MAX_SAFE_INTEGER));
    const big = fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n });
    fuzz(fc.array(fc.oneof(safe, big), { minLength: 1, maxLength: 20 }), (values) => {
      const text = `[${values.map(String).join(',')}]`;
      const i = jsonToTensorData('X', 'INT64', [values.length], data(text));
      expect([...(typedView('INT64', i) as BigInt64Array)]).toEqual(values.map((v) => BigInt(v)));
      const unsigned = values.map((v) => (typeof v === 'bigint' ? (v < 0n ? -v : v) : Math.abs(v)));
      const u = jsonToTensorData('X', 'UINT64', [unsigned.length], data(`[${unsigned.map(String).join(',')}]`));
      expect([...(typedView('UINT64', u) as BigUint64Array)]).toEqual(unsigned.map((v) => BigInt(v)));
    });
  });

  it('truncates integers to the element width like a C cast', () => {
    expect([...jsonToTensorData('X', 'UINT8', [2], data('[256,257]'))]).toEqual([0, 1]);
    expect([...(typedView('INT8', jsonToTensorData('X', 'INT8', [1], data('[200]'))) as Int8Array)]).toEqual([-56]);
  });

  it('BYTES as UTF-8 strings with length prefixes', () => {
    const b = jsonToTensorData('X', 'BYTES', [2], data('["ab","é"]'));
    expect(b).toEqual(serializeBytesElements([new Uint8Array([97, 98]), new Uint8Array([0xc3, 0xa9])]));
    expect(deserializeBytesElements(b)).toHaveLength(2);
    expect(tensorDataToJson('X', 'BYTES', [2], b)).toEqual(['ab', 'é']);
    expect(stringifyJson(tensorDataToJson('X', 'FP32', [2], jsonToTensorData('X', 'FP32', [2], data('[1,2]'))))).toBe('[1.0,2.0]');
  });

  it('zero-element shapes skip data entirely', () => {
    expect(jsonToTensorData('X', 'INT32', [0, 4], data('"anything"')).byteLength).toBe(0);
    expect(tensorDataToJson('X', 'INT32', [0], new Uint8Array(0))).toEqual([]);
  });
});

describe('json-data errors use Triton wording', () => {
  const cases: Array<[string, string, number[], string, string, string]> = [
    ['INT32', '[1,2,3]', [4], 'internal', '', "Failed to parse 'data' field: shape does not match true shape"],
    ['INT32', '[1,2,3,4,5]', [4], 'internal', '', "Unable to parse 'data': Shape does not match true shape of 'data' field"],
    ['INT32', '[1,2.0]', [2], 'internal', '', "Unable to parse 'data': attempt to access JSON non-signed-integer as signed-integer"],
    ['INT32', '[1,2.5]', [2], 'internal', '', "Unable to parse 'data': attempt to access JSON non-signed-integer as signed-integer"],
    ['UINT32', '[1,-2]', [2], 'internal', '', "Unable to parse 'data': attempt to access JSON non-unsigned-integer as unsigned-integer"],
    ['BOOL', '[1]', [1], 'internal', '', "Unable to parse 'data': attempt to access JSON non-boolean as boolean"],
    ['FP32', '["x"]', [1], 'internal', '', "Unable to parse 'data': attempt to access JSON non-number as double"],
    ['BYTES', '[1]', [1], 'internal', '', 'Unable to parse JSON bytes array: attempt to access JSON non-string as string'],
    ['INT32', '5', [1], 'internal', '', "Unable to parse 'data': attempt to access JSON non-array as array"],
    ['FP16', '[1]', [1], 'invalid_argument', '', 'receiving FP16 data via JSON is not supported. Please use the binary data format for input X'],
    ['BF16', '[1]', [1], 'invalid_argument', '', 'receiving BF16 data via JSON is not supported. Please use the binary data format for input X'],
    ['INT33', '[1]', [1], 'invalid_argument', '', 'invalid datatype for input X'],
  ];
  for (const [dt, json, shape, code, , msg] of cases) {
    it(`${dt} ${json}`, () => {
      const e = err(() => jsonToTensorData('X', dt, shape, data(json)));
      expect([e.code, e.message]).toEqual([code, msg]);
    });
  }

  it('a shape far larger than its data is a shape mismatch, not an allocation of the shape', () => {
    // 6e8 FP64 elements would be 4.8 GB: the buffer follows the values present instead.
    const e = err(() => jsonToTensorData('X', 'FP64', [1, 600_000_000], data('[1,2,3]')));
    expect([e.code, e.message]).toEqual(['internal', "Failed to parse 'data' field: shape does not match true shape"]);
    // Past the initial capacity the buffer grows and still ends exactly at the shape's size.
    const n = (1 << 16) * 3 + 5;
    const values = Array.from({ length: n }, (_, i) => i % 1000);
    const bytes = jsonToTensorData('X', 'INT32', [n], data(JSON.stringify(values)));
    expect(bytes.byteLength).toBe(n * 4);
    expect([...(typedView('INT32', bytes) as Int32Array)]).toEqual(values);
  });

  it('nesting deeper than 100 is refused', () => {
    const ok = '['.repeat(100) + '1' + ']'.repeat(100);
    expect(jsonToTensorData('X', 'INT32', [1], data(ok)).byteLength).toBe(4);
    const deep = '['.repeat(101) + '1' + ']'.repeat(101);
    expect(err(() => jsonToTensorData('X', 'INT32', [1], data(deep))).message).toBe(
      "Unable to parse 'data': JSON nesting depth exceeds maximum allowed limit (100)",
    );
  });

  it('output side', () => {
    expect(err(() => tensorDataToJson('Y', 'FP16', [1], new Uint8Array(2))).message).toBe(
      'sending FP16 data via JSON is not supported. Please use the binary data format for output',
    );
    expect(err(() => tensorDataToJson('Y', 'INT32', [2], new Uint8Array(4))).message).toBe(
      "output tensor shape does not match size of output for 'Y'",
    );
    expect(err(() => tensorDataToJson('Y', 'BYTES', [2], serializeBytesElements([new Uint8Array(1)]))).code).toBe('internal');
  });

  it('BYTES that are not UTF-8 are refused as JSON output, never altered', () => {
    const bytes = serializeBytesElements([new TextEncoder().encode('fine'), Uint8Array.of(0xc3, 0x28)]);
    const e = err(() => tensorDataToJson('Y', 'BYTES', [2], bytes));
    expect([e.code, e.message]).toEqual([
      'invalid_argument',
      "sending BYTES data that is not valid UTF-8 via JSON is not supported (element 1 of output 'Y'). Please use the binary data format for output",
    ]);
  });
});
