/**
 * How the inputs of one `/v1/embeddings` request travel as KServe infer requests to an `embedding`
 * model, and how the answers' rows come back to the inputs (pure).
 *
 * A model that batches (`max_batch_size` > 0) takes several sequences in one request (its batch
 * dimension, embedding-io.ts), so the inputs go as few requests as the model allows: through a router
 * each request is one NATS round trip to a worker, so a 256-input request to a model of max_batch_size
 * 32 is 8 round trips instead of 256. On a worker, the rows of one request are in one execution, as the
 * dynamic batcher would have put them had they come one by one.
 * - Text: `text_input` BYTES `[n, 1]`, the inputs in order, in `ceil(count / max_batch_size)` requests of
 *   near-equal size (sizes differ by at most one, so requests spread over workers finish together).
 * - Token ids: `input_ids` INT64 `[n, length]` carries rows of ONE length only. The backend has no
 *   attention-mask input: it reads every id of a row as a token (padding ids would be embedded and
 *   counted), and it pads a batch itself with the mask the model needs. So inputs of equal length share
 *   a request (grouped by length, in order of each length's first input), and an input whose length no
 *   other has goes alone, as before.
 * A model that does not batch (`max_batch_size` 0) takes one sequence per request: text `[1]`, ids
 * `[length]`, one request per input.
 *
 * Every input is in exactly one group; `indexes[j]` is the request input that row j answers.
 */
import { internal } from '@switchyard/common';
import { EMBEDDING_IDS_INPUT, EMBEDDING_OUTPUT, EMBEDDING_TEXT_INPUT, EMBEDDING_TOKENS_OUTPUT } from '@switchyard/engine';
import { type InferResponse, type InferTensor, serializeStringElements } from '@switchyard/kserve';
import type { EmbeddingInput } from './embeddings-request.js';

/** One KServe request's worth of inputs. */
export interface EmbeddingGroup {
  /** The request inputs this group carries, in row order. */
  readonly indexes: readonly number[];
  /** The one input tensor: `text_input` or `input_ids`, batched (`[rows, …]`) when the model batches. */
  readonly tensor: InferTensor;
}

/** One row of an answer: the sequence's vector (its own aligned copy) and the tokens it counted. */
export interface EmbeddingRow {
  readonly vector: Float32Array;
  readonly tokens: number;
}

/** Splits `count` items into `ceil(count / max)` runs of near-equal size (the first ones one longer). */
export function chunkSizes(count: number, max: number): number[] {
  if (count === 0) return [];
  const runs = Math.ceil(count / max);
  const base = Math.floor(count / runs);
  const longer = count % runs;
  return Array.from({ length: runs }, (_, i) => base + (i < longer ? 1 : 0));
}

function chunks(indexes: readonly number[], max: number): number[][] {
  const out: number[][] = [];
  let start = 0;
  for (const size of chunkSizes(indexes.length, max)) {
    out.push(indexes.slice(start, start + size));
    start += size;
  }
  return out;
}

function textTensor(texts: readonly string[], batched: boolean): InferTensor {
  return { name: EMBEDDING_TEXT_INPUT, datatype: 'BYTES', shape: batched ? [texts.length, 1] : [1], data: serializeStringElements(texts), parameters: {} };
}

/** `rows` of one length as INT64 `[rows, length]` (batched) or `[length]` (one row, not batched). */
function idsTensor(rows: ReadonlyArray<readonly number[]>, batched: boolean): InferTensor {
  const width = rows[0]!.length;
  const ids = new BigInt64Array(rows.length * width);
  rows.forEach((row, r) => row.forEach((id, i) => (ids[r * width + i] = BigInt(id))));
  return { name: EMBEDDING_IDS_INPUT, datatype: 'INT64', shape: batched ? [rows.length, width] : [width], data: new Uint8Array(ids.buffer), parameters: {} };
}

/** The requests that carry `inputs` to a model of `maxBatchSize` (0: the model does not batch). */
export function groupEmbeddingInputs(inputs: readonly EmbeddingInput[], maxBatchSize: number): EmbeddingGroup[] {
  if (maxBatchSize <= 0) {
    return inputs.map((input, i) => ({ indexes: [i], tensor: 'text' in input ? textTensor([input.text], false) : idsTensor([input.ids], false) }));
  }
  const texts: number[] = [];
  const byLength = new Map<number, number[]>(); // insertion order: each length's first input
  inputs.forEach((input, i) => {
    if ('text' in input) texts.push(i);
    else {
      const same = byLength.get(input.ids.length);
      if (same === undefined) byLength.set(input.ids.length, [i]);
      else same.push(i);
    }
  });
  const groups: EmbeddingGroup[] = [];
  for (const indexes of chunks(texts, maxBatchSize)) {
    groups.push({ indexes, tensor: textTensor(indexes.map((i) => (inputs[i] as { text: string }).text), true) });
  }
  for (const same of byLength.values()) {
    for (const indexes of chunks(same, maxBatchSize)) {
      groups.push({ indexes, tensor: idsTensor(indexes.map((i) => (inputs[i] as { ids: readonly number[] }).ids), true) });
    }
  }
  return groups;
}

/**
 * The `rows` rows of one answer, in row order: `embedding` FP32 (`[rows, dim]`, or `[dim]` for one
 * row) and `prompt_tokens` INT32 (one per row). An answer of another shape is a server error.
 */
export function embeddingRows(answer: InferResponse, rows: number): EmbeddingRow[] {
  const out = answer.outputs.find((o) => o.name === EMBEDDING_OUTPUT);
  const count = answer.outputs.find((o) => o.name === EMBEDDING_TOKENS_OUTPUT);
  if (out === undefined || out.datatype !== 'FP32' || out.data.byteLength % (4 * rows) !== 0 || count === undefined || count.datatype !== 'INT32' || count.data.byteLength !== 4 * rows) {
    throw internal(`model '${answer.modelName}' answered without the '${EMBEDDING_OUTPUT}' FP32 and '${EMBEDDING_TOKENS_OUTPUT}' INT32 outputs of ${rows} sequence${rows === 1 ? '' : 's'}`);
  }
  const width = out.data.byteLength / 4 / rows;
  const counts = new DataView(count.data.buffer, count.data.byteOffset, count.data.byteLength);
  return Array.from({ length: rows }, (_, r) => ({
    vector: new Float32Array(out.data.slice(r * width * 4, (r + 1) * width * 4).buffer),
    tokens: counts.getInt32(r * 4, true),
  }));
}
