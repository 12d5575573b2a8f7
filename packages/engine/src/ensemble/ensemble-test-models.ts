/**
 * Test models for the ensemble unit tests (ensemble-*.test.ts): ONNX Runtime and JavaScript
 * composing models and the ensembles over them, as a `createRepository` fixture.
 */
import { BATCH_DIM, buildAddConstantModel, buildSimpleModel, exampleRepositoryFiles } from '@switchyard/onnx-builder';
import type { ModelFixture } from '../test-support/repository-fixture.js';

const FP32_4 = (name: string) => `{ name: "${name}" data_type: TYPE_FP32 dims: [ 4 ] }`;
const onnx = (name: string, io: string) => `name: "${name}" platform: "onnxruntime_onnx" max_batch_size: 8 ${io} instance_group [{ count: 1 kind: KIND_CPU }]`;
const ADD_IO = `input [ ${FP32_4('INPUT0')} ] output [ ${FP32_4('OUTPUT0')} ]`;
const SUMDIFF_IO = `input [ ${FP32_4('INPUT0')}, ${FP32_4('INPUT1')} ] output [ ${FP32_4('OUTPUT0')}, ${FP32_4('OUTPUT1')} ]`;

/** A JavaScript model that fails every request holding a negative number. */
const FAILS_JS = `export class TritonModel {
  initialize(args) { this.pb = args.pb; }
  execute(requests) {
    const { Response, Tensor, TritonError } = this.pb;
    return requests.map((r) => {
      const x = r.input('X');
      if (x.data.some((v) => v < 0)) return new Response({ error: new TritonError('negative input', 'invalid_argument') });
      return new Response({ outputs: [new Tensor('Y', x.data, x.shape)] });
    });
  }
}`;

/** Decoupled: IN = [n] gets n responses OUT = [i], i = 0..n-1. */
const COUNT_JS = `export class TritonModel {
  initialize(args) { this.pb = args.pb; }
  execute(requests) {
    const { Response, Tensor } = this.pb;
    for (const r of requests) {
      const sender = r.responseSender();
      const n = r.input('IN').data[0];
      for (let i = 0; i < n; i++) sender.send(new Response({ outputs: [new Tensor('OUT', Int32Array.of(i))] }));
      sender.send(undefined, { final: true });
    }
  }
}`;

/** OUT = IN * 10. */
const TIMES10_JS = `export class TritonModel {
  initialize(args) { this.pb = args.pb; }
  execute(requests) {
    const { Response, Tensor } = this.pb;
    return requests.map((r) => new Response({ outputs: [new Tensor('OUT', r.input('IN').data.map((v) => v * 10))] }));
  }
}`;

/** PARAMS = the request's id and parameters as JSON (what reached the step). */
const ECHO_PARAMS_JS = `export class TritonModel {
  initialize(args) { this.pb = args.pb; }
  execute(requests) {
    const { Response, Tensor } = this.pb;
    return requests.map((r) => new Response({ outputs: [Tensor.fromStrings('PARAMS', [JSON.stringify({ id: r.id, parameters: r.parameters, correlationId: r.correlationId, flags: r.flags })])] }));
  }
}`;

/** Decoupled: one response OUT = IN at once, then nothing until the request is cancelled. */
const STALL_JS = `export class TritonModel {
  initialize(args) { this.pb = args.pb; }
  execute(requests) {
    const { Response, Tensor } = this.pb;
    for (const r of requests) {
      const sender = r.responseSender();
      sender.send(new Response({ outputs: [new Tensor('OUT', r.input('IN').data)] }));
      const timer = setInterval(() => {
        if (!sender.isCancelled()) return;
        clearInterval(timer);
        sender.send(undefined, { final: true });
      }, 5);
    }
  }
}`;

/** OUT = IN after 300 ms. */
const SLOW_JS = `export class TritonModel {
  initialize(args) { this.pb = args.pb; }
  async execute(requests) {
    const { Response, Tensor } = this.pb;
    await new Promise((resolve) => setTimeout(resolve, 300));
    return requests.map((r) => new Response({ outputs: [new Tensor('OUT', r.input('IN').data)] }));
  }
}`;

const SIMPLE_SEQUENCE = exampleRepositoryFiles().find((f) => f.path === 'simple_sequence/1/model.onnx');
const SEQ_CONFIG = `name: "seq" platform: "onnxruntime_onnx" max_batch_size: 8
sequence_batching { control_input [
  { name: "START" control [{ kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] }] },
  { name: "READY" control [{ kind: CONTROL_SEQUENCE_READY int32_false_true: [ 0, 1 ] }] } ] }
input [{ name: "INPUT" data_type: TYPE_INT32 dims: [ 1 ] }] output [{ name: "OUTPUT" data_type: TYPE_INT32 dims: [ 1 ] }]`;

const INT1 = (name: string) => `{ name: "${name}" data_type: TYPE_INT32 dims: [ 1 ] }`;
const step = (model: string, inputs: Record<string, string>, outputs: Record<string, string>) =>
  `{ model_name: "${model}" model_version: -1 ${Object.entries(inputs)
    .map(([k, v]) => `input_map { key: "${k}" value: "${v}" }`)
    .join(' ')} ${Object.entries(outputs)
    .map(([k, v]) => `output_map { key: "${k}" value: "${v}" }`)
    .join(' ')} }`;
const ensemble = (name: string, io: string, steps: string[], mbs = 8) =>
  `name: "${name}" platform: "ensemble" max_batch_size: ${mbs} ${io} ensemble_scheduling { step [ ${steps.join(', ')} ] }`;

export const ENSEMBLE_MODELS: Record<string, ModelFixture> = {
  add1: { config: onnx('add1', ADD_IO), versions: { 1: { 'model.onnx': buildAddConstantModel(1) } } },
  add2: { config: onnx('add2', ADD_IO), versions: { 1: { 'model.onnx': buildAddConstantModel(2) } } },
  sumdiff: { config: onnx('sumdiff', SUMDIFF_IO), versions: { 1: { 'model.onnx': buildSimpleModel({ elemType: 'FLOAT', dims: [BATCH_DIM, 4], graphName: 'sumdiff' }) } } },
  fails: {
    config: `name: "fails" backend: "javascript" max_batch_size: 8 input [ ${FP32_4('X')} ] output [ ${FP32_4('Y')} ]`,
    versions: { 1: { 'model.mjs': FAILS_JS } },
  },
  count: {
    config: `name: "count" backend: "javascript" max_batch_size: 0 model_transaction_policy { decoupled: true } input [ ${INT1('IN')} ] output [ ${INT1('OUT')} ]`,
    versions: { 1: { 'model.mjs': COUNT_JS } },
  },
  times10: { config: `name: "times10" backend: "javascript" max_batch_size: 0 input [ ${INT1('IN')} ] output [ ${INT1('OUT')} ]`, versions: { 1: { 'model.mjs': TIMES10_JS } } },
  // IN → add1 → l, IN → add2 → r, (l, r) → sumdiff → SUM = 2 IN + 3, DIFF = -1.
  diamond: {
    config: ensemble('diamond', `input [ ${FP32_4('IN')} ] output [ ${FP32_4('SUM')}, ${FP32_4('DIFF')}, ${FP32_4('LEFT')} ]`, [
      step('add1', { INPUT0: 'IN' }, { OUTPUT0: 'LEFT' }),
      step('add2', { INPUT0: 'IN' }, { OUTPUT0: 'right' }),
      step('sumdiff', { INPUT0: 'LEFT', INPUT1: 'right' }, { OUTPUT0: 'SUM', OUTPUT1: 'DIFF' }),
    ]),
    versions: { 1: {} },
  },
  // IN → add1 → fails → OUT: fails when IN + 1 < 0.
  guarded: {
    config: ensemble('guarded', `input [ ${FP32_4('IN')} ] output [ ${FP32_4('OUT')} ]`, [step('add1', { INPUT0: 'IN' }, { OUTPUT0: 'mid' }), step('fails', { X: 'mid' }, { Y: 'OUT' })]),
    versions: { 1: {} },
  },
  // Decoupled: IN = [n] → count → n values → times10 → OUT = 0, 10, 20, ...
  counted: {
    config: ensemble('counted', `input [ ${INT1('IN')} ] output [ ${INT1('OUT')} ]`, [step('count', { IN: 'IN' }, { OUT: 'i' }), step('times10', { IN: 'i' }, { OUT: 'OUT' })], 0),
    versions: { 1: {} },
  },
  echo_params: {
    config: `name: "echo_params" backend: "javascript" max_batch_size: 0 input [ ${INT1('IN')} ] output [{ name: "PARAMS" data_type: TYPE_STRING dims: [ 1 ] }]`,
    versions: { 1: { 'model.mjs': ECHO_PARAMS_JS } },
  },
  stall: {
    config: `name: "stall" backend: "javascript" max_batch_size: 0 model_transaction_policy { decoupled: true } input [ ${INT1('IN')} ] output [ ${INT1('OUT')} ]`,
    versions: { 1: { 'model.mjs': STALL_JS } },
  },
  slow: { config: `name: "slow" backend: "javascript" max_batch_size: 0 input [ ${INT1('IN')} ] output [ ${INT1('OUT')} ]`, versions: { 1: { 'model.mjs': SLOW_JS } } },
  seq: { config: SEQ_CONFIG, versions: { 1: { 'model.onnx': SIMPLE_SEQUENCE?.build() ?? new Uint8Array() } } },
  params: {
    config: ensemble('params', `input [ ${INT1('IN')} ] output [{ name: "PARAMS" data_type: TYPE_STRING dims: [ 1 ] }]`, [step('echo_params', { IN: 'IN' }, { PARAMS: 'PARAMS' })], 0),
    versions: { 1: {} },
  },
  stalled: { config: ensemble('stalled', `input [ ${INT1('IN')} ] output [ ${INT1('OUT')} ]`, [step('stall', { IN: 'IN' }, { OUT: 'OUT' })], 0), versions: { 1: {} } },
  slowed: { config: ensemble('slowed', `input [ ${INT1('IN')} ] output [ ${INT1('OUT')} ]`, [step('slow', { IN: 'IN' }, { OUT: 'OUT' })], 0), versions: { 1: {} } },
  sequenced: {
    config: ensemble('sequenced', `input [ ${INT1('X')} ] output [ ${INT1('Y')} ]`, [step('seq', { INPUT: 'X' }, { OUTPUT: 'Y' })], 8),
    versions: { 1: {} },
  },
};
