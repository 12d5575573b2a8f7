/**
 * The load-time checks of an ensemble against its composing models' configurations (Triton core's
 * `ValidateEnsembleConfig` in ensemble_utils.cc), with Triton's messages. Pure: the composing
 * configs come from the caller (the versions that are loaded now). The ensemble's own structure
 * (steps complete, every input used, every output written) is checked earlier by
 * `validateModelConfig` (@switchyard/model-config).
 *
 * What is checked, step by step:
 * - the ensemble's max_batch_size is not above a batching composing model's;
 * - every `input_map` key is an input of the composing model, every required input is mapped,
 *   every `output_map` key is one of its outputs;
 * - every ensemble tensor has one datatype and one shape (with -1 wildcards, and allowing a
 *   non-batching `[-1, d...]` to meet a batching `[d...]`) wherever it is read or written;
 * - decoupled steps: a step may not read tensors that descend from different decoupled steps.
 *   The ensemble is itself decoupled exactly when one of its steps is (Triton sets the flag).
 */
import { invalidArgument } from '@switchyard/common';
import type { DataTypeName, ModelConfig } from '@switchyard/model-config';
import { dimsToString } from '../request-normalizer.js';
import { dimsMatch, ensembleSteps } from './ensemble-plan.js';

/** What a tensor is known to be, and which model said so. */
interface TensorNode {
  readonly model: string;
  readonly type: DataTypeName;
  readonly dims: readonly number[];
  /** `dims` with a leading -1 when the model batches. */
  readonly fullDims: readonly number[];
  decoupled: boolean;
  label: number;
  visited: boolean;
  readonly prev: TensorNode[];
  readonly next: TensorNode[];
  /** Shared by the outputs of one step, so they get one decoupled label. */
  group: { label: number; visited: boolean } | undefined;
}

function node(model: string, batching: boolean, type: DataTypeName, dims: readonly number[]): TensorNode {
  return { model, type, dims, fullDims: batching ? [-1, ...dims] : [...dims], decoupled: false, label: 0, visited: false, prev: [], next: [], group: undefined };
}

function checkConsistent(lhs: TensorNode, rhs: TensorNode, context: string): void {
  if (lhs.type !== rhs.type) {
    throw invalidArgument(`${context}inconsistent data type: ${lhs.type} is inferred from model ${lhs.model} while ${rhs.type} is inferred from model ${rhs.model}`);
  }
  if (!dimsMatch(lhs.dims, rhs.dims) && !dimsMatch(lhs.fullDims, rhs.fullDims)) {
    throw invalidArgument(
      `${context}inconsistent shape: ${dimsToString(lhs.fullDims)} is inferred from model ${lhs.model} while ${dimsToString(rhs.fullDims)} is inferred from model ${rhs.model}`,
    );
  }
}

/**
 * Check `ensemble` (normalised, structurally valid) against `composing(name)`, the config of the
 * version each step would use. Returns whether the ensemble is decoupled. Throws invalid_argument.
 */
export function validateEnsembleComposition(ensemble: ModelConfig, composing: (name: string) => ModelConfig): { decoupled: boolean } {
  const name = ensemble.name;
  const batching = ensemble.max_batch_size > 0;
  const tensors = new Map<string, TensorNode>();
  for (const input of ensemble.input) tensors.set(input.name, node(name, batching, input.data_type, input.reshape?.shape ?? input.dims));
  // The sink reads every ensemble output: a response needs them all from one decoupled flow.
  const sink = node(name, false, 'TYPE_INVALID', []);
  for (const output of ensemble.output) {
    let t = tensors.get(output.name);
    if (t === undefined) tensors.set(output.name, (t = node(name, batching, output.data_type, output.reshape?.shape ?? output.dims)));
    sink.prev.push(t);
    t.next.push(sink);
  }

  for (const step of ensembleSteps(ensemble)) {
    const model = composing(step.model_name);
    if (model.max_batch_size !== 0 && model.max_batch_size < ensemble.max_batch_size) {
      throw invalidArgument(
        `ensemble ${name} allows maximum batch size ${ensemble.max_batch_size}, but it contains model ${step.model_name} which only allows maximum batch size to be ${model.max_batch_size}`,
      );
    }
    const stepModel = step.model_name;
    const stepBatching = model.max_batch_size > 0;
    const where = `in ensemble ${name}, `;
    const inputNames = new Set(model.input.map((i) => i.name));
    for (const [key, tensor] of Object.entries(step.input_map)) {
      if (!inputNames.has(key)) throw invalidArgument(`${where}ensemble tensor ${tensor} is mapping to non-existing input ${key} in model ${stepModel}`);
    }
    for (const input of model.input) {
      const tensor = step.input_map[input.name];
      if (tensor === undefined) {
        if (input.optional) continue;
        throw invalidArgument(`${where}input ${input.name} in model ${stepModel} is not mapped to any ensemble tensors`);
      }
      const mine = node(stepModel, stepBatching, input.data_type, input.dims);
      const known = tensors.get(tensor);
      if (known !== undefined) checkConsistent(known, mine, `${where}ensemble tensor ${tensor}: `);
      else tensors.set(tensor, mine);
    }
    const outputNames = new Set(model.output.map((o) => o.name));
    for (const [key, tensor] of Object.entries(step.output_map)) {
      if (!outputNames.has(key)) throw invalidArgument(`${where}ensemble tensor ${tensor} is mapped from non-existing output ${key} in model ${step.model_name}`);
    }
    const group = { label: 0, visited: false };
    for (const [key, tensor] of Object.entries(step.output_map)) {
      const output = model.output.find((o) => o.name === key);
      if (output === undefined) continue;
      const mine = node(stepModel, stepBatching, output.data_type, output.dims);
      let known = tensors.get(tensor);
      if (known !== undefined) checkConsistent(known, mine, `${where}ensemble tensor ${tensor}: `);
      else tensors.set(tensor, (known = mine));
      known.group = group;
    }
    // Link: every output of the step depends on every input of the step.
    const decoupled = model.model_transaction_policy?.decoupled === true;
    for (const tensor of Object.values(step.output_map)) {
      const out = tensors.get(tensor) as TensorNode;
      out.decoupled = decoupled;
      for (const input of Object.values(step.input_map)) {
        const prev = tensors.get(input) as TensorNode;
        out.prev.push(prev);
        prev.next.push(out);
      }
    }
  }
  return { decoupled: labelDecoupledFlow(ensemble, tensors) > 0 };
}

/**
 * Walk the data flow from the ensemble inputs, giving every tensor the label of the decoupled
 * step it descends from (0: none). Returns the number of decoupled labels handed out.
 */
function labelDecoupledFlow(ensemble: ModelConfig, tensors: Map<string, TensorNode>): number {
  let labels = 0;
  const queue: TensorNode[] = [];
  for (const input of ensemble.input) {
    const t = tensors.get(input.name) as TensorNode;
    t.visited = true;
    queue.push(t);
  }
  for (let head = 0; head < queue.length; head++) {
    for (const next of (queue[head] as TensorNode).next) {
      if (next.visited || !next.prev.every((p) => p.visited)) continue;
      const inherited = (next.prev[0] as TensorNode).label;
      if (next.prev.some((p) => p.label !== inherited)) {
        throw invalidArgument(`in ensemble ${ensemble.name}, step of model '${next.model}' receives inputs originated from different decoupled models`);
      }
      const group = next.group;
      if (group?.visited === true) {
        next.label = group.label;
      } else {
        next.label = next.decoupled ? ++labels : inherited;
        if (group !== undefined) {
          group.label = next.label;
          group.visited = true;
        }
      }
      next.visited = true;
      queue.push(next);
    }
  }
  return labels;
}
