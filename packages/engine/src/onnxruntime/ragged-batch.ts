/**
 * Ragged batching in the ONNX Runtime backend, as Triton's backends do it (`allow_ragged_batch`,
 * `batch_output` kind `BATCH_SCATTER_WITH_INPUT_SHAPE`), pure:
 * - a ragged input is fed to the model as one 1-D tensor `[total element count]`: the elements of
 *   every request of the batch end to end, in batch order, whatever each request's shape (the
 *   model's input is `[-1]`, checked at load by `checkOnnxIo`). The dynamic batcher lets requests
 *   of different shapes share a batch for such an input (`queue-batch-rule.ts`).
 * - a scatter output is cut back in the same order: request i gets the next
 *   `elementCount(its source input's shape)` elements, with that shape.
 * Outputs that are not batch outputs are split along dimension 0 as for any batch.
 */
import { internal } from '@switchyard/common';
import { elementCount, type DataType } from '@switchyard/kserve';
import type { ModelConfig } from '@switchyard/model-config';
import { concatBatch, splitBatch } from './onnx-tensor-codec.js';

/** The ragged-batch layout of one model, compiled once from its config. */
export interface RaggedLayout {
  /** Inputs fed as one 1-D tensor of the batch's elements. */
  raggedInputs: ReadonlySet<string>;
  /** Output name → the input whose per-request shape it takes (BATCH_SCATTER_WITH_INPUT_SHAPE). */
  scatterOutputs: ReadonlyMap<string, string>;
}

export function compileRaggedLayout(config: ModelConfig): RaggedLayout {
  const raggedInputs = new Set(config.input.filter((i) => i.allow_ragged_batch).map((i) => i.name));
  const scatterOutputs = new Map<string, string>();
  for (const b of config.batch_output as { kind?: string; target_name?: string[]; source_input?: string[] }[]) {
    const source = b.source_input?.[0];
    if (b.kind !== 'BATCH_SCATTER_WITH_INPUT_SHAPE' || source === undefined) continue;
    for (const target of b.target_name ?? []) scatterOutputs.set(target, source);
  }
  return { raggedInputs, scatterOutputs };
}

/** The 1-D feed of a ragged input: each request's data, end to end. */
export function raggedFeed(parts: readonly { shape: readonly number[]; data: Uint8Array }[]): { shape: number[]; data: Uint8Array } {
  let total = 0;
  for (const p of parts) total += elementCount(p.shape);
  return { shape: [total], data: concatBatch(parts.map((p) => p.data)) };
}

/**
 * Cut a scatter output into one part per request: request i gets `elementCount(shapes[i])`
 * elements, shaped `shapes[i]`. An output whose element count is not the sum of those counts is
 * an internal error (the model broke the contract of a scatter output), never a short answer.
 */
export function scatterOutput(
  model: string,
  name: string,
  datatype: DataType,
  data: Uint8Array,
  producedShape: readonly number[],
  shapes: readonly (readonly number[])[],
): { shape: number[]; data: Uint8Array }[] {
  const counts = shapes.map((s) => elementCount(s));
  const expected = counts.reduce((a, b) => a + b, 0);
  const produced = elementCount(producedShape);
  if (produced !== expected) {
    throw internal(
      `output '${name}' of model '${model}' has ${produced} elements, but its batch output scatters ${expected} (the element count of its source input over the batch)`,
    );
  }
  const parts = counts.length === 1 ? [data] : splitBatch(datatype, data, counts, 1);
  return parts.map((part, i) => ({ shape: [...(shapes[i] as readonly number[])], data: part }));
}
