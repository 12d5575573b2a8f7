/**
 * Conversions between Switchyard tensors (raw little-endian bytes, BYTES length-prefixed) and
 * onnxruntime-node tensors, plus the ORT ↔ Triton datatype tables.
 *
 * ORT string tensors are JavaScript strings: BYTES elements are decoded as UTF-8 on the way in
 * and encoded as UTF-8 on the way out (onnxruntime-node has no raw-bytes string API), and reach
 * ONNX Runtime as C strings. Bytes that are not UTF-8, and elements holding a NUL byte, would not
 * survive that trip (U+FFFD in place of the bytes; the string cut at the NUL), so they are refused
 * per request (`checkOrtStrings`) instead of being silently altered. The conversion itself happens
 * on the session thread (`worker/onnxruntime-session.mjs`): here string tensors stay BYTES bytes.
 * BF16 is not supported: onnxruntime-node has no 'bfloat16' tensor type (and Triton's own ORT
 * backend does not map BF16 either).
 */
import { internal, invalidArgument, type SwitchyardError } from '@switchyard/common';
import {
  bytesElementsEnd,
  bytesOf,
  bytesElementCount,
  firstUnfitStringElement,
  requestPrefix,
  elementByteSize,
  typedView,
  type DataType,
  type TypedArray,
} from '@switchyard/kserve';
import type { DataTypeName } from '@switchyard/model-config';
import type * as ort from 'onnxruntime-node';
import type { WireTensor } from './session-thread.js';

export type OrtType = ort.Tensor.Type;

const WIRE_TO_ORT: Partial<Record<DataType, OrtType>> = {
  BOOL: 'bool',
  UINT8: 'uint8',
  UINT16: 'uint16',
  UINT32: 'uint32',
  UINT64: 'uint64',
  INT8: 'int8',
  INT16: 'int16',
  INT32: 'int32',
  INT64: 'int64',
  FP16: 'float16',
  FP32: 'float32',
  FP64: 'float64',
  BYTES: 'string',
};

const ORT_TO_CONFIG: Partial<Record<string, DataTypeName>> = {
  bool: 'TYPE_BOOL',
  uint8: 'TYPE_UINT8',
  uint16: 'TYPE_UINT16',
  uint32: 'TYPE_UINT32',
  uint64: 'TYPE_UINT64',
  int8: 'TYPE_INT8',
  int16: 'TYPE_INT16',
  int32: 'TYPE_INT32',
  int64: 'TYPE_INT64',
  float16: 'TYPE_FP16',
  float32: 'TYPE_FP32',
  float64: 'TYPE_FP64',
  string: 'TYPE_STRING',
};

/** ORT type for a wire datatype, or undefined when ORT cannot carry it (BF16). */
export function ortTypeOf(datatype: DataType): OrtType | undefined {
  return WIRE_TO_ORT[datatype];
}

/** Config datatype for an ORT element type; TYPE_INVALID for types Triton cannot express. */
export function configTypeOfOrt(type: string): DataTypeName {
  return ORT_TO_CONFIG[type] ?? 'TYPE_INVALID';
}

/**
 * A tensor for a session thread, built from request bytes. Fixed-size data is copied into a
 * buffer of its own, because `SessionThread.run` transfers it (a request's bytes are often a
 * view into a larger socket or body buffer that must not be detached or cloned whole).
 * `fresh`: `data` was made for this call and nothing else holds its buffer (a batch `concatBatch`
 * built); when it spans that whole buffer it is handed over as it is, without a second copy.
 */
export function toWireTensor(datatype: DataType, shape: readonly number[], data: Uint8Array, fresh = false): WireTensor {
  const type = ortTypeOf(datatype);
  if (type === undefined) throw internal(`datatype ${datatype} is not supported by the onnxruntime backend`);
  const whole = fresh && data.byteOffset === 0 && data.byteLength === data.buffer.byteLength;
  // Strings cross to the session thread as BYTES bytes in a buffer of their own (see WireTensor).
  if (type === 'string') return { type, dims: [...shape], data: whole ? data : new Uint8Array(data) };
  const view = typedView(datatype, data);
  // typedView may already have copied (misaligned input); copy only when it did not.
  const owned = view.buffer !== data.buffer || whole ? view : view.slice();
  return { type, dims: [...shape], data: owned };
}

/**
 * A tensor over request bytes for a run on this thread (the inline session computes while the bytes
 * are there; a session thread copies them into its slot, or before its message: `borrowed` of
 * `SessionThread.runTimed`): no copy, unless the bytes are misaligned for their type (`typedView`
 * then copies).
 */
export function borrowedWireTensor(datatype: DataType, shape: readonly number[], data: Uint8Array): WireTensor {
  const type = ortTypeOf(datatype);
  if (type === undefined) throw internal(`datatype ${datatype} is not supported by the onnxruntime backend`);
  return { type, dims: [...shape], data: type === 'string' ? data : typedView(datatype, data) };
}

/**
 * The refusal of a request whose BYTES input for an ORT string tensor holds an element ORT cannot
 * carry unchanged (not valid UTF-8, or holding a NUL byte), or undefined when every element is
 * fine. `data` is the input's serialised BYTES.
 */
export function checkOrtStrings(input: { name: string; data: Uint8Array }, model: string, requestId: string): SwitchyardError | undefined {
  const unfit = firstUnfitStringElement(input.data, bytesElementCount(input.data, input.name), true);
  if (unfit === undefined) return undefined;
  const where = `${requestPrefix(requestId)}element ${unfit.index} of input '${input.name}' for model '${model}'`;
  return unfit.reason === 'utf8'
    ? invalidArgument(`${where} is not valid UTF-8: the onnxruntime backend passes BYTES to ONNX Runtime as text, which cannot carry these bytes unchanged`)
    : invalidArgument(`${where} holds a NUL byte: the onnxruntime backend passes BYTES to ONNX Runtime as C strings, which end at the first NUL`);
}

/** Raw bytes of a session output in Switchyard's layout. */
export function fromWireTensor(tensor: WireTensor): Uint8Array {
  return bytesOf(tensor.data);
}

/**
 * Concatenate the same input of several requests along the batch dimension.
 * Fixed-size types concatenate bytes; BYTES concatenates the serialised element lists.
 */
export function concatBatch(parts: readonly Uint8Array[]): Uint8Array {
  if (parts.length === 1) return parts[0] as Uint8Array;
  let total = 0;
  for (const p of parts) total += p.byteLength;
  const out = new Uint8Array(total);
  let offset = 0;
  for (const p of parts) {
    out.set(p, offset);
    offset += p.byteLength;
  }
  return out;
}

/**
 * Split a batched output back into per-request slices along dimension 0. Fixed-size slices are
 * views into `data` (no copy): response tensors are read-only, and any path that transfers bytes
 * to another thread copies them first (`toWireTensor`, the JavaScript backend's `ownedCopy`).
 * `batchSizes[i]` rows go to request i; `rowElements` is the element count of one row.
 */
export function splitBatch(datatype: DataType, data: Uint8Array, batchSizes: readonly number[], rowElements: number): Uint8Array[] {
  if (batchSizes.length === 1) return [data];
  if (datatype === 'BYTES') {
    // Cut the serialised bytes at row boundaries (views, like fixed-size slices): no per-element work.
    const out: Uint8Array[] = [];
    let offset = 0;
    for (const b of batchSizes) {
      const rest = data.subarray(offset);
      // A short output (never from a well-formed model) leaves the last requests what remains.
      const end = bytesElementsEnd(rest, b * rowElements);
      const take = end < 0 ? rest.byteLength : end;
      out.push(rest.subarray(0, take));
      offset += take;
    }
    return out;
  }
  const rowBytes = rowElements * elementByteSize(datatype);
  const out: Uint8Array[] = [];
  let offset = 0;
  for (const b of batchSizes) {
    const n = b * rowBytes;
    out.push(data.subarray(offset, offset + n));
    offset += n;
  }
  return out;
}
