/**
 * Fuzz the gRPC door's decode path on bytes, as a client reaches it: the protobuf decode of a
 * `ModelInferRequest` through the protos as the server loads them (`loadGrpcProtos`), then the
 * version string and `decodeModelInferRequest`. Bytes protobuf refuses never reach our code
 * (grpc-js answers INTERNAL "Error deserializing request"); everything it accepts must decode or be
 * refused as invalid_argument.
 */
import { describe, expect, it } from 'vitest';
import { DATATYPES, decodeModelInferRequest, elementByteSize, encodeModelInferResponse, parseModelVersion, type DataType } from '@switchyard/kserve';
import { fc, fuzz, parsesOrRefuses, rawTensor } from '@switchyard/testing/fuzz';
import { loadGrpcProtos } from './protos.js';

const ELEMENT_SIZES = Object.fromEntries(DATATYPES.map((d) => [d, elementByteSize(d)]));
const modelInfer = loadGrpcProtos().inferenceService['ModelInfer']!;
const serialize = (msg: object): Buffer => modelInfer.requestSerialize(msg);
const serializeResponse = (msg: object): Buffer => modelInfer.responseSerialize(msg);

/** What the server does with the bytes of one ModelInfer call, up to the engine. */
function decodeBytes(bytes: Uint8Array): void {
  let msg: Parameters<typeof decodeModelInferRequest>[0];
  try {
    msg = modelInfer.requestDeserialize(Buffer.from(bytes));
  } catch {
    return; // grpc-js's business: the call ends with INTERNAL before any handler runs
  }
  parsesOrRefuses(() => {
    parseModelVersion(msg.model_version);
    return decodeModelInferRequest(msg);
  });
}

const param = fc.oneof(
  fc.boolean().map((v) => ({ bool_param: v })),
  fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n }).map((v) => ({ int64_param: v.toString() })),
  fc.string({ maxLength: 6 }).map((v) => ({ string_param: v })),
  fc.double().map((v) => ({ double_param: v })),
  fc.bigInt({ min: 0n, max: 2n ** 64n - 1n }).map((v) => ({ uint64_param: v.toString() })),
);
const params = fc.dictionary(
  fc.constantFrom('sequence_id', 'sequence_start', 'priority', 'timeout', 'shared_memory_region', 'shared_memory_byte_size', 'classification', 'custom'),
  param,
  { maxKeys: 3 },
);

/** Valid-looking requests: raw or typed inputs, parameters, outputs. */
const validMessage = fc
  .tuple(fc.array(rawTensor(ELEMENT_SIZES), { maxLength: 3 }), params, fc.array(fc.integer({ min: -3, max: 3 }), { maxLength: 4 }), fc.boolean())
  .map(([tensors, parameters, ints, typed]) => ({
    model_name: 'm',
    model_version: '1',
    id: 'r',
    parameters,
    inputs: [
      ...tensors.map((t, i) => ({ name: `T${i}`, datatype: t.datatype, shape: t.shape, parameters })),
      ...(typed ? [{ name: 'C', datatype: 'INT32', shape: [ints.length], contents: { int_contents: ints } }] : []),
    ],
    outputs: [{ name: 'O', parameters }],
    raw_input_contents: typed ? [] : tensors.map((t) => t.data),
  }));

/** Byte-level mutations of a serialized message: flips, cuts, insertions (varints, lengths, tags). */
const mutatedBytes = fc
  .tuple(validMessage.map(serialize), fc.array(fc.tuple(fc.nat(), fc.integer({ min: 0, max: 255 }), fc.constantFrom('flip', 'cut', 'insert', 'huge-length')), { minLength: 1, maxLength: 4 }))
  .map(([bytes, edits]) => {
    let b = Buffer.from(bytes);
    for (const [at, value, kind] of edits) {
      const i = b.length === 0 ? 0 : at % b.length;
      if (kind === 'flip') b[i] = (b[i] ?? 0) ^ value;
      else if (kind === 'cut') b = b.subarray(0, i);
      else if (kind === 'insert') b = Buffer.concat([b.subarray(0, i), Buffer.from([value]), b.subarray(i)]);
      else b = Buffer.concat([b.subarray(0, i), Buffer.from([value | 0x80, 0xff, 0xff, 0xff, 0x0f]), b.subarray(i)]);
    }
    return new Uint8Array(b);
  });

describe('ModelInfer request bytes (fuzz)', () => {
  it('decodes or refuses any bytes protobuf accepts', () => {
    fuzz(fc.uint8Array({ maxLength: 128 }), decodeBytes);
  });

  it('decodes or refuses serialized requests with bytes flipped, cut or inserted', () => {
    fuzz(mutatedBytes, decodeBytes);
  });

  it('decodes or refuses every valid-looking request', () => {
    fuzz(validMessage, (msg) => decodeBytes(serialize(msg)));
  });

  it('round-trips raw tensors through protobuf bit for bit (NaN payloads, -0), requests and responses', () => {
    fuzz(fc.array(rawTensor(ELEMENT_SIZES), { minLength: 1, maxLength: 4 }), (tensors) => {
      const bytes = serialize({
        model_name: 'm',
        inputs: tensors.map((t, i) => ({ name: `T${i}`, datatype: t.datatype, shape: t.shape })),
        raw_input_contents: tensors.map((t) => t.data),
      });
      const request = decodeModelInferRequest(modelInfer.requestDeserialize(bytes)).request;
      request.inputs.forEach((t, i) => {
        expect([t.datatype, t.shape]).toEqual([tensors[i]!.datatype, tensors[i]!.shape]);
        expect(Buffer.from(t.data).equals(Buffer.from(tensors[i]!.data))).toBe(true);
      });
      const response = encodeModelInferResponse({ id: '', modelName: 'm', modelVersion: '1', parameters: {}, outputs: request.inputs });
      const back = modelInfer.responseDeserialize(serializeResponse(response)) as { outputs: { datatype: DataType }[]; raw_output_contents: Buffer[] };
      back.raw_output_contents.forEach((b, i) => expect(b.equals(Buffer.from(tensors[i]!.data))).toBe(true));
    });
  });
});
