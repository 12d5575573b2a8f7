/**
 * Triton's classification extension: an output requested with `classification: k` is replaced by
 * its top-k entries as BYTES strings `"<value>:<index>[:<label>]"`, per batch entry.
 *
 * Values are printed like C++ `std::to_string`: floats with six decimals (`10.000000`),
 * integers plainly. Ties keep index order (Triton's sort is unstable; any order is valid).
 *
 * Triton sorts every class of a batch entry, so it refuses a batch entry of more than
 * `MAX_CLASSIFICATION_ELEMENTS` classes (invalid_argument, `classification output tensor too large`,
 * the text qa/L0_parameters/class_count_test.py checks), after the datatype check.
 */
import { invalidArgument } from '@switchyard/common';
import type { InferTensor } from './protocols.js';
import { elementByteSize, serializeBytesElements, typedView } from './tensor.js';

const encoder = new TextEncoder();

/** The most classes (elements of one batch entry) an output may have to be classified. */
export const MAX_CLASSIFICATION_ELEMENTS = 1_000_000;

/**
 * Top-k classification of `tensor`. `batching` is true when the model batches
 * (max_batch_size > 0): the first dimension is then the batch and each entry is classified
 * separately, giving shape `[batch, k']`; otherwise shape `[k']`, with k' = min(k, elements).
 * `labels`, when given, maps a class index to its label (the output's `label_filename` lines).
 */
export function classifyTensor(tensor: InferTensor, k: number, batching: boolean, labels?: readonly string[]): InferTensor {
  const size = elementByteSize(tensor.datatype);
  if (size === 0 || tensor.datatype === 'BOOL' || tensor.datatype === 'FP16' || tensor.datatype === 'BF16') {
    throw invalidArgument(`class result not available for output due to unsupported type '${tensor.datatype}'`);
  }
  const batch = batching && tensor.shape.length > 0 ? (tensor.shape[0] as number) : 0;
  let perEntry = 1;
  for (let d = batch === 0 ? 0 : 1; d < tensor.shape.length; d++) perEntry *= tensor.shape[d] as number;
  if (perEntry > MAX_CLASSIFICATION_ELEMENTS) throw invalidArgument('classification output tensor too large');
  const values = typedView(tensor.datatype, tensor.data) as unknown as ArrayLike<number | bigint>;
  const isFloat = tensor.datatype === 'FP32' || tensor.datatype === 'FP64';
  const strings: Uint8Array[] = [];
  const entries = Math.max(1, batch);
  for (let b = 0; b < entries; b++) {
    const start = b * perEntry;
    const available = Math.max(0, Math.min(perEntry, values.length - start));
    const idx = Array.from({ length: available }, (_, j) => j);
    idx.sort((x, y) => {
      const vx = values[start + x] as number | bigint;
      const vy = values[start + y] as number | bigint;
      return vx > vy ? -1 : vx < vy ? 1 : 0;
    });
    const take = Math.min(available, k);
    for (let j = 0; j < take; j++) {
      const index = idx[j] as number;
      const v = values[start + index] as number | bigint;
      let s = `${isFloat ? toStdString(v as number) : String(v)}:${index}`;
      // Triton appends a label only when the class index has a non-empty one.
      const label = labels?.[index];
      if (label !== undefined && label !== '') s += `:${label}`;
      strings.push(encoder.encode(s));
    }
  }
  const kOut = Math.min(k, perEntry);
  return {
    name: tensor.name,
    datatype: 'BYTES',
    shape: batch > 0 ? [batch, kOut] : [kOut],
    data: serializeBytesElements(strings),
    parameters: { ...tensor.parameters },
  };
}

/** C++ `std::to_string(double)`: `%f`. */
function toStdString(v: number): string {
  if (Number.isNaN(v)) return v < 0 ? '-nan' : 'nan';
  if (!Number.isFinite(v)) return v > 0 ? 'inf' : '-inf';
  return v.toFixed(6);
}
