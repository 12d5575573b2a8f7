/**
 * ONNX tensor element types (`TensorProto.DataType` in onnx.proto) and the little-endian byte
 * encoding of initializer values (`TensorProto.raw_data`).
 */

/** `TensorProto.DataType` numbers, keyed by their onnx.proto names. */
export const ElemType = {
  FLOAT: 1,
  UINT8: 2,
  INT8: 3,
  UINT16: 4,
  INT16: 5,
  INT32: 6,
  INT64: 7,
  STRING: 8,
  BOOL: 9,
  FLOAT16: 10,
  DOUBLE: 11,
  UINT32: 12,
  UINT64: 13,
  BFLOAT16: 16,
} as const;

export type ElemTypeName = keyof typeof ElemType;

/**
 * KServe v2 datatype → ONNX element type: the mapping Triton's ONNX Runtime backend uses
 * (BYTES ↔ STRING, FP16 ↔ FLOAT16, BF16 ↔ BFLOAT16, FP32 ↔ FLOAT, FP64 ↔ DOUBLE).
 */
export const KSERVE_TO_ELEM_TYPE = {
  BOOL: 'BOOL',
  UINT8: 'UINT8',
  UINT16: 'UINT16',
  UINT32: 'UINT32',
  UINT64: 'UINT64',
  INT8: 'INT8',
  INT16: 'INT16',
  INT32: 'INT32',
  INT64: 'INT64',
  FP16: 'FLOAT16',
  FP32: 'FLOAT',
  FP64: 'DOUBLE',
  BYTES: 'STRING',
  BF16: 'BFLOAT16',
} as const satisfies Record<string, ElemTypeName>;

export type KserveDatatype = keyof typeof KSERVE_TO_ELEM_TYPE;

/** Bytes per element in `raw_data`; STRING has no fixed width (it uses `string_data`). */
export function elemByteSize(type: ElemTypeName): number {
  switch (type) {
    case 'BOOL':
    case 'UINT8':
    case 'INT8':
      return 1;
    case 'UINT16':
    case 'INT16':
    case 'FLOAT16':
    case 'BFLOAT16':
      return 2;
    case 'UINT32':
    case 'INT32':
    case 'FLOAT':
      return 4;
    case 'UINT64':
    case 'INT64':
    case 'DOUBLE':
      return 8;
    case 'STRING':
      return 0;
  }
}

/**
 * Values for a numeric initializer, in row-major order. Numbers are converted to the element
 * type (FLOAT16/BFLOAT16 with round-to-nearest-even; BOOL: non-zero → 1). 64-bit integers also
 * accept bigints. To give FLOAT16/BFLOAT16 as bit patterns, pass a `Uint16Array`.
 */
export type NumericValues = ArrayLike<number> | ArrayLike<bigint>;

/** Encode numeric values as ONNX `raw_data`: fixed width, little-endian, independent of host. */
export function encodeRawData(type: ElemTypeName, values: NumericValues): Uint8Array {
  if (type === 'STRING') throw new Error('STRING tensors use string_data, not raw_data');
  const size = elemByteSize(type);
  const out = new Uint8Array(values.length * size);
  const view = new DataView(out.buffer);
  const bitsGiven = values instanceof Uint16Array;
  for (let k = 0; k < values.length; k++) {
    const v = values[k] as number | bigint;
    const at = k * size;
    switch (type) {
      case 'BOOL':
        view.setUint8(at, Number(v) !== 0 ? 1 : 0);
        break;
      case 'UINT8':
        view.setUint8(at, Number(v));
        break;
      case 'INT8':
        view.setInt8(at, Number(v));
        break;
      case 'UINT16':
        view.setUint16(at, Number(v), true);
        break;
      case 'INT16':
        view.setInt16(at, Number(v), true);
        break;
      case 'UINT32':
        view.setUint32(at, Number(v), true);
        break;
      case 'INT32':
        view.setInt32(at, Number(v), true);
        break;
      case 'UINT64':
        view.setBigUint64(at, BigInt(v), true);
        break;
      case 'INT64':
        view.setBigInt64(at, BigInt(v), true);
        break;
      case 'FLOAT':
        view.setFloat32(at, Number(v), true);
        break;
      case 'DOUBLE':
        view.setFloat64(at, Number(v), true);
        break;
      case 'FLOAT16':
        view.setUint16(at, bitsGiven ? Number(v) : float16Bits(Number(v)), true);
        break;
      case 'BFLOAT16':
        view.setUint16(at, bitsGiven ? Number(v) : bfloat16Bits(Number(v)), true);
        break;
    }
  }
  return out;
}

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

/** IEEE 754 binary16 bit pattern of `x` (round to nearest, ties to even; overflow → ±Inf). */
export function float16Bits(x: number): number {
  f32[0] = x;
  const bits = u32[0] as number;
  const sign = (bits >>> 16) & 0x8000;
  const exp = (bits >>> 23) & 0xff;
  let mant = bits & 0x7fffff;
  if (exp === 0xff) return sign | 0x7c00 | (mant !== 0 ? 0x200 : 0); // Inf / NaN
  let e = exp - 127 + 15;
  if (e >= 0x1f) return sign | 0x7c00;
  if (e <= 0) {
    // Subnormal half (or zero): shift the implicit-1 mantissa right, rounding to even.
    if (e < -10) return sign;
    mant |= 0x800000;
    const shift = 14 - e;
    const half = 1 << (shift - 1);
    const rest = mant & ((1 << shift) - 1);
    let m = mant >>> shift;
    if (rest > half || (rest === half && (m & 1) === 1)) m++;
    return sign | m;
  }
  let m = mant >>> 13;
  const rest = mant & 0x1fff;
  if (rest > 0x1000 || (rest === 0x1000 && (m & 1) === 1)) {
    m++;
    if (m === 0x400) {
      m = 0;
      e++;
      if (e >= 0x1f) return sign | 0x7c00;
    }
  }
  return sign | (e << 10) | m;
}

/** bfloat16 bit pattern of `x`: the top half of its float32, rounded to nearest even. */
export function bfloat16Bits(x: number): number {
  f32[0] = x;
  const bits = u32[0] as number;
  if ((bits & 0x7f800000) === 0x7f800000 && (bits & 0x7fffff) !== 0) return (bits >>> 16) | 0x40;
  const rounded = bits + 0x7fff + ((bits >>> 16) & 1);
  return (rounded >>> 16) & 0xffff;
}
