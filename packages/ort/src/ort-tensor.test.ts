import * as ort from 'onnxruntime-node';
import { describe, expect, it } from 'vitest';
import { bytesToStrings, fromOrtTensor, runOrtSession, stringsToBytes, toOrtTensor } from './ort-tensor.js';

// A hand-encoded ONNX model: Y = Identity(X), X and Y of `elemType` with one symbolic dim. Written
// here (not with @switchyard/onnx-builder, whose tests depend on this package) from onnx.proto's
// field numbers: ModelProto{ir_version=1, graph=7, opset_import=8}, GraphProto{node=1, name=2,
// input=11, output=12}, NodeProto{input=1, output=2, op_type=4}, ValueInfoProto{name=1, type=2},
// TypeProto{tensor_type=1}, Tensor{elem_type=1, shape=2}, TensorShapeProto{dim=1}, Dimension{dim_param=2}.
function identityModel(elemType: number): Uint8Array {
  const varint = (n: number): number[] => {
    const out: number[] = [];
    for (; n > 0x7f; n >>>= 7) out.push((n & 0x7f) | 0x80);
    out.push(n);
    return out;
  };
  const bytes = (field: number, body: number[]): number[] => [...varint((field << 3) | 2), ...varint(body.length), ...body];
  const int = (field: number, v: number): number[] => [...varint(field << 3), ...varint(v)];
  const str = (field: number, s: string): number[] => bytes(field, [...new TextEncoder().encode(s)]);
  const valueInfo = (name: string): number[] => [
    ...str(1, name),
    ...bytes(2, bytes(1, [...int(1, elemType), ...bytes(2, bytes(1, str(2, 'n')))])),
  ];
  const graph = [...bytes(1, [...str(1, 'X'), ...str(2, 'Y'), ...str(4, 'Identity')]), ...str(2, 'g'), ...bytes(11, valueInfo('X')), ...bytes(12, valueInfo('Y'))];
  return Uint8Array.from([...int(1, 8), ...bytes(7, graph), ...bytes(8, int(2, 17))]);
}
const FLOAT16 = 10;
const INT64 = 7;

// 1, -2, -0, +inf, -inf, smallest subnormal, quiet NaN with a payload, negative NaN with a payload,
// signalling NaN, largest finite: every one must come back bit for bit.
const HALF_BITS = [0x3c00, 0xc000, 0x8000, 0x7c00, 0xfc00, 0x0001, 0x7e01, 0xfe55, 0x7d00, 0x7bff];

describe('float16 through a real onnxruntime session', () => {
  it(`round-trips bit patterns (NaN payloads, -0) on Node ${process.version}`, async () => {
    const session = await ort.InferenceSession.create(identityModel(FLOAT16));
    const data = Uint16Array.from(HALF_BITS);
    const out = await runOrtSession(session, { X: { type: 'float16', dims: [data.length], data } });
    expect(out['Y']!.type).toBe('float16');
    expect(out['Y']!.dims).toEqual([data.length]);
    expect(out['Y']!.data).toBeInstanceOf(Uint16Array);
    expect(Array.from(out['Y']!.data as Uint16Array)).toEqual(HALF_BITS);
    await session.release();
  });

  it('reads a feed that is a view into a larger buffer, and an empty one', async () => {
    const session = await ort.InferenceSession.create(identityModel(FLOAT16));
    const backing = Uint16Array.from([0xffff, ...HALF_BITS, 0xffff]);
    const view = backing.subarray(1, 1 + HALF_BITS.length);
    const out = await runOrtSession(session, { X: { type: 'float16', dims: [view.length], data: view } });
    expect(Array.from(out['Y']!.data as Uint16Array)).toEqual(HALF_BITS);
    const empty = await runOrtSession(session, { X: { type: 'float16', dims: [0], data: new Uint16Array(0) } });
    expect((empty['Y']!.data as Uint16Array).length).toBe(0);
    await session.release();
  });

  it('leaves other element types as onnxruntime gives them', async () => {
    const session = await ort.InferenceSession.create(identityModel(INT64));
    const data = BigInt64Array.of(-(2n ** 63n), -1n, 0n, 2n ** 63n - 1n);
    const out = await runOrtSession(session, { X: { type: 'int64', dims: [4], data } }, ['Y']);
    expect(out['Y']!.data).toBeInstanceOf(BigInt64Array);
    expect(Array.from(out['Y']!.data as BigInt64Array)).toEqual(Array.from(data));
    await session.release();
  });
});

describe('toOrtTensor / fromOrtTensor', () => {
  it('give the binding a Uint16Array over the caller bytes, without a copy', () => {
    const bits = Uint16Array.from(HALF_BITS);
    const t = toOrtTensor('float16', bits, [bits.length]);
    expect(t.type).toBe('float16');
    expect(t.data).toBe(bits);
  });

  it('view a Float16Array-backed output as bit patterns (what onnxruntime hands out on Node 24+)', () => {
    const bits = Uint16Array.from(HALF_BITS);
    // Built the way onnxruntime-common builds outputs: on Node 24+ its data is a Float16Array.
    const produced = new ort.Tensor('float16', bits, [bits.length]);
    const back = fromOrtTensor(produced);
    expect(back.data).toBeInstanceOf(Uint16Array);
    expect((back.data as Uint16Array).buffer).toBe(bits.buffer);
    expect(Array.from(back.data as Uint16Array)).toEqual(HALF_BITS);
  });
});

describe('string tensors in the BYTES layout', () => {
  const layout = (...elements: number[][]): Uint8Array =>
    Uint8Array.from(elements.flatMap((e) => [e.length & 0xff, (e.length >> 8) & 0xff, 0, 0, ...e]));

  it('turns BYTES elements into strings and back, in a buffer of its own', () => {
    const data = layout([0x61], [], [0xc3, 0xa9], [0xf0, 0x9f, 0x98, 0x80]);
    const strings = bytesToStrings(data);
    expect(strings).toEqual(['a', '', 'é', '😀']);
    const back = stringsToBytes(strings);
    expect(Array.from(back)).toEqual(Array.from(data));
    expect(back.byteOffset).toBe(0);
    expect(back.buffer.byteLength).toBe(back.byteLength);
  });

  it('replaces what UTF-8 cannot carry, and cuts a truncated last element at the end', () => {
    expect(bytesToStrings(layout([0xff, 0x61]))).toEqual(['\ufffda']);
    expect(Array.from(stringsToBytes(['\ud800']))).toEqual([3, 0, 0, 0, 0xef, 0xbf, 0xbd]);
    expect(bytesToStrings(Uint8Array.of(5, 0, 0, 0, 0x61, 0x62))).toEqual(['ab']);
    expect(bytesToStrings(Uint8Array.of(1, 0))).toEqual([]);
  });
});
