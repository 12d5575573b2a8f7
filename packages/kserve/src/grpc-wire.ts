/**
 * ModelInferResponse / ModelStreamInferResponse plain objects (`grpc-messages.ts`) straight to
 * protobuf bytes, without building protobufjs messages first (`fromObject` makes a message object,
 * a `Long` per shape dimension and per 64-bit parameter, and `encode` a list of write operations,
 * for every response).
 *
 * The bytes are exactly those of the protos' own serializer (`cls.encode(cls.fromObject(obj))`,
 * protobufjs as loaded by @grpc/proto-loader): fields in field-number order; a singular field is
 * written whenever it is present, even when it holds its default (`""`, `false`, `0`), as
 * protobufjs does; `shape` packed; map entries in key insertion order, each with its key (1) and
 * value (2); `raw_output_contents` one length-delimited entry per output. Anything outside the
 * shapes this server produces (a tensor `contents`, a 64-bit value that is neither a safe
 * integer nor a decimal string, bytes that are not a `Uint8Array`, a string that is not well-formed
 * UTF-16) is not handled here: these functions return `undefined` and the caller uses the protos'
 * serializer, so no input is ever encoded differently.
 */
import type { GrpcInferOutputTensor, GrpcInferParameter, GrpcModelInferResponse, GrpcModelStreamInferResponse } from './grpc-messages.js';

/** Thrown inside a pass when a value falls outside the handled shapes; never escapes. */
const UNHANDLED = Symbol('unhandled');

function varintSize(v: number): number {
  // v: a non-negative integer below 2^32 (tags, lengths)
  return v < 0x80 ? 1 : v < 0x4000 ? 2 : v < 0x200000 ? 3 : v < 0x10000000 ? 4 : 5;
}

/** UTF-8 length of a string, or throws UNHANDLED for a lone surrogate (protobufjs and Buffer encode those differently). */
function utf8Size(s: string): number {
  const n = s.length;
  let size = n;
  for (let i = 0; i < n; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x80) continue;
    if (c < 0x800) size += 1;
    else if (c < 0xd800 || c > 0xdfff) size += 2;
    else {
      // a high surrogate followed by a low one: 4 bytes for the pair
      const next = i + 1 < n ? s.charCodeAt(i + 1) : 0;
      if (c > 0xdbff || next < 0xdc00 || next > 0xdfff) throw UNHANDLED;
      size += 2;
      i++;
    }
  }
  return size;
}

/**
 * A 64-bit field value as protobufjs's `Long.fromValue` reads it: a safe-integer number as is, a
 * decimal string taken modulo 2^64 (as `Long.fromString` wraps); returned as a number when it is
 * a non-negative safe integer, else as the unsigned 64-bit pattern in a bigint. A negative number
 * for a uint64 field is left to protobufjs (it writes 0 there).
 */
function int64Bits(v: unknown, unsigned = false): number | bigint {
  if (typeof v === 'number') {
    if (!Number.isSafeInteger(v) || (unsigned && v < 0)) throw UNHANDLED;
    return v >= 0 ? v : BigInt.asUintN(64, BigInt(v));
  }
  if (typeof v === 'string' && /^-?[0-9]{1,20}$/.test(v)) {
    const bits = BigInt.asUintN(64, BigInt(v));
    return bits <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(bits) : bits;
  }
  throw UNHANDLED;
}

function int64Size(bits: number | bigint): number {
  if (typeof bits === 'number') {
    let size = 1;
    for (let v = bits; v >= 128; v = Math.floor(v / 128)) size++;
    return size;
  }
  let size = 1;
  for (let v = bits; v >= 128n; v >>= 7n) size++;
  return size;
}

/** The member of an `InferParameter` that is set, as protobufjs writes it (every non-null member, in field order). */
function parameterSize(p: GrpcInferParameter): number {
  if (p === null || typeof p !== 'object') throw UNHANDLED;
  let size = 0;
  if (p.bool_param !== undefined && p.bool_param !== null) size += 2;
  if (p.int64_param !== undefined && p.int64_param !== null) size += 1 + int64Size(int64Bits(p.int64_param));
  if (p.string_param !== undefined && p.string_param !== null) {
    if (typeof p.string_param !== 'string') throw UNHANDLED;
    const n = utf8Size(p.string_param);
    size += 1 + varintSize(n) + n;
  }
  if (p.double_param !== undefined && p.double_param !== null) {
    if (typeof p.double_param !== 'number') throw UNHANDLED;
    size += 9;
  }
  if (p.uint64_param !== undefined && p.uint64_param !== null) size += 1 + int64Size(int64Bits(p.uint64_param, true));
  return size;
}

/**
 * Sizes are computed once, in the order the writer needs them: every length-delimited
 * submessage's size is pushed as the size pass meets it, and the write pass shifts them off.
 */
class Sizer {
  readonly sizes: number[] = [];

  string(tagSize: number, s: unknown): number {
    if (typeof s !== 'string') throw UNHANDLED;
    const n = utf8Size(s);
    return tagSize + varintSize(n) + n;
  }

  parameters(params: Record<string, GrpcInferParameter> | undefined | null): number {
    if (params === undefined || params === null) return 0;
    if (typeof params !== 'object') throw UNHANDLED;
    let size = 0;
    for (const key of Object.keys(params)) {
      const value = parameterSize(params[key] as GrpcInferParameter);
      const entry = this.string(1, key) + 1 + varintSize(value) + value;
      this.sizes.push(entry, value);
      size += 1 + varintSize(entry) + entry;
    }
    return size;
  }

  output(o: GrpcInferOutputTensor): number {
    if (o === null || typeof o !== 'object' || ((o as { contents?: unknown }).contents !== undefined && (o as { contents?: unknown }).contents !== null)) throw UNHANDLED;
    const at = this.sizes.length;
    this.sizes.push(0, 0); // this output's size, its packed shape's size
    let size = 0;
    if (o.name !== undefined && o.name !== null) size += this.string(1, o.name);
    if (o.datatype !== undefined && o.datatype !== null) size += this.string(1, o.datatype);
    const shape = o.shape;
    if (shape !== undefined && shape !== null) {
      if (!Array.isArray(shape)) throw UNHANDLED;
      if (shape.length > 0) {
        let packed = 0;
        for (const d of shape) packed += int64Size(int64Bits(d));
        this.sizes[at + 1] = packed;
        size += 1 + varintSize(packed) + packed;
      }
    }
    size += this.parameters(o.parameters);
    this.sizes[at] = size;
    return size;
  }

  response(r: GrpcModelInferResponse): number {
    if (r === null || typeof r !== 'object') throw UNHANDLED;
    let size = 0;
    if (r.model_name !== undefined && r.model_name !== null) size += this.string(1, r.model_name);
    if (r.model_version !== undefined && r.model_version !== null) size += this.string(1, r.model_version);
    if (r.id !== undefined && r.id !== null) size += this.string(1, r.id);
    size += this.parameters(r.parameters);
    if (r.outputs !== undefined && r.outputs !== null) {
      if (!Array.isArray(r.outputs)) throw UNHANDLED;
      for (const o of r.outputs) {
        const n = this.output(o);
        size += 1 + varintSize(n) + n;
      }
    }
    const raw = r.raw_output_contents;
    if (raw !== undefined && raw !== null) {
      if (!Array.isArray(raw)) throw UNHANDLED;
      for (const b of raw) {
        if (!(b instanceof Uint8Array)) throw UNHANDLED;
        size += 1 + varintSize(b.byteLength) + b.byteLength;
      }
    }
    return size;
  }
}

class Writer {
  pos = 0;
  next = 0;

  constructor(
    readonly buf: Buffer,
    readonly sizes: readonly number[],
  ) {}

  size(): number {
    return this.sizes[this.next++] as number;
  }

  varint(v: number): void {
    const buf = this.buf;
    while (v >= 0x80) {
      buf[this.pos++] = (v & 0x7f) | 0x80;
      v = Math.floor(v / 128);
    }
    buf[this.pos++] = v;
  }

  int64(bits: number | bigint): void {
    if (typeof bits === 'number') return this.varint(bits);
    const buf = this.buf;
    let v = bits;
    while (v >= 0x80n) {
      buf[this.pos++] = Number(v & 0x7fn) | 0x80;
      v >>= 7n;
    }
    buf[this.pos++] = Number(v);
  }

  string(tag: number, s: string): void {
    this.buf[this.pos++] = tag;
    const n = s.length;
    let i = 0;
    while (i < n && s.charCodeAt(i) < 0x80) i++;
    if (i === n) {
      this.varint(n);
      const buf = this.buf;
      let pos = this.pos;
      for (let j = 0; j < n; j++) buf[pos++] = s.charCodeAt(j);
      this.pos = pos;
      return;
    }
    const bytes = Buffer.byteLength(s, 'utf8');
    this.varint(bytes);
    this.pos += this.buf.write(s, this.pos, bytes, 'utf8');
  }

  parameter(p: GrpcInferParameter): void {
    const buf = this.buf;
    if (p.bool_param !== undefined && p.bool_param !== null) {
      buf[this.pos++] = 8;
      buf[this.pos++] = p.bool_param ? 1 : 0;
    }
    if (p.int64_param !== undefined && p.int64_param !== null) {
      buf[this.pos++] = 16;
      this.int64(int64Bits(p.int64_param));
    }
    if (p.string_param !== undefined && p.string_param !== null) this.string(26, p.string_param);
    if (p.double_param !== undefined && p.double_param !== null) {
      buf[this.pos++] = 33;
      this.pos = buf.writeDoubleLE(p.double_param, this.pos);
    }
    if (p.uint64_param !== undefined && p.uint64_param !== null) {
      buf[this.pos++] = 40;
      this.int64(int64Bits(p.uint64_param, true));
    }
  }

  parameters(tag: number, params: Record<string, GrpcInferParameter> | undefined | null): void {
    if (params === undefined || params === null) return;
    for (const key of Object.keys(params)) {
      this.buf[this.pos++] = tag;
      this.varint(this.size());
      this.string(10, key);
      this.buf[this.pos++] = 18;
      this.varint(this.size());
      this.parameter(params[key] as GrpcInferParameter);
    }
  }

  output(o: GrpcInferOutputTensor): void {
    this.buf[this.pos++] = 42;
    this.varint(this.size());
    const packed = this.size();
    if (o.name !== undefined && o.name !== null) this.string(10, o.name);
    if (o.datatype !== undefined && o.datatype !== null) this.string(18, o.datatype);
    if (o.shape !== undefined && o.shape !== null && o.shape.length > 0) {
      this.buf[this.pos++] = 26;
      this.varint(packed);
      for (const d of o.shape) this.int64(int64Bits(d));
    }
    this.parameters(34, o.parameters);
  }

  response(r: GrpcModelInferResponse): void {
    if (r.model_name !== undefined && r.model_name !== null) this.string(10, r.model_name);
    if (r.model_version !== undefined && r.model_version !== null) this.string(18, r.model_version);
    if (r.id !== undefined && r.id !== null) this.string(26, r.id);
    this.parameters(34, r.parameters);
    if (r.outputs !== undefined && r.outputs !== null) for (const o of r.outputs) this.output(o);
    if (r.raw_output_contents !== undefined && r.raw_output_contents !== null) {
      for (const b of r.raw_output_contents) {
        this.buf[this.pos++] = 50;
        this.varint(b.byteLength);
        this.buf.set(b, this.pos);
        this.pos += b.byteLength;
      }
    }
  }
}

/** `ModelInferResponse` bytes, or `undefined` when `response` is outside the handled shapes (see above). */
export function encodeModelInferResponseBytes(response: GrpcModelInferResponse): Buffer | undefined {
  try {
    const sizer = new Sizer();
    const size = sizer.response(response);
    const w = new Writer(Buffer.allocUnsafe(size), sizer.sizes);
    w.response(response);
    return w.buf;
  } catch (e) {
    if (e === UNHANDLED) return undefined;
    throw e;
  }
}

/** `ModelStreamInferResponse` bytes, or `undefined` when `response` is outside the handled shapes (see above). */
export function encodeModelStreamInferResponseBytes(response: GrpcModelStreamInferResponse): Buffer | undefined {
  try {
    if (response === null || typeof response !== 'object') return undefined;
    const sizer = new Sizer();
    const error = response.error_message;
    const hasError = error !== undefined && error !== null;
    const inner = response.infer_response;
    const hasInner = inner !== undefined && inner !== null;
    let size = hasError ? sizer.string(1, error) : 0;
    const innerSize = hasInner ? sizer.response(inner) : 0;
    if (hasInner) size += 1 + varintSize(innerSize) + innerSize;
    const w = new Writer(Buffer.allocUnsafe(size), sizer.sizes);
    if (hasError) w.string(10, error);
    if (hasInner) {
      w.buf[w.pos++] = 18;
      w.varint(innerSize);
      w.response(inner);
    }
    return w.buf;
  } catch (e) {
    if (e === UNHANDLED) return undefined;
    throw e;
  }
}
