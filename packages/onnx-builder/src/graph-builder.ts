/**
 * `GraphBuilder`: collect inputs, outputs, initializers and nodes of one ONNX graph, then
 * serialise it as a ModelProto. Output is a pure function of the calls made (same calls → same
 * bytes): nothing depends on time, host or map iteration order beyond insertion order.
 *
 * Misuse (duplicate names, a node reading a value nobody produces, an output never produced) is a
 * bug in the caller and throws a plain `Error` at `buildModel`.
 */
import { ElemType, encodeRawData, type ElemTypeName, type NumericValues } from './elem-type.js';
import { encodeModelProto } from './onnx-proto.js';

/**
 * One dimension of a graph input/output: a number ≥ 0 is fixed, a string is a named symbolic dim
 * (`dim_param`, e.g. 'batch'), and -1 is an anonymous unknown dim (neither field set).
 */
export type Dim = number | string;

/** `AttributeProto.AttributeType` numbers used here. */
const AttrType = { FLOAT: 1, INT: 2, STRING: 3, TENSOR: 4, FLOATS: 6, INTS: 7, STRINGS: 8 } as const;

/** A typed attribute value, for the cases a plain JS value cannot say (floats, tensors, lists of strings). */
export type TypedAttr =
  | { readonly kind: 'float'; readonly value: number }
  | { readonly kind: 'floats'; readonly value: readonly number[] }
  | { readonly kind: 'strings'; readonly value: readonly string[] }
  | { readonly kind: 'tensor'; readonly value: TensorInit };

/**
 * Node attribute value. A plain `number` is an INT (must be an integer), a `string` a STRING,
 * a `number[]` INTS; use `floatAttr`, `floatsAttr`, `stringsAttr`, `tensorAttr` for the rest.
 */
export type AttrValue = number | string | readonly number[] | TypedAttr;

export const floatAttr = (value: number): TypedAttr => ({ kind: 'float', value });
export const floatsAttr = (value: readonly number[]): TypedAttr => ({ kind: 'floats', value });
export const stringsAttr = (value: readonly string[]): TypedAttr => ({ kind: 'strings', value });
export const tensorAttr = (value: TensorInit): TypedAttr => ({ kind: 'tensor', value });

/** A constant tensor: numeric values (see `NumericValues`), strings for STRING, or ready `raw` LE bytes. */
export interface TensorInit {
  elemType: ElemTypeName;
  dims: readonly number[];
  values?: NumericValues | readonly string[];
  raw?: Uint8Array;
}

export interface BuildModelOptions {
  /** Default opset of the ai.onnx domain. Default 17. */
  opset?: number;
  /** ModelProto.ir_version. Default 8 (ONNX 1.10+; ORT 1.30 reads up to 11). */
  irVersion?: number;
  /** ModelProto.producer_name. Default 'switchyard-onnx-builder'. */
  producer?: string;
  /** ModelProto.producer_version. Default '0.1.0'. */
  producerVersion?: string;
  /** ModelProto.model_version; omitted when not given. */
  modelVersion?: number;
  docString?: string;
  /** ModelProto.metadata_props, in the given order. */
  metadata?: Readonly<Record<string, string>>;
}

export const DEFAULT_OPSET = 17;
export const DEFAULT_IR_VERSION = 8;
export const DEFAULT_PRODUCER = 'switchyard-onnx-builder';

interface ValueInfo {
  name: string;
  elemType: ElemTypeName;
  dims: readonly Dim[];
}

interface NodeSpec {
  opType: string;
  inputs: readonly string[];
  outputs: readonly string[];
  attrs: Readonly<Record<string, AttrValue>>;
  name: string;
  domain: string | undefined;
}

export class GraphBuilder {
  private readonly inputs: ValueInfo[] = [];
  private readonly outputs: ValueInfo[] = [];
  private readonly initializers: Array<{ name: string; init: TensorInit }> = [];
  private readonly nodes: NodeSpec[] = [];

  constructor(readonly name: string) {}

  /** Declare a graph input. */
  input(name: string, elemType: ElemTypeName, dims: readonly Dim[]): this {
    this.inputs.push({ name, elemType, dims });
    return this;
  }

  /** Declare a graph output; some node (or an input/initializer via Identity) must produce it. */
  output(name: string, elemType: ElemTypeName, dims: readonly Dim[]): this {
    this.outputs.push({ name, elemType, dims });
    return this;
  }

  /** Add a constant tensor (weights). Numeric values are stored as `raw_data`, strings as `string_data`. */
  initializer(name: string, elemType: ElemTypeName, dims: readonly number[], values: NumericValues | readonly string[]): this {
    this.initializers.push({ name, init: { elemType, dims, values } });
    return this;
  }

  /**
   * Add a node. Nodes must be added in topological order. An empty string in `inputs` is an
   * omitted optional input. `opts.name` defaults to `<opType>_<index>`.
   */
  node(
    opType: string,
    inputs: readonly string[],
    outputs: readonly string[],
    attrs: Readonly<Record<string, AttrValue>> = {},
    opts: { name?: string; domain?: string } = {},
  ): this {
    const name = opts.name ?? `${opType}_${this.nodes.length}`;
    this.nodes.push({ opType, inputs, outputs, attrs, name, domain: opts.domain });
    return this;
  }

  /** Serialise as an ONNX ModelProto. */
  buildModel(options: BuildModelOptions = {}): Uint8Array {
    this.check();
    const model: Record<string, unknown> = {
      ir_version: options.irVersion ?? DEFAULT_IR_VERSION,
      producer_name: options.producer ?? DEFAULT_PRODUCER,
      producer_version: options.producerVersion ?? '0.1.0',
      graph: {
        node: this.nodes.map(nodeProto),
        name: this.name,
        initializer: this.initializers.map(({ name, init }) => tensorProto(name, init)),
        input: this.inputs.map(valueInfoProto),
        output: this.outputs.map(valueInfoProto),
      },
      opset_import: [{ domain: '', version: options.opset ?? DEFAULT_OPSET }],
      metadata_props: Object.entries(options.metadata ?? {}).map(([key, value]) => ({ key, value })),
    };
    if (options.modelVersion !== undefined) model['model_version'] = options.modelVersion;
    if (options.docString !== undefined) model['doc_string'] = options.docString;
    return encodeModelProto(model);
  }

  /** Every value read is produced exactly once before it is read; every output is produced. */
  private check(): void {
    const known = new Set<string>();
    const define = (name: string, what: string): void => {
      if (name === '') throw new Error(`graph ${this.name}: ${what} has an empty name`);
      if (known.has(name)) throw new Error(`graph ${this.name}: value '${name}' is defined twice (${what})`);
      known.add(name);
    };
    for (const v of this.inputs) define(v.name, 'input');
    for (const i of this.initializers) define(i.name, 'initializer');
    for (const n of this.nodes) {
      for (const input of n.inputs) {
        if (input !== '' && !known.has(input)) {
          throw new Error(`graph ${this.name}: node ${n.name} reads '${input}' before anything produces it`);
        }
      }
      for (const output of n.outputs) define(output, `output of node ${n.name}`);
    }
    const outputNames = new Set<string>();
    for (const o of this.outputs) {
      if (!known.has(o.name)) throw new Error(`graph ${this.name}: output '${o.name}' is never produced`);
      if (outputNames.has(o.name)) throw new Error(`graph ${this.name}: output '${o.name}' declared twice`);
      outputNames.add(o.name);
    }
  }
}

function valueInfoProto(v: ValueInfo): Record<string, unknown> {
  return {
    name: v.name,
    type: {
      tensor_type: {
        elem_type: ElemType[v.elemType],
        shape: { dim: v.dims.map(dimProto) },
      },
    },
  };
}

function dimProto(d: Dim): Record<string, unknown> {
  if (typeof d === 'string') return { dim_param: d };
  if (d === -1) return {};
  if (!Number.isInteger(d) || d < 0) throw new Error(`bad dimension ${d}: use a size >= 0, -1 or a name`);
  return { dim_value: d };
}

function tensorProto(name: string, init: TensorInit): Record<string, unknown> {
  const count = init.dims.reduce((a, b) => a * b, 1);
  const tensor: Record<string, unknown> = { dims: [...init.dims], data_type: ElemType[init.elemType], name };
  if (init.raw !== undefined) {
    tensor['raw_data'] = init.raw;
    return tensor;
  }
  const values = init.values ?? [];
  if (values.length !== count) {
    throw new Error(`tensor ${name}: ${values.length} values for dims [${init.dims.join(', ')}] (${count} elements)`);
  }
  if (init.elemType === 'STRING') {
    tensor['string_data'] = Array.from(values as ArrayLike<unknown>, (s) => {
      if (typeof s !== 'string') throw new Error(`tensor ${name}: STRING values must be strings`);
      return new TextEncoder().encode(s);
    });
  } else {
    tensor['raw_data'] = encodeRawData(init.elemType, values as NumericValues);
  }
  return tensor;
}

function nodeProto(n: NodeSpec): Record<string, unknown> {
  const node: Record<string, unknown> = {
    input: [...n.inputs],
    output: [...n.outputs],
    name: n.name,
    op_type: n.opType,
    attribute: Object.entries(n.attrs).map(([name, value]) => attributeProto(`${n.name}.${name}`, name, value)),
  };
  if (n.domain !== undefined) node['domain'] = n.domain;
  return node;
}

function attributeProto(where: string, name: string, value: AttrValue): Record<string, unknown> {
  if (typeof value === 'number') {
    if (!Number.isInteger(value)) throw new Error(`attribute ${where}: ${value} is not an integer; use floatAttr()`);
    return { name, type: AttrType.INT, i: value };
  }
  if (typeof value === 'string') return { name, type: AttrType.STRING, s: new TextEncoder().encode(value) };
  if (isNumberList(value)) {
    for (const v of value) if (!Number.isInteger(v)) throw new Error(`attribute ${where}: ${v} is not an integer; use floatsAttr()`);
    return { name, type: AttrType.INTS, ints: [...value] };
  }
  switch (value.kind) {
    case 'float':
      return { name, type: AttrType.FLOAT, f: value.value };
    case 'floats':
      return { name, type: AttrType.FLOATS, floats: [...value.value] };
    case 'strings':
      return { name, type: AttrType.STRINGS, strings: value.value.map((s) => new TextEncoder().encode(s)) };
    case 'tensor':
      return { name, type: AttrType.TENSOR, t: tensorProto(name, value.value) };
  }
}

function isNumberList(value: AttrValue): value is readonly number[] {
  return Array.isArray(value);
}
