/**
 * The data flow of an ensemble, computed once per loaded version from its (validated) config:
 * which step reads and writes which ensemble tensor. Pure.
 *
 * Vocabulary (Triton's): an *ensemble tensor* is any name in the ensemble's tensor namespace:
 * the ensemble's inputs and outputs and every value of a step's `input_map` / `output_map`. A
 * map's key is the composing model's own tensor name, its value the ensemble tensor.
 */
import type { ModelConfig, ModelEnsembling } from '@switchyard/model-config';

export interface EnsembleStepPlan {
  readonly index: number;
  readonly modelName: string;
  /** The version to call; undefined for `model_version: -1` (the latest READY one, per request). */
  readonly modelVersion: number | undefined;
  /** `[composing model input, ensemble tensor]`, in config order. */
  readonly inputs: readonly (readonly [string, string])[];
  /** `[composing model output, ensemble tensor]`, in config order. */
  readonly outputs: readonly (readonly [string, string])[];
}

export interface EnsemblePlan {
  readonly name: string;
  readonly steps: readonly EnsembleStepPlan[];
  /** Ensemble tensor → the steps that read it. */
  readonly consumers: ReadonlyMap<string, readonly number[]>;
  /** Ensemble tensor → the step that writes it (ensemble inputs have none). */
  readonly producer: ReadonlyMap<string, number>;
  /** Ensemble output → the dims responses are shaped against (`reshape.shape`, else `dims`). */
  readonly outputDims: ReadonlyMap<string, readonly number[]>;
  /** Ensemble inputs marked `optional`: absent ones still let their steps run, without them. */
  readonly optionalInputs: ReadonlySet<string>;
  /** The ensemble batches (max_batch_size > 0): its tensors carry a batch dimension. */
  readonly batching: boolean;
}

/** The steps of an ensemble config (empty for other models). */
export function ensembleSteps(config: ModelConfig): ModelEnsembling['step'] {
  return (config.ensemble_scheduling as ModelEnsembling | undefined)?.step ?? [];
}

/** The distinct composing model names of an ensemble, in step order (empty for other models). */
export function composingModelNames(config: ModelConfig): string[] {
  return [...new Set(ensembleSteps(config).map((s) => s.model_name))];
}

/**
 * An ensemble is ready only while every step's model (and version, when one is named) is:
 * `isReady(name, version)`. True for models that are not ensembles.
 */
export function composingReady(config: ModelConfig, isReady: (name: string, version: number | undefined) => boolean): boolean {
  return ensembleSteps(config).every((s) => isReady(s.model_name, s.model_version < 0 ? undefined : s.model_version));
}

export function planEnsemble(config: ModelConfig): EnsemblePlan {
  const consumers = new Map<string, number[]>();
  const producer = new Map<string, number>();
  const steps = ensembleSteps(config).map((step, index): EnsembleStepPlan => {
    const inputs = Object.entries(step.input_map);
    const outputs = Object.entries(step.output_map);
    for (const [, tensor] of inputs) {
      const list = consumers.get(tensor) ?? [];
      if (!list.includes(index)) list.push(index);
      consumers.set(tensor, list);
    }
    for (const [, tensor] of outputs) producer.set(tensor, index);
    return { index, modelName: step.model_name, modelVersion: step.model_version < 0 ? undefined : step.model_version, inputs, outputs };
  });
  return {
    name: config.name,
    steps,
    consumers,
    producer,
    outputDims: new Map(config.output.map((o) => [o.name, o.reshape?.shape ?? o.dims])),
    optionalInputs: new Set(config.input.filter((i) => i.optional).map((i) => i.name)),
    batching: config.max_batch_size > 0,
  };
}

/**
 * The steps a request needs to produce `requested` (Triton prunes the others): a step is
 * needed when one of its outputs is requested or read by a needed step.
 */
export function neededSteps(plan: EnsemblePlan, requested: readonly string[]): Set<number> {
  const needed = new Set<number>();
  const pending = [...requested];
  const seen = new Set<string>(pending);
  while (pending.length > 0) {
    const tensor = pending.pop() as string;
    const index = plan.producer.get(tensor);
    if (index === undefined || needed.has(index)) continue;
    needed.add(index);
    for (const [, input] of (plan.steps[index] as EnsembleStepPlan).inputs) {
      if (!seen.has(input)) {
        seen.add(input);
        pending.push(input);
      }
    }
  }
  return needed;
}

/** Triton's CompareDimsWithWildcard: same rank, and each pair equal or one of them -1. */
export function dimsMatch(a: readonly number[], b: readonly number[]): boolean {
  return a.length === b.length && a.every((d, i) => d === -1 || b[i] === -1 || d === b[i]);
}

/**
 * Triton's ReshapeTensorDims: the shape to give a tensor (`dims`, full shape) where it goes next
 * (a composing input, or an ensemble output, described by `configDims` and whether it batches),
 * when the tensor came from a place that batches differently. A tensor from a non-batching model
 * going to a batching one gains a leading 1; a batch-1 tensor going to a non-batching one whose
 * dims it does not match loses its batch dimension. Anything else passes unchanged.
 * `tensorBatchSize`: the batch size of the request that produced the tensor (0: not batched).
 */
export function reshapeDims(configDims: readonly number[], configBatching: boolean, tensorBatchSize: number, dims: readonly number[]): number[] {
  if (configBatching !== (tensorBatchSize !== 0)) {
    if (configBatching) {
      if (dimsMatch(configDims, dims)) return [1, ...dims];
    } else if (!dimsMatch(configDims, dims) && tensorBatchSize === 1) {
      return dims.slice(1);
    }
  }
  return [...dims];
}
