/**
 * An ensemble's classification labels (Triton's model_lifecycle.cc, when an ensemble version is
 * created): an ensemble output whose own config gives it no labels takes the labels of the
 * composing model output mapped straight onto it (`output_map { key: <model output> value:
 * <ensemble output> }`), from the version that step names (latest when `model_version` is -1).
 * Only that step counts: labels do not travel further back through the ensemble, so an output
 * produced by a step without labels (Triton's qa `fan_*` ensembles) has none, and a composing
 * ensemble passes on what it inherited itself. Taken once, when the ensemble version loads: a
 * composing model that changes versions makes the lifecycle rebuild its ensembles
 * (`EnsembleDependencies.check`).
 *
 * "No labels of its own" is Triton's test, the output's first label being empty; a label file of
 * the ensemble's own is never replaced, even one whose first line is empty.
 */
import type { ModelConfig } from '@switchyard/model-config';
import type { OutputLabels } from '../types.js';
import { ensembleSteps } from './ensemble-plan.js';

/**
 * `own` (the ensemble's label files) completed from its steps. `labelsOf(model, version)`: the
 * labels of the composing version a step names (`version` undefined: latest), undefined when
 * it is not available.
 */
export function inheritComposingLabels(
  ensemble: ModelConfig,
  own: OutputLabels,
  labelsOf: (model: string, version: number | undefined) => OutputLabels | undefined,
): OutputLabels {
  const unlabelled = new Set(ensemble.output.filter((o) => (own.get(o.name)?.[0] ?? '') === '').map((o) => o.name));
  if (unlabelled.size === 0) return own;
  const labels = new Map(own);
  for (const step of ensembleSteps(ensemble)) {
    for (const [modelOutput, tensor] of Object.entries(step.output_map)) {
      if (!unlabelled.has(tensor) || labels.has(tensor)) continue;
      const inherited = labelsOf(step.model_name, step.model_version < 0 ? undefined : step.model_version)?.get(modelOutput);
      if (inherited !== undefined) labels.set(tensor, inherited);
    }
  }
  return labels;
}
