import { describe, expect, it } from 'vitest';
import { withBigIntLimit } from '@switchyard/testing/fuzz';
import { SwitchyardError } from '@switchyard/common';
import {
  classificationCounts,
  decodeModelInferRequest,
  emptyFinalStreamResponse,
  encodeModelInferResponse,
  streamInferError,
  streamInferResponse,
} from './grpc-codec.js';
import type { GrpcInferParameter, GrpcInferTensorContents, GrpcModelInferRequest } from './grpc-messages.js';
import { encodeParameter, parameterValue, parseModelVersion } from './grpc-parameters.js';
import type { DataType, InferResponse } from './protocols.js';
import { deserializeBytesElements, serializeBytesElements, typedView } from './tensor.js';

function expectError(fn: () => unknown, code: string, message: string): void {
  try {
    fn();
  } catch (e) {
    expect(e).toBeInstanceOf(SwitchyardError);
    expect((e as SwitchyardError).code).toBe(code);
    expect((e as SwitchyardError).message).toBe(message);
    return;
  }
  throw new Error(`expected an error: ${message}`);
}

const vals = (datatype: DataType, data: Uint8Array): unknown[] => Array.from(typedView(datatype, data) as ArrayLike<unknown>);

const withContents = (datatype: string, contents: GrpcInferTensorContents, shape: (string | number)[] = ['2']): GrpcModelInferRequest => ({
  model_name: 'm',
  inputs: [{ name: 'X', datatype, shape, contents }],
});

const decodeOne = (datatype: string, contents: GrpcInferTensorContents) => {
  const input = decodeModelInferRequest(withContents(datatype, contents)).request.inputs[0];
  if (input === undefined) throw new Error('no input');
  return input;
};

describe('decodeModelInferRequest: raw_input_contents', () => {
  it('assigns raw entries to inputs in order, as plain aligned-safe Uint8Arrays', () => {
    const backing = new ArrayBuffer(64);
    // An unaligned Buffer slice, as grpc-js produces.
    const a = Buffer.from(backing, 1, 8);
    new DataView(backing).setInt32(1, 7, true);
    new DataView(backing).setInt32(5, -3, true);
    const b = Buffer.from([1, 0]);
    const { request, enableEmptyFinalResponse } = decodeModelInferRequest({
      model_name: 'simple',
      model_version: '1',
      id: 'req-1',
      inputs: [
        { name: 'A', datatype: 'INT32', shape: ['1', '2'] },
        { name: 'B', datatype: 'BOOL', shape: ['2'] },
      ],
      outputs: [{ name: 'OUT' }],
      raw_input_contents: [a, b],
    });
    expect(enableEmptyFinalResponse).toBe(false);
    expect(request.id).toBe('req-1');
    expect(request.modelName).toBe('simple');
    expect(request.modelVersion).toBe(1);
    expect(request.outputs).toEqual([{ name: 'OUT', parameters: {} }]);
    const [ia, ib] = request.inputs;
    expect(ia?.shape).toEqual([1, 2]);
    expect(Object.getPrototypeOf(ia?.data)).toBe(Uint8Array.prototype);
    expect(vals('INT32', ia?.data ?? new Uint8Array())).toEqual([7, -3]);
    expect(Array.from(ib?.data ?? [])).toEqual([1, 0]);
  });

  it('keeps a custom parameter named __proto__ (found by grpc-codec.fuzz.test.ts: it vanished)', () => {
    const parameters = JSON.parse('{"__proto__":{"parameter_choice":"int64_param","int64_param":"7"}}') as Record<string, GrpcInferParameter>;
    expect(Object.entries(decodeModelInferRequest({ model_name: 'm', parameters }).request.parameters)).toEqual([['__proto__', 7]]);
  });

  it('defaults id to empty and version to undefined', () => {
    const { request } = decodeModelInferRequest({ model_name: 'm', inputs: [], raw_input_contents: [] });
    expect(request).toEqual({ id: '', modelName: 'm', modelVersion: undefined, parameters: {}, inputs: [], outputs: [] });
  });

  it('reports an input without data', () => {
    expectError(
      () =>
        decodeModelInferRequest({
          model_name: 'm',
          inputs: [
            { name: 'A', datatype: 'FP32', shape: [1] },
            { name: 'B', datatype: 'FP32', shape: [1] },
          ],
          raw_input_contents: [new Uint8Array(4)],
        }),
      'invalid_argument',
      "unable to find data for input tensor 'B' for model 'm' in request.",
    );
  });

  it('refuses raw_input_contents entries that no input reads', () => {
    const input = (name: string, parameters = {}) => ({ name, datatype: 'FP32', shape: [1], parameters });
    const shm = { shared_memory_region: { string_param: 'r' }, shared_memory_byte_size: { int64_param: 4 } };
    for (const [inputs, rawCount, expected] of [
      [[input('A')], 2, 1],
      [[], 1, 0],
      [[input('A'), input('S', shm)], 2, 1],
    ] as const) {
      expectError(
        () => decodeModelInferRequest({ model_name: 'm', inputs: [...inputs], raw_input_contents: Array.from({ length: rawCount }, () => new Uint8Array(4)) }),
        'invalid_argument',
        `expected ${expected} raw_input_contents for model 'm' (one per input without 'contents' or shared memory), got ${rawCount}`,
      );
    }
    // One entry per input that reads one (a shared-memory input reads none) is fine.
    const ok = decodeModelInferRequest({ model_name: 'm', inputs: [input('A'), input('S', shm)], raw_input_contents: [new Uint8Array(4)] });
    expect(ok.request.inputs.map((t) => t.data.byteLength)).toEqual([4, 0]);
  });

  it('refuses contents mixed with raw_input_contents', () => {
    expectError(
      () =>
        decodeModelInferRequest({
          model_name: 'm',
          inputs: [
            { name: 'A', datatype: 'INT32', shape: [1], contents: { int_contents: [1] } },
            { name: 'B', datatype: 'INT32', shape: [1] },
          ],
          raw_input_contents: [new Uint8Array(4)],
        }),
      'invalid_argument',
      "contents field must not be specified when using raw_input_contents for 'A' for model 'm'",
    );
  });

  it('refuses unknown datatypes and duplicate names', () => {
    expectError(
      () => decodeModelInferRequest({ model_name: 'm', inputs: [{ name: 'A', datatype: 'FLOAT', shape: [1] }], raw_input_contents: [new Uint8Array(4)] }),
      'invalid_argument',
      "unexpected datatype 'FLOAT' for input tensor 'A' for model 'm'",
    );
    expectError(
      () =>
        decodeModelInferRequest({
          model_name: 'm',
          inputs: [
            { name: 'A', datatype: 'FP32', shape: [1] },
            { name: 'A', datatype: 'FP32', shape: [1] },
          ],
        }),
      'invalid_argument',
      "input 'A' already exists in request",
    );
    expectError(
      () => decodeModelInferRequest({ model_name: 'm', outputs: [{ name: 'O' }, { name: 'O' }] }),
      'invalid_argument',
      "output 'O' already exists in request",
    );
  });
});

describe('decodeModelInferRequest: typed contents', () => {
  const cases: [DataType, GrpcInferTensorContents, (d: Uint8Array) => unknown[], unknown[]][] = [
    ['BOOL', { bool_contents: [true, false] }, (d) => Array.from(d), [1, 0]],
    ['INT8', { int_contents: [-1, 127] }, (d) => vals('INT8', d), [-1, 127]],
    ['INT16', { int_contents: [-300, 300] }, (d) => vals('INT16', d), [-300, 300]],
    ['INT32', { int_contents: [-70000, 70000] }, (d) => vals('INT32', d), [-70000, 70000]],
    ['INT64', { int64_contents: ['-9007199254740993', '5'] }, (d) => vals('INT64', d), [-9007199254740993n, 5n]],
    ['UINT8', { uint_contents: [255, 1] }, (d) => Array.from(d), [255, 1]],
    ['UINT16', { uint_contents: [65535, 2] }, (d) => vals('UINT16', d), [65535, 2]],
    ['UINT32', { uint_contents: [4294967295, 3] }, (d) => vals('UINT32', d), [4294967295, 3]],
    ['UINT64', { uint64_contents: ['18446744073709551615', 4] }, (d) => vals('UINT64', d), [18446744073709551615n, 4n]],
    ['FP32', { fp32_contents: [1.5, -2.25] }, (d) => vals('FP32', d), [1.5, -2.25]],
    ['FP64', { fp64_contents: [0.1, 1e300] }, (d) => vals('FP64', d), [0.1, 1e300]],
    [
      'BYTES',
      { bytes_contents: [Buffer.from('ab'), new Uint8Array(0)] },
      (d) => deserializeBytesElements(d).map((e) => Buffer.from(e).toString()),
      ['ab', ''],
    ],
  ];
  for (const [datatype, contents, read, expected] of cases) {
    it(`converts ${datatype}`, () => {
      const input = decodeOne(datatype, contents);
      expect(input.datatype).toBe(datatype);
      expect(read(input.data)).toEqual(expected);
    });
  }

  it('serialises BYTES with 4-byte length prefixes', () => {
    const input = decodeOne('BYTES', { bytes_contents: [Buffer.from('xyz')] });
    expect(input.data).toEqual(serializeBytesElements([Buffer.from('xyz')]));
    expect(input.data.byteLength).toBe(7);
  });

  it('truncates int_contents to the narrow type like a C cast', () => {
    expect(vals('INT8', decodeOne('INT8', { int_contents: [257] }).data)).toEqual([1]);
    expect(Array.from(decodeOne('UINT8', { uint_contents: [256 + 9] }).data)).toEqual([9]);
  });

  it('yields zero bytes for an empty contents message', () => {
    expect(decodeOne('FP32', {}).data.byteLength).toBe(0);
  });

  it('refuses contents of the wrong type with Triton wording', () => {
    expectError(
      () => decodeOne('INT32', { int64_contents: ['1'] }),
      'invalid_argument',
      "unexpected explicit tensor data for input tensor 'X' for model 'm' of type 'INT64', expected datatype 'INT32'",
    );
    expectError(
      () => decodeOne('FP16', { int_contents: [1] }),
      'invalid_argument',
      "unexpected explicit tensor data for input tensor 'X' for model 'm' of type 'INT32', expected datatype 'FP16'",
    );
    expectError(
      () => decodeOne('BF16', { uint_contents: [1] }),
      'invalid_argument',
      "unexpected explicit tensor data for input tensor 'X' for model 'm' of type 'UINT32', expected datatype 'BF16'",
    );
  });

  it('refuses two filled content members', () => {
    expectError(
      () => decodeOne('INT32', { int_contents: [1], fp32_contents: [1] }),
      'invalid_argument',
      "unexpected explicit tensor data for input tensor 'X' for model 'm', binary data was already supplied.",
    );
  });
});

describe('decodeModelInferRequest: shared memory', () => {
  const shm = (region: string, size: number, offset?: number): Record<string, GrpcInferParameter> => ({
    shared_memory_region: { string_param: region },
    shared_memory_byte_size: { int64_param: String(size) },
    ...(offset === undefined ? {} : { shared_memory_offset: { int64_param: offset } }),
  });

  it('leaves shm inputs unresolved and skips them when consuming raw entries', () => {
    const { request } = decodeModelInferRequest({
      model_name: 'm',
      inputs: [
        { name: 'A', datatype: 'INT32', shape: [4], parameters: shm('in', 16, 8) },
        { name: 'B', datatype: 'INT32', shape: [1] },
      ],
      outputs: [{ name: 'O', parameters: shm('out', 64) }],
      raw_input_contents: [new Uint8Array(4)],
    });
    expect(request.inputs[0]?.data.byteLength).toBe(0);
    expect(request.inputs[0]?.parameters).toEqual({ shared_memory_region: 'in', shared_memory_byte_size: 16, shared_memory_offset: 8 });
    expect(request.inputs[1]?.data.byteLength).toBe(4);
    expect(request.outputs[0]?.parameters).toEqual({ shared_memory_region: 'out', shared_memory_byte_size: 64, shared_memory_offset: 0 });
  });

  it('validates shm parameters with Triton wording', () => {
    const req = (parameters: Record<string, GrpcInferParameter>, contents?: GrpcInferTensorContents) =>
      decodeModelInferRequest({ model_name: 'm', inputs: [{ name: 'A', datatype: 'INT32', shape: [1], parameters, contents: contents ?? null }] });
    expectError(() => req({ shared_memory_region: { int64_param: 1 } }), 'invalid_argument', "invalid value type for 'shared_memory_region' parameter for tensor 'A', expected string_param.");
    expectError(
      () => req({ shared_memory_offset: { int64_param: 1 } }),
      'invalid_argument',
      "'shared_memory_offset' can not be specified without 'shared_memory_region' parameter for tensor 'A'",
    );
    expectError(
      () => req({ shared_memory_region: { string_param: 'r' } }),
      'invalid_argument',
      "'shared_memory_byte_size' must be specified along with 'shared_memory_region' parameter for tensor 'A'",
    );
    expectError(
      () => req({ shared_memory_region: { string_param: 'r' }, shared_memory_byte_size: { string_param: '4' } }),
      'invalid_argument',
      "invalid value type for 'shared_memory_byte_size' parameter for tensor 'A', expected int64_param.",
    );
    expectError(
      () => req(shm('r', 4), { int_contents: [1] }),
      'invalid_argument',
      "unexpected 'content' provided when using shared memory for input tensor 'A' for model 'm'",
    );
  });
});

describe('decodeModelInferRequest: outputs', () => {
  const outputs = (parameters: Record<string, GrpcInferParameter>) => decodeModelInferRequest({ model_name: 'm', outputs: [{ name: 'O', parameters }] }).request.outputs;
  it('passes a classification count', () => {
    expect(outputs({ classification: { int64_param: '3' } })).toEqual([{ name: 'O', parameters: { classification: 3 } }]);
  });
  it('validates classification', () => {
    expectError(() => outputs({ classification: { bool_param: true } }), 'invalid_argument', "invalid value type for 'classification' parameter, expected int64_param");
    expectError(() => outputs({ classification: { int64_param: 0 } }), 'invalid_argument', "invalid value for 'classification' parameter, expected >= 0");
    expectError(
      () => outputs({ classification: { int64_param: 2 }, shared_memory_region: { string_param: 'r' }, shared_memory_byte_size: { int64_param: 4 } }),
      'invalid_argument',
      "output can't set both 'shared_memory_region' and 'classification'",
    );
  });
});

describe('request parameters', () => {
  const params = (parameters: Record<string, GrpcInferParameter>) => decodeModelInferRequest({ model_name: 'm', parameters });

  it('converts reserved and custom parameters', () => {
    const { request, enableEmptyFinalResponse } = params({
      sequence_id: { int64_param: '42', parameter_choice: 'int64_param' },
      sequence_start: { bool_param: true },
      sequence_end: { bool_param: false, parameter_choice: 'bool_param' },
      priority: { uint64_param: '18446744073709551615' },
      timeout: { int64_param: 100 },
      custom_s: { string_param: 'v' },
      custom_d: { double_param: 0.5 },
      triton_enable_empty_final_response: { bool_param: true },
    });
    expect(enableEmptyFinalResponse).toBe(true);
    expect(request.parameters).toEqual({
      sequence_id: 42,
      sequence_start: true,
      sequence_end: false,
      priority: 18446744073709551615n,
      timeout: 100,
      custom_s: 'v',
      custom_d: 0.5,
    });
  });

  it('keeps uint64-sized sequence ids exact and accepts string ids', () => {
    expect(params({ sequence_id: { int64_param: '9007199254740993' } }).request.parameters['sequence_id']).toBe(9007199254740993n);
    expect(params({ sequence_id: { string_param: 'abc' } }).request.parameters['sequence_id']).toBe('abc');
  });

  it('refuses wrong types and reserved keys with Triton wording', () => {
    expectError(() => params({ sequence_id: { bool_param: true } }), 'invalid_argument', "invalid value type for 'sequence_id' parameter, expected int64_param or string_param.");
    expectError(() => params({ sequence_start: { int64_param: 1 } }), 'invalid_argument', "invalid value type for 'sequence_start' parameter, expected bool_param.");
    expectError(() => params({ priority: { int64_param: -1 } }), 'invalid_argument', "invalid value for 'priority', expected value >= 0.");
    expectError(() => params({ priority: { string_param: '1' } }), 'invalid_argument', "invalid value type for 'priority' parameter, expected int64_param or uint64_param.");
    expectError(() => params({ timeout: { uint64_param: 1 } }), 'invalid_argument', "invalid value type for 'timeout' parameter, expected int64_param.");
    expectError(() => params({ mine: { uint64_param: 1 } }), 'invalid_argument', "invalid value type for 'mine' parameter, expected int64_param, bool_param, or string_param.");
    expectError(
      () => params({ triton_x: { bool_param: true } }),
      'invalid_argument',
      "parameter keys starting with 'triton_' are reserved for Triton usage. Only the following keys starting with 'triton_' are allowed: triton_enable_empty_final_response",
    );
    expectError(
      () => params({ triton_enable_empty_final_response: { string_param: 'true' } }),
      'invalid_argument',
      "invalid value type for 'triton_enable_empty_final_response' parameter, expected bool_param.",
    );
  });
});

describe('parseModelVersion', () => {
  it('parses like std::stol', () => {
    expect(parseModelVersion('')).toBeUndefined();
    expect(parseModelVersion(undefined)).toBeUndefined();
    expect(parseModelVersion('3')).toBe(3);
    expect(parseModelVersion(' +7')).toBe(7);
    expect(parseModelVersion('12abc')).toBe(12);
    expect(parseModelVersion('0')).toBe(0);
  });
  it('refuses a long version string without BigInt (found by grpc-codec.fuzz.test.ts)', () => {
    // BigInt's decimal parse is superlinear: 3·10^6 digits took a second.
    expect(parseModelVersion(` +000${'0'.repeat(100)}9223372036854775807x`)).toBe(9223372036854775807);
    expect(() => withBigIntLimit(() => parseModelVersion(`9${'0'.repeat(1_000_000)}`))).toThrow(/details: stol/);
  });

  it('reports bad version strings with Triton wording', () => {
    expectError(
      () => parseModelVersion('abc'),
      'invalid_argument',
      "failed to get model version from specified version string 'abc' (details: stol), version should be an integral value > 0",
    );
    expectError(
      () => parseModelVersion('99999999999999999999'),
      'invalid_argument',
      "failed to get model version from specified version string '99999999999999999999' (details: stol), version should be an integral value > 0",
    );
    expectError(() => parseModelVersion('-1'), 'invalid_argument', "invalid model version specified '-1' , version should be an integral value > 0");
  });
  it('is applied by decodeModelInferRequest', () => {
    expectError(
      () => decodeModelInferRequest({ model_name: 'm', model_version: 'x' }),
      'invalid_argument',
      "failed to get model version from specified version string 'x' (details: stol), version should be an integral value > 0",
    );
  });
});

describe('parameter values', () => {
  it('round-trips through encodeParameter/parameterValue', () => {
    for (const v of [true, false, 0, -5, 2 ** 40, 1.25, 'text', 2n ** 62n, 2n ** 64n - 1n]) {
      const p = encodeParameter(v);
      const wire = JSON.parse(JSON.stringify(p)) as GrpcInferParameter;
      expect(parameterValue(wire)).toEqual(v);
    }
  });
  it('types values as Triton does', () => {
    expect(encodeParameter(true)).toEqual({ bool_param: true });
    expect(encodeParameter(3)).toEqual({ int64_param: 3 });
    expect(encodeParameter(0.5)).toEqual({ double_param: 0.5 });
    expect(encodeParameter('s')).toEqual({ string_param: 's' });
    expect(encodeParameter(2n ** 63n)).toEqual({ uint64_param: '9223372036854775808' });
  });
});

describe('encodeModelInferResponse', () => {
  const response: InferResponse = {
    id: '',
    modelName: 'simple',
    modelVersion: '1',
    parameters: { sequence_id: 5, note: 'x' },
    outputs: [
      { name: 'OUTPUT0', datatype: 'INT32', shape: [1, 2], data: new Uint8Array(8).fill(1), parameters: { binary_data_size: 8 } },
      { name: 'OUTPUT1', datatype: 'INT32', shape: [1, 2], data: new Uint8Array(8).fill(2), parameters: {} },
      { name: 'EMPTY', datatype: 'FP32', shape: [0], data: new Uint8Array(0), parameters: {} },
    ],
  };

  it('aligns raw_output_contents with outputs and always sets id and version', () => {
    const msg = encodeModelInferResponse(response);
    expect(msg.id).toBe('');
    expect(msg.model_name).toBe('simple');
    expect(msg.model_version).toBe('1');
    expect(msg.parameters).toEqual({ sequence_id: { int64_param: 5 }, note: { string_param: 'x' } });
    expect(msg.outputs).toEqual([
      { name: 'OUTPUT0', datatype: 'INT32', shape: [1, 2], parameters: {} },
      { name: 'OUTPUT1', datatype: 'INT32', shape: [1, 2], parameters: {} },
      { name: 'EMPTY', datatype: 'FP32', shape: [0], parameters: {} },
    ]);
    expect(msg.raw_output_contents.map((b) => b.byteLength)).toEqual([8, 8, 0]);
    expect(msg.raw_output_contents[1]?.[0]).toBe(2);
  });

  it('replaces classification outputs by their top-k strings', () => {
    const scores: InferResponse = {
      id: 'c',
      modelName: 'm',
      modelVersion: '1',
      parameters: {},
      outputs: [{ name: 'P', datatype: 'FP32', shape: [1, 3], data: new Uint8Array(Float32Array.of(0.5, 2, 1).buffer), parameters: {} }],
    };
    const { request } = decodeModelInferRequest({ model_name: 'm', outputs: [{ name: 'P', parameters: { classification: { int64_param: 2 } } }] });
    const msg = encodeModelInferResponse(scores, { classification: classificationCounts(request), batching: true });
    expect(msg.outputs).toEqual([{ name: 'P', datatype: 'BYTES', shape: [1, 2], parameters: {} }]);
    const strings = deserializeBytesElements(msg.raw_output_contents[0] ?? new Uint8Array()).map((e) => Buffer.from(e).toString());
    expect(strings).toEqual(['2.000000:1', '1.000000:2']);
    const labelled = encodeModelInferResponse(scores, { classification: classificationCounts(request), batching: true, labels: new Map([['P', ['x', 'y']]]) });
    const withLabels = deserializeBytesElements(labelled.raw_output_contents[0] ?? new Uint8Array()).map((e) => Buffer.from(e).toString());
    expect(withLabels).toEqual(['2.000000:1:y', '1.000000:2']);
  });

  it('leaves an empty entry for shared-memory outputs', () => {
    const msg = encodeModelInferResponse(response, { omitData: new Set(['OUTPUT0']) });
    expect(msg.outputs).toHaveLength(3);
    expect(msg.raw_output_contents.map((b) => b.byteLength)).toEqual([0, 8, 0]);
  });
});

describe('stream responses', () => {
  it('marks every streamed response with triton_final_response', () => {
    const msg = streamInferResponse(encodeModelInferResponse({ id: 'a', modelName: 'm', modelVersion: '2', parameters: {}, outputs: [] }), false);
    expect(msg.error_message).toBe('');
    expect(msg.infer_response?.parameters).toEqual({ triton_final_response: { bool_param: false } });
  });
  it('echoes only the id for requests refused before issue', () => {
    expect(streamInferError('bad', { id: 'r1' })).toEqual({
      error_message: 'bad',
      infer_response: { model_name: '', model_version: '', id: 'r1', parameters: {}, outputs: [], raw_output_contents: [] },
    });
  });
  it('echoes model and final flag for engine failures and empty finals', () => {
    expect(streamInferError('boom', { id: 'r2', model: { name: 'm', version: '' }, final: true }).infer_response).toEqual({
      model_name: 'm',
      model_version: '',
      id: 'r2',
      parameters: { triton_final_response: { bool_param: true } },
      outputs: [],
      raw_output_contents: [],
    });
    expect(emptyFinalStreamResponse({ id: 'r3', model: { name: 'm', version: '1' } })).toEqual({
      error_message: '',
      infer_response: {
        model_name: 'm',
        model_version: '1',
        id: 'r3',
        parameters: { triton_final_response: { bool_param: true } },
        outputs: [],
        raw_output_contents: [],
      },
    });
  });
});

describe('decodeModelInferRequest: shapes pass the one size check', () => {
  it('refuses negative dimensions and sizes no tensor can have, as INVALID_ARGUMENT', () => {
    const raw = (datatype: string, shape: (string | number)[]): GrpcModelInferRequest => ({
      model_name: 'm',
      id: 'q',
      inputs: [{ name: 'X', datatype, shape }],
      raw_input_contents: [new Uint8Array(16)],
    });
    expectError(() => decodeModelInferRequest(raw('BYTES', [-2, -2])), 'invalid_argument', "[request id: q] All input dimensions should be specified for input 'X' for model 'm', got [-2,-2]");
    expectError(() => decodeModelInferRequest(raw('FP32', ['-1', '4'])), 'invalid_argument', "[request id: q] All input dimensions should be specified for input 'X' for model 'm', got [-1,4]");
    expect(() => decodeModelInferRequest(raw('FP32', ['16', '1152921504606846978']))).toThrow(/causes total element count to exceed maximum size of 9223372036854775807/);
    expect(() => decodeModelInferRequest(withContents('FP32', { fp32_contents: [1] }, ['1', '2000000000']))).toThrow(/byte size overflow for input 'X' for model 'm'/);
    expect(decodeModelInferRequest(raw('FP32', [2, 2])).request.inputs[0]?.shape).toEqual([2, 2]);
  });
});
