/**
 * ModelInferRequest protobuf bytes straight to the plain object `@grpc/proto-loader` hands over
 * (`grpc-messages.ts`), without protobufjs's message objects, a `Long` per shape dimension and
 * 64-bit parameter, and its `toObject` pass over them, on every request.
 *
 * The result is exactly the protos' own deserializer's (`cls.toObject(cls.decode(bytes), options)`
 * with `{ keepCase, longs: String, enums: String, defaults: true, oneofs: true }`): every field
 * present with its default when absent, 64-bit integers as decimal strings (signed for `int64`,
 * unsigned for `uint64`), `bytes` as `Buffer` views of the message, a map entry for each key (the
 * last value of a repeated key), a oneof's virtual `parameter_choice`, `contents: null` for an
 * input without contents. Only the messages the infer RPCs usually carry are handled: anything
 * else (a tensor `contents`, an unknown field, a field with another wire type, a varint longer than
 * needed, a length past the end, a map entry without a value, a `__proto__` map key, two members of
 * one oneof) makes `decodeModelInferRequestBytes` return `undefined`, and the caller uses the
 * protos' deserializer, which then accepts, or refuses, the message as it always did.
 */
import type { GrpcInferInputTensor, GrpcInferParameter, GrpcInferRequestedOutputTensor, GrpcModelInferRequest } from './grpc-messages.js';

/** Thrown inside a pass when the bytes fall outside the handled shapes; never escapes. */
const UNHANDLED = Symbol('unhandled');

const LENGTH_DELIMITED = 2;
const VARINT = 0;
const FIXED64 = 1;
const TWO_POW_32 = 2 ** 32;

/** A cursor over one message's bytes. */
class Reader {
  pos: number;
  constructor(
    readonly buf: Buffer,
    pos: number,
    readonly end: number,
  ) {
    this.pos = pos;
  }

  /** A varint below 2^31 (tags, lengths) in at most 5 bytes. */
  uint31(): number {
    const buf = this.buf;
    let value = 0;
    for (let shift = 0; shift < 35; shift += 7) {
      if (this.pos >= this.end) throw UNHANDLED;
      const b = buf[this.pos++]!;
      value += (b & 0x7f) * 2 ** shift;
      if (b < 0x80) {
        if (value > 0x7fffffff) throw UNHANDLED;
        return value;
      }
    }
    throw UNHANDLED;
  }

  /** End of a length-delimited field whose length comes next. */
  delimited(): number {
    const len = this.uint31();
    const end = this.pos + len;
    if (end > this.end) throw UNHANDLED;
    return end;
  }

  string(): string {
    const end = this.delimited();
    const s = this.buf.toString('utf8', this.pos, end);
    this.pos = end;
    return s;
  }

  bytes(): Buffer {
    const end = this.delimited();
    // an empty field is a new empty Buffer, as protobufjs reads it
    const b = end === this.pos ? Buffer.alloc(0) : this.buf.subarray(this.pos, end);
    this.pos = end;
    return b;
  }

  /** A 64-bit varint (at most 10 bytes, nothing past bit 63) as a decimal string, two's complement when `signed`. */
  int64(signed: boolean): string {
    const buf = this.buf;
    let lo = 0;
    let hi = 0;
    let i = 0;
    for (; ; i++) {
      if (this.pos >= this.end || i === 10) throw UNHANDLED;
      const b = buf[this.pos++]!;
      const bits = b & 0x7f;
      if (i < 4) lo += bits * 2 ** (7 * i);
      else if (i === 4) {
        lo += (bits & 0x0f) * 2 ** 28;
        hi += bits >>> 4;
      } else if (i < 9) hi += bits * 2 ** (7 * i - 32);
      else {
        if (bits > 1) throw UNHANDLED; // bits past 64: protobufjs drops them
        hi += bits * 2 ** 31;
      }
      if (b < 0x80) break;
    }
    if (hi === 0) return String(lo);
    if (hi < 0x200000) return String(hi * TWO_POW_32 + lo); // below 2^53: exact as a number
    const bits = (BigInt(hi) << 32n) | BigInt(lo);
    return (signed ? BigInt.asIntN(64, bits) : bits).toString();
  }

  /** A `bool` field: one byte, 0 or 1 (longer encodings are left to protobufjs). */
  bool(): boolean {
    if (this.pos >= this.end) throw UNHANDLED;
    const b = this.buf[this.pos++]!;
    if (b > 1) throw UNHANDLED;
    return b === 1;
  }

  double(): number {
    if (this.pos + 8 > this.end) throw UNHANDLED;
    const v = this.buf.readDoubleLE(this.pos);
    this.pos += 8;
    return v;
  }
}

/** The wire type each field of `InferParameter` comes with. */
function parameterWireType(field: number): number | undefined {
  return field === 4 ? FIXED64 : field >= 1 && field <= 5 ? (field === 3 ? LENGTH_DELIMITED : VARINT) : undefined;
}

const PARAMETER_FIELDS = ['', 'bool_param', 'int64_param', 'string_param', 'double_param', 'uint64_param'] as const;

function parameter(r: Reader, end: number): GrpcInferParameter {
  const out: GrpcInferParameter = {};
  let choice = 0;
  while (r.pos < end) {
    const tag = r.uint31();
    const field = tag >>> 3;
    if (parameterWireType(field) !== (tag & 7)) throw UNHANDLED;
    if (choice !== 0 && choice !== field) throw UNHANDLED; // two members of the oneof
    choice = field;
    if (field === 1) out.bool_param = r.bool();
    else if (field === 2) out.int64_param = r.int64(true);
    else if (field === 3) out.string_param = r.string();
    else if (field === 4) out.double_param = r.double();
    else out.uint64_param = r.int64(false);
  }
  if (r.pos !== end) throw UNHANDLED;
  if (choice !== 0) out.parameter_choice = PARAMETER_FIELDS[choice] as GrpcInferParameter['parameter_choice'];
  return out;
}

/** One `map<string, InferParameter>` entry into `into`. */
function mapEntry(r: Reader, into: Record<string, GrpcInferParameter>): void {
  const end = r.delimited();
  let key = '';
  let value: GrpcInferParameter | undefined;
  while (r.pos < end) {
    const tag = r.uint31();
    if (tag === ((1 << 3) | LENGTH_DELIMITED)) key = r.string();
    else if (tag === ((2 << 3) | LENGTH_DELIMITED)) {
      // a repeated value field: protobufjs decodes the last one alone
      const valueEnd = r.delimited();
      value = parameter(r, valueEnd);
    } else throw UNHANDLED;
  }
  if (r.pos !== end || value === undefined || key === '__proto__') throw UNHANDLED;
  into[key] = value;
}

function shapeField(r: Reader, tag: number, shape: string[]): void {
  if ((tag & 7) === VARINT) {
    shape.push(r.int64(true));
    return;
  }
  const end = r.delimited(); // packed
  while (r.pos < end) shape.push(r.int64(true));
  if (r.pos !== end) throw UNHANDLED;
}

function input(r: Reader): GrpcInferInputTensor {
  const end = r.delimited();
  const shape: string[] = [];
  const parameters: Record<string, GrpcInferParameter> = {};
  let name = '';
  let datatype = '';
  while (r.pos < end) {
    const tag = r.uint31();
    switch (tag) {
      case (1 << 3) | LENGTH_DELIMITED:
        name = r.string();
        break;
      case (2 << 3) | LENGTH_DELIMITED:
        datatype = r.string();
        break;
      case (3 << 3) | VARINT:
      case (3 << 3) | LENGTH_DELIMITED:
        shapeField(r, tag, shape);
        break;
      case (4 << 3) | LENGTH_DELIMITED:
        mapEntry(r, parameters);
        break;
      default:
        throw UNHANDLED; // contents (5) and anything unknown
    }
  }
  if (r.pos !== end) throw UNHANDLED;
  return { shape, parameters, name, datatype, contents: null };
}

function output(r: Reader): GrpcInferRequestedOutputTensor {
  const end = r.delimited();
  const parameters: Record<string, GrpcInferParameter> = {};
  let name = '';
  while (r.pos < end) {
    const tag = r.uint31();
    if (tag === ((1 << 3) | LENGTH_DELIMITED)) name = r.string();
    else if (tag === ((2 << 3) | LENGTH_DELIMITED)) mapEntry(r, parameters);
    else throw UNHANDLED;
  }
  if (r.pos !== end) throw UNHANDLED;
  return { parameters, name };
}

/**
 * A ModelInferRequest message as the protos' deserializer would return it, or `undefined` for a
 * message outside the handled shapes (see above): decode it with the protos' deserializer then.
 */
export function decodeModelInferRequestBytes(bytes: Buffer): GrpcModelInferRequest | undefined {
  const r = new Reader(bytes, 0, bytes.length);
  const inputs: GrpcInferInputTensor[] = [];
  const outputs: GrpcInferRequestedOutputTensor[] = [];
  const raw: Buffer[] = [];
  const parameters: Record<string, GrpcInferParameter> = {};
  let model_name = '';
  let model_version = '';
  let id = '';
  try {
    while (r.pos < r.end) {
      const tag = r.uint31();
      switch (tag) {
        case (1 << 3) | LENGTH_DELIMITED:
          model_name = r.string();
          break;
        case (2 << 3) | LENGTH_DELIMITED:
          model_version = r.string();
          break;
        case (3 << 3) | LENGTH_DELIMITED:
          id = r.string();
          break;
        case (4 << 3) | LENGTH_DELIMITED:
          mapEntry(r, parameters);
          break;
        case (5 << 3) | LENGTH_DELIMITED:
          inputs.push(input(r));
          break;
        case (6 << 3) | LENGTH_DELIMITED:
          outputs.push(output(r));
          break;
        case (7 << 3) | LENGTH_DELIMITED:
          raw.push(r.bytes());
          break;
        default:
          return undefined;
      }
    }
  } catch (e) {
    if (e === UNHANDLED) return undefined;
    throw e;
  }
  return { inputs, outputs, raw_input_contents: raw, parameters, model_name, model_version, id };
}
