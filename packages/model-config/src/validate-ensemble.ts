/**
 * Structural checks of an ensemble's own configuration (core's `ValidateEnsembleSchedulingConfig`
 * and `BuildEnsembleGraph`): steps are complete, every ensemble input feeds some step, every
 * ensemble output is produced, and no ensemble tensor dangles. Checks against the composing
 * models' configs (types, shapes, batch sizes) need those models and belong to the loader.
 *
 * Messages are Triton's, including its unbalanced quotes.
 */
import { invalidArgument } from '@switchyard/common';
import type { ModelConfig, ModelEnsembling } from './types.js';

interface EnsembleTensor {
  readonly name: string;
  isOutput: boolean;
  ready: boolean;
  readonly prev: EnsembleTensor[];
  readonly next: EnsembleTensor[];
}

export function validateEnsembleScheduling(c: ModelConfig): void {
  const fail: (msg: string) => never = (msg) => {
    throw invalidArgument(msg);
  };
  if (c.platform !== 'ensemble') {
    fail(`ensemble scheduling cannot be set for model '${c.name}' whose platform is not ensemble`);
  }
  if (c.instance_group.length !== 0) fail(`instance group should not be specified for ensemble '${c.name}'`);
  if (c.optimization !== undefined) fail(`optimization should not be specified for ensemble '${c.name}'`);
  if (c.model_warmup.length !== 0) fail(`model_warmup can not be specified for ensemble '${c.name}'`);
  const ens = c.ensemble_scheduling as ModelEnsembling;
  if (ens.step.length === 0) fail(`must specify 'step' for ensemble '${c.name}'`);

  const tensors = buildGraph(c, ens);

  // Propagate readiness from the ensemble inputs.
  const queue: EnsembleTensor[] = [];
  for (const input of c.input) {
    const t = tensors.get(input.name);
    if (t === undefined) fail(`ensemble input '${input.name}' for ensemble ${c.name}' is not used`);
    t.ready = true;
    queue.push(t);
  }
  while (queue.length > 0) {
    const node = queue.shift() as EnsembleTensor;
    for (const next of node.next) {
      if (next.ready) continue;
      next.ready = next.prev.every((p) => p.ready);
      if (next.ready) queue.push(next);
    }
  }

  const outputs = new Set<string>();
  for (const output of c.output) {
    const t = tensors.get(output.name);
    if (t === undefined) fail(`ensemble output '${output.name}' for ensemble ${c.name}' is not used`);
    if (!t.ready) {
      let msg = `output '${output.name}' for ensemble '${c.name}' is not written`;
      // Walk back to the first not-ready source (the graph may be cyclic).
      let prev: EnsembleTensor[] | undefined = t.prev;
      let last = t;
      const seen = new Set<string>();
      while (prev !== undefined && prev.length > 0) {
        const nodes: EnsembleTensor[] = prev;
        prev = undefined;
        for (const n of nodes) {
          if (!n.ready && !seen.has(n.name)) {
            seen.add(n.name);
            last = n;
            prev = n.prev;
            break;
          }
        }
      }
      if (last.name !== t.name) msg += `: at least one of its depending tensors, '${last.name}', is not connected`;
      fail(msg);
    }
    outputs.add(output.name);
  }
  for (const [name, t] of tensors) {
    if (outputs.has(name)) continue;
    if (!t.ready || t.next.length === 0) fail(`ensemble tensor '${name}' is unused in ensemble '${c.name}'`);
  }
}

function buildGraph(c: ModelConfig, ens: ModelEnsembling): Map<string, EnsembleTensor> {
  const tensors = new Map<string, EnsembleTensor>();
  const tensor = (name: string, isOutput: boolean): EnsembleTensor => {
    let t = tensors.get(name);
    if (t === undefined) {
      t = { name, isOutput, ready: false, prev: [], next: [] };
      tensors.set(name, t);
    }
    return t;
  };
  ens.step.forEach((step, idx) => {
    const where = `in step ${idx} of ensemble '${c.name}'`;
    if (step.model_name === '') throw invalidArgument(`must specify 'model_name' ${where}`);
    if (Object.keys(step.input_map).length === 0) throw invalidArgument(`must specify 'input_map' ${where}`);
    if (Object.keys(step.output_map).length === 0) throw invalidArgument(`must specify 'output_map' ${where}`);

    const produced: EnsembleTensor[] = [];
    for (const ensembleName of Object.values(step.output_map)) {
      const existing = tensors.get(ensembleName);
      if (existing?.isOutput === true) {
        throw invalidArgument(
          `ensemble tensor '${ensembleName}' can appear in an output map only once for ensemble '${c.name}' step ${idx}`,
        );
      }
      const t = existing ?? tensor(ensembleName, true);
      t.isOutput = true;
      produced.push(t);
    }
    // input_map keys are unique by construction (a map), so core's "mapped to multiple" check cannot fire.
    for (const ensembleName of Object.values(step.input_map)) {
      const t = tensor(ensembleName, false);
      for (const out of produced) {
        out.prev.push(t);
        t.next.push(out);
      }
    }
  });
  return tensors;
}
