/**
 * The one fuzzing mechanism of the test suites (`@switchyard/testing/fuzz`): property-based runs
 * with fast-check, a run count taken from one environment variable, a time bound per input, the
 * "returns a value or throws our error" check, and structure-aware mutations of valid JSON.
 *
 * Runs are deterministic by default: `DEFAULT_FUZZ_RUNS` runs per property from a fixed seed, so
 * `npm test` is repeatable. `FUZZ_RUNS=<n>` (the long run, `npm run fuzz`) runs n per property
 * from a random seed printed once per test file; `FUZZ_SEED=<seed>` replays one. A failure message
 * always carries the seed, the shrunk counterexample and the `path` fast-check needs to replay it.
 *
 * Parsers are synchronous, so a slow input cannot be interrupted: the bound is checked after each
 * input returns (an input that takes longer than `timeLimitMs` of CPU, twice, fails the property). A true
 * infinite loop surfaces as vitest's test timeout instead (none in the long run: interrupt it).
 * Slowness that grows with input size is better caught without a clock where the cause is known
 * (`withBigIntLimit`).
 */
import fc from 'fast-check';
import { SwitchyardError, type ErrorCode } from '@switchyard/common';

export { fc };
export { validates } from './json-schema-check.js';

/** Runs per property, for the long run. Unset: `DEFAULT_FUZZ_RUNS` from `DEFAULT_FUZZ_SEED`. */
export const FUZZ_RUNS_ENV = 'FUZZ_RUNS';
/** Seed to replay a failure of the long run (printed in its failure message). */
export const FUZZ_SEED_ENV = 'FUZZ_SEED';
export const DEFAULT_FUZZ_RUNS = 200;
export const DEFAULT_FUZZ_SEED = 20_261_125;
/** Longest a single input may take, in ms of CPU time: generous for a loaded CI machine, far below a hang. */
export const DEFAULT_INPUT_TIME_LIMIT_MS = 1_000;

export interface FuzzOptions {
  /** Runs relative to the configured count (e.g. 0.25 for a property whose inputs are large). Default 1. */
  readonly scale?: number;
  /** Per-input time bound in ms. Default `DEFAULT_INPUT_TIME_LIMIT_MS`. */
  readonly timeLimitMs?: number;
}

export interface FuzzSettings {
  readonly numRuns: number;
  readonly seed: number;
}

/** The run count and seed from the environment (see the file header). */
export function fuzzSettings(env: NodeJS.ProcessEnv = process.env): FuzzSettings {
  const runs = env[FUZZ_RUNS_ENV];
  const seed = env[FUZZ_SEED_ENV];
  const numRuns = runs === undefined || runs === '' ? DEFAULT_FUZZ_RUNS : Number(runs);
  if (!Number.isSafeInteger(numRuns) || numRuns < 1) throw new Error(`${FUZZ_RUNS_ENV} must be an integer >= 1, got '${runs}'`);
  if (seed !== undefined && seed !== '') {
    const n = Number(seed);
    if (!Number.isSafeInteger(n)) throw new Error(`${FUZZ_SEED_ENV} must be an integer, got '${seed}'`);
    return { numRuns, seed: n };
  }
  if (runs === undefined || runs === '') return { numRuns, seed: DEFAULT_FUZZ_SEED };
  // The long run explores: a fresh seed per test file, printed once so that a run can be replayed.
  if (randomSeed === undefined) {
    randomSeed = (Date.now() ^ (Math.random() * 0x7fffffff)) | 0;
    console.info(`[fuzz] ${FUZZ_RUNS_ENV}=${numRuns} ${FUZZ_SEED_ENV}=${randomSeed}`);
  }
  return { numRuns, seed: randomSeed };
}

let randomSeed: number | undefined;

/**
 * Check `property` on inputs drawn from `arbitrary`: it must return (any value) within the time
 * bound; a thrown error fails the run with the shrunk input. Synchronous properties only.
 *
 * The bound is on the process's CPU time, not the wall clock, so a machine busy with other work
 * does not fail a property; an input over the bound is run once more and fails only when it is over
 * again (a garbage-collection pause does not repeat, superlinear work does). The failure message is
 * built here, not by fast-check, whose printer recurses once per level and overflows the stack on
 * the deeply nested inputs `hostileJsonValue` draws.
 */
export function fuzz<T>(arbitrary: fc.Arbitrary<T>, property: (input: T) => void, options: FuzzOptions = {}): void {
  const { numRuns, seed } = fuzzSettings();
  const limit = options.timeLimitMs ?? DEFAULT_INPUT_TIME_LIMIT_MS;
  const timed = (input: T): number => {
    const start = process.cpuUsage();
    property(input);
    const used = process.cpuUsage(start);
    return (used.user + used.system) / 1000;
  };
  const details = fc.check(
    fc.property(arbitrary, (input) => {
      if (timed(input) <= limit) return;
      const ms = timed(input);
      if (ms > limit) throw new Error(`one input took ${ms.toFixed(0)} ms of CPU, twice (limit ${limit} ms)`);
    }),
    { numRuns: Math.max(1, Math.round(numRuns * (options.scale ?? 1))), seed },
  );
  if (!details.failed) return;
  const error = details.errorInstance;
  const why = error instanceof Error ? (error.stack ?? error.message) : String(error);
  throw new Error(
    `Property failed after ${details.numRuns} tests\n{ seed: ${details.seed}, path: "${details.counterexamplePath ?? ''}" }\n` +
      `Counterexample: ${printable(details.counterexample)}\nShrunk ${details.numShrinks} time(s)\nGot error: ${why}`,
    { cause: error },
  );
}

/** Longest counterexample text a failure message carries. */
const MAX_COUNTEREXAMPLE_TEXT = 4_000;

/** fast-check's rendering of `value`, cut to MAX_COUNTEREXAMPLE_TEXT; too deep to print is said so. */
function printable(value: unknown): string {
  let text: string;
  try {
    text = fc.stringify(value);
  } catch {
    return '(nested too deeply to print: replay it with the seed and path above)';
  }
  return text.length <= MAX_COUNTEREXAMPLE_TEXT ? text : `${text.slice(0, MAX_COUNTEREXAMPLE_TEXT)}… (${text.length} characters)`;
}

/** Longest string `BigInt` may parse under `withBigIntLimit` by default: every 64-bit integer fits with room. */
export const DEFAULT_BIGINT_TEXT_LIMIT = 40;

/**
 * Run `f` with the global `BigInt` refusing strings longer than `maxLength` (it throws a plain
 * Error, which `parsesOrRefuses` reports). BigInt's decimal parse takes time superlinear in the
 * length, so a parser that hands it client text unbounded can be stalled by one request (a 4 MB
 * literal took seconds); this finds such a path deterministically, without timing anything.
 */
export function withBigIntLimit<T>(f: () => T, maxLength = DEFAULT_BIGINT_TEXT_LIMIT): T {
  const original = globalThis.BigInt;
  globalThis.BigInt = new Proxy(original, {
    apply(target, thisArg, args: unknown[]) {
      const v = args[0];
      if (typeof v === 'string' && v.length > maxLength) throw new Error(`BigInt asked to parse a ${v.length}-character string`);
      return Reflect.apply(target, thisArg, args) as bigint;
    },
  });
  try {
    return f();
  } finally {
    globalThis.BigInt = original;
  }
}

export type Outcome<T> = { readonly ok: true; readonly value: T } | { readonly ok: false; readonly error: SwitchyardError };

/**
 * Run `parse`: it must return a value or throw a `SwitchyardError` whose code is one of `codes`.
 * Anything else (RangeError, TypeError, a stack overflow, another code) is rethrown as a test
 * failure carrying the original as its cause.
 */
export function parsesOrRefuses<T>(parse: () => T, codes: readonly ErrorCode[] = ['invalid_argument']): Outcome<T> {
  try {
    return { ok: true, value: parse() };
  } catch (e) {
    if (e instanceof SwitchyardError && codes.includes(e.code)) return { ok: false, error: e };
    const what = e instanceof SwitchyardError ? `SwitchyardError(${e.code})` : e instanceof Error ? e.constructor.name : typeof e;
    const message = e instanceof Error ? e.message : String(e);
    throw new Error(`expected a value or a SwitchyardError of class ${codes.join(' / ')}, got ${what}: ${message}`, { cause: e });
  }
}

// ---- arbitraries ----------------------------------------------------------------------------------

export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };

/** Object keys that have bitten JavaScript parsers: prototype members and the `__proto__` setter. */
export const HOSTILE_KEYS = ['__proto__', 'constructor', 'toString', 'valueOf', 'hasOwnProperty', 'prototype'] as const;

/** A plain object with own enumerable `key` (also when `key` is `__proto__`), as JSON.parse builds it. */
export function objectWith(entries: ReadonlyArray<readonly [string, JsonValue]>): { [key: string]: JsonValue } {
  const out: { [key: string]: JsonValue } = {};
  for (const [k, v] of entries) Object.defineProperty(out, k, { value: v, enumerable: true, writable: true, configurable: true });
  return out;
}

/**
 * Any text up to `maxLength` code points: mostly printable ASCII, the rest anywhere in Unicode
 * (lone surrogates included). Much cheaper to generate than fast-check's `unit: 'binary'` strings.
 */
export function anyText(maxLength: number): fc.Arbitrary<string> {
  const codePoint = fc.oneof({ arbitrary: fc.integer({ min: 0x20, max: 0x7e }), weight: 4 }, { arbitrary: fc.integer({ min: 0, max: 0x10ffff }), weight: 1 });
  return fc.array(codePoint, { maxLength }).map((cps) => String.fromCodePoint(...cps));
}

/** Strings for keys and names: mostly short ones, sometimes hostile keys or odd Unicode. */
export function fuzzKey(): fc.Arbitrary<string> {
  return fc.oneof(
    { arbitrary: fc.string({ maxLength: 8 }), weight: 6 },
    { arbitrary: fc.constantFrom(...HOSTILE_KEYS), weight: 2 },
    { arbitrary: anyText(6), weight: 1 },
  );
}

/** Numbers a parser must bound or refuse: sizes past 32 and 53 bits, negatives, non-integers, -0. */
export function hostileNumber(): fc.Arbitrary<number> {
  return fc.oneof(
    fc.constantFrom(-1, -0, 0.5, 1.0000001, 2 ** 31, 2 ** 32, 2 ** 53, 2 ** 53 + 2, 1e21, 1e300, -1e300, Number.MAX_SAFE_INTEGER),
    fc.integer({ min: -(2 ** 31), max: 2 ** 31 - 1 }),
    fc.double({ noNaN: true, noDefaultInfinity: true }),
  );
}

/** Arrays nested `depth` deep around `leaf`. */
export function nested(depth: number, leaf: JsonValue = 0): JsonValue {
  let v: JsonValue = leaf;
  for (let k = 0; k < depth; k++) v = [v];
  return v;
}

/**
 * Nesting that overflows the stack of anything recursing once per level (`JSON.stringify`,
 * `String`, a recursive walk) while `JSON.parse` reads it without recursing: 10^5 levels is
 * 200 kB of brackets, far past Node's ~10^4 frames.
 */
export const DEEP_NESTING = 100_000;

export interface MutationOptions {
  /** Deepest nesting a replacement may add. Default `DEEP_NESTING`; smaller depths are drawn more often. */
  readonly maxDepth?: number;
}

/** A value of the wrong type, size or depth, to put where a valid request has something else. */
export function hostileJsonValue(options: MutationOptions = {}): fc.Arbitrary<JsonValue> {
  const maxDepth = options.maxDepth ?? DEEP_NESTING;
  return fc.oneof(
    fc.constantFrom<JsonValue>(null, true, false, '', 0, [], {}),
    hostileNumber(),
    fc.string({ maxLength: 12 }),
    fc.constantFrom('\u0000', '\ud800', 'x'.repeat(4096), 'NaN', 'Infinity', '-1', '1e400'),
    fc.integer({ min: 2, max: maxDepth }).map((d) => nested(d)),
    fc.array(hostileNumber(), { maxLength: 6 }),
    fc.constantFrom(...HOSTILE_KEYS).map((k) => objectWith([[k, { a: 1 }]])),
    fc.jsonValue({ maxDepth: 3 }) as fc.Arbitrary<JsonValue>,
  );
}

type Path = ReadonlyArray<string | number>;

function paths(v: JsonValue, prefix: Path, out: Path[]): void {
  out.push(prefix);
  if (Array.isArray(v)) v.forEach((x, i) => paths(x, [...prefix, i], out));
  else if (v !== null && typeof v === 'object') for (const k of Object.keys(v)) paths(v[k] as JsonValue, [...prefix, k], out);
}

function clone(v: JsonValue): JsonValue {
  if (Array.isArray(v)) return v.map(clone);
  if (v !== null && typeof v === 'object') return objectWith(Object.keys(v).map((k) => [k, clone(v[k] as JsonValue)] as const));
  return v;
}

/** `v` with the value at `path` replaced (`undefined`: removed); `path` [] replaces the root. */
export function replaceAt(v: JsonValue, path: Path, replacement: JsonValue | undefined): JsonValue | undefined {
  if (path.length === 0) return replacement;
  const root = clone(v);
  let parent: JsonValue = root;
  for (const step of path.slice(0, -1)) parent = (parent as Record<string | number, JsonValue>)[step] as JsonValue;
  const last = path[path.length - 1] as string | number;
  if (Array.isArray(parent)) {
    if (replacement === undefined) parent.splice(last as number, 1);
    else parent[last as number] = replacement;
  } else if (parent !== null && typeof parent === 'object') {
    if (replacement === undefined) delete parent[last as string];
    else Object.defineProperty(parent, last, { value: replacement, enumerable: true, writable: true, configurable: true });
  }
  return root;
}

/**
 * Mostly-valid variants of valid values: one node (any depth, the root included) replaced by a
 * hostile value or removed, or a hostile key added to one object.
 */
export function mutatedJson(valid: fc.Arbitrary<JsonValue>, options: MutationOptions = {}): fc.Arbitrary<JsonValue | undefined> {
  return valid.chain((v) => {
    const all: Path[] = [];
    paths(v, [], all);
    const at = fc.constantFrom(...all);
    return fc.oneof(
      { arbitrary: fc.tuple(at, hostileJsonValue(options)).map(([p, r]) => replaceAt(v, p, r)), weight: 6 },
      { arbitrary: at.map((p) => replaceAt(v, p, undefined)), weight: 2 },
      {
        arbitrary: fc.tuple(at, fc.constantFrom(...HOSTILE_KEYS), hostileJsonValue(options)).map(([p, k, r]) => {
          const target = p.reduce<JsonValue | undefined>((x, s) => (x as Record<string | number, JsonValue>)[s], v);
          if (target === null || typeof target !== 'object' || Array.isArray(target)) return v;
          return replaceAt(v, p, objectWith([...Object.entries(target), [k, r]]));
        }),
        weight: 1,
      },
    );
  });
}

/** JSON text of arrays nested `depth` deep around `0`, as `jsonText(nested(depth))` but in linear time. */
export function nestedText(depth: number): string {
  return `${'['.repeat(depth)}0${']'.repeat(depth)}`;
}

/**
 * JSON text of `valid` with each of its nodes (the root included) replaced in turn by the JSON text
 * `replacement`, with the node's path: e.g. every field of a request set to `nestedText(DEEP_NESTING)`.
 */
export function eachNodeReplaced(valid: JsonValue, replacement: string): Array<{ readonly path: string; readonly text: string }> {
  const all: Path[] = [];
  paths(valid, [], all);
  const marker = '\u0000replaced\u0000';
  return all.map((p) => ({ path: p.join('.'), text: JSON.stringify(replaceAt(valid, p, marker)).split(JSON.stringify(marker)).join(replacement) }));
}

/**
 * JSON text for a value from `mutatedJson` (a removed root is the empty document): `JSON.stringify`'s
 * text, written without recursion so that a value nested `DEEP_NESTING` deep can be sent.
 */
export function jsonText(v: JsonValue | undefined): string {
  if (v === undefined) return '';
  const out: string[] = [];
  // Work left to do, last first: a value to write, or literal text (brackets, commas, keys).
  const work: Array<{ readonly value: JsonValue } | string> = [{ value: v }];
  for (let item = work.pop(); item !== undefined; item = work.pop()) {
    if (typeof item === 'string') {
      out.push(item);
      continue;
    }
    const x = item.value;
    if (Array.isArray(x)) {
      work.push(']');
      for (let i = x.length - 1; i >= 0; i--) {
        work.push({ value: x[i] as JsonValue });
        if (i > 0) work.push(',');
      }
      out.push('[');
    } else if (x !== null && typeof x === 'object') {
      const keys = Object.keys(x);
      work.push('}');
      for (let i = keys.length - 1; i >= 0; i--) {
        const k = keys[i] as string;
        work.push({ value: x[k] as JsonValue });
        work.push(`${i > 0 ? ',' : ''}${JSON.stringify(k)}:`);
      }
      out.push('{');
    } else {
      out.push(JSON.stringify(x));
    }
  }
  return out.join('');
}

// ---- tensors --------------------------------------------------------------------------------------

/** Bit patterns worth a float element of each size: -0, NaNs with payloads (quiet and signalling), infinities. */
const FLOAT_SPECIALS: Readonly<Record<number, readonly bigint[]>> = {
  2: [0x8000n, 0x7e01n, 0xfd55n, 0x7c00n, 0xfc00n, 0x7f81n],
  4: [0x80000000n, 0x7fc00001n, 0xffa00000n, 0x7f800000n, 0xff800000n, 0x7f800001n],
  8: [0x8000000000000000n, 0x7ff8000000000123n, 0xfff0000000000001n, 0x7ff0000000000000n, 0x7ff4000000000000n],
};

/** `count` elements of `size` bytes, little-endian: random bits with the float specials of that size mixed in. */
export function elementBytes(size: number, count: number): fc.Arbitrary<Uint8Array> {
  const specials = FLOAT_SPECIALS[size] ?? [];
  const element = fc.oneof(
    { arbitrary: fc.uint8Array({ minLength: size, maxLength: size }), weight: 3 },
    {
      arbitrary: specials.length === 0 ? fc.uint8Array({ minLength: size, maxLength: size }) : fc.constantFrom(...specials).map((bits) => littleEndian(bits, size)),
      weight: 1,
    },
  );
  return fc.array(element, { minLength: count, maxLength: count }).map((parts) => concatBytes(parts));
}

function littleEndian(bits: bigint, size: number): Uint8Array {
  const out = new Uint8Array(size);
  for (let k = 0; k < size; k++) out[k] = Number((bits >> BigInt(8 * k)) & 0xffn);
  return out;
}

export function concatBytes(parts: readonly Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.byteLength, 0));
  let off = 0;
  for (const p of parts) {
    out.set(p, off);
    off += p.byteLength;
  }
  return out;
}

/** A tensor as raw bytes: row-major elements; BYTES elements each a uint32 length + bytes (Triton's form). */
export interface RawTensor {
  readonly datatype: string;
  readonly shape: number[];
  readonly data: Uint8Array;
}

/**
 * Tensors of the given datatypes (datatype → bytes per element, 0 for variable-size BYTES) with
 * small shapes (up to 3 dimensions of up to 4) and random element bytes.
 */
export function rawTensor(elementSizes: Readonly<Record<string, number>>): fc.Arbitrary<RawTensor> {
  const shape = fc.array(fc.integer({ min: 0, max: 4 }), { maxLength: 3 });
  return fc.tuple(fc.constantFrom(...Object.keys(elementSizes)), shape).chain(([datatype, dims]) => {
    const count = dims.reduce((n, d) => n * d, 1);
    const size = elementSizes[datatype] ?? 0;
    const data =
      size > 0
        ? elementBytes(size, count)
        : fc.array(fc.uint8Array({ maxLength: 8 }), { minLength: count, maxLength: count }).map((els) =>
            concatBytes(els.flatMap((e) => [littleEndian(BigInt(e.byteLength), 4), e])),
          );
    return data.map((bytes): RawTensor => ({ datatype, shape: dims, data: bytes }));
  });
}
