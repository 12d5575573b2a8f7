import { describe, expect, it } from 'vitest';
import { isSwitchyardError } from '@switchyard/common';
import { initialState, isAccepting, step, type JsonState } from './json-automaton.js';
import { compileJsonSchema, MAX_SCHEMA_DEPTH, MAX_SCHEMA_NODES, MAX_UNION_ALTERNATIVES } from './json-schema.js';
import { parseResponseFormat } from './response-format.js';

function refusal(f: () => unknown): string {
  try {
    f();
  } catch (e) {
    expect(isSwitchyardError(e) && e.code === 'invalid_argument').toBe(true);
    return (e as Error).message;
  }
  throw new Error('not refused');
}

function accepts(schema: unknown, text: string): boolean {
  let s: JsonState | null = initialState(compileJsonSchema(schema));
  for (const b of Buffer.from(text)) if ((s = step(s, b)) === null) return false;
  return isAccepting(s);
}

describe('compileJsonSchema', () => {
  it('refuses unsupported keywords by name and place', () => {
    expect(refusal(() => compileJsonSchema({ type: 'object', properties: { id: { type: 'string', pattern: '^a' } } }))).toBe(
      'schema: pattern is not supported (at #/properties/id)',
    );
    expect(refusal(() => compileJsonSchema({ type: 'string', format: 'date-time' }))).toContain('format is not supported');
    expect(refusal(() => compileJsonSchema({ type: 'string', minLength: 2 }))).toContain('minLength is not supported');
    expect(refusal(() => compileJsonSchema({ type: 'number', minimum: 0 }))).toContain('minimum is not supported');
    expect(refusal(() => compileJsonSchema({ allOf: [{}] }))).toContain('allOf is not supported');
    expect(refusal(() => compileJsonSchema({ type: 'array', items: [{}, {}] }))).toContain('tuple validation');
    expect(refusal(() => compileJsonSchema({ $ref: 'https://example.com/s.json' }))).toContain('only local');
    expect(refusal(() => compileJsonSchema({ type: 'date' }))).toContain('type must be one of');
  });

  it('resolves local $refs and refuses recursive ones', () => {
    const schema = { $defs: { item: { type: 'object', properties: { n: { type: 'integer' } }, required: ['n'], additionalProperties: false } }, type: 'array', items: { $ref: '#/$defs/item' } };
    expect(accepts(schema, '[{"n":1},{"n":2}]')).toBe(true);
    expect(accepts(schema, '[{"m":1}]')).toBe(false);
    const recursive = { $defs: { node: { type: 'object', properties: { next: { $ref: '#/$defs/node' } } } }, $ref: '#/$defs/node' };
    expect(refusal(() => compileJsonSchema(recursive))).toContain('recursive $ref #/$defs/node is not supported');
    expect(refusal(() => compileJsonSchema({ $ref: '#/$defs/missing' }))).toContain('points nowhere');
  });

  it('refuses schemas no value satisfies', () => {
    expect(refusal(() => compileJsonSchema(false))).toContain('no JSON value satisfies');
    expect(refusal(() => compileJsonSchema({ type: 'array', minItems: 3, maxItems: 2 }))).toContain('no JSON value satisfies');
    expect(refusal(() => compileJsonSchema({ type: 'object', required: ['a'], additionalProperties: false }))).toContain('no JSON value satisfies');
    expect(refusal(() => compileJsonSchema({ type: 'string', enum: [1, 2] }))).toContain('no JSON value satisfies');
  });

  it('keeps adversarial schemas bounded in time and size', () => {
    // Deep nesting: compiled, or refused, quickly.
    let deep: unknown = { type: 'string' };
    for (let i = 0; i < 100_000; i++) deep = { type: 'array', items: deep };
    let t = performance.now();
    expect(refusal(() => compileJsonSchema(deep))).toContain(`nested deeper than ${MAX_SCHEMA_DEPTH}`);
    expect(performance.now() - t).toBeLessThan(1000);
    // Nested past what the automaton opens: the mask simply never opens the deeper array.
    let nested: unknown = { type: 'integer' };
    for (let i = 0; i < 100; i++) nested = { type: 'array', items: nested, maxItems: 1 };
    expect(accepts(nested, '['.repeat(64) + ']'.repeat(64))).toBe(true);
    expect(accepts(nested, '['.repeat(65))).toBe(false);
    // …and a schema that needs more nesting than that is refused; one that may need it near the limit never gets stuck.
    let required: unknown = { type: 'integer' };
    for (let i = 0; i < 70; i++) required = { type: 'array', items: required, minItems: 1 };
    expect(refusal(() => compileJsonSchema(required))).toContain('deeper than 64');
    const d10 = [...Array(10)].reduce((x: unknown) => ({ type: 'array', items: x, minItems: 1 }), { type: 'null' }) as unknown;
    const optionalDeep = { type: 'array', items: { anyOf: [{ type: 'null' }, d10] } };
    expect(accepts({ type: 'array', items: optionalDeep }, '[[[[[[[[[[[[null]]]]]]]]]]]]')).toBe(true);
    let chain: unknown = optionalDeep;
    for (let i = 0; i < 60; i++) chain = { type: 'array', items: chain, minItems: 1 };
    // At depth 61 a 10-deep value no longer fits: null is the only way on.
    expect(accepts(chain, '['.repeat(61) + '['.repeat(11) + 'null' + ']'.repeat(72))).toBe(false);
    expect(accepts(chain, '['.repeat(61) + 'null' + ']'.repeat(61))).toBe(true);
    // Too many subschemas.
    const wide = { type: 'object', properties: Object.fromEntries(Array.from({ length: MAX_SCHEMA_NODES + 1 }, (_, i) => [`k${i}`, { type: 'null' }])) };
    expect(refusal(() => compileJsonSchema(wide))).toContain(`more than ${MAX_SCHEMA_NODES}`);
    // anyOf of anyOf…: alternatives multiply; refused past the bound.
    let union: unknown = { type: 'object', properties: { x: { type: 'integer' } } };
    for (let i = 0; i < 8; i++) union = { anyOf: [union, union] };
    expect(refusal(() => compileJsonSchema(union))).toContain(`at most ${MAX_UNION_ALTERNATIVES} alternatives`);
    // Options told apart by their first byte do not add up: 40 scalars of distinct types and many open objects' values.
    compileJsonSchema({ anyOf: Array.from({ length: 40 }, (_, i) => ({ const: `v${i}` })).concat([{ type: 'object' }, { type: 'array' }, { type: 'integer' }] as never[]) });
    compileJsonSchema({ anyOf: Array.from({ length: 60 }, (_, i) => ({ type: 'object', properties: { [`k${i}`]: { type: 'integer' } }, required: [`k${i}`] })) });
    // Large maxItems: the automaton keeps a count, not the items.
    const big = compileJsonSchema({ type: 'array', items: { type: 'integer' }, maxItems: 1_000_000_000 });
    let s: JsonState | null = initialState(big);
    t = performance.now();
    s = step(s, 0x5b);
    for (let i = 0; i < 20_000; i++) s = step(step(s!, 0x31)!, 0x2c);
    expect(performance.now() - t).toBeLessThan(2000);
    expect(refusal(() => compileJsonSchema({ type: 'array', minItems: 1_000_000 }))).toContain('minItems above');
    // A large enum.
    const values = Array.from({ length: 5000 }, (_, i) => `v${i}`);
    expect(accepts({ enum: values }, '"v4999"')).toBe(true);
    expect(accepts({ enum: values }, '"v5000"')).toBe(false);
  });

  it('enforces the schema subset', () => {
    const s = { type: 'object', properties: { a: { type: 'integer' }, b: { enum: ['x', 2, null] }, c: { type: 'array', items: { type: 'boolean' }, minItems: 1, maxItems: 2 } }, required: ['a'], additionalProperties: false };
    expect(accepts(s, '{"a":1}')).toBe(true);
    expect(accepts(s, '{"a":1.5}')).toBe(false);
    expect(accepts(s, '{"b":"x"}')).toBe(false);
    expect(accepts(s, '{"a":1,"b":2,"c":[true]}')).toBe(true);
    expect(accepts(s, '{"a":1,"c":[]}')).toBe(false);
    expect(accepts(s, '{"a":1,"c":[true,false,true]}')).toBe(false);
    expect(accepts(s, '{"a":1,"d":0}')).toBe(false);
    expect(accepts(s, '{"a":1,"a":2}')).toBe(false);
    expect(accepts({ anyOf: [{ type: 'integer' }, { type: 'string' }] }, '"s"')).toBe(true);
    expect(accepts({ oneOf: [{ type: 'integer' }, { type: 'null' }] }, 'true')).toBe(false);
    expect(accepts({ const: { k: [1, 'two'] } }, '{"k":[1,"two"]}')).toBe(true);
    expect(accepts({ type: 'object', additionalProperties: { type: 'integer' } }, '{"x":1,"y":2}')).toBe(true);
    expect(accepts({ type: 'object', additionalProperties: { type: 'integer' } }, '{"x":"1"}')).toBe(false);
  });
});

describe('parseResponseFormat', () => {
  it('maps OpenAI response formats to specs', () => {
    expect(parseResponseFormat(undefined)).toBeNull();
    expect(parseResponseFormat({ type: 'text' })).toBeNull();
    expect(parseResponseFormat({ type: 'json_object' })).toEqual({ kind: 'json' });
    const schema = { type: 'object', properties: { a: { type: 'string' } } };
    expect(parseResponseFormat({ type: 'json_schema', json_schema: { name: 'x', schema, strict: true } })).toEqual({ kind: 'json_schema', schema });
  });

  it('refuses malformed formats', () => {
    expect(refusal(() => parseResponseFormat({ type: 'xml' }))).toContain('response_format.type must be');
    expect(refusal(() => parseResponseFormat({ type: 'json_schema' }))).toContain('json_schema must be an object');
    expect(refusal(() => parseResponseFormat({ type: 'json_schema', json_schema: { name: 'a b', schema: {} } }))).toContain('name must be');
    expect(refusal(() => parseResponseFormat({ type: 'json_schema', json_schema: { name: 'a' } }))).toContain('schema is required');
    expect(refusal(() => parseResponseFormat({ type: 'json_schema', json_schema: { name: 'a', schema: { type: 'string', pattern: 'x' } } }))).toBe(
      'response_format.json_schema.schema: pattern is not supported (at #)',
    );
  });
});
