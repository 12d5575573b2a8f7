import { describe, expect, it } from 'vitest';
import { serializeBytesElements } from '@switchyard/kserve';
import { normalizeModelConfig, parseModelConfigText } from '@switchyard/model-config';
import { normalizeRequest } from './request-normalizer.js';
import { bytesTensor, request, SIMPLE_CONFIG, tensor } from './test-support/repository-fixture.js';

const simple = normalizeModelConfig(parseModelConfigText(SIMPLE_CONFIG), { modelName: 'simple' });
const ints = (n: number): Int32Array => new Int32Array(n);

const messageOf = (f: () => unknown): string => {
  try {
    f();
  } catch (e) {
    return (e as Error).message;
  }
  throw new Error('expected a throw');
};

describe('normalizeRequest', () => {
  it('accepts a valid batched request and strips nothing', () => {
    const n = normalizeRequest(simple, request('simple', [tensor('INPUT0', 'INT32', [2, 16], ints(32)), tensor('INPUT1', 'INT32', [2, 16], ints(32))]));
    expect(n.batchSize).toBe(2);
    expect(n.inputs.map((i) => i.shape)).toEqual([
      [2, 16],
      [2, 16],
    ]);
    expect(n.requestedOutputs).toEqual(['OUTPUT0', 'OUTPUT1']);
  });

  it('rejects unknown requested outputs', () => {
    const msg = messageOf(() =>
      normalizeRequest(simple, request('simple', [], { outputs: [{ name: 'NOPE', parameters: {} }] })),
    );
    expect(msg).toBe("unexpected inference output 'NOPE' for model 'simple'");
  });

  it('reports missing inputs with Triton wording and the request id prefix', () => {
    const msg = messageOf(() => normalizeRequest(simple, request('simple', [tensor('INPUT0', 'INT32', [1, 16], ints(16))], { id: 'abc' })));
    expect(msg).toBe(
      "[request id: abc] expected 2 inputs but got 1 inputs for model 'simple'. Got input(s) ['INPUT0'], but missing required input(s) ['INPUT1']. Please provide all required input(s).",
    );
    const empty = messageOf(() => normalizeRequest(simple, request('simple', [])));
    expect(empty).toContain("[request id: <id_unknown>] expected 2 inputs but got 0 inputs for model 'simple'. Got input(s) []");
  });

  it('checks the batch dimension', () => {
    const mismatch = messageOf(() =>
      normalizeRequest(simple, request('simple', [tensor('INPUT0', 'INT32', [1, 16], ints(16)), tensor('INPUT1', 'INT32', [2, 16], ints(32))])),
    );
    expect(mismatch).toContain("input 'INPUT1' batch size does not match other inputs for 'simple'");
    const tooBig = messageOf(() =>
      normalizeRequest(simple, request('simple', [tensor('INPUT0', 'INT32', [9, 16], ints(144)), tensor('INPUT1', 'INT32', [9, 16], ints(144))])),
    );
    expect(tooBig).toContain("inference request batch-size must be <= 8 for 'simple'");
    const noShape = messageOf(() =>
      normalizeRequest(simple, request('simple', [tensor('INPUT0', 'INT32', [], ints(1)), tensor('INPUT1', 'INT32', [1, 16], ints(16))])),
    );
    expect(noShape).toContain("input 'INPUT0' has no shape but model requires batch dimension for 'simple'");
  });

  it('checks names, datatypes and shapes', () => {
    const unknown = messageOf(() =>
      normalizeRequest(simple, request('simple', [tensor('INPUT0', 'INT32', [1, 16], ints(16)), tensor('INPUTX', 'INT32', [1, 16], ints(16))])),
    );
    expect(unknown).toBe("unexpected inference input 'INPUTX' for model 'simple'");
    const dtype = messageOf(() =>
      normalizeRequest(simple, request('simple', [tensor('INPUT0', 'FP32', [1, 16], ints(16)), tensor('INPUT1', 'INT32', [1, 16], ints(16))])),
    );
    expect(dtype).toContain("inference input 'INPUT0' data-type is 'FP32', but model 'simple' expects 'INT32'");
    const shape = messageOf(() =>
      normalizeRequest(simple, request('simple', [tensor('INPUT0', 'INT32', [2, 8], ints(16)), tensor('INPUT1', 'INT32', [2, 8], ints(16))])),
    );
    expect(shape).toContain("unexpected shape for input 'INPUT0' for model 'simple'. Expected [-1,16], got [2,8]. NOTE: Setting a non-zero max_batch_size");
    const wildcard = messageOf(() =>
      normalizeRequest(simple, request('simple', [tensor('INPUT0', 'INT32', [1, -1], ints(16)), tensor('INPUT1', 'INT32', [1, 16], ints(16))])),
    );
    expect(wildcard).toContain("All input dimensions should be specified for input 'INPUT0' for model 'simple', got [1,-1]");
    const duplicate = messageOf(() =>
      normalizeRequest(simple, request('simple', [tensor('INPUT0', 'INT32', [1, 16], ints(16)), tensor('INPUT0', 'INT32', [1, 16], ints(16))])),
    );
    expect(duplicate).toContain("input 'INPUT0' already exists in request");
  });

  it('checks byte sizes', () => {
    const msg = messageOf(() =>
      normalizeRequest(simple, request('simple', [tensor('INPUT0', 'INT32', [1, 16], ints(18)), tensor('INPUT1', 'INT32', [1, 16], ints(16))])),
    );
    expect(msg).toContain("input byte size mismatch for input 'INPUT0' for model 'simple'. Expected 64, got 72");
  });

  it('counts BYTES elements against the shape', () => {
    const config = normalizeModelConfig(
      parseModelConfigText('name: "s" backend: "onnxruntime" max_batch_size: 0 input { name: "IN" data_type: TYPE_STRING dims: [ 4 ] } output { name: "OUT" data_type: TYPE_STRING dims: [ 4 ] }'),
      { modelName: 's' },
    );
    expect(() => normalizeRequest(config, request('s', [bytesTensor('IN', [4], ['a', 'b', 'c', 'd'])]))).not.toThrow();
    expect(messageOf(() => normalizeRequest(config, request('s', [bytesTensor('IN', [4], ['a', 'b'])])))).toContain(
      "expected 4 string elements for inference input 'IN' for model 's', got 2",
    );
    expect(messageOf(() => normalizeRequest(config, request('s', [bytesTensor('IN', [4], ['a', 'b', 'c', 'd', 'e', 'f'])])))).toContain(
      "unexpected number of string elements 5 for inference input 'IN' for model 's', expecting 4",
    );
    const truncated = serializeBytesElements([new Uint8Array(3)]).slice(0, 5);
    expect(messageOf(() => normalizeRequest(config, request('s', [tensor('IN', 'BYTES', [4], truncated)])))).toContain('exceeds the end of the buffer');
  });

  it('applies reshape with variable dims', () => {
    const config = normalizeModelConfig(
      parseModelConfigText(
        'name: "r" backend: "onnxruntime" max_batch_size: 2 input { name: "IN" data_type: TYPE_FP32 dims: [ -1, 4 ] reshape { shape: [ 4, -1 ] } } output { name: "OUT" data_type: TYPE_FP32 dims: [ 1 ] }',
      ),
      { modelName: 'r' },
    );
    const n = normalizeRequest(config, request('r', [tensor('IN', 'FP32', [2, 3, 4], new Float32Array(24))]));
    expect(n.inputs[0]?.shape).toEqual([2, 4, 3]);
    expect(n.inputs[0]?.originalShape).toEqual([2, 3, 4]);
  });

  it('reports the optional-input range form', () => {
    const config = normalizeModelConfig(
      parseModelConfigText(
        'name: "o" backend: "onnxruntime" input { name: "A" data_type: TYPE_FP32 dims: [ 1 ] } input { name: "B" data_type: TYPE_FP32 dims: [ 1 ] optional: true } output { name: "OUT" data_type: TYPE_FP32 dims: [ 1 ] }',
      ),
      { modelName: 'o' },
    );
    expect(messageOf(() => normalizeRequest(config, request('o', [])))).toContain(
      "expected number of inputs between 1 and 2 but got 0 inputs for model 'o'. Got input(s) [], but missing required input(s) ['A']",
    );
    expect(() => normalizeRequest(config, request('o', [tensor('A', 'FP32', [1], new Float32Array(1))]))).not.toThrow();
  });
});
