/**
 * Fuzz properties of `valueDependentWork`, the reader of untrusted model files: mutated and
 * truncated real models, and random bytes in every message the reader descends into, always give
 * a string or undefined (never a throw) within the time bound; untouched models give their known
 * answers; a model cut before the end of its graph is unreadable.
 */
import { describe, expect, it } from 'vitest';
import { buildMlpModel, encodeModelProto, GraphBuilder, tensorAttr } from '@switchyard/onnx-builder';
import { concatBytes, fc, fuzz } from '@switchyard/testing/fuzz';
import { UNREADABLE_MODEL, valueDependentWork } from './onnx-op-scan.js';

/** Real models with their known answers. */
const MODELS: ReadonlyArray<{ readonly bytes: Uint8Array; readonly answer: string | undefined }> = [
  { bytes: buildMlpModel({ width: 8, layers: 2 }), answer: undefined },
  {
    bytes: new GraphBuilder('expand')
      .input('x', 'FLOAT', [1, 4])
      .output('y', 'FLOAT', [3, 4])
      .node('Constant', [], ['shape'], { value: tensorAttr({ elemType: 'INT64', dims: [2], values: [3, 4] }) })
      .node('Expand', ['x', 'shape'], ['y'])
      .buildModel(),
    answer: undefined,
  },
  {
    bytes: new GraphBuilder('range')
      .input('n', 'INT64', [])
      .output('y', 'INT64', [-1])
      .initializer('zero', 'INT64', [], [0])
      .initializer('one', 'INT64', [], [1])
      .node('Range', ['zero', 'n', 'one'], ['y'], {}, { name: 'r' })
      .buildModel(),
    answer: "node 'r' (Range) takes its output shape from input 1, which is not a constant",
  },
  {
    bytes: new GraphBuilder('custom').input('x', 'FLOAT', [2]).output('y', 'FLOAT', [2]).node('Foo', ['x'], ['y'], {}, { domain: 'custom.x' }).buildModel(),
    answer: "operator domain 'custom.x' (op 'Foo') is not a standard ONNX domain",
  },
];

/** How many bytes GraphBuilder writes after the graph (the one opset_import entry). */
const AFTER_GRAPH = encodeModelProto({ opset_import: [{ domain: '', version: 17 }] }).length;

type Mutation =
  | { readonly kind: 'set'; readonly at: number; readonly byte: number }
  | { readonly kind: 'insert'; readonly at: number; readonly bytes: Uint8Array }
  | { readonly kind: 'delete'; readonly at: number; readonly count: number };

const mutation: fc.Arbitrary<Mutation> = fc.oneof(
  fc.record({ kind: fc.constant('set' as const), at: fc.nat(), byte: fc.constantFrom(0x00, 0x7f, 0x80, 0xff, 0x0b, 0x0c, 0x3a, 0x0a) }),
  fc.record({ kind: fc.constant('set' as const), at: fc.nat(), byte: fc.integer({ min: 0, max: 255 }) }),
  fc.record({ kind: fc.constant('insert' as const), at: fc.nat(), bytes: fc.uint8Array({ minLength: 1, maxLength: 12 }) }),
  fc.record({ kind: fc.constant('delete' as const), at: fc.nat(), count: fc.integer({ min: 1, max: 8 }) }),
);

function mutate(bytes: Uint8Array, m: Mutation): Uint8Array {
  const at = bytes.length === 0 ? 0 : m.at % bytes.length;
  switch (m.kind) {
    case 'set': {
      const out = bytes.slice();
      out[at] = m.byte;
      return out;
    }
    case 'insert':
      return concatBytes([bytes.subarray(0, at), m.bytes, bytes.subarray(at)]);
    case 'delete':
      return concatBytes([bytes.subarray(0, at), bytes.subarray(at + m.count)]);
  }
}

/** A length-delimited field. */
function field(number: number, payload: Uint8Array): Uint8Array {
  const head: number[] = [number * 8 + 2];
  let n = payload.length;
  while (n >= 0x80) {
    head.push((n % 0x80) | 0x80);
    n = Math.floor(n / 0x80);
  }
  head.push(n);
  return concatBytes([Uint8Array.from(head), payload]);
}

/** What `valueDependentWork` may return: undefined, or a reason of one line. */
const isAnswer = (r: unknown): boolean => r === undefined || (typeof r === 'string' && r.length > 0 && !/[\r\n]/.test(r));

describe('valueDependentWork (fuzz)', () => {
  it('gives each untouched model its known answer', () => {
    fuzz(fc.constantFrom(...MODELS), ({ bytes, answer }) => {
      expect(valueDependentWork(bytes)).toBe(answer);
    });
  });

  it('answers a string or undefined for models with a few bytes set, inserted or deleted', () => {
    const mutated = fc.tuple(fc.constantFrom(...MODELS), fc.array(mutation, { minLength: 1, maxLength: 4 }));
    fuzz(mutated, ([{ bytes }, mutations]) => {
      expect(isAnswer(valueDependentWork(mutations.reduce(mutate, bytes)))).toBe(true);
    });
  });

  it('gives the same answer whatever an initializer holds (its payload is skipped by length)', () => {
    const payload = Uint8Array.from({ length: 64 }, (_, i) => i);
    const model = new GraphBuilder('padded')
      .input('x', 'FLOAT', [1, 4])
      .output('y', 'FLOAT', [3, 4])
      .initializer('shape', 'INT64', [2], [3, 4])
      .initializer('payload', 'UINT8', [64], [...payload])
      .node('Expand', ['x', 'shape'], ['y'])
      .buildModel();
    const at = Buffer.from(model).indexOf(Buffer.from(payload));
    expect(at).toBeGreaterThan(0);
    const changes = fc.array(fc.tuple(fc.integer({ min: 0, max: payload.length - 1 }), fc.integer({ min: 0, max: 255 })), { minLength: 1, maxLength: 16 });
    fuzz(changes, (list) => {
      const bytes = model.slice();
      for (const [offset, byte] of list) bytes[at + offset] = byte;
      expect(valueDependentWork(bytes)).toBeUndefined();
    });
  });

  it('calls any model cut before the end of its graph unreadable, and answers for any cut', () => {
    const cut = fc.constantFrom(...MODELS).chain((m) => fc.tuple(fc.constant(m), fc.integer({ min: 0, max: m.bytes.length })));
    fuzz(cut, ([{ bytes }, length]) => {
      const answer = valueDependentWork(bytes.subarray(0, length));
      if (length < bytes.length - AFTER_GRAPH) expect(answer).toBe(UNREADABLE_MODEL);
      else expect(isAnswer(answer)).toBe(true);
    });
  });

  it('answers for random bytes as a whole file, a graph, a node or an attribute', () => {
    const wrapped = fc.tuple(fc.uint8Array({ maxLength: 64 }), fc.integer({ min: 0, max: 3 })).map(([bytes, depth]) => {
      // depth 0: the file; 1: ModelProto.graph; 2: GraphProto.node; 3: NodeProto.attribute.
      const numbers = [7, 1, 5].slice(0, depth);
      return numbers.reduceRight<Uint8Array>((inner, n) => field(n, inner), bytes);
    });
    fuzz(wrapped, (bytes) => {
      expect(isAnswer(valueDependentWork(bytes))).toBe(true);
    });
  });

  it('names a subgraph nested 1000 deep at its first level', () => {
    // A subgraph nested 1000 deep (If → then_branch → If → …) is one reason, found at the first level.
    let inner: Uint8Array = new Uint8Array();
    for (let level = 0; level < 1_000; level++) inner = field(1, concatBytes([field(4, new TextEncoder().encode('If')), field(5, field(6, inner))]));
    expect(valueDependentWork(field(7, inner))).toBe('node #0 (If) runs a subgraph');
  });
});
