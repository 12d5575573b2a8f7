/**
 * Fuzz properties of the gRPC request decoder (grpc-codec, grpc-parameters, grpc-contents) on
 * `ModelInferRequest` objects shaped as @grpc/proto-loader delivers them (64-bit integers as
 * decimal strings, bytes as Buffers, `parameter_choice` set): any such message decodes or is
 * refused as invalid_argument. The same decoder behind the real protobuf decode of arbitrary
 * bytes is fuzzed in @switchyard/server (`grpc/model-infer-decode.fuzz.test.ts`).
 */
import { describe, expect, it } from 'vitest';
import { anyText, fc, fuzz, fuzzKey, objectWith, parsesOrRefuses, rawTensor, withBigIntLimit } from '@switchyard/testing/fuzz';
import { decodeModelInferRequest, encodeModelInferResponse } from './grpc-codec.js';
import type { GrpcInferInputTensor, GrpcInferParameter, GrpcInferTensorContents, GrpcModelInferRequest } from './grpc-messages.js';
import { parseModelVersion } from './grpc-parameters.js';
import { DATATYPES, type DataType, type InferResponse } from './protocols.js';
import { elementByteSize } from './tensor.js';

const ELEMENT_SIZES = Object.fromEntries(DATATYPES.map((d) => [d, elementByteSize(d)]));
const INT64 = fc.oneof(fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n }).map(String), fc.constantFrom('0', '-1', '1', '2000000000'));
const UINT64 = fc.oneof(fc.bigInt({ min: 0n, max: 2n ** 64n - 1n }).map(String), fc.constantFrom('0', '18446744073709551615'));

const parameter: fc.Arbitrary<GrpcInferParameter> = fc.oneof(
  fc.boolean().map((v): GrpcInferParameter => ({ parameter_choice: 'bool_param', bool_param: v })),
  INT64.map((v): GrpcInferParameter => ({ parameter_choice: 'int64_param', int64_param: v })),
  fc.string({ maxLength: 8 }).map((v): GrpcInferParameter => ({ parameter_choice: 'string_param', string_param: v })),
  fc.double().map((v): GrpcInferParameter => ({ parameter_choice: 'double_param', double_param: v })),
  UINT64.map((v): GrpcInferParameter => ({ parameter_choice: 'uint64_param', uint64_param: v })),
  fc.constant<GrpcInferParameter>({}),
);
const RESERVED = ['sequence_id', 'sequence_start', 'sequence_end', 'priority', 'timeout'];
const parameterKey = fc.oneof(
  fc.constantFrom(
    ...RESERVED,
    'triton_enable_empty_final_response',
    'triton_other',
    'shared_memory_region',
    'shared_memory_offset',
    'shared_memory_byte_size',
    'classification',
  ),
  fuzzKey(),
);
const parameters = fc.dictionary(parameterKey, parameter, { maxKeys: 4 });

const contents: fc.Arbitrary<GrpcInferTensorContents> = fc.record(
  {
    bool_contents: fc.array(fc.boolean(), { maxLength: 4 }),
    int_contents: fc.array(fc.integer({ min: -(2 ** 31), max: 2 ** 31 - 1 }), { maxLength: 4 }),
    int64_contents: fc.array(INT64, { maxLength: 4 }),
    uint_contents: fc.array(fc.nat({ max: 2 ** 32 - 1 }), { maxLength: 4 }),
    uint64_contents: fc.array(UINT64, { maxLength: 4 }),
    fp32_contents: fc.array(fc.float(), { maxLength: 4 }),
    fp64_contents: fc.array(fc.double(), { maxLength: 4 }),
    bytes_contents: fc.array(fc.uint8Array({ maxLength: 6 }).map((b) => Buffer.from(b)), { maxLength: 4 }),
  },
  { requiredKeys: [] },
);

const inputTensor: fc.Arbitrary<GrpcInferInputTensor> = fc.record({
  name: fc.oneof(fc.constantFrom('A', 'B'), fuzzKey()),
  datatype: fc.oneof(fc.constantFrom(...DATATYPES), fc.constantFrom('', 'TYPE_FP32', 'fp32')),
  shape: fc.array(INT64, { maxLength: 4 }),
  parameters,
  contents: fc.option(contents, { nil: null }),
});

const modelVersion = fc.oneof(
  fc.constantFrom('', '1', ' 7x', '-1', '+3', '9223372036854775808', '0x10', '99999999999999999999999'),
  fc.string({ maxLength: 6 }),
);

const request: fc.Arbitrary<GrpcModelInferRequest> = fc.record({
  model_name: fc.string({ maxLength: 4 }),
  model_version: modelVersion,
  id: fc.string({ maxLength: 4 }),
  parameters,
  inputs: fc.array(inputTensor, { maxLength: 3 }),
  outputs: fc.array(fc.record({ name: fc.oneof(fc.constantFrom('O', 'P'), fuzzKey()), parameters }), { maxLength: 2 }),
  raw_input_contents: fc.array(fc.uint8Array({ maxLength: 16 }).map((b) => Buffer.from(b)), { maxLength: 3 }),
});

describe('decodeModelInferRequest (fuzz)', () => {
  it('decodes or refuses any message as invalid_argument', () => {
    fuzz(request, (msg) => {
      parsesOrRefuses(() => decodeModelInferRequest(msg));
    });
  });

  it('keeps every custom parameter name as a parameter (__proto__ included)', () => {
    const custom = fc.uniqueArray(fc.tuple(fuzzKey().filter((k) => !k.startsWith('triton_') && !RESERVED.includes(k)), fc.string({ maxLength: 3 })), { selector: ([k]) => k, maxLength: 4 });
    fuzz(custom, (entries) => {
      const params = objectWith(entries.map(([k, v]) => [k, { parameter_choice: 'string_param', string_param: v }] as const)) as unknown as Record<string, GrpcInferParameter>;
      const decoded = decodeModelInferRequest({ model_name: 'm', parameters: params }).request.parameters;
      expect(Object.entries(decoded).sort()).toEqual([...entries].sort());
    });
  });

  it('parses any version string to a non-negative integer or refuses it', () => {
    fuzz(fc.oneof(modelVersion, anyText(30)), (version) => {
      const r = parsesOrRefuses(() => parseModelVersion(version));
      if (r.ok && r.value !== undefined) expect(Number.isInteger(r.value) && r.value >= 0).toBe(true);
    });
  });

  it('parses a version string of any length without a superlinear BigInt parse', () => {
    // BigInt's decimal parse is superlinear: a 3·10^6-digit version took a second on the event loop.
    fuzz(fc.tuple(fc.integer({ min: 1, max: 200_000 }), fc.constantFrom('', '-', '+', ' 000')), ([digits, prefix]) => {
      withBigIntLimit(() => parsesOrRefuses(() => parseModelVersion(`${prefix}9${'0'.repeat(digits - 1)}`)));
    }, { scale: 0.1 });
  });

  it('turns typed contents of the matching member into element count × element size bytes', () => {
    const typed = fc.constantFrom<[DataType, keyof GrpcInferTensorContents]>(
      ['BOOL', 'bool_contents'],
      ['INT8', 'int_contents'],
      ['INT16', 'int_contents'],
      ['INT32', 'int_contents'],
      ['INT64', 'int64_contents'],
      ['UINT8', 'uint_contents'],
      ['UINT16', 'uint_contents'],
      ['UINT32', 'uint_contents'],
      ['UINT64', 'uint64_contents'],
      ['FP32', 'fp32_contents'],
      ['FP64', 'fp64_contents'],
    );
    fuzz(fc.tuple(typed, contents), ([[datatype, member], c]) => {
      const values = c[member] ?? [];
      const only: GrpcInferTensorContents = { [member]: values };
      const msg: GrpcModelInferRequest = { model_name: 'm', inputs: [{ name: 'X', datatype, shape: [String(values.length)], contents: only }] };
      const data = decodeModelInferRequest(msg).request.inputs[0]?.data;
      expect(data?.byteLength).toBe(values.length * elementByteSize(datatype));
    });
  });

  it('passes raw input bytes through bit for bit, and the response encoder does the same', () => {
    fuzz(fc.array(rawTensor(ELEMENT_SIZES), { minLength: 1, maxLength: 4 }), (tensors) => {
      const msg: GrpcModelInferRequest = {
        model_name: 'm',
        inputs: tensors.map((t, i) => ({ name: `T${i}`, datatype: t.datatype, shape: t.shape.map(String), parameters: {}, contents: null })),
        // grpc-js hands over unaligned Buffer slices of one frame
        raw_input_contents: tensors.map((t) => Buffer.concat([Buffer.from([0]), t.data]).subarray(1)),
      };
      const decoded = decodeModelInferRequest(msg).request;
      decoded.inputs.forEach((t, i) => {
        expect(t.shape).toEqual(tensors[i]!.shape);
        expect(Buffer.from(t.data).equals(Buffer.from(tensors[i]!.data))).toBe(true);
      });
      const response: InferResponse = { id: '', modelName: 'm', modelVersion: '1', parameters: {}, outputs: decoded.inputs };
      const encoded = encodeModelInferResponse(response);
      encoded.raw_output_contents.forEach((b, i) => expect(Buffer.from(b).equals(Buffer.from(tensors[i]!.data))).toBe(true));
    });
  });
});
