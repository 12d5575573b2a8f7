/**
 * Tensor `data` in KServe v2 JSON ↔ Switchyard tensor bytes, for every datatype.
 *
 * Input (`jsonToTensorData`) follows Triton's `ReadDataFromJson`: `data` is nested or flat in
 * row-major order, BOOL is true/false, BYTES elements are strings (UTF-8), integers must be
 * integer literals (unsigned ones non-negative) and are truncated to the element width like a C
 * cast, FP16/BF16 are refused. Element counts are checked against the shape for fixed-size
 * types (more values than the shape holds: `Unable to parse 'data': Shape does not match true
 * shape of 'data' field`; fewer: `Failed to parse 'data' field: shape does not match true
 * shape`), and memory follows the values present, never the shape alone; for BYTES the engine
 * checks the element count (as Triton's core does).
 *
 * Output (`tensorDataToJson`) follows `WriteDataToJson`: a flat list; INT64/UINT64 beyond the
 * double-safe range stay exact as `bigint`; FP32/FP64 are `JsonDoubles` so they print as
 * doubles (`1.0`); BYTES elements are strings, and an element that is not UTF-8 is refused
 * (`invalid_argument`, like FP16) rather than altered: the client can ask for binary data.
 *
 * Messages and codes are Triton's: type and shape problems are `internal` (HTTP 500) because
 * Triton's JSON layer reports them that way; FP16/BF16 are `invalid_argument`.
 */
import { internal, invalidArgument } from '@switchyard/common';
import { hasDoubleLiteral, JsonDoubles, JsonIntegers, type JsonValue } from './http-json.js';
import type { DataType } from './protocols.js';
import { bytesElementCount, serializeStringElements, utf8StringElements } from './bytes-strings.js';
import { elementByteSize, elementCount, isDataType, typedView } from './tensor.js';

/** Deepest `data` nesting accepted; Triton's HTTP_MAX_JSON_NESTING_DEPTH. */
export const MAX_JSON_DATA_DEPTH = 100;

/** Elements a fixed-size `data` buffer starts with; it doubles up to the shape's count as values arrive. */
const INITIAL_CAPACITY = 1 << 16;

const SHAPE_MISMATCH = "Shape does not match true shape of 'data' field";
const TOO_FEW_VALUES = "Failed to parse 'data' field: shape does not match true shape";
const NOT_BOOL = 'attempt to access JSON non-boolean as boolean';
const NOT_INT = 'attempt to access JSON non-signed-integer as signed-integer';
const NOT_UINT = 'attempt to access JSON non-unsigned-integer as unsigned-integer';
const NOT_NUMBER = 'attempt to access JSON non-number as double';
const NOT_STRING = 'attempt to access JSON non-string as string';
const NOT_ARRAY = 'attempt to access JSON non-array as array';
const DEPTH_EXCEEDED = `JSON nesting depth exceeds maximum allowed limit (${MAX_JSON_DATA_DEPTH})`;

const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;
const UINT64_MAX = 2n ** 64n - 1n;


/**
 * Convert the JSON `data` of input `name` into tensor bytes. `datatype` may be any string:
 * an unknown one is refused with Triton's message.
 */
export function jsonToTensorData(name: string, datatype: string, shape: readonly number[], data: unknown): Uint8Array {
  const count = elementCount(shape);
  if (count === 0) return new Uint8Array(0);
  if (!Array.isArray(data)) throw internal(`Unable to parse 'data': ${NOT_ARRAY}`);
  if (datatype === 'BYTES') return bytesFromJson(data);
  if (datatype === 'FP16' || datatype === 'BF16') {
    throw invalidArgument(
      `receiving ${datatype} data via JSON is not supported. Please use the binary data format for input ${name}`,
    );
  }
  if (!isDataType(datatype)) throw invalidArgument(`invalid datatype for input ${name}`);
  if (data.length === count) {
    const flat = flatData(datatype, data as readonly JsonValue[]);
    if (flat !== undefined) return flat;
  }
  // The buffer grows with the values actually present, never ahead of them: a shape claiming far
  // more elements than `data` holds must not size an allocation (it ends as a shape mismatch).
  const size = elementByteSize(datatype);
  let capacity = Math.min(count, INITIAL_CAPACITY);
  let out = new Uint8Array(capacity * size);
  let sink = makeSink(datatype, out);
  let written = 0;
  const walk = (array: readonly JsonValue[], depth: number): void => {
    if (depth > MAX_JSON_DATA_DEPTH) throw invalidArgument(`Unable to parse 'data': ${DEPTH_EXCEEDED}`);
    const marked = hasDoubleLiteral(array);
    for (let k = 0; k < array.length; k++) {
      const v = array[k] as JsonValue;
      if (Array.isArray(v)) {
        walk(v, depth + 1);
        continue;
      }
      if (written >= count) throw internal(`Unable to parse 'data': ${SHAPE_MISMATCH}`);
      if (written === capacity) {
        capacity = Math.min(count, capacity * 2);
        const grown = new Uint8Array(capacity * size);
        grown.set(out);
        out = grown;
        sink = makeSink(datatype, out);
      }
      sink(written, v, marked);
      written += 1;
    }
  };
  walk(data as JsonValue[], 1);
  // Fewer values than the shape holds (more were refused while walking) has its own message.
  if (written !== count) throw internal(TOO_FEW_VALUES);
  return out;
}

/**
 * `data` as tensor bytes when it is a flat list of exactly the shape's count (the form nearly every
 * client sends) and every value is what `makeSink` takes without a word (a number, an integer one
 * for integer types, non-negative for unsigned ones; a boolean for BOOL): one loop, no call per
 * value. Undefined otherwise, with nothing allocated past the values: the general walk then reads
 * it and names the first problem (an integer type's list holding an integral double literal, `1.0`,
 * among them).
 */
function flatData(datatype: DataType, data: readonly JsonValue[]): Uint8Array | undefined {
  const n = data.length;
  if (datatype === 'BYTES' || datatype === 'FP16' || datatype === 'BF16') return undefined;
  if (datatype === 'BOOL') {
    const out = new Uint8Array(n);
    for (let k = 0; k < n; k++) {
      const v = data[k];
      if (typeof v !== 'boolean') return undefined;
      out[k] = v ? 1 : 0;
    }
    return out;
  }
  const size = elementByteSize(datatype);
  const out = new Uint8Array(n * size);
  if (datatype === 'FP32' || datatype === 'FP64') {
    const view = datatype === 'FP32' ? new Float32Array(out.buffer) : new Float64Array(out.buffer);
    for (let k = 0; k < n; k++) {
      const v = data[k];
      if (typeof v !== 'number') return undefined;
      view[k] = v;
    }
    return out;
  }
  if (hasDoubleLiteral(data)) return undefined;
  const signed = datatype.startsWith('INT');
  if (size === 8) {
    // a safe integer (the parser makes a bigint of any other)
    const words = new Uint32Array(out.buffer);
    for (let k = 0; k < n; k++) {
      const v = integerNumber(data[k] as JsonValue, signed);
      if (v === undefined) return undefined;
      setInt64Words(words, k, v);
    }
    return out;
  }
  // the typed array's store truncates to the element width, as makeSink's does
  const view = typedView(datatype, out) as unknown as { [i: number]: number };
  for (let k = 0; k < n; k++) {
    const v = integerNumber(data[k] as JsonValue, signed);
    if (v === undefined) return undefined;
    view[k] = v;
  }
  return out;
}

/** A safe integer as its two 32-bit words at element `i` (little-endian, two's complement). */
function setInt64Words(words: Uint32Array, i: number, v: number): void {
  words[2 * i] = v >>> 0;
  words[2 * i + 1] = Math.floor(v / 4294967296) >>> 0;
}

type Sink = (index: number, v: JsonValue, containerHasDoubleLiteral: boolean) => void;

function makeSink(datatype: DataType, out: Uint8Array): Sink {
  const view = typedView(datatype, out) as unknown as { [i: number]: number | bigint };
  switch (datatype) {
    case 'BOOL':
      return (i, v) => {
        if (typeof v !== 'boolean') throw internal(`Unable to parse 'data': ${NOT_BOOL}`);
        view[i] = v ? 1 : 0;
      };
    case 'FP32':
    case 'FP64':
      return (i, v) => {
        if (typeof v === 'number') view[i] = v;
        else if (typeof v === 'bigint') view[i] = Number(v);
        else throw internal(`Unable to parse 'data': ${NOT_NUMBER}`);
      };
    default: {
      const signed = datatype.startsWith('INT');
      const bits = elementByteSize(datatype) * 8;
      if (bits === 64) {
        // A safe integer goes in as its two 32-bit words (little-endian, two's complement): a BigInt
        // made per element cost three times the rest of the read.
        const words = new Uint32Array(out.buffer, out.byteOffset, out.byteLength / 4);
        return (i, v, marked) => {
          const big = integerLiteral(v, marked, signed);
          if (big === undefined) throw internal(`Unable to parse 'data': ${signed ? NOT_INT : NOT_UINT}`);
          if (typeof big === 'bigint') view[i] = big;
          else setInt64Words(words, i, big);
        };
      }
      return (i, v, marked) => {
        const big = integerLiteral(v, marked, signed);
        if (big === undefined) throw internal(`Unable to parse 'data': ${signed ? NOT_INT : NOT_UINT}`);
        view[i] = typeof big === 'bigint' ? Number(BigInt.asUintN(bits, big)) : big;
      };
    }
  }
}

/** The integer a JSON value denotes if it is an integer literal in the int64/uint64 range, else undefined. */
function integerLiteral(v: JsonValue, containerHasDoubleLiteral: boolean, signed: boolean): number | bigint | undefined {
  if (typeof v === 'number') return containerHasDoubleLiteral ? undefined : integerNumber(v, signed);
  if (typeof v === 'bigint') {
    if (signed ? v < INT64_MIN || v > INT64_MAX : v < 0n || v > UINT64_MAX) return undefined;
    return v;
  }
  return undefined;
}

/** `v` if it is an integer number the type takes (a non-negative one when unsigned), else undefined. */
function integerNumber(v: JsonValue, signed: boolean): number | undefined {
  if (typeof v !== 'number' || !Number.isInteger(v) || (!signed && v < 0)) return undefined;
  return v;
}

/** BYTES: every leaf a string; serialised as uint32 length + UTF-8 bytes, in row-major order. */
function bytesFromJson(data: readonly JsonValue[]): Uint8Array {
  const strings: string[] = [];
  const walk = (array: readonly JsonValue[], depth: number): void => {
    if (depth > MAX_JSON_DATA_DEPTH) throw invalidArgument(`Unable to parse 'data': ${DEPTH_EXCEEDED}`);
    for (const v of array) {
      if (Array.isArray(v)) {
        walk(v, depth + 1);
        continue;
      }
      if (typeof v !== 'string') throw internal(`Unable to parse JSON bytes array: ${NOT_STRING}`);
      strings.push(v);
    }
  };
  walk(data, 1);
  return serializeStringElements(strings);
}

/**
 * Convert output tensor bytes to the flat JSON `data` list. Throws `internal` when the bytes do
 * not hold `shape`'s element count, `invalid_argument` for FP16/BF16.
 */
export function tensorDataToJson(name: string, datatype: DataType, shape: readonly number[], data: Uint8Array): JsonValue[] | JsonDoubles | JsonIntegers {
  const count = elementCount(shape);
  const mismatch = () => internal(`output tensor shape does not match size of output for '${name}'`);
  if (datatype === 'FP16' || datatype === 'BF16') {
    throw invalidArgument(`sending ${datatype} data via JSON is not supported. Please use the binary data format for output`);
  }
  if (datatype === 'BYTES') {
    let available: number;
    try {
      available = bytesElementCount(data, name);
    } catch {
      available = 0;
      if (count > 0) throw mismatch();
    }
    if (available < count) throw mismatch();
    // JSON text can only carry these bytes altered (U+FFFD); Triton writes them raw, which is not JSON.
    const strings = utf8StringElements(data, count);
    if (!Array.isArray(strings)) {
      throw invalidArgument(
        `sending BYTES data that is not valid UTF-8 via JSON is not supported (element ${strings.invalid} of output '${name}'). Please use the binary data format for output`,
      );
    }
    return strings;
  }
  if (data.byteLength !== count * elementByteSize(datatype)) throw mismatch();
  if (count === 0) return datatype === 'FP32' || datatype === 'FP64' ? new JsonDoubles([]) : [];
  const view = typedView(datatype, data);
  if (datatype === 'FP32' || datatype === 'FP64') return new JsonDoubles(view as Float32Array | Float64Array);
  if (datatype === 'BOOL') {
    // a loop: Array.from with a mapping function costs ten times JSON.stringify of the result
    const flags = new Array<boolean>(count);
    for (let k = 0; k < count; k++) flags[k] = (view as Uint8Array)[k] !== 0;
    return flags;
  }
  return new JsonIntegers(view as Exclude<typeof view, Float32Array | Float64Array>);
}
