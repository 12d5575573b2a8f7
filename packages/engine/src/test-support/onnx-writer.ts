/**
 * Test helper: a minimal ONNX ModelProto encoder (hand-rolled protobuf) so engine tests can build
 * tiny real models without depending on another package. Field numbers are onnx.proto's.
 * Only what the tests need: graphs of nodes with int/float/ints attributes, raw-data
 * initializers, typed inputs/outputs with fixed, symbolic or absent dims.
 */

/** ONNX TensorProto.DataType numbers. */
export const ONNX_TYPES = {
  FLOAT: 1,
  UINT8: 2,
  INT8: 3,
  UINT16: 4,
  INT16: 5,
  INT32: 6,
  INT64: 7,
  STRING: 8,
  BOOL: 9,
  FLOAT16: 10,
  DOUBLE: 11,
  UINT32: 12,
  UINT64: 13,
  BFLOAT16: 16,
} as const;

export type OnnxTypeName = keyof typeof ONNX_TYPES;

/** A dim: a number (fixed), a string (symbolic, dynamic). */
export type Dim = number | string;

export interface ValueInfo {
  name: string;
  type: OnnxTypeName;
  /** Omit for an unknown rank. */
  dims?: Dim[];
}

export type AttributeValue = { i: number } | { f: number } | { ints: number[] } | { s: string };

export interface NodeSpec {
  op: string;
  inputs: string[];
  outputs: string[];
  attributes?: Record<string, AttributeValue>;
}

export interface Initializer {
  name: string;
  type: OnnxTypeName;
  dims: number[];
  /** Raw little-endian element bytes. */
  raw: Uint8Array;
}

export interface GraphSpec {
  inputs: ValueInfo[];
  outputs: ValueInfo[];
  nodes: NodeSpec[];
  initializers?: Initializer[];
  opset?: number;
}

class Writer {
  private chunks: number[] = [];

  varint(value: number | bigint): this {
    let v = BigInt.asUintN(64, BigInt(value));
    while (v >= 0x80n) {
      this.chunks.push(Number((v & 0x7fn) | 0x80n));
      v >>= 7n;
    }
    this.chunks.push(Number(v));
    return this;
  }

  tag(field: number, wire: number): this {
    return this.varint((field << 3) | wire);
  }

  int(field: number, value: number | bigint): this {
    return this.tag(field, 0).varint(value);
  }

  bytes(field: number, data: Uint8Array): this {
    this.tag(field, 2).varint(data.length);
    for (const b of data) this.chunks.push(b);
    return this;
  }

  string(field: number, value: string): this {
    return this.bytes(field, new TextEncoder().encode(value));
  }

  message(field: number, build: (w: Writer) => void): this {
    const inner = new Writer();
    build(inner);
    return this.bytes(field, inner.finish());
  }

  float(field: number, value: number): this {
    this.tag(field, 5);
    const buf = new Uint8Array(4);
    new DataView(buf.buffer).setFloat32(0, value, true);
    for (const b of buf) this.chunks.push(b);
    return this;
  }

  finish(): Uint8Array {
    return Uint8Array.from(this.chunks);
  }
}

function writeValueInfo(w: Writer, info: ValueInfo): void {
  w.string(1, info.name);
  w.message(2, (type) =>
    type.message(1, (tensor) => {
      tensor.int(1, ONNX_TYPES[info.type]);
      if (info.dims !== undefined) {
        const dims = info.dims;
        tensor.message(2, (shape) => {
          for (const d of dims) {
            shape.message(1, (dim) => {
              if (typeof d === 'number') dim.int(1, d);
              else dim.string(2, d);
            });
          }
        });
      }
    }),
  );
}

function writeAttribute(w: Writer, name: string, value: AttributeValue): void {
  w.string(1, name);
  if ('i' in value) w.int(3, value.i).int(20, 2);
  else if ('f' in value) w.float(2, value.f).int(20, 1);
  else if ('s' in value) w.string(4, value.s).int(20, 3);
  else {
    for (const i of value.ints) w.int(8, i);
    w.int(20, 7);
  }
}

/** Encode a single-graph ModelProto (IR 8, default opset 17). */
export function buildOnnxModel(spec: GraphSpec): Uint8Array {
  const w = new Writer();
  w.int(1, 8); // ir_version
  w.string(2, 'switchyard-test');
  w.message(7, (g) => {
    spec.nodes.forEach((node, idx) => {
      g.message(1, (n) => {
        for (const i of node.inputs) n.string(1, i);
        for (const o of node.outputs) n.string(2, o);
        n.string(3, `node_${idx}`);
        n.string(4, node.op);
        for (const [k, v] of Object.entries(node.attributes ?? {})) n.message(5, (a) => writeAttribute(a, k, v));
      });
    });
    g.string(2, 'graph');
    for (const init of spec.initializers ?? []) {
      g.message(5, (t) => {
        for (const d of init.dims) t.int(1, d);
        t.int(2, ONNX_TYPES[init.type]);
        t.string(8, init.name);
        t.bytes(9, init.raw);
      });
    }
    for (const i of spec.inputs) g.message(11, (v) => writeValueInfo(v, i));
    for (const o of spec.outputs) g.message(12, (v) => writeValueInfo(v, o));
  });
  w.message(8, (o) => o.string(1, '').int(2, spec.opset ?? 17));
  return w.finish();
}

/** `OUTPUT0 = Identity(INPUT0)` with the given type and dims. */
export function identityModel(type: OnnxTypeName, dims: Dim[], names = { input: 'INPUT0', output: 'OUTPUT0' }): Uint8Array {
  return buildOnnxModel({
    inputs: [{ name: names.input, type, dims }],
    outputs: [{ name: names.output, type, dims }],
    nodes: [{ op: 'Identity', inputs: [names.input], outputs: [names.output] }],
  });
}

/** Triton's `simple`: INT32 [batch,16] ×2 → OUTPUT0 = a+b, OUTPUT1 = a−b. */
export function simpleModel(type: OnnxTypeName = 'INT32', batchDim: Dim = 'batch'): Uint8Array {
  return buildOnnxModel({
    inputs: [
      { name: 'INPUT0', type, dims: [batchDim, 16] },
      { name: 'INPUT1', type, dims: [batchDim, 16] },
    ],
    outputs: [
      { name: 'OUTPUT0', type, dims: [batchDim, 16] },
      { name: 'OUTPUT1', type, dims: [batchDim, 16] },
    ],
    nodes: [
      { op: 'Add', inputs: ['INPUT0', 'INPUT1'], outputs: ['OUTPUT0'] },
      { op: 'Sub', inputs: ['INPUT0', 'INPUT1'], outputs: ['OUTPUT1'] },
    ],
  });
}

/**
 * A deliberately slow FP32 model: `rounds` chained MatMuls of [batch,n]×[n,n] with an identity
 * weight, so OUTPUT0 == INPUT0 but each run costs rounds·n² multiply-adds.
 */
export function slowModel(n = 256, rounds = 64): Uint8Array {
  const eye = new Float32Array(n * n);
  for (let i = 0; i < n; i++) eye[i * n + i] = 1;
  const nodes: NodeSpec[] = [];
  let prev = 'INPUT0';
  for (let r = 0; r < rounds; r++) {
    const out = r === rounds - 1 ? 'OUTPUT0' : `h${r}`;
    nodes.push({ op: 'MatMul', inputs: [prev, 'W'], outputs: [out] });
    prev = out;
  }
  return buildOnnxModel({
    inputs: [{ name: 'INPUT0', type: 'FLOAT', dims: ['batch', n] }],
    outputs: [{ name: 'OUTPUT0', type: 'FLOAT', dims: ['batch', n] }],
    nodes,
    initializers: [{ name: 'W', type: 'FLOAT', dims: [n, n], raw: new Uint8Array(eye.buffer) }],
  });
}
