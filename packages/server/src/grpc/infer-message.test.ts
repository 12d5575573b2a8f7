import { afterAll, describe, expect, it } from 'vitest';
import { status, type MethodDefinition } from '@grpc/grpc-js';
import { SwitchyardError } from '@switchyard/common';
import type { DecodedGrpcInferRequest, GrpcModelInferRequest } from '@switchyard/kserve';
import { CodecThread, OFF_LOOP_GRPC_BYTES } from '../codec-thread.js';
import { EncodedInferMessage, inlineInferMessage, readInferMessage, withOffLoopInferDecoding, type InferMessage } from './infer-message.js';
import { GrpcStatusError } from './grpc-status.js';
import { loadGrpcProtos } from './protos.js';

const thread = new CodecThread();
afterAll(() => thread.close());

const method = loadGrpcProtos().inferenceService['ModelInfer'] as MethodDefinition<object, unknown>;
const encode = (msg: object): Buffer => method.requestSerialize(msg);

/** Tensor bytes as plain arrays: the thread's are Uint8Arrays, the loop's may be Buffers. */
function comparable(d: DecodedGrpcInferRequest): unknown {
  return { ...d, request: { ...d.request, inputs: d.request.inputs.map((t) => ({ ...t, data: Array.from(t.data) })) } };
}

/** What a handler gets from `m`: the header and the decoding, or the decoding's error. */
function outcome(m: InferMessage): unknown {
  const header = { id: m.header.id, model_name: m.header.model_name, model_version: m.header.model_version };
  try {
    return { header, decoded: comparable(m.decode()) };
  } catch (e) {
    expect(e).toBeInstanceOf(SwitchyardError);
    return { header, error: { code: (e as SwitchyardError).code, message: (e as Error).message } };
  }
}

/** The message decoded inline (grpc-js's deserializer + kserve) and on the thread. */
async function bothWays(msg: object): Promise<[unknown, unknown]> {
  const bytes = encode(msg);
  const inline = outcome(inlineInferMessage(method.requestDeserialize(bytes) as GrpcModelInferRequest));
  const offLoop = outcome(await readInferMessage(thread, new EncodedInferMessage(bytes)));
  return [inline, offLoop];
}

const strings = Array.from({ length: 2000 }, (_, i) => Buffer.from(i % 7 === 0 ? `é${i}` : String(i)));

describe('ModelInfer messages decoded on the codec thread', () => {
  it('give the very request the inline path gives: typed contents of every kind, raw inputs, parameters, outputs', async () => {
    const typed = {
      model_name: 'm',
      model_version: '3',
      id: 'req-1',
      parameters: { sequence_id: { int64_param: '9007199254740993' }, priority: { uint64_param: '2' }, custom: { string_param: 'x' }, flag: { bool_param: true } },
      inputs: [
        { name: 'S', datatype: 'BYTES', shape: [1, strings.length], contents: { bytes_contents: strings } },
        { name: 'I', datatype: 'INT64', shape: [3], contents: { int64_contents: ['-9223372036854775808', '1', '9223372036854775807'] } },
        { name: 'F', datatype: 'FP32', shape: [2], contents: { fp32_contents: [1.5, -0.25] } },
        { name: 'B', datatype: 'BOOL', shape: [2], contents: { bool_contents: [true, false] } },
        { name: 'E', datatype: 'INT32', shape: [0], contents: {} },
        { name: 'SHM', datatype: 'FP32', shape: [4], parameters: { shared_memory_region: { string_param: 'r' }, shared_memory_byte_size: { int64_param: '16' } } },
      ],
      outputs: [{ name: 'O', parameters: { classification: { int64_param: '2' } } }],
    };
    const raw = {
      model_name: 'm',
      inputs: [
        { name: 'A', datatype: 'UINT8', shape: [5] },
        { name: 'C', datatype: 'FP64', shape: [1] },
      ],
      raw_input_contents: [Buffer.from([1, 2, 3, 4, 5]), Buffer.alloc(8, 7)],
    };
    for (const msg of [typed, raw, { model_name: 'empty' }]) {
      const [inline, offLoop] = await bothWays(msg);
      expect(inline).toHaveProperty('decoded');
      expect(offLoop).toEqual(inline);
    }
  });

  it('fail with the same codes and messages, the header still read', async () => {
    const malformed: object[] = [
      { model_name: 'm', inputs: [{ name: 'X', datatype: 'INT32', shape: [1], contents: { int_contents: [1] } }, { name: 'X', datatype: 'INT32', shape: [1] }] },
      { model_name: 'm', id: 'q', inputs: [{ name: 'X', datatype: 'FP32', shape: [1], contents: { int_contents: [1] } }] },
      { model_name: 'm', inputs: [{ name: 'X', datatype: 'BYTES', shape: [-1], contents: { bytes_contents: strings } }] },
      { model_name: 'm', inputs: [{ name: 'X', datatype: 'NOPE', shape: [1] }], raw_input_contents: [Buffer.alloc(4)] },
      { model_name: 'm', inputs: [{ name: 'X', datatype: 'UINT8', shape: [1] }], raw_input_contents: [Buffer.alloc(1), Buffer.alloc(1)] },
      { model_name: 'm', model_version: 'v1', inputs: [] },
      { model_name: 'm', parameters: { sequence_id: { bool_param: true } } },
    ];
    for (const msg of malformed) {
      const [inline, offLoop] = await bothWays(msg);
      expect(inline).toHaveProperty('error');
      expect(offLoop).toEqual(inline);
    }
  });

  it('that protobuf cannot parse fail with the status grpc-js sends for them', async () => {
    const good = encode({ model_name: 'm', inputs: [{ name: 'S', datatype: 'BYTES', shape: [1, strings.length], contents: { bytes_contents: strings } }] });
    for (const bytes of [good.subarray(0, good.byteLength - 3), good.subarray(0, 10), Buffer.from([0xff])]) {
      expect(() => method.requestDeserialize(bytes), bytes.toString('hex').slice(0, 20)).toThrow();
      const e = await readInferMessage(thread, new EncodedInferMessage(bytes)).catch((err: unknown) => err);
      expect(e).toBeInstanceOf(GrpcStatusError);
      expect(e).toMatchObject({ code: status.INTERNAL, details: 'Error deserializing request' });
    }
  });
});

describe('withOffLoopInferDecoding', () => {
  it(`keeps ModelInfer and ModelStreamInfer messages from ${OFF_LOOP_GRPC_BYTES} bytes undecoded, decodes smaller ones inline`, () => {
    const service = withOffLoopInferDecoding(loadGrpcProtos().inferenceService);
    const small = encode({ model_name: 'm', id: 'small' });
    const large = encode({ model_name: 'm', inputs: [{ name: 'A', datatype: 'UINT8', shape: [OFF_LOOP_GRPC_BYTES] }], raw_input_contents: [Buffer.alloc(OFF_LOOP_GRPC_BYTES)] });
    for (const name of ['ModelInfer', 'ModelStreamInfer']) {
      const deserialize = (service[name] as MethodDefinition<unknown, unknown>).requestDeserialize;
      expect(deserialize(small)).toMatchObject({ model_name: 'm', id: 'small' });
      expect(deserialize(large)).toBeInstanceOf(EncodedInferMessage);
    }
    expect(loadGrpcProtos().inferenceService['ModelInfer']?.requestDeserialize(large)).not.toBeInstanceOf(EncodedInferMessage);
  });
});
