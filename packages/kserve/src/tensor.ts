/**
 * Tensor byte-level helpers shared by every codec and backend: element sizes, element counts,
 * the one size check every input shape passes, Triton's BYTES serialisation, and aligned
 * typed-array views.
 */
import { constants as bufferConstants } from 'node:buffer';
import { invalidArgument } from '@switchyard/common';
import { DATATYPES, type DataType } from './protocols.js';

const ELEMENT_SIZE: Record<DataType, number> = {
  BOOL: 1,
  UINT8: 1,
  UINT16: 2,
  UINT32: 4,
  UINT64: 8,
  INT8: 1,
  INT16: 2,
  INT32: 4,
  INT64: 8,
  FP16: 2,
  FP32: 4,
  FP64: 8,
  BYTES: 0,
  BF16: 2,
};

/** Each datatype's name keyed by itself: what `dataTypeOf` hands back. */
const CANONICAL_DATATYPES: ReadonlyMap<string, DataType> = new Map(DATATYPES.map((d) => [d, d]));

/**
 * The datatype `s` names, or undefined. The result is the literal of that name, not `s`: decoders
 * keep it, so every lookup keyed by a datatype meets one string per type. A string read out of a
 * request's bytes is a new string each time, and V8 deoptimises an optimised property lookup
 * specialised on the literal when such a key reaches it (over gRPC, `checkInputShape`'s element
 * size lookup was deoptimised and recompiled over and over: ~110 times in 16 s of ModelInfer calls).
 */
export function dataTypeOf(s: unknown): DataType | undefined {
  return typeof s === 'string' ? CANONICAL_DATATYPES.get(s) : undefined;
}

export function isDataType(s: unknown): s is DataType {
  return dataTypeOf(s) !== undefined;
}

/** Bytes per element; 0 for BYTES, whose elements vary in size. */
export function elementByteSize(datatype: DataType): number {
  return ELEMENT_SIZE[datatype];
}

/** Number of elements of a shape; 1 for a scalar shape `[]`. */
export function elementCount(shape: readonly number[]): number {
  let n = 1;
  for (const d of shape) n *= d;
  return n;
}

/** Byte size of a fixed-size tensor, or undefined for BYTES. */
export function fixedByteSize(datatype: DataType, shape: readonly number[]): number | undefined {
  const size = ELEMENT_SIZE[datatype];
  return size === 0 ? undefined : size * elementCount(shape);
}

/**
 * The largest tensor this server takes, in bytes: 4 GiB on every Node.js (one buffer's maximum on
 * Node 20; newer lines allow larger buffers, and the bound must not depend on the runtime a worker
 * happens to run on). Triton's bound is INT64_MAX bytes; a tensor past this one could not be
 * allocated on Node 20 and is never sane to buffer, so refusing it up front turns an allocation
 * failure into a client error.
 */
export const MAX_TENSOR_BYTE_SIZE = Math.min(bufferConstants.MAX_LENGTH, 2 ** 32);

/** Triton's element count bound (INT64_MAX), as it prints it. */
const MAX_ELEMENT_COUNT_TEXT = '9223372036854775807';
const MAX_ELEMENT_COUNT = 2 ** 63 - 1;

/** The request id prefix of Triton's request-scoped messages: `[request id: <id>] ` (`<id_unknown>` when empty). */
export function requestPrefix(id: string): string {
  return `[request id: ${id === '' ? '<id_unknown>' : id}] `;
}

/** An integer as C++ prints an int64: all its digits, also past 2^53 (`String` would round them to zeros). */
function integerText(n: number): string {
  return Number.isSafeInteger(n) || !Number.isInteger(n) ? String(n) : BigInt(n).toString();
}

/** Triton's DimsListToString: `[1,2,3]`. */
export function dimsToString(dims: readonly number[]): string {
  return `[${dims.map(integerText).join(',')}]`;
}

/** What a size check needs to name the input in its message. */
export interface InputShapeContext {
  requestId: string;
  model: string;
}

/**
 * The one size check of every input shape a client sends, before anything is sized from it: the
 * HTTP and gRPC decoders and the cluster wire decoder call it, so the router and the worker refuse
 * alike. Throws invalid_argument:
 * - a negative dimension: Triton's "All input dimensions should be specified" (a shape over gRPC
 *   is int64, and -1 is the wildcard of configs, never a size);
 * - more elements than INT64_MAX: Triton's "causes total element count to exceed maximum size of";
 * - more bytes than MAX_TENSOR_BYTE_SIZE (fixed-size types: count × element size; BYTES: at least
 *   4 bytes per element): Triton's "byte size overflow for input".
 * Returns the element count.
 */
export function checkInputShape(input: { name: string; datatype: string; shape: readonly number[] }, context: InputShapeContext): number {
  const { name, shape } = input;
  for (const d of shape) {
    if (!Number.isInteger(d) || d < 0) {
      throw invalidArgument(
        `${requestPrefix(context.requestId)}All input dimensions should be specified for input '${name}' for model '${context.model}', got ${dimsToString(shape)}`,
      );
    }
  }
  // A zero dimension makes an empty tensor whatever the others are (and must not meet Infinity).
  const count = shape.includes(0) ? 0 : elementCount(shape);
  if (count > MAX_ELEMENT_COUNT) {
    throw invalidArgument(
      `${requestPrefix(context.requestId)}input '${name}' for model '${context.model}' with shape ${dimsToString(shape)} causes total element count to exceed maximum size of ${MAX_ELEMENT_COUNT_TEXT}`,
    );
  }
  const datatype = dataTypeOf(input.datatype);
  const size = datatype === undefined ? 1 : ELEMENT_SIZE[datatype];
  const bytes = count * (size === 0 ? 4 : size);
  // The message is only built for a refusal (this runs for every input of every request).
  if (bytes > MAX_TENSOR_BYTE_SIZE) {
    checkInputByteSize(name, bytes, `shape ${dimsToString(shape)} of ${input.datatype} takes ${size === 0 ? 'at least ' : ''}${integerText(bytes)} bytes`, context);
  }
  return count;
}

/**
 * The byte bound of `checkInputShape` for a size the client states apart from the shape (a
 * shared-memory input's `shared_memory_byte_size`): past MAX_TENSOR_BYTE_SIZE is Triton's "byte
 * size overflow for input", invalid_argument, before anything of that size is allocated.
 * `what` says where the size comes from.
 */
export function checkInputByteSize(name: string, bytes: number, what: string, context: InputShapeContext): void {
  if (bytes > MAX_TENSOR_BYTE_SIZE) {
    throw invalidArgument(
      `${requestPrefix(context.requestId)}byte size overflow for input '${name}' for model '${context.model}': ${what}, more than the maximum of ${MAX_TENSOR_BYTE_SIZE}`,
    );
  }
}

/** Serialise BYTES elements: each a uint32 little-endian length followed by its bytes. */
export function serializeBytesElements(elements: readonly Uint8Array[]): Uint8Array {
  let total = 0;
  for (const e of elements) total += 4 + e.byteLength;
  const out = new Uint8Array(total);
  const view = new DataView(out.buffer);
  let off = 0;
  for (const e of elements) {
    view.setUint32(off, e.byteLength, true);
    out.set(e, off + 4);
    off += 4 + e.byteLength;
  }
  return out;
}

/**
 * Split serialised BYTES data into elements (views into `data`, not copies).
 * Throws invalid_argument with Triton's wording when the data is truncated.
 */
export function deserializeBytesElements(data: Uint8Array, tensorName = ''): Uint8Array[] {
  const out: Uint8Array[] = [];
  const view = new DataView(data.buffer, data.byteOffset, data.byteLength);
  let off = 0;
  while (off < data.byteLength) {
    if (off + 4 > data.byteLength) {
      throw invalidArgument(`incomplete string length indicator for inference input '${tensorName}', expecting 4 bytes but only ${data.byteLength - off} bytes available`);
    }
    const len = view.getUint32(off, true);
    off += 4;
    if (off + len > data.byteLength) {
      throw invalidArgument(`incomplete string data for inference input '${tensorName}', expecting string of length ${len} but only ${data.byteLength - off} bytes available`);
    }
    out.push(data.subarray(off, off + len));
    off += len;
  }
  return out;
}

export type TypedArray =
  | Uint8Array
  | Int8Array
  | Uint16Array
  | Int16Array
  | Uint32Array
  | Int32Array
  | BigUint64Array
  | BigInt64Array
  | Float32Array
  | Float64Array;

/**
 * A typed-array view of fixed-size tensor bytes. Copies only when `data` is not aligned to the
 * element size (gRPC-decoded buffers often are not). FP16 and BF16 come back as Uint16Array
 * (raw bit patterns); BOOL as Uint8Array.
 */
export function typedView(datatype: DataType, data: Uint8Array): TypedArray {
  const size = ELEMENT_SIZE[datatype];
  if (size === 0) throw new Error('typedView: BYTES has no fixed-size view');
  let src = data;
  // `new Uint8Array(view)` copies (Buffer#slice would return another unaligned view).
  if (src.byteOffset % size !== 0) src = new Uint8Array(src);
  const n = src.byteLength / size;
  const { buffer, byteOffset } = src;
  switch (datatype) {
    case 'BOOL':
    case 'UINT8':
      return new Uint8Array(buffer, byteOffset, n);
    case 'INT8':
      return new Int8Array(buffer, byteOffset, n);
    case 'UINT16':
    case 'FP16':
    case 'BF16':
      return new Uint16Array(buffer, byteOffset, n);
    case 'INT16':
      return new Int16Array(buffer, byteOffset, n);
    case 'UINT32':
      return new Uint32Array(buffer, byteOffset, n);
    case 'INT32':
      return new Int32Array(buffer, byteOffset, n);
    case 'UINT64':
      return new BigUint64Array(buffer, byteOffset, n);
    case 'INT64':
      return new BigInt64Array(buffer, byteOffset, n);
    case 'FP32':
      return new Float32Array(buffer, byteOffset, n);
    case 'FP64':
      return new Float64Array(buffer, byteOffset, n);
    default:
      throw new Error(`typedView: unhandled datatype ${String(datatype)}`);
  }
}

/** The bytes behind a typed array (a view, not a copy). */
export function bytesOf(array: ArrayBufferView): Uint8Array {
  return new Uint8Array(array.buffer, array.byteOffset, array.byteLength);
}
