import { describe, expect, it } from 'vitest';
import type { ModelConfig } from '@switchyard/model-config';
import type { OutputLabels } from '../types.js';
import { inheritComposingLabels } from './ensemble-labels.js';

/** An ensemble config with the given outputs and steps (only what the rule reads). */
const ensemble = (outputs: string[], steps: Array<{ model: string; version?: number; outputs: Record<string, string> }>): ModelConfig =>
  ({
    name: 'e',
    output: outputs.map((name) => ({ name })),
    ensemble_scheduling: { step: steps.map((s) => ({ model_name: s.model, model_version: s.version ?? -1, input_map: {}, output_map: s.outputs })) },
  }) as unknown as ModelConfig;

const composing: Record<string, OutputLabels> = {
  addsub: new Map([['OUTPUT0', ['label0', 'label1']]]),
  nop: new Map(),
};

describe('inheritComposingLabels', () => {
  it('an output without labels of its own takes those of the composing output mapped onto it', () => {
    const seen: Array<[string, number | undefined]> = [];
    const labels = inheritComposingLabels(ensemble(['OUTPUT0', 'OUTPUT1'], [{ model: 'addsub', version: 2, outputs: { OUTPUT0: 'OUTPUT0', OUTPUT1: 'OUTPUT1' } }]), new Map(), (m, v) => {
      seen.push([m, v]);
      return composing[m];
    });
    expect([...labels]).toEqual([['OUTPUT0', ['label0', 'label1']]]);
    expect(seen).toEqual([
      ['addsub', 2],
      ['addsub', 2],
    ]);
  });

  it('only the step producing the output counts: labels do not travel through a step without labels', () => {
    const fan = ensemble(['OUTPUT0'], [
      { model: 'addsub', outputs: { OUTPUT0: 'same_output0' } },
      { model: 'nop', outputs: { OUTPUT0: 'OUTPUT0' } },
    ]);
    expect(inheritComposingLabels(fan, new Map(), (m, v) => (expect(v).toBeUndefined(), composing[m])).size).toBe(0);
  });

  it("the ensemble's own labels win, even a file whose first line is empty; an absent composing model gives nothing", () => {
    const own: OutputLabels = new Map([
      ['A', ['mine']],
      ['B', ['', 'second']],
    ]);
    const config = ensemble(['A', 'B', 'C'], [{ model: 'addsub', outputs: { OUTPUT0: 'A' } }, { model: 'addsub', outputs: { OUTPUT0: 'B' } }, { model: 'gone', outputs: { OUTPUT0: 'C' } }]);
    const labels = inheritComposingLabels(config, own, (m) => composing[m]);
    expect(labels.get('A')).toEqual(['mine']);
    expect(labels.get('B')).toEqual(['', 'second']);
    expect(labels.has('C')).toBe(false);
  });
});
