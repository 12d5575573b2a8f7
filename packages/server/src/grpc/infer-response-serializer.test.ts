/**
 * The infer response serializers write exactly the bytes of the protos' own serializer, for
 * every response shape the server produces and for the shapes they hand back to it.
 */
import { describe, expect, it } from 'vitest';
import { encodeModelInferResponseBytes, encodeModelStreamInferResponseBytes, type GrpcModelInferResponse, type GrpcModelStreamInferResponse } from '@switchyard/kserve';
import { fc, fuzz } from '@switchyard/testing/fuzz';
import { loadGrpcProtos } from './protos.js';
import { modelInferResponseSerializer, modelStreamInferResponseSerializer, withFastInferResponseEncoding } from './infer-response-serializer.js';

const service = loadGrpcProtos().inferenceService;
const protosInfer = (r: object): Buffer => Buffer.from(service['ModelInfer']!.responseSerialize(r));
const protosStream = (r: object): Buffer => Buffer.from(service['ModelStreamInfer']!.responseSerialize(r));
const fastInfer = modelInferResponseSerializer(service);
const fastStream = modelStreamInferResponseSerializer(service);

const text = fc.oneof(fc.string({ maxLength: 8 }), fc.string({ unit: 'grapheme', maxLength: 4 }), fc.string({ unit: 'binary', maxLength: 4 }), fc.constant(''), fc.string({ minLength: 130, maxLength: 300 }));
const int64Text = fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n }).map(String);
const param = fc.oneof(
  fc.boolean().map((v) => ({ bool_param: v })),
  int64Text.map((v) => ({ int64_param: v })),
  fc.maxSafeInteger().map((v) => ({ int64_param: v })),
  text.map((v) => ({ string_param: v })),
  fc.double().map((v) => ({ double_param: v })),
  fc.bigInt({ min: 0n, max: 2n ** 64n - 1n }).map((v) => ({ uint64_param: v.toString() })),
  fc.maxSafeNat().map((v) => ({ uint64_param: v })),
);
const params = fc.dictionary(fc.oneof(text, fc.constantFrom('triton_final_response', '__proto__', '7', 'sequence_id')), param, { maxKeys: 4 });
const bytes = fc.oneof(fc.uint8Array({ maxLength: 40 }), fc.integer({ min: 120, max: 20_000 }).map((n) => new Uint8Array(n).fill(7)));
const shape = fc.array(fc.oneof(fc.nat({ max: 300 }), fc.maxSafeNat(), fc.integer({ min: -(2 ** 40), max: -1 })), { maxLength: 5 });

const response: fc.Arbitrary<GrpcModelInferResponse> = fc
  .record({
    model_name: text,
    model_version: text,
    id: text,
    parameters: params,
    outputs: fc.array(fc.record({ name: text, datatype: text, shape, parameters: params }), { maxLength: 4 }),
    raw: fc.array(bytes, { maxLength: 4 }),
  })
  .map(({ raw, ...r }) => ({ ...r, raw_output_contents: raw }));

const streamResponse: fc.Arbitrary<GrpcModelStreamInferResponse> = fc.record({ error_message: text, infer_response: fc.option(response, { nil: null }) });

describe('infer response serializers', () => {
  it('write the bytes of the protos serializer for any ModelInferResponse', () => {
    fuzz(response, (r) => {
      expect(fastInfer(r).equals(protosInfer(r))).toBe(true);
    });
  });

  it('write the bytes of the protos serializer for any ModelStreamInferResponse', () => {
    fuzz(streamResponse, (r) => {
      expect(fastStream(r).equals(protosStream(r))).toBe(true);
    });
  });

  it('encode a typical response without falling back, and it decodes to what was sent', () => {
    const raw = new Uint8Array(new Float32Array([1.5, -0, NaN, 3]).buffer);
    const r: GrpcModelInferResponse = {
      model_name: 'mlp',
      model_version: '1',
      id: 'req-7',
      parameters: { triton_final_response: { bool_param: true }, n: { int64_param: '-9223372036854775808' }, u: { uint64_param: '18446744073709551615' }, d: { double_param: 0.25 } },
      outputs: [{ name: 'OUTPUT0', datatype: 'FP32', shape: [1, 4], parameters: {} }],
      raw_output_contents: [raw],
    };
    const encoded = encodeModelInferResponseBytes(r);
    expect(encoded?.equals(protosInfer(r))).toBe(true);
    const back = service['ModelInfer']!.responseDeserialize(encoded!) as GrpcModelInferResponse;
    expect(back.parameters['u']).toEqual({ uint64_param: '18446744073709551615', parameter_choice: 'uint64_param' });
    expect(back.parameters['n']).toEqual({ int64_param: '-9223372036854775808', parameter_choice: 'int64_param' });
    expect(back.outputs[0]!.shape).toEqual(['1', '4']);
    expect(Buffer.from(back.raw_output_contents[0]!).equals(Buffer.from(raw))).toBe(true);
    const stream = { error_message: '', infer_response: r };
    expect(encodeModelStreamInferResponseBytes(stream)?.equals(protosStream(stream))).toBe(true);
  });

  it('leave shapes they do not handle to the protos serializer, which then writes the same bytes', () => {
    const base: GrpcModelInferResponse = { model_name: 'm', model_version: '1', id: '', parameters: {}, outputs: [], raw_output_contents: [] };
    const unhandled = [
      { ...base, id: 'lone \ud800 surrogate' },
      { ...base, parameters: { p: { string_param: '\udc00' } } },
      { ...base, parameters: { p: { int64_param: 2 ** 60 } } },
      { ...base, parameters: { p: { int64_param: 1.5 } } },
      { ...base, parameters: { p: { uint64_param: -1 } } },
      { ...base, parameters: { p: { double_param: '2' } } },
      { ...base, outputs: [{ name: 'o', datatype: 'INT32', shape: [2 ** 53], parameters: {} }] },
      { ...base, outputs: [{ name: 'o', datatype: 'INT32', shape: [2], parameters: {}, contents: { int_contents: [1, 2] } }] },
      { ...base, raw_output_contents: ['AAEC'] },
      { ...base, model_name: 7 },
    ] as unknown as GrpcModelInferResponse[];
    for (const r of unhandled) {
      expect(encodeModelInferResponseBytes(r)).toBeUndefined();
      expect(fastInfer(r).equals(protosInfer(r))).toBe(true);
      expect(encodeModelStreamInferResponseBytes({ error_message: 'e', infer_response: r })).toBeUndefined();
    }
    // what the protos serializer refuses, the fast one refuses the same way
    const bad = { ...base, parameters: { p: 3 } } as unknown as GrpcModelInferResponse;
    expect(() => protosInfer(bad)).toThrow(/object expected/);
    expect(() => fastInfer(bad)).toThrow(/object expected/);
  });

  it('replace only the two infer response serializers of the service', () => {
    const fast = withFastInferResponseEncoding(service);
    expect(fast['ModelInfer']!.responseSerialize).not.toBe(service['ModelInfer']!.responseSerialize);
    expect(fast['ModelStreamInfer']!.responseSerialize).not.toBe(service['ModelStreamInfer']!.responseSerialize);
    expect(fast['ModelInfer']!.requestDeserialize).toBe(service['ModelInfer']!.requestDeserialize);
    expect(fast['ModelMetadata']).toBe(service['ModelMetadata']);
  });
});
