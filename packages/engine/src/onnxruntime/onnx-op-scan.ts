/**
 * `valueDependentWork`: whether an ONNX model's run time may depend on the VALUES of its inputs, or
 * on their SHAPES alone, decided from the model file's bytes. A shape-only model is safe to run
 * inline on the event loop for tiny inputs (`inline-session.ts`): its cost is known from the shapes
 * the inline gate checks. A value-dependent one could turn a tiny request into a long stall.
 *
 * Policy (a reason is returned for the first rule a model breaks; `undefined` when it breaks none):
 * - The file must be a readable ModelProto with a graph. The protobuf wire format is read directly,
 *   bounded: truncated varints, lengths past the end, groups (wire types 3 / 4), unknown wire types,
 *   a known field with the wrong wire type, names that are not UTF-8, or no graph at all give
 *   `UNREADABLE_MODEL`. Anything else unknown is skipped by its wire type.
 * - No model-local functions (`ModelProto.functions`): their bodies are graphs of their own.
 * - No node with a graph attribute (`g` or `graphs`: If, Loop, Scan or any other): a subgraph runs
 *   as many times, or along whichever branch, its inputs' values say.
 * - Every node's operator domain is a standard one: `STANDARD_DOMAINS`. A custom op's cost is unknown.
 * - An operator listed in `SHAPE_FROM_VALUES` (by domain) takes the size of its output (so its work)
 *   from the values of the listed inputs; each of those must be omitted (empty name) or a constant
 *   of the main graph: an initializer, a sparse initializer or the output of a `Constant` node. An
 *   initializer that is also a graph input is not a constant: ONNX (IR 4 on) makes it a default a
 *   request may override.
 * Names in a reason come from the file: control characters are replaced and long names cut, so a
 * reason is one short line for a log.
 * Every doubt falls on the safe side: a reason means the model only loses the inline path.
 *
 * Field numbers are those of onnx/onnx's onnx.proto (ModelProto.graph 7, functions 25; GraphProto
 * node 1, initializer 5, input 11, sparse_initializer 15; NodeProto input 1, output 2, name 3,
 * op_type 4, attribute 5, domain 7; AttributeProto g 6, graphs 11; TensorProto name 8;
 * SparseTensorProto values 1; ValueInfoProto name 1). Repeated occurrences of a message field merge,
 * as protobuf parsers merge them. Nothing recurses into subgraphs (one is a reason already), so the
 * nesting read is at most model → graph → node → attribute, and each byte is visited a bounded
 * number of times: time is linear in the file's size. Tensor payloads are skipped by length.
 * Pure: no IO, never throws.
 */

/** The reason for bytes that are not a ModelProto with a graph. */
export const UNREADABLE_MODEL = 'the model file is not a readable ONNX ModelProto';

/** Operator domains whose operators' cost is known from the ONNX and ONNX Runtime specs. */
export const STANDARD_DOMAINS: ReadonlySet<string> = new Set(['', 'ai.onnx', 'ai.onnx.ml', 'com.microsoft']);

/**
 * Operators whose output shape comes from some inputs' values → those input indices, by domain
 * ('' stands for 'ai.onnx' too). The one place to extend.
 */
export const SHAPE_FROM_VALUES: ReadonlyMap<string, ReadonlyMap<string, readonly number[]>> = new Map([
  [
    '',
    new Map<string, readonly number[]>([
      ['ConstantOfShape', [0]], // shape
      ['Expand', [1]], // shape
      ['Tile', [1]], // repeats
      ['Range', [0, 1, 2]], // start, limit, delta
      ['Resize', [1, 2, 3]], // roi, scales, sizes (opset 10: scales at 1)
      ['Upsample', [1]], // scales
      ['Pad', [1, 3]], // pads, axes
      ['OneHot', [1]], // depth
      ['CenterCropPad', [1]], // shape
      ['NonMaxSuppression', [2]], // max_output_boxes_per_class
      ['MaxUnpool', [2]], // output_shape
      ['Col2Im', [1, 2]], // image_shape, block_shape
      ['AffineGrid', [1]], // size
      ['DFT', [1]], // dft_length
      ['STFT', [1, 3]], // frame_step, frame_length
      ['HannWindow', [0]], // size
      ['HammingWindow', [0]], // size
      ['BlackmanWindow', [0]], // size
      ['MelWeightMatrix', [0, 1]], // num_mel_bins, dft_length
      ['ImageDecoder', [0]], // encoded_stream: the image's size is in its bytes
    ]),
  ],
  [
    'com.microsoft',
    new Map<string, readonly number[]>([
      ['Range', [0, 1, 2]], // start, limit, delta
      ['CropAndResize', [3]], // crop_size
      ['Pad', [1]], // pads
      ['ConvTransposeWithDynamicPads', [2]], // Pads
    ]),
  ],
]);

/** Why a model's run time may depend on its input values, or undefined when it depends on input shapes alone. */
export function valueDependentWork(model: Uint8Array): string | undefined {
  const scan = readModel(model);
  if (scan === undefined) return UNREADABLE_MODEL;
  if (scan.hasFunctions) return 'the model defines local functions';
  const constants = new Set<string>();
  for (const name of scan.initializers) if (!scan.graphInputs.has(name)) constants.add(name);
  for (const node of scan.nodes) {
    if (isOnnxDomain(node.domain) && node.opType === 'Constant') for (const out of node.outputs) constants.add(out);
  }
  for (let i = 0; i < scan.nodes.length; i++) {
    const node = scan.nodes[i] as NodeScan;
    const who = `${node.name === '' ? `node #${i}` : `node '${printable(node.name)}'`} (${printable(node.opType)})`;
    if (node.hasGraph) return `${who} runs a subgraph`;
    if (!STANDARD_DOMAINS.has(node.domain)) {
      return `operator domain '${printable(node.domain)}' (op '${printable(node.opType)}') is not a standard ONNX domain`;
    }
    const table = SHAPE_FROM_VALUES.get(isOnnxDomain(node.domain) ? '' : node.domain);
    for (const index of table?.get(node.opType) ?? []) {
      const input = node.inputs[index];
      if (input === undefined || input === '' || constants.has(input)) continue;
      return `${who} takes its output shape from input ${index}, which is not a constant`;
    }
  }
  return undefined;
}

/** Longest name a reason quotes whole. */
const MAX_NAME_IN_REASON = 80;

/** `name` fit for one log line: control characters (and line separators) as '?', cut to MAX_NAME_IN_REASON. */
function printable(name: string): string {
  // eslint-disable-next-line no-control-regex
  const clean = name.replace(/[\u0000-\u001f\u007f-\u009f\u2028\u2029]/g, '?');
  return clean.length <= MAX_NAME_IN_REASON ? clean : `${clean.slice(0, MAX_NAME_IN_REASON)}…`;
}

function isOnnxDomain(domain: string): boolean {
  return domain === '' || domain === 'ai.onnx';
}

// ---- reading the wire format ------------------------------------------------------------------

interface NodeScan {
  name: string;
  opType: string;
  domain: string;
  inputs: string[];
  outputs: string[];
  hasGraph: boolean;
}

interface ModelScan {
  hasFunctions: boolean;
  nodes: NodeScan[];
  /** Names of initializers and sparse initializers. */
  initializers: string[];
  graphInputs: Set<string>;
}

const WIRE_VARINT = 0;
const WIRE_FIXED64 = 1;
const WIRE_LEN = 2;
const WIRE_FIXED32 = 5;

/** Called per field; `start`/`end` bound the payload of a length-delimited field. Returns false when malformed. */
type FieldVisitor = (field: number, wire: number, start: number, end: number) => boolean;

/** Decodes UTF-8 strictly; `fatal` makes bad bytes throw, caught in `text`. */
const utf8 = new TextDecoder('utf-8', { fatal: true });

/** The parts of `bytes` the policy needs, or undefined when they are not a ModelProto with a graph. */
function readModel(bytes: Uint8Array): ModelScan | undefined {
  const scan: ModelScan = { hasFunctions: false, nodes: [], initializers: [], graphInputs: new Set() };
  let hasGraph = false;
  const ok = forEachField(bytes, 0, bytes.length, (field, wire, start, end) => {
    if (field === 7) {
      hasGraph = true;
      return wire === WIRE_LEN && readGraph(bytes, start, end, scan);
    }
    if (field === 25) {
      scan.hasFunctions = true;
      return wire === WIRE_LEN;
    }
    return true;
  });
  return ok && hasGraph ? scan : undefined;
}

function readGraph(bytes: Uint8Array, from: number, to: number, scan: ModelScan): boolean {
  return forEachField(bytes, from, to, (field, wire, start, end) => {
    switch (field) {
      case 1: {
        if (wire !== WIRE_LEN) return false;
        const node = readNode(bytes, start, end);
        if (node === undefined) return false;
        scan.nodes.push(node);
        return true;
      }
      case 5: {
        const name = wire === WIRE_LEN ? lastString(bytes, start, end, 8) : undefined;
        if (name === undefined) return false;
        scan.initializers.push(name);
        return true;
      }
      case 11: {
        const name = wire === WIRE_LEN ? lastString(bytes, start, end, 1) : undefined;
        if (name === undefined) return false;
        scan.graphInputs.add(name);
        return true;
      }
      case 15: {
        if (wire !== WIRE_LEN) return false;
        // SparseTensorProto.values (a TensorProto; repeated occurrences merge, so the name is the last one set).
        let name = '';
        const ok = forEachField(bytes, start, end, (f, w, s, e) => {
          if (f !== 1) return true;
          const valuesName = w === WIRE_LEN ? lastString(bytes, s, e, 8, name) : undefined;
          if (valuesName === undefined) return false;
          name = valuesName;
          return true;
        });
        if (!ok) return false;
        scan.initializers.push(name);
        return true;
      }
      default:
        return true;
    }
  });
}

function readNode(bytes: Uint8Array, from: number, to: number): NodeScan | undefined {
  const node: NodeScan = { name: '', opType: '', domain: '', inputs: [], outputs: [], hasGraph: false };
  const ok = forEachField(bytes, from, to, (field, wire, start, end) => {
    if (field === 5) {
      if (wire !== WIRE_LEN) return false;
      return forEachField(bytes, start, end, (f, w) => {
        if (f !== 6 && f !== 11) return true;
        node.hasGraph = true;
        return w === WIRE_LEN;
      });
    }
    if (field !== 1 && field !== 2 && field !== 3 && field !== 4 && field !== 7) return true;
    const value = wire === WIRE_LEN ? text(bytes, start, end) : undefined;
    if (value === undefined) return false;
    if (field === 1) node.inputs.push(value);
    else if (field === 2) node.outputs.push(value);
    else if (field === 3) node.name = value;
    else if (field === 4) node.opType = value;
    else node.domain = value;
    return true;
  });
  return ok ? node : undefined;
}

/** The last value of string field `field` in the message at [from, to) (`initial` when absent), or undefined when malformed. */
function lastString(bytes: Uint8Array, from: number, to: number, field: number, initial = ''): string | undefined {
  let value = initial;
  const ok = forEachField(bytes, from, to, (f, w, start, end) => {
    if (f !== field) return true;
    const s = w === WIRE_LEN ? text(bytes, start, end) : undefined;
    if (s === undefined) return false;
    value = s;
    return true;
  });
  return ok ? value : undefined;
}

function text(bytes: Uint8Array, start: number, end: number): string | undefined {
  try {
    return utf8.decode(bytes.subarray(start, end));
  } catch {
    return undefined;
  }
}

/**
 * Walk the fields of the message at [from, to), calling `visit` for each; false when the bytes are
 * malformed or `visit` said so. Varints, fixed-size and length-delimited fields are skipped by their
 * wire type; groups and unknown wire types are malformed.
 */
function forEachField(bytes: Uint8Array, from: number, to: number, visit: FieldVisitor): boolean {
  let pos = from;
  while (pos < to) {
    const tag = readVarint(bytes, pos, to);
    if (tag === undefined) return false;
    pos = tag.next;
    if (tag.value > 0xffff_ffff) return false;
    const field = Math.floor(tag.value / 8);
    const wire = tag.value % 8;
    if (field === 0) return false;
    let start = pos;
    let end: number;
    switch (wire) {
      case WIRE_VARINT: {
        const v = readVarint(bytes, pos, to);
        if (v === undefined) return false;
        end = v.next;
        break;
      }
      case WIRE_FIXED64:
        end = pos + 8;
        break;
      case WIRE_FIXED32:
        end = pos + 4;
        break;
      case WIRE_LEN: {
        const length = readVarint(bytes, pos, to);
        if (length === undefined) return false;
        start = length.next;
        end = start + length.value;
        break;
      }
      default:
        return false;
    }
    if (end > to) return false;
    if (!visit(field, wire, start, end)) return false;
    pos = end;
  }
  return true;
}

/** A varint at `pos` (at most 10 bytes, ending before `to`), or undefined when truncated or too long. */
function readVarint(bytes: Uint8Array, pos: number, to: number): { value: number; next: number } | undefined {
  let value = 0;
  let scale = 1;
  for (let i = 0; i < 10 && pos + i < to; i++) {
    const byte = bytes[pos + i] as number;
    value += (byte & 0x7f) * scale;
    if (byte < 0x80) return { value, next: pos + i + 1 };
    scale *= 128;
  }
  return undefined;
}
