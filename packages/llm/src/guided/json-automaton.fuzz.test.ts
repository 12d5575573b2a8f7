/**
 * Properties of the JSON automaton over random schemas of the supported subset: a random walk
 * through allowed bytes never gets stuck (some byte continues, or the document is complete), and
 * every complete document parses with JSON.parse and validates against the schema (checked by the
 * small validator of @switchyard/testing, written apart from the automaton); every valid value's canonical text is
 * accepted.
 */
import { describe, expect, it } from 'vitest';
import { fc, fuzz, validates, type JsonValue } from '@switchyard/testing/fuzz';
import { initialState, isAccepting, MAX_WS, step, type JsonState } from './json-automaton.js';
import { compileJsonSchema } from './json-schema.js';

type Schema = { [k: string]: JsonValue | Schema };

const keyArb = fc.constantFrom('a', 'b', 'name', 'é', 'with "quote"', '__proto__', '');
const leaf: fc.Arbitrary<Schema> = fc.oneof(
  fc.constantFrom<Schema>({ type: 'string' }, { type: 'integer' }, { type: 'number' }, { type: 'boolean' }, { type: 'null' }, { type: ['string', 'null'] }, {}),
  fc.array(fc.oneof(fc.string({ maxLength: 4 }), fc.integer({ min: -20, max: 20 }), fc.constant(null), fc.boolean()), { minLength: 1, maxLength: 4 }).map((e): Schema => ({ enum: e })),
  fc.oneof(fc.string({ maxLength: 3 }), fc.integer()).map((c): Schema => ({ const: c })),
);
const schemaArb: fc.Arbitrary<Schema> = fc.letrec<{ s: Schema }>((tie) => ({
  s: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    leaf,
    fc
      .record({
        props: fc.dictionary(keyArb, tie('s'), { maxKeys: 3 }),
        required: fc.subarray(['a', 'b', 'name', '__proto__']),
        closed: fc.boolean(),
      })
      .map(({ props, required, closed }): Schema => {
        const req = required.filter((r) => Object.hasOwn(props, r));
        return { type: 'object', properties: props as Schema, required: req, ...(closed ? { additionalProperties: false } : {}) };
      }),
    fc.record({ items: tie('s'), min: fc.nat(2), extra: fc.option(fc.nat(3)) }).map(({ items, min, extra }): Schema => ({
      type: 'array',
      items,
      minItems: min,
      ...(extra !== null ? { maxItems: min + extra } : {}),
    })),
    fc.array(tie('s'), { minLength: 1, maxLength: 3 }).map((options): Schema => ({ anyOf: options })),
  ),
})).s;

const STRUCTURAL = Buffer.from('{}[],:"0123456789-.etrufanl ');

/** A random walk of at most `limit` bytes; returns the bytes and whether the document is complete. */
function walk(state0: JsonState, rand: () => number, limit: number): { text: Buffer; complete: boolean } {
  let state = state0;
  const bytes: number[] = [];
  for (let i = 0; i < limit; i++) {
    const allowed: Array<[number, JsonState]> = [];
    for (let b = 0; b < 256; b++) {
      const next = step(state, b);
      if (next !== null) allowed.push([b, next]);
    }
    const accepting = isAccepting(state);
    // Never stuck: every reachable state continues or is complete.
    if (allowed.length === 0 && !accepting) throw new Error(`stuck after ${JSON.stringify(Buffer.from(bytes).toString('latin1'))}`);
    if (allowed.length === 0 || (accepting && rand() < 0.3)) return { text: Buffer.from(bytes), complete: accepting };
    const structural = allowed.filter(([b]) => STRUCTURAL.includes(b));
    const pool = structural.length > 0 && rand() < 0.85 ? structural : allowed;
    const [b, next] = pool[Math.floor(rand() * pool.length)]!;
    bytes.push(b);
    state = next;
  }
  return { text: Buffer.from(bytes), complete: isAccepting(state) };
}

function mulberry(seed: number): () => number {
  let a = seed | 0;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function accepts(root: ReturnType<typeof compileJsonSchema>, text: string): boolean {
  let s: JsonState | null = initialState(root);
  for (const b of Buffer.from(text)) {
    s = step(s, b);
    if (s === null) return false;
  }
  return isAccepting(s);
}

describe('JSON automaton (property-based)', () => {
  it('walks never get stuck, and every complete document parses and validates', () => {
    let completed = 0;
    fuzz(
      fc.tuple(schemaArb, fc.integer()),
      ([schema, seed]) => {
        let root;
        try {
          root = compileJsonSchema(schema);
        } catch {
          return; // unsatisfiable: refused, tested elsewhere
        }
        const rand = mulberry(seed);
        for (let i = 0; i < 4; i++) {
          const { text, complete } = walk(initialState(root), rand, 300);
          if (!complete) continue;
          completed++;
          const value = JSON.parse(text.toString('utf8')) as unknown;
          if (!validates(value, schema)) throw new Error(`${text.toString('utf8')} does not validate against ${JSON.stringify(schema)}`);
          expect(Buffer.from(text.toString('utf8'), 'utf8').equals(text)).toBe(true); // well-formed UTF-8
        }
      },
      { timeLimitMs: 5_000 },
    );
    expect(completed).toBeGreaterThan(50);
  });

  it('accepts the canonical text of values that validate', () => {
    fuzz(fc.tuple(schemaArb, fc.jsonValue({ maxDepth: 3 })), ([schema, value]) => {
      let root;
      try {
        root = compileJsonSchema(schema);
      } catch {
        return;
      }
      if (!validates(value, schema)) return;
      const text = JSON.stringify(value);
      // The deliberate gaps: numbers the automaton caps (MAX_NUMBER_BYTES), and integers from 1e21 on,
      // which JSON.stringify writes with an exponent (1e+21) while the automaton writes an integer in
      // plain digits only, as outlines' and xgrammar's integer rules do.
      if (/\d{20}/.test(text) || /\de\+/.test(text)) return;
      expect(accepts(root, text)).toBe(true);
    });
  });

  it('json_object accepts any JSON object text and refuses anything else', () => {
    const root = compileJsonSchema({ type: 'object' });
    fuzz(fc.jsonValue({ maxDepth: 4 }), (value) => {
      const text = JSON.stringify(value);
      if (/\d{20}/.test(text)) return;
      const isObject = typeof value === 'object' && value !== null && !Array.isArray(value);
      expect(accepts(root, text)).toBe(isObject);
      const pretty = JSON.stringify(value, null, 2);
      expect(accepts(root, pretty)).toBe(isObject && !new RegExp(`\\s{${MAX_WS + 1}}`).test(pretty));
    });
  });
});
