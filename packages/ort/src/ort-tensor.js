// The one place where tensors cross into and out of onnxruntime-node.
//
// Switchyard's convention, on every Node.js: a `float16` tensor's data is a Uint16Array of IEEE 754
// half-precision bit patterns (the bytes Triton puts on the wire), never values. That keeps FP16
// bit-exact end to end (NaN payloads and -0 included) because nothing converts a half to a number
// and back.
//
// Why a boundary is needed: where `globalThis.Float16Array` exists (Node.js 24 and newer),
// onnxruntime-common 1.30 wraps the Uint16Array given to `new Tensor('float16', ...)` in a
// Float16Array view of the same bytes, and hands outputs back as Float16Array. The native binding of
// onnxruntime-node 1.30 reads a Float16Array as a typed array of byte length 0 and fails every run
// ("not enough space: expected 6, got 0"). So on the way in the binding must see a Uint16Array, and on
// the way out the Float16Array is viewed (not converted) as a Uint16Array.
//
// Other element types pass through untouched. onnxruntime-node has no bfloat16 tensor type, so BF16
// never reaches this boundary (the ONNX Runtime backend refuses it at load, as Triton's does).
//
// Plain JavaScript (type-checked through JSDoc) on purpose: the engine's session thread
// (`packages/engine/worker/onnxruntime-session.mjs`) imports it as-is, also under the test runner's
// `source` export condition, where a TypeScript file could not load on Node.js 20.
import { createRequire } from 'node:module';

// Required, not imported: importing this CommonJS package from an ES module makes each thread that
// loads it (every session thread) scan its sources for export names first, ~4 ms of the ~45 ms of
// CPU a session thread takes to start.
/** @type {typeof import('onnxruntime-node')} */
const ort = createRequire(import.meta.url)('onnxruntime-node');

/** @typedef {import('onnxruntime-node').Tensor} OrtTensor */
/** @typedef {import('onnxruntime-node').InferenceSession} OrtSession */
/** @typedef {import('onnxruntime-node').Tensor.Type} OrtElementType Element type names: 'float32', 'float16', 'int64', 'string', ... */

/**
 * Tensor data in Switchyard's convention: float16 as Uint16Array bit patterns, string as JS strings.
 * @typedef {Float32Array | Float64Array | Int8Array | Int16Array | Int32Array | BigInt64Array | Uint8Array | Uint16Array | Uint32Array | BigUint64Array | string[]} OrtTensorData
 */

/**
 * A tensor in Switchyard's convention: plain data, structured-clone friendly (it crosses threads).
 * @typedef {{ readonly type: string, readonly dims: readonly number[], readonly data: OrtTensorData }} OrtTensorValue
 */

/**
 * A result tensor: as `OrtTensorValue`, with arrays the caller owns.
 * @typedef {{ type: string, dims: number[], data: OrtTensorData }} OrtTensorResult
 */

/**
 * The same bytes as a Uint16Array. `data` must hold 2-byte elements (Uint16Array, Float16Array,
 * Int16Array); a Uint16Array is returned as is.
 * @param {ArrayBufferView} data
 * @returns {Uint16Array}
 */
export function float16BitsView(data) {
  if (data instanceof Uint16Array) return data;
  const bytesPerElement = /** @type {{ BYTES_PER_ELEMENT?: number }} */ (data).BYTES_PER_ELEMENT;
  if (bytesPerElement !== 2) throw new TypeError(`float16 data must hold 2-byte elements, got ${data.constructor.name}`);
  return new Uint16Array(data.buffer, data.byteOffset, data.byteLength / 2);
}

/**
 * An onnxruntime tensor for a feed. float16 data (Uint16Array bit patterns, or any 2-byte typed array
 * view) reaches the native binding as a Uint16Array over the caller's bytes, on every Node.js.
 * No copy is made: the caller keeps the data alive and unchanged until the run resolves.
 * @param {string} type
 * @param {OrtTensorData | ArrayBufferView} data
 * @param {readonly number[]} dims
 * @returns {OrtTensor}
 */
export function toOrtTensor(type, data, dims) {
  if (type !== 'float16') return new ort.Tensor(/** @type {'float32'} */ (type), /** @type {Float32Array} */ (data), [...dims]);
  const bits = float16BitsView(/** @type {ArrayBufferView} */ (data));
  const tensor = new ort.Tensor('float16', bits, [...dims]);
  // onnxruntime-common re-wraps the bits in a Float16Array where one exists; the binding reads the
  // `data` property, so an own property holding the Uint16Array shadows that view for this tensor.
  if (tensor.data !== bits) Object.defineProperty(tensor, 'data', { value: bits, enumerable: true });
  return tensor;
}

/**
 * An onnxruntime output in Switchyard's convention: float16 as a Uint16Array view of the output's
 * bytes (whatever typed array onnxruntime chose), everything else as onnxruntime gave it.
 * @param {OrtTensor} tensor
 * @returns {OrtTensorResult}
 */
export function fromOrtTensor(tensor) {
  const data = /** @type {OrtTensorData} */ (tensor.data);
  return {
    type: tensor.type,
    dims: [...tensor.dims],
    data: tensor.type === 'float16' ? float16BitsView(/** @type {ArrayBufferView} */ (/** @type {unknown} */ (data))) : data,
  };
}

const utf8 = new TextDecoder('utf-8');

/**
 * A string tensor's data from Triton's BYTES layout (each element a uint32 little-endian length,
 * then its bytes) to the JavaScript strings onnxruntime takes: UTF-8, invalid sequences replaced
 * (U+FFFD). The session thread and the main thread's inline session both convert with it, so an
 * execution gets the same strings wherever it runs. A truncated last element is cut at the end of
 * `data` (the engine refuses truncated BYTES inputs before they get here).
 * @param {Uint8Array} data
 * @returns {string[]}
 */
export function bytesToStrings(data) {
  const bytes = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  /** @type {string[]} */
  const out = [];
  let off = 0;
  while (off + 4 <= bytes.byteLength) {
    const end = Math.min(off + 4 + bytes.readUInt32LE(off), bytes.byteLength);
    out.push(utf8.decode(bytes.subarray(off + 4, end)));
    off = end;
  }
  return out;
}

/**
 * onnxruntime's output strings back to the BYTES layout (UTF-8, lone surrogates as U+FFFD), in a
 * buffer of their own (it can be transferred to another thread).
 * @param {readonly string[]} strings
 * @returns {Uint8Array}
 */
export function stringsToBytes(strings) {
  let total = 0;
  for (const s of strings) total += 4 + Buffer.byteLength(s, 'utf8');
  const out = Buffer.alloc(total);
  let off = 0;
  for (const s of strings) {
    const n = out.write(s, off + 4, 'utf8');
    out.writeUInt32LE(n, off);
    off += 4 + n;
  }
  return new Uint8Array(out.buffer, out.byteOffset, out.byteLength);
}

/**
 * Feeds for `session.run`, each through `toOrtTensor`.
 * @param {Readonly<Record<string, OrtTensorValue>>} feeds
 * @returns {Record<string, OrtTensor>}
 */
export function toOrtFeeds(feeds) {
  /** @type {Record<string, OrtTensor>} */
  const out = {};
  for (const [name, t] of Object.entries(feeds)) out[name] = toOrtTensor(t.type, t.data, t.dims);
  return out;
}

/**
 * One `session.run` with both directions converted: feeds in Switchyard's convention, outputs back in
 * it. `fetches` limits the outputs, as in onnxruntime.
 * @param {OrtSession} session
 * @param {Readonly<Record<string, OrtTensorValue>>} feeds
 * @param {readonly string[]} [fetches]
 * @returns {Promise<Record<string, OrtTensorResult>>}
 */
export async function runOrtSession(session, feeds, fetches) {
  const produced = fetches === undefined ? await session.run(toOrtFeeds(feeds)) : await session.run(toOrtFeeds(feeds), [...fetches]);
  /** @type {Record<string, OrtTensorResult>} */
  const out = {};
  for (const [name, value] of Object.entries(produced)) out[name] = fromOrtTensor(value);
  return out;
}
