import { describe, it, expect } from 'vitest';
import { bfloat16Bits, elemByteSize, encodeRawData, float16Bits, KSERVE_TO_ELEM_TYPE } from './elem-type.js';

describe('float16Bits', () => {
  it.each([
    [0, 0x0000],
    [-0, 0x8000],
    [1, 0x3c00],
    [-2, 0xc000],
    [0.5, 0x3800],
    [0.1, 0x2e66],
    [65504, 0x7bff],
    [65520, 0x7c00], // rounds up to +Inf
    [Infinity, 0x7c00],
    [-Infinity, 0xfc00],
    [2 ** -24, 0x0001], // smallest subnormal
    [2 ** -14, 0x0400], // smallest normal
    [2 ** -26, 0x0000], // underflows to zero
    [1 + 2 ** -11, 0x3c00], // tie → even
    [1 + 3 * 2 ** -11, 0x3c02], // tie → even (up)
  ])('%d → %i', (x, bits) => {
    expect(float16Bits(x)).toBe(bits);
  });
  it('keeps NaN a NaN', () => {
    const b = float16Bits(NaN);
    expect(b & 0x7c00).toBe(0x7c00);
    expect(b & 0x3ff).not.toBe(0);
  });
});

describe('bfloat16Bits', () => {
  it('takes the rounded top half of the float32', () => {
    expect(bfloat16Bits(1)).toBe(0x3f80);
    expect(bfloat16Bits(-2)).toBe(0xc000);
    expect(bfloat16Bits(Math.fround(1 + 2 ** -8))).toBe(0x3f80); // tie → even
    expect(bfloat16Bits(Math.fround(1 + 3 * 2 ** -8))).toBe(0x3f82);
    expect(bfloat16Bits(NaN) & 0x7fc0).toBe(0x7fc0);
  });
});

describe('encodeRawData', () => {
  it('writes fixed-width little-endian values', () => {
    expect([...encodeRawData('INT32', [1, -2])]).toEqual([1, 0, 0, 0, 0xfe, 0xff, 0xff, 0xff]);
    expect([...encodeRawData('UINT16', [0x1234])]).toEqual([0x34, 0x12]);
    expect([...encodeRawData('INT8', [-1, 127])]).toEqual([0xff, 0x7f]);
    expect([...encodeRawData('BOOL', [0, 5, 1])]).toEqual([0, 1, 1]);
    expect([...encodeRawData('INT64', [-1n])]).toEqual([0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]);
    expect([...encodeRawData('UINT64', [2 ** 40])]).toEqual([0, 0, 0, 0, 0, 1, 0, 0]);
    expect([...encodeRawData('FLOAT', [1])]).toEqual([0, 0, 0x80, 0x3f]);
    expect([...encodeRawData('DOUBLE', [1])]).toEqual([0, 0, 0, 0, 0, 0, 0xf0, 0x3f]);
    expect([...encodeRawData('FLOAT16', [1])]).toEqual([0x00, 0x3c]);
    expect([...encodeRawData('BFLOAT16', [1])]).toEqual([0x80, 0x3f]);
  });
  it('takes a Uint16Array as FLOAT16/BFLOAT16 bit patterns', () => {
    expect([...encodeRawData('FLOAT16', new Uint16Array([0x3c00]))]).toEqual([0x00, 0x3c]);
    expect([...encodeRawData('BFLOAT16', new Uint16Array([0x4000]))]).toEqual([0x00, 0x40]);
  });
  it('refuses STRING', () => {
    expect(() => encodeRawData('STRING', [1])).toThrow(/string_data/);
  });
  it('knows the width of every KServe type', () => {
    for (const t of Object.values(KSERVE_TO_ELEM_TYPE)) expect(elemByteSize(t)).toBeGreaterThanOrEqual(0);
    expect(elemByteSize('FLOAT16')).toBe(2);
    expect(elemByteSize('STRING')).toBe(0);
  });
});
