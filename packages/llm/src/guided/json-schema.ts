/**
 * Guided decoding specs and the JSON Schema subset they may carry, compiled into `SchemaNode`s the
 * JSON automaton (`json-automaton.ts`) walks. Pure.
 *
 * `GuidedDecoding` is the wire-level spec (it travels inside compiled sampling parameters, from a
 * router to a worker, as plain JSON). `compileGuidedDecoding` is the one place it is validated:
 * every schema keyword outside the supported subset is refused by name (invalid_argument), as are
 * schemas no JSON value can satisfy (the automaton must never reach a state with no way forward),
 * and schemas too large to walk in bounded time.
 *
 * Supported: `type` (a name or a list), `properties`, `required`, `additionalProperties` (false,
 * true or a schema), `items`, `minItems`, `maxItems`, `enum`, `const`, `anyOf`, `oneOf` (as anyOf:
 * exclusivity is not enforced), `$defs`/`definitions` with local `$ref`s to them (not recursive),
 * and the annotations `title`, `description`, `default`, `examples`, `$schema`, `$id`, `$comment`,
 * `strict`. Enum and const values are emitted in their canonical `JSON.stringify` form.
 */
import { describeValue, invalidArgument, type SwitchyardError } from '@switchyard/common';

/** What a request asks generation to follow. `json`: any JSON object (OpenAI's `json_object`). */
export type GuidedDecoding = { readonly kind: 'json' } | { readonly kind: 'json_schema'; readonly schema: unknown };

export interface ObjectNode {
  readonly k: 'object';
  readonly props: ReadonlyMap<string, SchemaNode>;
  readonly required: readonly string[];
  /** null: no other keys (additionalProperties: false). */
  readonly additional: SchemaNode | null;
  /** Canonical key texts (JSON-encoded, without the opening quote, with the closing one) → key. */
  readonly keyTexts: ReadonlyArray<{ readonly text: Uint8Array; readonly key: string }>;
}
export interface ArrayNode {
  readonly k: 'array';
  readonly items: SchemaNode;
  readonly min: number;
  /** Infinity: unbounded. */
  readonly max: number;
}
export interface LiteralNode {
  readonly k: 'literal';
  /** Canonical JSON texts of the allowed values (never empty, no duplicates). */
  readonly texts: readonly Uint8Array[];
}
export type SchemaNode =
  | ObjectNode
  | ArrayNode
  | LiteralNode
  | { readonly k: 'string' }
  | { readonly k: 'number'; readonly integer: boolean }
  | { readonly k: 'union'; readonly options: readonly SchemaNode[] };

/** Bounds that keep one schema's compile and walk small (a body is size-limited too). */
export const MAX_SCHEMA_NODES = 10_000;
/** Most alternatives a union may keep alive at once (anyOf widths along a path add up). */
export const MAX_UNION_ALTERNATIVES = 64;
/** Deepest nesting of arrays and objects a guided value may have (schema or `json_object`). */
export const MAX_GUIDED_DEPTH = 64;
/** Deepest nesting of subschemas (a request body is at most 128 deep; the cluster wire too is bounded here). */
export const MAX_SCHEMA_DEPTH = 256;
/** minItems above this is refused: the automaton counts items, and a model cannot be made to emit more. */
export const MAX_MIN_ITEMS = 4096;

const enc = new TextEncoder();

const ANNOTATIONS = new Set(['title', 'description', 'default', 'examples', '$schema', '$id', '$comment', 'strict', 'deprecated', 'readOnly', 'writeOnly']);
const KNOWN = new Set(['type', 'properties', 'required', 'additionalProperties', 'items', 'minItems', 'maxItems', 'enum', 'const', 'anyOf', 'oneOf', '$ref', '$defs', 'definitions']);
const TYPES = new Set(['object', 'array', 'string', 'number', 'integer', 'boolean', 'null']);

function literal(values: readonly unknown[]): LiteralNode {
  const texts = [...new Set(values.map((v) => JSON.stringify(v)))].map((t) => enc.encode(t));
  return { k: 'literal', texts };
}

/** Any JSON value (cyclic node graph: objects and arrays of anything). */
export const ANY_VALUE: SchemaNode = (() => {
  const anyObject: { k: 'object'; props: Map<string, SchemaNode>; required: string[]; additional: SchemaNode | null; keyTexts: [] } = {
    k: 'object',
    props: new Map(),
    required: [],
    additional: null,
    keyTexts: [],
  };
  const anyArray: { k: 'array'; items: SchemaNode | null; min: number; max: number } = { k: 'array', items: null, min: 0, max: Infinity };
  const any: SchemaNode = {
    k: 'union',
    options: [anyObject, anyArray as ArrayNode, { k: 'string' }, { k: 'number', integer: false }, literal([true, false, null])],
  };
  anyObject.additional = any;
  anyArray.items = any;
  return any;
})();

/** The root node `json_object` generates: an object with any keys and values. */
export const ANY_OBJECT: SchemaNode = (ANY_VALUE as { readonly options: readonly SchemaNode[] }).options[0]!;

/** The spec a wire value (`unknown`) describes, checked; invalid_argument naming `what` otherwise. */
export function decodeGuidedDecoding(value: unknown, what = 'guided_decoding'): GuidedDecoding {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw invalidArgument(`${what} must be an object, got ${describeValue(value)}`);
  const o = value as Record<string, unknown>;
  if (o['kind'] === 'json') return { kind: 'json' };
  if (o['kind'] === 'json_schema') {
    compileJsonSchema(o['schema'], `${what}.schema`);
    return { kind: 'json_schema', schema: o['schema'] };
  }
  throw invalidArgument(`${what}.kind must be "json" or "json_schema", got ${describeValue(o['kind'])}`);
}

/** The root schema node of a spec (its schema compiled; `json`: ANY_OBJECT). */
export function guidedRoot(spec: GuidedDecoding): SchemaNode {
  return spec.kind === 'json' ? ANY_OBJECT : compileJsonSchema(spec.schema, 'response_format.json_schema.schema');
}

/**
 * Compile `schema` (JSON from a client). invalid_argument for anything outside the supported subset
 * (naming the keyword and where it is, e.g. `pattern is not supported (at #/properties/name)`),
 * unsatisfiable schemas, and schemas past the size bounds above.
 */
export function compileJsonSchema(schema: unknown, what = 'schema'): SchemaNode {
  const c = new Compiler(schema, what);
  const root = c.node(schema, '#', []);
  if (root === null) throw c.error('#', 'no JSON value satisfies this schema');
  if (minDepth(root) > MAX_GUIDED_DEPTH) throw c.error('#', `every value of this schema nests arrays and objects deeper than ${MAX_GUIDED_DEPTH}`);
  if (alternatives(root, new Set()) > MAX_UNION_ALTERNATIVES) {
    throw c.error('#', `anyOf/oneOf/type lists may keep at most ${MAX_UNION_ALTERNATIVES} alternatives open at once`);
  }
  return root;
}

const minDepths = new WeakMap<SchemaNode, number>();

/**
 * The least nesting of arrays and objects a value of `n` needs (0 for scalars and literals). The
 * automaton opens a container only when that still fits under MAX_GUIDED_DEPTH, so it never
 * reaches a state it cannot finish.
 */
export function minDepth(n: SchemaNode, visiting: Set<SchemaNode> = new Set()): number {
  const known = minDepths.get(n);
  if (known !== undefined) return known;
  if (visiting.has(n)) return Infinity;
  visiting.add(n);
  let d: number;
  switch (n.k) {
    case 'object':
      d = 1 + n.required.reduce((m, r) => Math.max(m, minDepth(n.props.get(r) ?? n.additional!, visiting)), 0);
      break;
    case 'array':
      d = 1 + (n.min === 0 ? 0 : minDepth(n.items, visiting));
      break;
    case 'union':
      d = n.options.reduce((m, o) => Math.min(m, minDepth(o, visiting)), Infinity);
      break;
    default:
      d = 0;
  }
  visiting.delete(n);
  if (visiting.size === 0 || d !== Infinity) minDepths.set(n, d);
  return d;
}

/** First bytes a value of `n` may start with (whitespace aside). */
function firstBytes(n: SchemaNode, out: Set<number>, onPath: Set<SchemaNode> = new Set()): Set<number> {
  if (onPath.has(n)) return out;
  onPath.add(n);
  switch (n.k) {
    case 'object':
      out.add(0x7b);
      break;
    case 'array':
      out.add(0x5b);
      break;
    case 'string':
      out.add(0x22);
      break;
    case 'number':
      for (const c of '-0123456789') out.add(c.charCodeAt(0));
      break;
    case 'literal':
      for (const t of n.texts) out.add(t[0]!);
      break;
    case 'union':
      for (const o of n.options) firstBytes(o, out, onPath);
      break;
  }
  onPath.delete(n);
  return out;
}

/**
 * Most union alternatives open at once under `n`: a union's options split on their first byte, so
 * the most options sharing one first byte (their own counts added); the most over an object's or an
 * array's children.
 */
function alternatives(n: SchemaNode, onPath: Set<SchemaNode>): number {
  if (onPath.has(n)) return 1; // ANY_VALUE's cycle
  onPath.add(n);
  let r = 1;
  if (n.k === 'union') {
    const perByte = new Map<number, number>();
    for (const o of n.options) {
      const a = alternatives(o, onPath);
      for (const b of firstBytes(o, new Set())) perByte.set(b, Math.min(1e9, (perByte.get(b) ?? 0) + a));
    }
    r = Math.max(1, ...perByte.values());
  } else if (n.k === 'array') r = alternatives(n.items, onPath);
  else if (n.k === 'object') {
    for (const p of n.props.values()) r = Math.max(r, alternatives(p, onPath));
    if (n.additional !== null) r = Math.max(r, alternatives(n.additional, onPath));
  }
  onPath.delete(n);
  return r;
}

class Compiler {
  private count = 0;
  private depth = 0;
  private readonly defs = new Map<string, SchemaNode | null>();

  constructor(
    private readonly root: unknown,
    private readonly what: string,
  ) {}

  error(at: string, message: string): SwitchyardError {
    return invalidArgument(`${this.what}: ${message} (at ${at})`);
  }

  /** The node of `s` at `at`; null when no value satisfies it. `refs`: the $refs being resolved (recursion). */
  node(s: unknown, at: string, refs: readonly string[]): SchemaNode | null {
    if (++this.count > MAX_SCHEMA_NODES) throw this.error(at.slice(0, 200), `the schema has more than ${MAX_SCHEMA_NODES} subschemas`);
    if (++this.depth > MAX_SCHEMA_DEPTH) throw this.error(at.slice(0, 200), `the schema is nested deeper than ${MAX_SCHEMA_DEPTH} subschemas`);
    try {
      return this.nodeOf(s, at, refs);
    } finally {
      this.depth--;
    }
  }

  private nodeOf(s: unknown, at: string, refs: readonly string[]): SchemaNode | null {
    if (s === true) return ANY_VALUE;
    if (s === false) return null;
    if (typeof s !== 'object' || s === null || Array.isArray(s)) throw this.error(at, `a schema must be an object or a boolean, got ${describeValue(s)}`);
    const o = s as Record<string, unknown>;
    for (const key of Object.keys(o)) {
      if (!KNOWN.has(key) && !ANNOTATIONS.has(key)) throw this.error(at, `${key} is not supported`);
    }
    if (o['$ref'] !== undefined) {
      if (Object.keys(o).some((k) => k !== '$ref' && !ANNOTATIONS.has(k) && k !== '$defs' && k !== 'definitions')) {
        throw this.error(at, '$ref beside other keywords is not supported');
      }
      return this.ref(o['$ref'], at, refs);
    }
    // Narrowing steps, each intersected with the type set: const/enum, then anyOf/oneOf, then type.
    if (o['const'] !== undefined || o['enum'] !== undefined) return this.literalNode(o, at);
    for (const key of ['anyOf', 'oneOf'] as const) {
      if (o[key] === undefined) continue;
      if (o['anyOf'] !== undefined && o['oneOf'] !== undefined) throw this.error(at, 'anyOf beside oneOf is not supported');
      const list = o[key];
      if (!Array.isArray(list) || list.length === 0) throw this.error(at, `${key} must be a non-empty list of schemas`);
      if (Object.keys(o).some((k) => KNOWN.has(k) && k !== key && k !== '$defs' && k !== 'definitions')) {
        throw this.error(at, `${key} beside other keywords is not supported: put them inside each alternative`);
      }
      return unionOf(list.map((sub, i) => this.node(sub, `${at}/${key}/${i}`, refs)));
    }
    return unionOf(this.types(o, at).map((t) => this.typed(t, o, at, refs)));
  }

  private types(o: Record<string, unknown>, at: string): string[] {
    const t = o['type'];
    if (t === undefined) {
      // Untyped: whatever its keywords imply, else any value.
      const implied: string[] = [];
      if (o['properties'] !== undefined || o['required'] !== undefined || o['additionalProperties'] !== undefined) implied.push('object');
      if (o['items'] !== undefined || o['minItems'] !== undefined || o['maxItems'] !== undefined) implied.push('array');
      return implied.length > 0 ? implied : [...TYPES].filter((x) => x !== 'integer');
    }
    const list = typeof t === 'string' ? [t] : t;
    if (!Array.isArray(list) || list.length === 0 || !list.every((x) => typeof x === 'string' && TYPES.has(x))) {
      throw this.error(at, `type must be one of ${[...TYPES].join(', ')} or a non-empty list of them, got ${describeValue(t)}`);
    }
    const set = new Set(list as string[]);
    if (set.has('number')) set.delete('integer');
    return [...set];
  }

  private typed(t: string, o: Record<string, unknown>, at: string, refs: readonly string[]): SchemaNode | null {
    switch (t) {
      case 'string':
        return { k: 'string' };
      case 'number':
        return { k: 'number', integer: false };
      case 'integer':
        return { k: 'number', integer: true };
      case 'boolean':
        return literal([true, false]);
      case 'null':
        return literal([null]);
      case 'array':
        return this.array(o, at, refs);
      default:
        return this.object(o, at, refs);
    }
  }

  private literalNode(o: Record<string, unknown>, at: string): SchemaNode | null {
    if (Object.keys(o).some((k) => KNOWN.has(k) && k !== 'const' && k !== 'enum' && k !== 'type' && k !== '$defs' && k !== 'definitions')) {
      throw this.error(at, 'enum/const beside other validation keywords is not supported');
    }
    let values: unknown[];
    if (o['const'] !== undefined) {
      values = [o['const']];
      if (o['enum'] !== undefined) throw this.error(at, 'enum beside const is not supported');
    } else {
      if (!Array.isArray(o['enum']) || o['enum'].length === 0) throw this.error(at, 'enum must be a non-empty list');
      values = o['enum'];
    }
    if (o['type'] !== undefined) {
      const types = new Set(this.types(o, at));
      values = values.filter((v) => types.has(jsonType(v)) || (types.has('number') && jsonType(v) === 'integer'));
    }
    if (values.length === 0) return null;
    const node = literal(values);
    this.count += node.texts.length;
    if (this.count > MAX_SCHEMA_NODES) throw this.error(at, `the schema has more than ${MAX_SCHEMA_NODES} subschemas and enum values`);
    return node;
  }

  private array(o: Record<string, unknown>, at: string, refs: readonly string[]): SchemaNode | null {
    const min = this.count_(o, 'minItems', at) ?? 0;
    const max = this.count_(o, 'maxItems', at) ?? Infinity;
    if (min > MAX_MIN_ITEMS) throw this.error(at, `minItems above ${MAX_MIN_ITEMS} is not supported`);
    if (min > max) return null;
    if (Array.isArray(o['items'])) throw this.error(at, 'items as a list (tuple validation) is not supported');
    const items = o['items'] === undefined ? ANY_VALUE : this.node(o['items'], `${at}/items`, refs);
    if (items === null) return min === 0 ? { k: 'array', items: ANY_VALUE, min: 0, max: 0 } : null;
    return { k: 'array', items, min, max };
  }

  private count_(o: Record<string, unknown>, key: string, at: string): number | undefined {
    const v = o[key];
    if (v === undefined) return undefined;
    if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 0) throw this.error(at, `${key} must be an integer >= 0, got ${describeValue(v)}`);
    return v;
  }

  private object(o: Record<string, unknown>, at: string, refs: readonly string[]): SchemaNode | null {
    const propsIn = o['properties'] ?? {};
    if (typeof propsIn !== 'object' || propsIn === null || Array.isArray(propsIn)) throw this.error(at, 'properties must be an object');
    const req = o['required'] ?? [];
    if (!Array.isArray(req) || !req.every((r) => typeof r === 'string')) throw this.error(at, 'required must be a list of strings');
    const required = [...new Set(req as string[])];
    const props = new Map<string, SchemaNode>();
    for (const [key, sub] of Object.entries(propsIn as Record<string, unknown>)) {
      const n = this.node(sub, `${at}/properties/${key}`, refs);
      if (n !== null) props.set(key, n);
      else if (required.includes(key)) return null;
    }
    const addIn = o['additionalProperties'];
    const additional = addIn === undefined ? ANY_VALUE : this.node(addIn, `${at}/additionalProperties`, refs);
    for (const r of required) if (!props.has(r) && additional === null) return null;
    const keyTexts = [...props.keys()].map((key) => ({ text: enc.encode(JSON.stringify(key).slice(1)), key }));
    return { k: 'object', props, required, additional, keyTexts };
  }

  private ref(ref: unknown, at: string, refs: readonly string[]): SchemaNode | null {
    if (typeof ref !== 'string') throw this.error(at, '$ref must be a string');
    const m = /^#\/(\$defs|definitions)\/([^/]+)$/.exec(ref);
    if (m === null) throw this.error(at, `$ref ${JSON.stringify(ref.slice(0, 80))} is not supported: only local #/$defs/NAME or #/definitions/NAME`);
    if (refs.includes(ref)) throw this.error(at, `recursive $ref ${ref} is not supported`);
    if (this.defs.has(ref)) return this.defs.get(ref)!;
    const defs = typeof this.root === 'object' && this.root !== null ? (this.root as Record<string, unknown>)[m[1]!] : undefined;
    const name = m[2]!.replace(/~1/g, '/').replace(/~0/g, '~');
    const target = typeof defs === 'object' && defs !== null && Object.hasOwn(defs, name) ? (defs as Record<string, unknown>)[name] : undefined;
    if (target === undefined) throw this.error(at, `$ref ${ref} points nowhere`);
    const n = this.node(target, ref, [...refs, ref]);
    this.defs.set(ref, n);
    return n;
  }
}

/** The union of `nodes` (null: unsatisfiable, dropped); literal options merged into one, nested unions flattened. */
function unionOf(nodes: ReadonlyArray<SchemaNode | null>): SchemaNode | null {
  const options: SchemaNode[] = [];
  const texts = new Map<string, Uint8Array>();
  const add = (n: SchemaNode): void => {
    if (n.k === 'union' && n !== ANY_VALUE) n.options.forEach(add);
    else if (n.k === 'literal') for (const t of n.texts) texts.set(Buffer.from(t).toString('latin1'), t);
    else options.push(n);
  };
  for (const n of nodes) if (n !== null) add(n);
  if (texts.size > 0) options.push({ k: 'literal', texts: [...texts.values()] });
  if (options.length === 0) return null;
  return options.length === 1 ? options[0]! : { k: 'union', options };
}

function jsonType(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'array';
  if (typeof v === 'number') return Number.isInteger(v) ? 'integer' : 'number';
  return typeof v;
}
