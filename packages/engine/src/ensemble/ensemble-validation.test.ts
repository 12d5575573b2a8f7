import { describe, expect, it } from 'vitest';
import { normalizeModelConfig, parseModelConfigText, type ModelConfig } from '@switchyard/model-config';
import { validateEnsembleComposition } from './ensemble-validation.js';

const config = (name: string, text: string): ModelConfig => normalizeModelConfig(parseModelConfigText(`name: "${name}" ${text}`, `${name}/config.pbtxt`), { modelName: name });

/** A composing model: `backend: "javascript"` keeps normalisation quiet; only I/O matters here. */
const model = (name: string, io: string, extra = ''): ModelConfig => config(name, `backend: "javascript" ${extra} ${io}`);

const IDENTITY_IO = 'input [{ name: "X" data_type: TYPE_FP32 dims: [ 4 ] }] output [{ name: "Y" data_type: TYPE_FP32 dims: [ 4 ] }]';

const MODELS: Record<string, ModelConfig> = {
  a: model('a', IDENTITY_IO, 'max_batch_size: 8'),
  b: model('b', IDENTITY_IO, 'max_batch_size: 8'),
  small: model('small', IDENTITY_IO, 'max_batch_size: 2'),
  nobatch: model('nobatch', 'input [{ name: "X" data_type: TYPE_FP32 dims: [ -1, 4 ] }] output [{ name: "Y" data_type: TYPE_FP32 dims: [ -1, 4 ] }]'),
  ints: model('ints', 'input [{ name: "X" data_type: TYPE_INT32 dims: [ 4 ] }] output [{ name: "Y" data_type: TYPE_INT32 dims: [ 4 ] }]', 'max_batch_size: 8'),
  wide: model('wide', 'input [{ name: "X" data_type: TYPE_FP32 dims: [ 8 ] }] output [{ name: "Y" data_type: TYPE_FP32 dims: [ 8 ] }]', 'max_batch_size: 8'),
  two_in: model(
    'two_in',
    'input [{ name: "X" data_type: TYPE_FP32 dims: [ 4 ] }, { name: "Z" data_type: TYPE_FP32 dims: [ 4 ] optional: true }] output [{ name: "Y" data_type: TYPE_FP32 dims: [ 4 ] }]',
    'max_batch_size: 8',
  ),
  repeat: model('repeat', IDENTITY_IO, 'max_batch_size: 8 model_transaction_policy { decoupled: true }'),
  repeat2: model('repeat2', IDENTITY_IO, 'max_batch_size: 8 model_transaction_policy { decoupled: true }'),
  join: model(
    'join',
    'input [{ name: "X" data_type: TYPE_FP32 dims: [ 4 ] }, { name: "Z" data_type: TYPE_FP32 dims: [ 4 ] }] output [{ name: "Y" data_type: TYPE_FP32 dims: [ 4 ] }]',
    'max_batch_size: 8',
  ),
};

const step = (m: string, inputs: Record<string, string>, outputs: Record<string, string>): string =>
  `{ model_name: "${m}" model_version: -1 ${Object.entries(inputs)
    .map(([k, v]) => `input_map { key: "${k}" value: "${v}" }`)
    .join(' ')} ${Object.entries(outputs)
    .map(([k, v]) => `output_map { key: "${k}" value: "${v}" }`)
    .join(' ')} }`;

const ensemble = (steps: string[], io = 'input [{ name: "IN" data_type: TYPE_FP32 dims: [ 4 ] }] output [{ name: "OUT" data_type: TYPE_FP32 dims: [ 4 ] }]', mbs = 8): ModelConfig =>
  config('e', `platform: "ensemble" max_batch_size: ${mbs} ${io} ensemble_scheduling { step [ ${steps.join(', ')} ] }`);

const check = (e: ModelConfig) => validateEnsembleComposition(e, (n) => MODELS[n] as ModelConfig);
const problem = (e: ModelConfig): string | undefined => {
  try {
    check(e);
    return undefined;
  } catch (err) {
    return (err as Error).message;
  }
};

describe('validateEnsembleComposition', () => {
  it('accepts a chain and a fan-out / fan-in, not decoupled', () => {
    expect(check(ensemble([step('a', { X: 'IN' }, { Y: 'mid' }), step('b', { X: 'mid' }, { Y: 'OUT' })]))).toEqual({ decoupled: false });
    const diamond = ensemble([step('a', { X: 'IN' }, { Y: 'l' }), step('b', { X: 'IN' }, { Y: 'r' }), step('join', { X: 'l', Z: 'r' }, { Y: 'OUT' })]);
    expect(check(diamond)).toEqual({ decoupled: false });
  });

  it("rejects an ensemble batching more than a composing model, with Triton's message", () => {
    expect(problem(ensemble([step('small', { X: 'IN' }, { Y: 'OUT' })]))).toBe(
      'ensemble e allows maximum batch size 8, but it contains model small which only allows maximum batch size to be 2',
    );
    // Non-batching composing models are fine in a batching ensemble when full shapes agree.
    expect(problem(ensemble([step('nobatch', { X: 'IN' }, { Y: 'OUT' })]))).toBeUndefined();
  });

  it('rejects maps to tensors the composing model does not have, and unmapped inputs', () => {
    expect(problem(ensemble([step('a', { NOPE: 'IN', X: 'IN' }, { Y: 'OUT' })]))).toBe('in ensemble e, ensemble tensor IN is mapping to non-existing input NOPE in model a');
    expect(problem(ensemble([step('join', { X: 'IN' }, { Y: 'OUT' })]))).toBe('in ensemble e, input Z in model join is not mapped to any ensemble tensors');
    expect(problem(ensemble([step('two_in', { X: 'IN' }, { Y: 'OUT' })]))).toBeUndefined(); // optional input left out
    expect(problem(ensemble([step('a', { X: 'IN' }, { Y: 'OUT', NOPE: 'x' }), step('b', { X: 'x' }, { Y: 'y' })]))).toBe(
      'in ensemble e, ensemble tensor x is mapped from non-existing output NOPE in model a',
    );
  });

  it('rejects inconsistent datatypes and shapes between steps', () => {
    expect(problem(ensemble([step('a', { X: 'IN' }, { Y: 'mid' }), step('ints', { X: 'mid' }, { Y: 'OUT' })]))).toBe(
      'in ensemble e, ensemble tensor mid: inconsistent data type: TYPE_FP32 is inferred from model a while TYPE_INT32 is inferred from model ints',
    );
    expect(problem(ensemble([step('a', { X: 'IN' }, { Y: 'mid' }), step('wide', { X: 'mid' }, { Y: 'OUT' })]))).toBe(
      'in ensemble e, ensemble tensor mid: inconsistent shape: [-1,4] is inferred from model a while [-1,8] is inferred from model wide',
    );
    // Against the ensemble's own input.
    expect(problem(ensemble([step('wide', { X: 'IN' }, { Y: 'OUT' })]))).toBe(
      'in ensemble e, ensemble tensor IN: inconsistent shape: [-1,4] is inferred from model e while [-1,8] is inferred from model wide',
    );
  });

  it('makes the ensemble decoupled when a step is, and refuses mixing decoupled flows', () => {
    expect(check(ensemble([step('repeat', { X: 'IN' }, { Y: 'mid' }), step('a', { X: 'mid' }, { Y: 'OUT' })]))).toEqual({ decoupled: true });
    // `join` reads the ensemble input (no decoupled origin) and repeat's output.
    expect(problem(ensemble([step('repeat', { X: 'IN' }, { Y: 'mid' }), step('join', { X: 'mid', Z: 'IN' }, { Y: 'OUT' })]))).toBe(
      "in ensemble e, step of model 'e' receives inputs originated from different decoupled models",
    );
    const twoOutputs =
      'input [{ name: "IN" data_type: TYPE_FP32 dims: [ 4 ] }] output [{ name: "OUT" data_type: TYPE_FP32 dims: [ 4 ] }, { name: "OUT2" data_type: TYPE_FP32 dims: [ 4 ] }]';
    expect(problem(ensemble([step('repeat', { X: 'IN' }, { Y: 'OUT' }), step('repeat2', { X: 'IN' }, { Y: 'OUT2' })], twoOutputs))).toBe(
      "in ensemble e, step of model 'e' receives inputs originated from different decoupled models",
    );
  });
});
