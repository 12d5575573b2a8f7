/**
 * Ragged batching in the ONNX Runtime backend, as Triton's backends do it (`allow_ragged_batch`,
 * `batch_output` kind `BATCH_SCATTER_WITH_INPUT_SHAPE`), pure:
 * - a ragged input is fed to the model as one 1-D tensor `[total element count]`: the elements of
 *   every request of the batch end to end, in batch order, whatever each request's shape (the
 *   model's input is `[-1]`, checked at load by `checkOnnxIo`). The dynamic batcher lets requests
 *   of different shapes share a batch for such an input (`queue-batch-rule.ts`).
 * - a scatter output is cut back in the same order: request i gets the next
 *   `elementCount(its source input's shape)` elements, with that shape.
 * - a `batch_input` is a tensor the backend makes from the batch (never sent by clients), fed under
 *   each of its target names, as Triton's backend input collector makes it from each request's
 *   source input shape (batch dimension included):
 *   BATCH_ELEMENT_COUNT `[requests]` element counts; BATCH_ACCUMULATED_ELEMENT_COUNT `[requests]`
 *   running sums; ..._WITH_ZERO `[requests + 1]` the same after a 0; BATCH_MAX_ELEMENT_COUNT_AS_SHAPE
 *   `[largest element count]` (only its shape speaks: zeros); BATCH_ITEM_SHAPE `[batch items,
 *   rank - 1]` each batch item's shape without the batch dimension; BATCH_ITEM_SHAPE_FLATTEN the
 *   same values as `[batch items × (rank - 1)]`. Values are INT32 or FP32 (the config's type).
 * Outputs that are not batch outputs are split along dimension 0 as for any batch.
 */
import { internal, invalidArgument } from '@switchyard/common';
import { elementCount, type DataType } from '@switchyard/kserve';
import type { ModelConfig } from '@switchyard/model-config';
import { concatBatch, splitBatch } from './onnx-tensor-codec.js';

/** The ragged-batch layout of one model, compiled once from its config. */
export interface RaggedLayout {
  /** Inputs fed as one 1-D tensor of the batch's elements. */
  raggedInputs: ReadonlySet<string>;
  /** Output name → the input whose per-request shape it takes (BATCH_SCATTER_WITH_INPUT_SHAPE). */
  scatterOutputs: ReadonlyMap<string, string>;
  /** Tensors made from the batch and fed to the model under their target names. */
  batchInputs: readonly BatchInputSpec[];
}

export type BatchInputKind =
  | 'BATCH_ELEMENT_COUNT'
  | 'BATCH_ACCUMULATED_ELEMENT_COUNT'
  | 'BATCH_ACCUMULATED_ELEMENT_COUNT_WITH_ZERO'
  | 'BATCH_MAX_ELEMENT_COUNT_AS_SHAPE'
  | 'BATCH_ITEM_SHAPE'
  | 'BATCH_ITEM_SHAPE_FLATTEN';

export interface BatchInputSpec {
  kind: BatchInputKind;
  targets: readonly string[];
  /** TYPE_INT32 → INT32, TYPE_FP32 → FP32 (model-config validation allows no other). */
  datatype: 'INT32' | 'FP32';
  source: string;
}

const BATCH_INPUT_KINDS: ReadonlySet<string> = new Set<BatchInputKind>([
  'BATCH_ELEMENT_COUNT',
  'BATCH_ACCUMULATED_ELEMENT_COUNT',
  'BATCH_ACCUMULATED_ELEMENT_COUNT_WITH_ZERO',
  'BATCH_MAX_ELEMENT_COUNT_AS_SHAPE',
  'BATCH_ITEM_SHAPE',
  'BATCH_ITEM_SHAPE_FLATTEN',
]);

export function compileRaggedLayout(config: ModelConfig): RaggedLayout {
  const raggedInputs = new Set(config.input.filter((i) => i.allow_ragged_batch).map((i) => i.name));
  const scatterOutputs = new Map<string, string>();
  for (const b of config.batch_output as { kind?: string; target_name?: string[]; source_input?: string[] }[]) {
    const source = b.source_input?.[0];
    if (b.kind !== 'BATCH_SCATTER_WITH_INPUT_SHAPE' || source === undefined) continue;
    for (const target of b.target_name ?? []) scatterOutputs.set(target, source);
  }
  const batchInputs: BatchInputSpec[] = [];
  for (const b of config.batch_input as { kind?: string; target_name?: string[]; data_type?: string; source_input?: string[] }[]) {
    const source = b.source_input?.[0];
    if (b.kind === undefined || !BATCH_INPUT_KINDS.has(b.kind) || source === undefined) {
      throw internal(`unsupported BatchInputKind received for model '${config.name}': '${b.kind ?? ''}'`);
    }
    batchInputs.push({ kind: b.kind as BatchInputKind, targets: b.target_name ?? [], datatype: b.data_type === 'TYPE_FP32' ? 'FP32' : 'INT32', source });
  }
  return { raggedInputs, scatterOutputs, batchInputs };
}

/**
 * The tensor of one batch input for a batch whose requests' source inputs have `shapes` (batch
 * dimension first when the model batches). Throws invalid_argument with Triton's message when the
 * batch items' ranks differ (their shapes would not fill the tensor Triton sizes from the last one).
 */
export function batchInputTensor(spec: BatchInputSpec, shapes: readonly (readonly number[])[]): { shape: number[]; data: Uint8Array } {
  const counts = shapes.map((s) => elementCount(s));
  let shape: number[];
  let values: number[];
  switch (spec.kind) {
    case 'BATCH_ELEMENT_COUNT':
      shape = [shapes.length];
      values = counts;
      break;
    case 'BATCH_ACCUMULATED_ELEMENT_COUNT':
    case 'BATCH_ACCUMULATED_ELEMENT_COUNT_WITH_ZERO': {
      let sum = 0;
      values = counts.map((c) => (sum += c));
      if (spec.kind === 'BATCH_ACCUMULATED_ELEMENT_COUNT_WITH_ZERO') values.unshift(0);
      shape = [values.length];
      break;
    }
    case 'BATCH_MAX_ELEMENT_COUNT_AS_SHAPE': {
      // Only the shape speaks: a zeroed tensor, made without a per-element array.
      const largest = counts.reduce((a, b) => Math.max(a, b), 0);
      return { shape: [largest], data: new Uint8Array(largest * 4) };
    }
    case 'BATCH_ITEM_SHAPE':
    case 'BATCH_ITEM_SHAPE_FLATTEN': {
      values = [];
      let items = 0;
      for (const s of shapes) {
        const rows = s[0] ?? 0;
        items += rows;
        for (let r = 0; r < rows; r++) values.push(...s.slice(1));
      }
      const rank = (shapes[shapes.length - 1]?.length ?? 1) - 1;
      shape = spec.kind === 'BATCH_ITEM_SHAPE' ? [items, rank] : [values.length];
      if (values.length !== items * rank) throw invalidArgument('unexpected total byte size for batch input');
      break;
    }
  }
  const data = spec.datatype === 'FP32' ? Float32Array.from(values) : Int32Array.from(values);
  return { shape, data: new Uint8Array(data.buffer) };
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
