// The helpers a JavaScript model gets as `args.pb` (Triton's `triton_python_backend_utils`), and
// the tensor codec between them and the wire format the instance thread exchanges with the
// server (src/javascript/javascript-protocol.ts). Plain JavaScript on purpose: loaded as-is in a worker
// thread from src/ (tests) and dist/.
//
// Tensors on the wire: { name, datatype, shape, data: Uint8Array } with Triton's byte layout
// (little-endian elements; BYTES as 4-byte length + bytes per element). Tensors for the model:
// `Tensor` with `data` as a typed array (BOOL → Uint8Array of 0/1, FP16/BF16 → Uint16Array of
// raw bits, INT64/UINT64 → BigInt64Array/BigUint64Array) or, for BYTES, an array of Buffers. A model
// may give FP16 data as a Float16Array (Node.js 24+); it is taken as its bit patterns.

/** Error codes a model may give a `TritonError` (the server's taxonomy; Triton's names as keys). */
export const ErrorCode = Object.freeze({
  UNKNOWN: 'unknown',
  INTERNAL: 'internal',
  NOT_FOUND: 'not_found',
  INVALID_ARG: 'invalid_argument',
  UNAVAILABLE: 'unavailable',
  UNSUPPORTED: 'unsupported',
  ALREADY_EXISTS: 'already_exists',
  CANCELLED: 'cancelled',
});
const CODES = new Set(Object.values(ErrorCode));

/** An error for one response (`{ error }`) or thrown from `execute` (fails the whole execution). */
export class TritonError extends Error {
  constructor(message, code = ErrorCode.INTERNAL) {
    super(message);
    this.name = 'TritonError';
    this.code = CODES.has(code) ? code : ErrorCode.INTERNAL;
  }
}

const ARRAYS = {
  BOOL: Uint8Array,
  UINT8: Uint8Array,
  UINT16: Uint16Array,
  UINT32: Uint32Array,
  UINT64: BigUint64Array,
  INT8: Int8Array,
  INT16: Int16Array,
  INT32: Int32Array,
  INT64: BigInt64Array,
  FP16: Uint16Array,
  FP32: Float32Array,
  FP64: Float64Array,
  BF16: Uint16Array,
};
const INFERRED = new Map([
  [Int8Array, 'INT8'],
  [Uint8Array, 'UINT8'],
  [Int16Array, 'INT16'],
  [Uint16Array, 'UINT16'],
  [Int32Array, 'INT32'],
  [Uint32Array, 'UINT32'],
  [BigInt64Array, 'INT64'],
  [BigUint64Array, 'UINT64'],
  [Float32Array, 'FP32'],
  [Float64Array, 'FP64'],
]);
// Node.js 24 and newer have Float16Array: a model may hand one out for FP16. Its bytes are the bit
// patterns, so it is viewed as Uint16Array (never converted value by value: NaN payloads and -0 stay).
const Float16 = globalThis.Float16Array;
if (Float16 !== undefined) INFERRED.set(Float16, 'FP16');
const DATATYPES = new Set([...Object.keys(ARRAYS), 'BYTES']);

const elementCount = (shape) => shape.reduce((n, d) => n * d, 1);
const isBytesLike = (v) => typeof v === 'string' || v instanceof Uint8Array;

/** The datatype `data` implies, or undefined when it cannot tell (plain arrays of numbers). */
function inferDatatype(data) {
  if (ArrayBuffer.isView(data) && !(data instanceof DataView)) return INFERRED.get(data.constructor);
  if (Array.isArray(data) && data.length > 0) {
    if (data.every(isBytesLike)) return 'BYTES';
    if (data.every((v) => typeof v === 'boolean')) return 'BOOL';
  }
  return undefined;
}

/** `data` as the typed array (or, for BYTES, array of Buffers) of `datatype`. */
function normalizeData(name, datatype, data) {
  if (datatype === 'BYTES') {
    if (!Array.isArray(data)) throw new TritonError(`tensor '${name}': BYTES data must be an array of strings or Uint8Arrays`, ErrorCode.INVALID_ARG);
    return data.map((v) => {
      if (typeof v === 'string') return Buffer.from(v, 'utf8');
      if (v instanceof Uint8Array) return Buffer.from(v.buffer, v.byteOffset, v.byteLength);
      throw new TritonError(`tensor '${name}': BYTES elements must be strings or Uint8Arrays`, ErrorCode.INVALID_ARG);
    });
  }
  const Ctor = ARRAYS[datatype];
  if (data instanceof Ctor) return data;
  if (datatype === 'FP16' && Float16 !== undefined && data instanceof Float16) return new Uint16Array(data.buffer, data.byteOffset, data.length);
  const values = ArrayBuffer.isView(data) ? Array.from(data) : data;
  if (!Array.isArray(values)) throw new TritonError(`tensor '${name}': data must be a typed array or an array`, ErrorCode.INVALID_ARG);
  const wide = Ctor === BigInt64Array || Ctor === BigUint64Array;
  try {
    return Ctor.from(values, (v) => (typeof v === 'boolean' ? (wide ? BigInt(v ? 1 : 0) : v ? 1 : 0) : wide ? BigInt(v) : Number(v)));
  } catch (e) {
    throw new TritonError(`tensor '${name}': cannot convert data to ${datatype}: ${e instanceof Error ? e.message : String(e)}`, ErrorCode.INVALID_ARG);
  }
}

export class Tensor {
  /**
   * @param name tensor name
   * @param data typed array, array of numbers/bigints/booleans, or (BYTES) array of strings / Uint8Arrays
   * @param shape default: one dimension holding every element
   * @param datatype KServe datatype (INT32, FP32, BYTES, ...); default: implied by `data`
   */
  constructor(name, data, shape, datatype) {
    if (typeof name !== 'string' || name === '') throw new TritonError('a tensor needs a name', ErrorCode.INVALID_ARG);
    const type = datatype ?? inferDatatype(data);
    if (type === undefined) throw new TritonError(`tensor '${name}': give a datatype (its data does not imply one)`, ErrorCode.INVALID_ARG);
    if (!DATATYPES.has(type)) throw new TritonError(`tensor '${name}': unknown datatype '${type}'`, ErrorCode.INVALID_ARG);
    const values = normalizeData(name, type, data);
    const dims = shape === undefined ? [values.length] : [...shape];
    if (!dims.every((d) => Number.isInteger(d) && d >= 0)) throw new TritonError(`tensor '${name}': invalid shape [${dims.join(',')}]`, ErrorCode.INVALID_ARG);
    if (elementCount(dims) !== values.length) {
      throw new TritonError(`tensor '${name}': shape [${dims.join(',')}] holds ${elementCount(dims)} elements but data has ${values.length}`, ErrorCode.INVALID_ARG);
    }
    this.name = name;
    this.datatype = type;
    this.shape = dims;
    this.data = values;
  }

  /** Convenience: a BYTES tensor from strings. */
  static fromStrings(name, strings, shape) {
    return new Tensor(name, strings, shape, 'BYTES');
  }

  /** BYTES elements decoded as UTF-8 (other datatypes: each element as a string). */
  strings() {
    if (this.datatype === 'BYTES') return this.data.map((b) => b.toString('utf8'));
    return Array.from(this.data, (v) => String(v));
  }

  /** Elements as a plain array (BOOL as booleans, BYTES as Buffers). */
  toArray() {
    if (this.datatype === 'BOOL') return Array.from(this.data, (v) => v !== 0);
    return Array.from(this.data);
  }
}

/** A response: outputs, or an error for this request alone; optional response parameters. */
export class Response {
  constructor({ outputs = [], error = undefined, parameters = undefined } = {}) {
    this.outputs = outputs;
    this.error = error;
    this.parameters = parameters;
  }

  output(name) {
    return this.outputs.find((t) => t.name === name);
  }
}

// ---------------------------------------------------------------------------------------------
// Wire codec

/** A wire tensor (from the server) as a `Tensor`. The bytes are owned (transferred), so views are safe. */
export function tensorFromWire(w) {
  const t = Object.create(Tensor.prototype);
  t.name = w.name;
  t.datatype = w.datatype;
  t.shape = w.shape;
  const bytes = w.data;
  if (w.datatype === 'BYTES') {
    const out = [];
    const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    for (let off = 0; off + 4 <= bytes.byteLength; ) {
      const len = view.getUint32(off, true);
      out.push(Buffer.from(bytes.buffer, bytes.byteOffset + off + 4, len));
      off += 4 + len;
    }
    t.data = out;
  } else {
    const Ctor = ARRAYS[w.datatype];
    let src = bytes;
    if (src.byteOffset % Ctor.BYTES_PER_ELEMENT !== 0) src = new Uint8Array(src);
    t.data = new Ctor(src.buffer, src.byteOffset, src.byteLength / Ctor.BYTES_PER_ELEMENT);
  }
  return t;
}

/**
 * A model's tensor (a `Tensor`, or a plain `{ name, data, shape?, datatype? }`) as a wire tensor
 * in a buffer of its own; `defaults(name)` supplies a datatype when neither the object nor its
 * data does (the output's configured type). Pushes the buffer onto `transfer`.
 */
export function tensorToWire(tensor, transfer, defaults = () => undefined) {
  if (tensor === null || typeof tensor !== 'object') throw new TritonError('an output must be a Tensor or { name, data }', ErrorCode.INVALID_ARG);
  const t =
    tensor instanceof Tensor ? tensor : new Tensor(tensor.name, tensor.data, tensor.shape, tensor.datatype ?? inferDatatype(tensor.data) ?? defaults(tensor.name));
  let bytes;
  if (t.datatype === 'BYTES') {
    const total = t.data.reduce((n, b) => n + 4 + b.byteLength, 0);
    bytes = new Uint8Array(total);
    const view = new DataView(bytes.buffer);
    let off = 0;
    for (const b of t.data) {
      view.setUint32(off, b.byteLength, true);
      bytes.set(b, off + 4);
      off += 4 + b.byteLength;
    }
  } else {
    const src = t.data;
    bytes = new Uint8Array(src.byteLength);
    bytes.set(new Uint8Array(src.buffer, src.byteOffset, src.byteLength));
  }
  transfer.push(bytes.buffer);
  return { name: t.name, datatype: t.datatype, shape: [...t.shape], data: bytes };
}

/** An error (TritonError, Error, string or { message, code }) as a wire error. */
export function errorToWire(error) {
  if (typeof error === 'string') return { message: error, code: ErrorCode.INTERNAL };
  if (error instanceof Error) return { message: error.message, code: CODES.has(error.code) ? error.code : ErrorCode.INTERNAL };
  if (error !== null && typeof error === 'object' && typeof error.message === 'string') {
    return { message: error.message, code: CODES.has(error.code) ? error.code : ErrorCode.INTERNAL };
  }
  return { message: String(error), code: ErrorCode.INTERNAL };
}

/** A wire response (from BLS) as a `Response`. */
export function responseFromWire(w) {
  if (w.error !== undefined) return new Response({ error: new TritonError(w.error.message, w.error.code) });
  return new Response({ outputs: w.outputs.map(tensorFromWire), parameters: w.parameters });
}
