import { describe, expect, it } from 'vitest';
import { buildMlpModel, decodeModelProto, encodeModelProto, GraphBuilder, tensorAttr } from '@switchyard/onnx-builder';
import { UNREADABLE_MODEL, valueDependentWork } from './onnx-op-scan.js';

const enc = new TextEncoder();

/** Protobuf wire pieces, for what onnx-mini.proto cannot say (functions, sparse initializers). */
function varint(n: number): number[] {
  const out: number[] = [];
  while (n >= 0x80) {
    out.push((n % 0x80) | 0x80);
    n = Math.floor(n / 0x80);
  }
  out.push(n);
  return out;
}
function lengthDelimited(field: number, payload: Uint8Array | string): Uint8Array {
  const body = typeof payload === 'string' ? enc.encode(payload) : payload;
  return Uint8Array.from([...varint(field * 8 + 2), ...varint(body.length), ...body]);
}
function concat(...parts: Uint8Array[]): Uint8Array {
  return Uint8Array.from(parts.flatMap((p) => [...p]));
}

/** y = Expand(x, shape), with `shape` made by `addShape`. */
function expandModel(addShape: (g: GraphBuilder) => GraphBuilder): Uint8Array {
  const g = new GraphBuilder('expand').input('x', 'FLOAT', [1, 4]).output('y', 'FLOAT', [3, 4]);
  return addShape(g).node('Expand', ['x', 'shape'], ['y'], {}, { name: 'Expand_7' }).buildModel();
}

const constantShapeModel = () => expandModel((g) => g.initializer('shape', 'INT64', [2], [3, 4]));

/** `base` with `node` appended to its graph, encoded through protobufjs (GraphBuilder cannot write graph attributes). */
function withNode(base: Uint8Array, node: Record<string, unknown>): Uint8Array {
  const model = decodeModelProto(base);
  const graph = model['graph'] as Record<string, unknown>;
  graph['node'] = [...((graph['node'] as unknown[] | undefined) ?? []), node];
  return encodeModelProto(model);
}

/** `AttributeProto.AttributeType` numbers. */
const GRAPH = 5;
const GRAPHS = 10;

function branch(name: string, value: number): Record<string, unknown> {
  const sub = new GraphBuilder(name)
    .output(`${name}_out`, 'FLOAT', [1])
    .initializer('c', 'FLOAT', [1], [value])
    .node('Identity', ['c'], [`${name}_out`])
    .buildModel();
  return decodeModelProto(sub)['graph'] as Record<string, unknown>;
}

describe('valueDependentWork', () => {
  it('finds nothing in the benchmark MLP or a plain elementwise model', () => {
    expect(valueDependentWork(buildMlpModel({ width: 8 }))).toBeUndefined();
    const add = new GraphBuilder('add')
      .input('a', 'INT32', ['batch', 4])
      .input('b', 'INT32', ['batch', 4])
      .output('c', 'INT32', ['batch', 4])
      .node('Add', ['a', 'b'], ['c'])
      .buildModel();
    expect(valueDependentWork(add)).toBeUndefined();
  });

  it('accepts an Expand whose shape is an initializer or a Constant node', () => {
    expect(valueDependentWork(constantShapeModel())).toBeUndefined();
    const fromConstant = expandModel((g) =>
      g.node('Constant', [], ['shape'], { value: tensorAttr({ elemType: 'INT64', dims: [2], values: [3, 4] }) }),
    );
    expect(valueDependentWork(fromConstant)).toBeUndefined();
  });

  it('names an Expand whose shape is computed', () => {
    const computed = new GraphBuilder('expand')
      .input('x', 'FLOAT', [1, 4])
      .input('like', 'FLOAT', [3, 4])
      .output('y', 'FLOAT', [3, 4])
      .node('Shape', ['like'], ['shape'])
      .node('Expand', ['x', 'shape'], ['y'], {}, { name: 'Expand_7' })
      .buildModel();
    expect(valueDependentWork(computed)).toBe("node 'Expand_7' (Expand) takes its output shape from input 1, which is not a constant");
  });

  it('names an unnamed node by its index', () => {
    const fromInput = new GraphBuilder('fill')
      .input('dims', 'INT64', [2])
      .output('y', 'FLOAT', [-1, -1])
      .node('ConstantOfShape', ['dims'], ['y'], {}, { name: '' })
      .buildModel();
    expect(valueDependentWork(fromInput)).toBe('node #0 (ConstantOfShape) takes its output shape from input 0, which is not a constant');
  });

  it('accepts a Resize with constant scales and omitted roi / sizes, not one with sizes from an input', () => {
    const base = () =>
      new GraphBuilder('resize').input('x', 'FLOAT', [1, 1, 2, 2]).output('y', 'FLOAT', [1, 1, 4, 4]).initializer('scales', 'FLOAT', [4], [1, 1, 2, 2]);
    expect(valueDependentWork(base().node('Resize', ['x', '', 'scales'], ['y']).buildModel())).toBeUndefined();
    const sized = base().input('sizes', 'INT64', [4]).node('Resize', ['x', '', '', 'sizes'], ['y'], {}, { name: 'up' }).buildModel();
    expect(valueDependentWork(sized)).toBe("node 'up' (Resize) takes its output shape from input 3, which is not a constant");
  });

  it('reads the table by domain: a Pad without its optional axes, a contrib Range from an input', () => {
    const pad = new GraphBuilder('pad')
      .input('x', 'FLOAT', [2, 2])
      .output('y', 'FLOAT', [4, 4])
      .initializer('pads', 'INT64', [4], [1, 1, 1, 1])
      .node('Pad', ['x', 'pads'], ['y'])
      .buildModel();
    expect(valueDependentWork(pad)).toBeUndefined();
    const range = (domain: string) =>
      new GraphBuilder('range')
        .input('n', 'INT64', [])
        .output('y', 'INT64', [-1])
        .initializer('zero', 'INT64', [], [0])
        .node('Range', ['zero', 'n'], ['y'], {}, { name: 'r', domain })
        .buildModel();
    expect(valueDependentWork(range('ai.onnx'))).toBe("node 'r' (Range) takes its output shape from input 1, which is not a constant");
    expect(valueDependentWork(range('com.microsoft'))).toBe("node 'r' (Range) takes its output shape from input 1, which is not a constant");
    expect(valueDependentWork(range('ai.onnx.ml'))).toBeUndefined();
  });

  it('names a node with subgraphs (g or graphs)', () => {
    // No attributes in `base`: decodeModelProto gives enums as names, which encodeModelProto's check refuses.
    const base = new GraphBuilder('cond').input('c', 'BOOL', []).output('y', 'BOOL', []).node('Identity', ['c'], ['y']).buildModel();
    const ifModel = withNode(base, {
      input: ['c'],
      output: ['z'],
      name: 'If_3',
      op_type: 'If',
      attribute: [
        { name: 'then_branch', type: GRAPH, g: branch('then', 1) },
        { name: 'else_branch', type: GRAPH, g: branch('else', 0) },
      ],
    });
    expect(valueDependentWork(ifModel)).toBe("node 'If_3' (If) runs a subgraph");
    const graphsModel = withNode(base, { input: ['c'], output: ['z'], name: 'Multi', op_type: 'Custom', attribute: [{ name: 'bodies', type: GRAPHS, graphs: [branch('a', 1)] }] });
    expect(valueDependentWork(graphsModel)).toBe("node 'Multi' (Custom) runs a subgraph");
  });

  it('names an operator of a custom domain, and allows the standard ones', () => {
    const model = (domain: string) =>
      new GraphBuilder('custom').input('x', 'FLOAT', [2]).output('y', 'FLOAT', [2]).node('Foo', ['x'], ['y'], {}, { domain }).buildModel();
    expect(valueDependentWork(model('custom.x'))).toBe("operator domain 'custom.x' (op 'Foo') is not a standard ONNX domain");
    for (const domain of ['', 'ai.onnx', 'ai.onnx.ml', 'com.microsoft']) expect(valueDependentWork(model(domain))).toBeUndefined();
  });

  it('quotes names from the file on one short line', () => {
    const model = new GraphBuilder('custom')
      .input('x', 'FLOAT', [2])
      .output('y', 'FLOAT', [2])
      .node('Foo\nBar', ['x'], ['y'], {}, { domain: `evil\r\n${'x'.repeat(200)}` })
      .buildModel();
    expect(valueDependentWork(model)).toBe(`operator domain 'evil??${'x'.repeat(74)}…' (op 'Foo?Bar') is not a standard ONNX domain`);
  });

  it('names model-local functions', () => {
    const functions = lengthDelimited(25, lengthDelimited(1, 'my_function'));
    expect(valueDependentWork(concat(buildMlpModel({ width: 4 }), functions))).toBe('the model defines local functions');
  });

  it('takes a sparse initializer as a constant, and not an initializer a request may override', () => {
    const reason = "node 'Expand_7' (Expand) takes its output shape from input 1, which is not a constant";
    // An Expand reading 'shape', which nothing in the graph GraphBuilder wrote defines.
    const base = new GraphBuilder('expand').input('x', 'FLOAT', [1, 4]).output('x2', 'FLOAT', [1, 4]).node('Identity', ['x'], ['x2']).buildModel();
    const undefinedShape = withNode(base, { input: ['x', 'shape'], output: ['y'], name: 'Expand_7', op_type: 'Expand' });
    expect(valueDependentWork(undefinedShape)).toBe(reason);
    // A second occurrence of ModelProto.graph merges into the first, as protobuf parsers merge it.
    const sparse = lengthDelimited(7, lengthDelimited(15, lengthDelimited(1, lengthDelimited(8, 'shape'))));
    // Constants are not followed through other nodes: an Identity of an initializer is not one.
    const throughIdentity = expandModel((g) => g.initializer('other', 'INT64', [1], [0]).node('Identity', ['other'], ['shape']));
    expect(valueDependentWork(throughIdentity)).toBe(reason);
    expect(valueDependentWork(concat(undefinedShape, sparse))).toBeUndefined();
    const fromInput = expandModel((g) => g.input('shape', 'INT64', [2]));
    expect(valueDependentWork(concat(fromInput, sparse))).toBe(reason);
    const overridable = lengthDelimited(7, lengthDelimited(11, lengthDelimited(1, 'shape')));
    expect(valueDependentWork(concat(constantShapeModel(), overridable))).toBe(reason);
  });

  it('calls truncated, garbage, empty and graph-less bytes unreadable', () => {
    const good = constantShapeModel();
    expect(valueDependentWork(good.subarray(0, good.length - 3))).toBe(UNREADABLE_MODEL);
    expect(valueDependentWork(new Uint8Array())).toBe(UNREADABLE_MODEL);
    expect(valueDependentWork(enc.encode('this is not a model'))).toBe(UNREADABLE_MODEL);
    expect(valueDependentWork(Uint8Array.from([0x08, 0xff, 0xff]))).toBe(UNREADABLE_MODEL); // truncated varint
    expect(valueDependentWork(Uint8Array.from([0x0b, 0x0c]))).toBe(UNREADABLE_MODEL); // a group
    expect(valueDependentWork(Uint8Array.from([0x3a, 0xff, 0xff, 0xff, 0xff, 0x0f]))).toBe(UNREADABLE_MODEL); // graph length past the end
    expect(valueDependentWork(Uint8Array.from([0x38, 0x01]))).toBe(UNREADABLE_MODEL); // graph as a varint
    expect(valueDependentWork(Uint8Array.from([0x08, 0x08]))).toBe(UNREADABLE_MODEL); // ir_version only, no graph
    expect(valueDependentWork(lengthDelimited(7, lengthDelimited(1, lengthDelimited(4, Uint8Array.from([0xc3, 0x28])))))).toBe(UNREADABLE_MODEL); // op_type not UTF-8
    expect(valueDependentWork(lengthDelimited(7, new Uint8Array()))).toBeUndefined(); // an empty graph does nothing
  });
});
