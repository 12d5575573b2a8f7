/**
 * kserve's `decodeModelInferRequestBytes` returns exactly the protos' deserializer's object for every
 * message it handles, and hands back (`undefined`) every message it does not, which the infer
 * methods' deserializer then reads with the protos' own.
 */
import { isDeepStrictEqual } from 'node:util';
import { describe, expect, it } from 'vitest';
import type { MethodDefinition } from '@grpc/grpc-js';
import { decodeModelInferRequestBytes } from '@switchyard/kserve';
import { fc, fuzz } from '@switchyard/testing/fuzz';
import { withOffLoopInferDecoding } from './infer-message.js';
import { loadGrpcProtos } from './protos.js';

const service = loadGrpcProtos().inferenceService;
const method = service['ModelInfer'] as MethodDefinition<object, unknown>;
const encode = (msg: object): Buffer => method.requestSerialize(msg);
const protos = (bytes: Buffer): unknown => method.requestDeserialize(bytes);

/**
 * Same prototypes, own keys and values (Buffers by content). node's strict comparison: vitest's
 * `toStrictEqual` compares `constructor` properties, which a map key `constructor` makes differ.
 */
function expectSame(fast: unknown, reference: unknown): void {
  if (isDeepStrictEqual(fast, reference)) return;
  expect(fast).toStrictEqual(reference); // shows the difference
  expect.fail('not strictly deep-equal');
}

const text = fc.oneof(fc.string({ maxLength: 8 }), fc.string({ unit: 'grapheme', maxLength: 4 }), fc.constant(''), fc.string({ minLength: 130, maxLength: 300 }));
const int64Text = fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n }).map(String);
const param = fc.oneof(
  fc.boolean().map((v) => ({ bool_param: v })),
  int64Text.map((v) => ({ int64_param: v })),
  fc.integer({ min: -300, max: 300 }).map((v) => ({ int64_param: v })),
  text.map((v) => ({ string_param: v })),
  fc.double().map((v) => ({ double_param: v })),
  fc.bigInt({ min: 0n, max: 2n ** 64n - 1n }).map((v) => ({ uint64_param: v.toString() })),
  fc.constant({}),
);
const params = fc.dictionary(fc.oneof(text, fc.constantFrom('shared_memory_region', 'classification', '7', 'sequence_id', 'constructor')), param, { maxKeys: 4 });
const shape = fc.array(fc.oneof(fc.nat({ max: 300 }), int64Text), { maxLength: 5 });
const contents = fc.oneof(fc.record({ fp32_contents: fc.array(fc.float(), { maxLength: 3 }) }), fc.record({ bytes_contents: fc.array(fc.uint8Array({ maxLength: 4 }), { maxLength: 3 }) }));
const input = fc.record({ name: text, datatype: fc.oneof(text, fc.constantFrom('FP32', 'BYTES', 'INT64')), shape, parameters: params }, { requiredKeys: ['name', 'datatype'] });
const request = fc.record(
  {
    model_name: text,
    model_version: fc.oneof(text, fc.constantFrom('', '1', '-1')),
    id: text,
    parameters: params,
    inputs: fc.array(input, { maxLength: 4 }),
    outputs: fc.array(fc.record({ name: text, parameters: params }, { requiredKeys: ['name'] }), { maxLength: 3 }),
    raw_input_contents: fc.array(fc.oneof(fc.uint8Array({ maxLength: 40 }), fc.constant(new Uint8Array(0))), { maxLength: 4 }),
  },
  { requiredKeys: ['model_name'] },
);

/** A random change of the bytes: one byte flipped, the tail cut, or bytes inserted. */
const mutation = fc.oneof(
  fc.record({ kind: fc.constant('flip' as const), at: fc.nat(), value: fc.integer({ min: 0, max: 255 }) }),
  fc.record({ kind: fc.constant('cut' as const), at: fc.nat() }),
  fc.record({ kind: fc.constant('insert' as const), at: fc.nat(), bytes: fc.uint8Array({ minLength: 1, maxLength: 6 }) }),
);

interface Mutation {
  kind: 'flip' | 'cut' | 'insert';
  at: number;
  value?: number;
  bytes?: Uint8Array;
}

function mutate(bytes: Buffer, m: Mutation): Buffer {
  if (bytes.length === 0) return bytes;
  const at = m.at % bytes.length;
  if (m.kind === 'flip') {
    const out = Buffer.from(bytes);
    out[at] = m.value!;
    return out;
  }
  if (m.kind === 'cut') return bytes.subarray(0, at);
  return Buffer.concat([bytes.subarray(0, at), m.bytes!, bytes.subarray(at)]);
}

/** What the protos' deserializer does with `bytes`: its object, or that it threw. */
function protosOutcome(bytes: Buffer): { value: unknown } | 'threw' {
  try {
    return { value: protos(bytes) };
  } catch {
    return 'threw';
  }
}

describe('decodeModelInferRequestBytes', () => {
  it('returns the protos deserializer object for any request without typed contents', () => {
    fuzz(request, (r) => {
      const bytes = encode(r);
      const fast = decodeModelInferRequestBytes(bytes);
      expect(fast).toBeDefined();
      expectSame(fast, protos(bytes));
    });
  });

  it('leaves requests with typed contents to the protos deserializer', () => {
    fuzz(fc.tuple(request, input, contents), ([r, i, c]) => {
      const bytes = encode({ ...r, inputs: [...(r.inputs ?? []), { ...i, contents: c }] });
      expect(decodeModelInferRequestBytes(bytes)).toBeUndefined();
    });
  });

  it('on changed bytes, returns the protos object or nothing, never a different object, and nothing where protobufjs throws', () => {
    fuzz(fc.tuple(request, fc.array(mutation, { minLength: 1, maxLength: 3 })), ([r, ms]) => {
      let bytes = encode(r);
      for (const m of ms) bytes = mutate(bytes, m);
      const fast = decodeModelInferRequestBytes(bytes);
      const reference = protosOutcome(bytes);
      if (reference === 'threw') expect(fast).toBeUndefined();
      else if (fast !== undefined) expectSame(fast, reference.value);
    });
  });

  it('reads what other encoders may write: unpacked shapes, long varints, repeated fields, 64-bit extremes', () => {
    // model_name "m" twice (the last wins); input 'a' with shape [3, -1] unpacked, 3 as a 3-byte varint;
    // parameter p: int64 -2^63 (10 bytes); raw entry of 0 bytes
    const int64Min = [0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01];
    const minusOne = [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01];
    const shapeAndName = [0x0a, 0x01, 0x61, 0x18, 0x83, 0x80, 0x00, 0x18, ...minusOne];
    const paramValue = [0x10, ...int64Min];
    const entry = [0x0a, 0x01, 0x70, 0x12, paramValue.length, ...paramValue];
    const bytes = Buffer.from([0x0a, 0x01, 0x6e, 0x0a, 0x01, 0x6d, 0x2a, shapeAndName.length, ...shapeAndName, 0x22, entry.length, ...entry, 0x3a, 0x00]);
    const fast = decodeModelInferRequestBytes(bytes);
    expectSame(fast, protos(bytes));
    expect(fast).toMatchObject({ model_name: 'm', inputs: [{ name: 'a', shape: ['3', '-1'] }], parameters: { p: { int64_param: '-9223372036854775808', parameter_choice: 'int64_param' } } });
  });

  it('leaves unusual encodings to the protos deserializer', () => {
    const unhandled = [
      Buffer.from([0x48, 0x01]), // unknown field 9
      Buffer.from([0x08, 0x01]), // model_name with a varint wire type
      Buffer.from([0x0a, 0x05, 0x61]), // a length past the end
      Buffer.from([0x22, 0x03, 0x0a, 0x01, 0x6b]), // a map entry without a value
      Buffer.from([0x22, 0x09, 0x0a, 0x01, 0x6b, 0x12, 0x04, 0x08, 0x01, 0x10, 0x02]), // two members of one oneof
      Buffer.from([0x22, 0x0e, 0x0a, 0x09, ...Buffer.from('__proto__'), 0x12, 0x01, 0x08]), // a __proto__ key (value cut short too)
      Buffer.from([0x22, 0x07, 0x0a, 0x01, 0x6b, 0x12, 0x02, 0x08, 0x02]), // a bool written as 2
    ];
    for (const bytes of unhandled) {
      expect(decodeModelInferRequestBytes(bytes)).toBeUndefined();
      // the infer methods' deserializer gives the protos' answer for these
      const deserialize = (withOffLoopInferDecoding(service)['ModelInfer'] as MethodDefinition<object, unknown>).requestDeserialize;
      const reference = protosOutcome(bytes);
      if (reference === 'threw') expect(() => deserialize(bytes)).toThrow();
      else expectSame(deserialize(bytes), reference.value);
    }
  });
});
