import { describe, expect, it } from 'vitest';
import { checkOnnxIo, type OnnxIo } from './onnx-io-config.js';
import { sequenceConfig } from '../sequence/sequence-test-harness.js';

const config = (controls: string, state = '') =>
  sequenceConfig(`sequence_batching { control_input [${controls}] ${state} }`);
const START_INT32 = '{ name: "START" control [{ kind: CONTROL_SEQUENCE_START int32_false_true: [0, 1] }] }';
const CORRID_U64 = '{ name: "CORRID" control [{ kind: CONTROL_SEQUENCE_CORRID data_type: TYPE_UINT64 }] }';
const STATE = 'state [{ input_name: "S_IN" output_name: "S_OUT" data_type: TYPE_FP32 dims: [4] }]';

const io = (extraInputs: OnnxIo['inputs'], extraOutputs: OnnxIo['outputs'] = []): OnnxIo => ({
  inputs: [{ name: 'INPUT', type: 'int32', dims: [-1, 1] }, ...extraInputs],
  outputs: [{ name: 'OUTPUT', type: 'int32', dims: [-1, 1] }, ...extraOutputs],
});

const message = (f: () => void): string => {
  try {
    f();
  } catch (e) {
    return (e as Error).message;
  }
  return 'no error';
};

describe('checkOnnxIo with sequence batching', () => {
  it('counts control and state inputs and accepts a matching model', () => {
    const c = config(`${START_INT32}, ${CORRID_U64}`, STATE);
    const good = io(
      [
        { name: 'START', type: 'int32', dims: [-1, 1] },
        { name: 'CORRID', type: 'uint64', dims: [-1, 1] },
        { name: 'S_IN', type: 'float32', dims: [-1, 4] },
      ],
      [{ name: 'S_OUT', type: 'float32', dims: [-1, 4] }],
    );
    expect(message(() => checkOnnxIo(c, good))).toBe('no error');
    expect(message(() => checkOnnxIo(c, { ...good, inputs: good.inputs.slice(0, 3) }))).toBe(
      "unable to load model 'seq', configuration expects 4 inputs, model provides 3",
    );
  });

  it('refuses a missing, mis-shaped or mis-typed control with Triton words', () => {
    const c = config(START_INT32);
    expect(message(() => checkOnnxIo(c, io([])))).toBe("configuration specified sequence control 'START', but model does not provide that input");
    expect(message(() => checkOnnxIo(c, io([{ name: 'START', type: 'int32', dims: [-1, 2] }])))).toBe(
      "unable to load model 'seq', sequence control 'START' in model has dims [2] but dims [1] is expected",
    );
    expect(message(() => checkOnnxIo(c, io([{ name: 'START', type: 'float32', dims: [-1, 1] }])))).toBe(
      "unable to load model 'seq', sequence control 'START', the model expects data-type FLOAT but the model configuration specifies data-type TYPE_INT32",
    );
  });

  it('refuses a state output the model lacks or types differently', () => {
    const c = config(START_INT32, STATE);
    const inputs = [
      { name: 'START', type: 'int32', dims: [-1, 1] },
      { name: 'S_IN', type: 'float32', dims: [-1, 4] },
    ];
    expect(message(() => checkOnnxIo(c, io(inputs)))).toBe("unexpected inference output 'S_OUT', allowed outputs are: OUTPUT");
    expect(message(() => checkOnnxIo(c, io(inputs, [{ name: 'S_OUT', type: 'int32', dims: [-1, 4] }])))).toBe(
      "unable to load model 'seq', configuration expects datatype TYPE_FP32 for output state 'S_OUT', model provides TYPE_INT32",
    );
  });
});
