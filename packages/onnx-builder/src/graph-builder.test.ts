import { describe, it, expect } from 'vitest';
import * as ort from 'onnxruntime-node';
import { runOrtSession } from '@switchyard/ort';
import { floatAttr, GraphBuilder, stringsAttr, tensorAttr } from './graph-builder.js';
import { decodeModelProto } from './onnx-proto.js';

const build = (): Uint8Array =>
  new GraphBuilder('g')
    .input('X', 'FLOAT', ['batch', 3])
    .output('Y', 'FLOAT', ['batch', 3])
    .initializer('W', 'FLOAT', [3], [1, 2, 3])
    .node('Mul', ['X', 'W'], ['Y'])
    .buildModel({ metadata: { a: '1', b: '2' } });

describe('GraphBuilder.buildModel', () => {
  it('writes onnx.proto field numbers ORT understands', () => {
    const m = decodeModelProto(build()) as any;
    expect(m.ir_version).toBe(8);
    expect(m.producer_name).toBe('switchyard-onnx-builder');
    expect(m.opset_import).toEqual([{ domain: '', version: 17 }]);
    expect(m.metadata_props).toEqual([
      { key: 'a', value: '1' },
      { key: 'b', value: '2' },
    ]);
    expect(m.graph.name).toBe('g');
    expect(m.graph.input[0].type.tensor_type).toEqual({
      elem_type: 1,
      shape: { dim: [{ dim_param: 'batch' }, { dim_value: 3 }] },
    });
    expect(m.graph.initializer[0]).toMatchObject({ name: 'W', dims: [3], data_type: 1 });
    expect(m.graph.node[0]).toMatchObject({ op_type: 'Mul', input: ['X', 'W'], output: ['Y'], name: 'Mul_0' });
  });

  it('is deterministic: same calls, same bytes', () => {
    expect(Buffer.from(build()).equals(Buffer.from(build()))).toBe(true);
  });

  it('writes an INT attribute even when it is 0, and typed attributes', () => {
    const bytes = new GraphBuilder('g')
      .input('X', 'FLOAT', [2])
      .output('Y', 'FLOAT', [4])
      .node('Concat', ['X', 'X'], ['Y'], { axis: 0, f: floatAttr(0.5), s: 'x', ss: stringsAttr(['a']), ints: [0, 1] })
      .buildModel();
    const attrs = (decodeModelProto(bytes) as any).graph.node[0].attribute;
    expect(attrs[0]).toEqual({ name: 'axis', type: 'INT', i: 0 });
    expect(attrs[1]).toEqual({ name: 'f', type: 'FLOAT', f: 0.5 });
    expect(attrs[2].type).toBe('STRING');
    expect(attrs[3].type).toBe('STRINGS');
    expect(attrs[4]).toEqual({ name: 'ints', type: 'INTS', ints: [0, 1] });
  });

  it('rejects graphs that read or declare values nobody produces', () => {
    expect(() => new GraphBuilder('g').output('Y', 'FLOAT', [1]).buildModel()).toThrow(/never produced/);
    expect(() =>
      new GraphBuilder('g').input('X', 'FLOAT', [1]).output('Y', 'FLOAT', [1]).node('Add', ['X', 'Z'], ['Y']).buildModel(),
    ).toThrow(/reads 'Z'/);
    expect(() => new GraphBuilder('g').input('X', 'FLOAT', [1]).input('X', 'FLOAT', [1]).buildModel()).toThrow(/twice/);
    expect(() => new GraphBuilder('g').initializer('W', 'FLOAT', [2], [1]).buildModel()).toThrow(/1 values/);
    expect(() =>
      new GraphBuilder('g').input('X', 'FLOAT', [1]).output('Y', 'FLOAT', [1]).node('Cast', ['X'], ['Y'], { to: 1.5 }).buildModel(),
    ).toThrow(/not an integer/);
    expect(() => new GraphBuilder('g').input('X', 'FLOAT', [-2]).buildModel()).toThrow(/bad dimension/);
  });

  it('builds initializers of every raw type plus strings that ORT reads back', async () => {
    const g = new GraphBuilder('consts').input('X', 'INT64', [1]).output('I64', 'INT64', [2]);
    g.initializer('C64', 'INT64', [2], [-5n, 2n ** 40n]).node('Identity', ['C64'], ['I64']);
    g.output('F16', 'FLOAT16', [2]).initializer('C16', 'FLOAT16', [2], [1, -0.5]).node('Identity', ['C16'], ['F16']);
    g.output('STR', 'STRING', [2]).initializer('CS', 'STRING', [2], ['héllo', '']).node('Identity', ['CS'], ['STR']);
    g.output('B', 'BOOL', [3]).initializer('CB', 'BOOL', [3], [1, 0, 1]).node('Identity', ['CB'], ['B']);
    g.output('T', 'INT32', []).node('Constant', [], ['T'], { value: tensorAttr({ elemType: 'INT32', dims: [], values: [7] }) });
    g.output('Z', 'FLOAT', [0]).initializer('CZ', 'FLOAT', [0], []).node('Identity', ['CZ'], ['Z']);
    const session = await ort.InferenceSession.create(g.buildModel());
    const out = await runOrtSession(session, { X: { type: 'int64', data: new BigInt64Array([0n]), dims: [1] } });
    expect(Array.from(out['I64']!.data as BigInt64Array)).toEqual([-5n, 2n ** 40n]);
    expect(out['F16']!.type).toBe('float16');
    expect(Array.from(out['F16']!.data as Uint16Array)).toEqual([0x3c00, 0xb800]);
    expect(out['STR']!.data).toEqual(['héllo', '']);
    expect(Array.from(out['B']!.data as Uint8Array)).toEqual([1, 0, 1]);
    expect(out['T']!.dims).toEqual([]);
    expect(Array.from(out['T']!.data as Int32Array)).toEqual([7]);
    expect(out['Z']!.dims).toEqual([0]);
    await session.release();
  });
});
