import { describe, expect, it } from 'vitest';
import { SwitchyardError } from '@switchyard/common';
import { DATATYPES } from './protocols.js';
import { MAX_TENSOR_BYTE_SIZE, checkInputShape, dataTypeOf, isDataType } from './tensor.js';

const context = { requestId: '', model: 'm' };

function refusal(datatype: string, shape: number[]): SwitchyardError {
  try {
    checkInputShape({ name: 'X', datatype, shape }, context);
  } catch (e) {
    if (e instanceof SwitchyardError) return e;
    throw e;
  }
  throw new Error(`${datatype} ${JSON.stringify(shape)} was accepted`);
}

describe('dataTypeOf: the datatype a decoded string names', () => {
  it('names each datatype, whatever string object carries it (a read from bytes included)', () => {
    for (const d of DATATYPES) {
      const read = Buffer.from(` ${d}`).toString('utf8', 1);
      expect(dataTypeOf(read)).toBe(d);
      expect(isDataType(read)).toBe(true);
    }
  });

  it('refuses anything else, inherited property names included', () => {
    for (const s of ['', 'fp32', 'FP32 ', ' FP32', 'FLOAT', 'TYPE_FP32', 'toString', '__proto__', 'constructor', 'hasOwnProperty']) {
      expect(dataTypeOf(s)).toBeUndefined();
      expect(isDataType(s)).toBe(false);
    }
    for (const v of [undefined, null, 4, {}, ['FP32'], new String('FP32')]) expect(dataTypeOf(v)).toBeUndefined();
  });
});

describe('checkInputShape: the one size check of input shapes', () => {
  it('accepts ordinary shapes and returns the element count', () => {
    expect(checkInputShape({ name: 'X', datatype: 'FP32', shape: [2, 3] }, context)).toBe(6);
    expect(checkInputShape({ name: 'X', datatype: 'BYTES', shape: [] }, context)).toBe(1);
    expect(checkInputShape({ name: 'X', datatype: 'INT8', shape: [0, 2 ** 62, 2 ** 62] }, context)).toBe(0);
  });

  it('refuses negative dimensions with Triton wording, whatever their value', () => {
    for (const shape of [[-1], [-2, -2], [1, -5]]) {
      const e = refusal('BYTES', shape);
      expect(e.code).toBe('invalid_argument');
      expect(e.message).toBe(`[request id: <id_unknown>] All input dimensions should be specified for input 'X' for model 'm', got [${shape.join(',')}]`);
    }
  });

  it('refuses an element count past INT64_MAX (Triton qa: [16, 2^60 + 2])', () => {
    const e = refusal('FP32', [16, 2 ** 60 + 2]);
    expect(e.code).toBe('invalid_argument');
    expect(e.message).toContain('causes total element count to exceed maximum size of 9223372036854775807');
    expect(e.message).toMatch(/^\[request id: <id_unknown>\] input 'X' for model 'm' with shape \[16,\d+\]/);
  });

  it('refuses a byte size past the 4 GiB tensor bound on every Node.js (Triton qa: [4, 2^60 + 2]; and [1, 2e9] FP32)', () => {
    expect(refusal('FP32', [4, 2 ** 60 + 2]).message).toContain("byte size overflow for input 'X' for model 'm'");
    const e = refusal('FP32', [1, 2_000_000_000]);
    expect(e.code).toBe('invalid_argument');
    expect(e.message).toBe(
      `[request id: <id_unknown>] byte size overflow for input 'X' for model 'm': shape [1,2000000000] of FP32 takes 8000000000 bytes, more than the maximum of ${MAX_TENSOR_BYTE_SIZE}`,
    );
    // BYTES elements take at least their 4-byte length.
    expect(refusal('BYTES', [1, 2_000_000_000]).message).toContain('of BYTES takes at least 8000000000 bytes');
  });

  it('the byte bound is exact: the largest tensor passes, one element more does not', () => {
    expect(checkInputShape({ name: 'X', datatype: 'UINT8', shape: [MAX_TENSOR_BYTE_SIZE] }, context)).toBe(MAX_TENSOR_BYTE_SIZE);
    expect(refusal('UINT8', [MAX_TENSOR_BYTE_SIZE + 1]).message).toContain('byte size overflow');
  });
});
