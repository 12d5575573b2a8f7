/**
 * JSON for the HTTP front door, parsed the way Triton's RapidJSON-based `TritonJson` sees it.
 *
 * Why not `JSON.parse`: clients and tests depend on three things it loses.
 * - Integer vs double literals: Triton reads `shape`, integer tensor data and uint parameters
 *   with `AsUInt`/`AsInt`, which reject `1.0`. A double literal with an integral value (`1.0`,
 *   `2e3`) is recorded on its container (see `hasDoubleLiteral`); non-integral values are
 *   recognisably doubles already.
 * - 64-bit integers: integer literals outside the double-safe range become `bigint`.
 * - Error text: parse failures read `failed to parse the request JSON buffer: <RapidJSON
 *   message> at <byte offset>` and are `internal` (HTTP 500), as in Triton.
 * - Encoding: a body that is not UTF-8 is refused (`invalid_argument`, RapidJSON's "Invalid
 *   encoding in string."), never decoded with replacement characters. Triton's reader does not
 *   validate and passes the raw bytes on; decoding to text here cannot, so it says so instead.
 *
 * The parser is iterative, so hostile nesting cannot overflow the stack; consumers that recurse
 * into values (tensor `data`) bound their own depth. Objects keep the first of duplicate keys,
 * as RapidJSON's `FindMember` does.
 */
import { isUtf8 } from 'node:buffer';
import { internal } from '@switchyard/common';

export type JsonValue = null | boolean | number | bigint | string | JsonValue[] | JsonObject;
export interface JsonObject {
  [key: string]: JsonValue;
}

/** Marks arrays (value `true`) and objects (value: set of keys) holding integral double literals. */
const DOUBLE_LITERALS = Symbol('switchyard.doubleLiterals');

type Marked = { [DOUBLE_LITERALS]?: true | Set<string> };

/** True when `array` contains a double literal with an integral value, such as `1.0`. */
export function hasDoubleLiteral(array: readonly JsonValue[]): boolean {
  return (array as Marked)[DOUBLE_LITERALS] === true;
}

/** True when member `key` of `object` was written as a double literal with an integral value. */
export function isDoubleLiteralMember(object: JsonObject, key: string): boolean {
  const marks = (object as Marked)[DOUBLE_LITERALS];
  return marks instanceof Set && marks.has(key);
}

export function isJsonObject(v: unknown): v is JsonObject {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

const decoder = new TextDecoder('utf-8');
const INT64_MIN = -(2n ** 63n);
const UINT64_MAX = 2n ** 64n - 1n;

class ParseError extends Error {
  constructor(
    message: string,
    readonly pos: number,
  ) {
    super(message);
  }
}

/**
 * Parse a complete JSON document. Throws `internal` with Triton's message on malformed input.
 * An empty input is "The document is empty.".
 */
export function parseJson(input: string | Uint8Array): JsonValue {
  if (typeof input !== 'string' && !isUtf8(input)) {
    // Decoding would put U+FFFD in place of the bytes (a BYTES element would reach the model
    // altered); RapidJSON's validating reader names this error, and like every JSON parse error of
    // Triton's HTTP door it is INTERNAL (500).
    throw internal(`failed to parse the request JSON buffer: Invalid encoding in string. at ${firstInvalidUtf8(input)}`);
  }
  const text = typeof input === 'string' ? input : decoder.decode(input);
  try {
    return parseText(text);
  } catch (e) {
    if (e instanceof ParseError) {
      // RapidJSON reports byte offsets; we work on UTF-16 units, so convert (identical for ASCII).
      const offset = Buffer.byteLength(text.slice(0, e.pos), 'utf8');
      throw internal(`failed to parse the request JSON buffer: ${e.message} at ${offset}`);
    }
    throw e;
  }
}

/** Byte offset of the first byte that does not belong to a well-formed UTF-8 sequence (RFC 3629). */
export function firstInvalidUtf8(bytes: Uint8Array): number {
  let i = 0;
  while (i < bytes.length) {
    const b = bytes[i] as number;
    if (b < 0x80) {
      i += 1;
      continue;
    }
    let n: number;
    let min = 0x80;
    let max = 0xbf;
    if (b >= 0xc2 && b <= 0xdf) n = 1;
    else if (b >= 0xe0 && b <= 0xef) {
      n = 2;
      if (b === 0xe0) min = 0xa0; // no overlong forms
      if (b === 0xed) max = 0x9f; // no surrogates
    } else if (b >= 0xf0 && b <= 0xf4) {
      n = 3;
      if (b === 0xf0) min = 0x90;
      if (b === 0xf4) max = 0x8f; // nothing past U+10FFFF
    } else return i;
    for (let k = 1; k <= n; k++) {
      const c = bytes[i + k];
      if (c === undefined || c < (k === 1 ? min : 0x80) || c > (k === 1 ? max : 0xbf)) return i;
    }
    i += n + 1;
  }
  return bytes.length;
}

type Frame = { kind: 'array'; value: JsonValue[] } | { kind: 'object'; value: JsonObject; key: string };

function parseText(s: string): JsonValue {
  const n = s.length;
  let i = skipWs(s, 0);
  if (i >= n) throw new ParseError('The document is empty.', i);
  const stack: Frame[] = [];
  let result: JsonValue = null;
  nextClose = -1;
  nextOpen = -1;

  // Each iteration parses one value at `i`, then attaches it and consumes separators/closers.
  for (;;) {
    let value: JsonValue;
    let doubleIntegral = false;
    const c = s.charCodeAt(i);
    if (c === 0x7b /* { */) {
      i = skipWs(s, i + 1);
      if (s.charCodeAt(i) === 0x7d) {
        value = {};
        i += 1;
      } else {
        const obj: JsonObject = {};
        i = readKey(s, i, stack, obj);
        continue;
      }
    } else if (c === 0x5b /* [ */) {
      const open = i;
      i = skipWs(s, i + 1);
      const first = s.charCodeAt(i);
      const flat = first === 0x2d || (first >= 0x30 && first <= 0x39) || first === 0x22 || first === 0x74 || first === 0x66 ? flatArray(s, open) : undefined;
      if (first === 0x5d) {
        value = [];
        i += 1;
      } else if (flat !== undefined) {
        value = flat;
        i = flatArrayEnd;
      } else {
        stack.push({ kind: 'array', value: [] });
        continue;
      }
    } else if (c === 0x22 /* " */) {
      const r = readString(s, i);
      value = r.value;
      i = r.end;
    } else if (c === 0x74 /* t */ && s.startsWith('true', i)) {
      value = true;
      i += 4;
    } else if (c === 0x66 /* f */ && s.startsWith('false', i)) {
      value = false;
      i += 5;
    } else if (c === 0x6e /* n */ && s.startsWith('null', i)) {
      value = null;
      i += 4;
    } else if (c === 0x2d /* - */ || (c >= 0x30 && c <= 0x39)) {
      const r = readNumber(s, i);
      value = r.value;
      doubleIntegral = r.doubleIntegral;
      i = r.end;
    } else {
      throw new ParseError('Invalid value.', i);
    }

    // Attach the value to its container and close finished containers.
    for (;;) {
      const top = stack[stack.length - 1];
      if (top === undefined) {
        result = value;
        i = skipWs(s, i);
        if (i < n) throw new ParseError('The document root must not be followed by other values.', i);
        return result;
      }
      if (top.kind === 'array') {
        top.value.push(value);
        if (doubleIntegral) (top.value as Marked)[DOUBLE_LITERALS] = true;
        i = skipWs(s, i);
        const d = s.charCodeAt(i);
        if (d === 0x2c /* , */) {
          i = skipWs(s, i + 1);
          break;
        }
        if (d !== 0x5d /* ] */) throw new ParseError("Missing a comma or ']' after an array element.", i);
        i += 1;
        stack.pop();
        value = top.value;
        doubleIntegral = false;
        continue;
      }
      const obj = top.value;
      if (!Object.prototype.hasOwnProperty.call(obj, top.key)) {
        setMember(obj, top.key, value);
        if (doubleIntegral) {
          const marked = obj as Marked;
          const set = marked[DOUBLE_LITERALS] instanceof Set ? (marked[DOUBLE_LITERALS] as Set<string>) : new Set<string>();
          set.add(top.key);
          marked[DOUBLE_LITERALS] = set;
        }
      }
      i = skipWs(s, i);
      const d = s.charCodeAt(i);
      if (d === 0x2c /* , */) {
        stack.pop();
        i = readKey(s, skipWs(s, i + 1), stack, obj);
        break;
      }
      if (d !== 0x7d /* } */) throw new ParseError("Missing a comma or '}' after an object member.", i);
      i += 1;
      stack.pop();
      value = obj;
      doubleIntegral = false;
    }
  }
}

/** Shorter arrays (shapes, small data) cost less through the general loop than a native call. */
const FLAT_ARRAY_MIN_CHARS = 32;
/** Where the array `flatArray` returned ends (just past its `]`). */
let flatArrayEnd = 0;
/**
 * The first `]` and the first `[` found after the last `[` `flatArray` looked at (-1 before the
 * first look of a document, the document's length when there is none): every `[` of a document searches on from there, never again over
 * the same characters, so the searches of one document take linear time.
 */
let nextClose = -1;
let nextOpen = -1;

/**
 * A flat array of numbers, booleans or strings (tensor `data`, the bulk of a JSON request) read
 * by the native `JSON.parse` when it yields exactly what the general loop would: `open` is its `[`.
 * Tried on the text up to the first `]` when no `[` comes before it, so the texts tried are
 * disjoint and the whole document is tried at most once (a `[` or `]` inside a string only makes
 * the try fail: the text then ends inside a string, or holds a `[`). Undefined (the general loop
 * then reads the array, and reports any error) when `JSON.parse` refuses that text, when it holds
 * anything else (null, an object), or when a value needs the general loop's care:
 * - a string, when the text holds a backslash: escapes are the general loop's (RapidJSON refuses
 *   a lone high surrogate `JSON.parse` accepts);
 * - a non-finite double (RapidJSON's error), an integral value past 2^53 (an exact `bigint`, or
 *   RapidJSON's double);
 * - an integral number beside a string (the literals are found between commas, which a string may hold).
 * Integral values of integer literals are kept (`-0` as 0, as the general loop reads it); those of
 * double literals (`1.0`) mark the array (`hasDoubleLiteral`).
 */
function flatArray(s: string, open: number): JsonValue[] | undefined {
  if (nextClose <= open) nextClose = foundOrEnd(s, s.indexOf(']', open));
  if (nextOpen <= open) nextOpen = foundOrEnd(s, s.indexOf('[', open + 1));
  const close = nextClose;
  if (close === s.length || nextOpen < close || close - open < FLAT_ARRAY_MIN_CHARS) return undefined;
  const text = s.slice(open, close + 1);
  let values: unknown[];
  try {
    values = JSON.parse(text) as unknown[];
  } catch {
    return undefined;
  }
  let integral = false;
  let strings = false;
  for (let k = 0; k < values.length; k++) {
    const v = values[k];
    if (typeof v === 'number') {
      if (Number.isInteger(v)) {
        if (!Number.isSafeInteger(v)) return undefined;
        integral = true;
      } else if (!Number.isFinite(v)) return undefined;
    } else if (typeof v === 'string') strings = true;
    else if (typeof v !== 'boolean') return undefined;
  }
  if (strings && (integral || text.includes('\\'))) return undefined;
  if (integral) settleIntegralValues(text, values as number[]);
  flatArrayEnd = close + 1;
  return values as JsonValue[];
}

/** An `indexOf` result, with none found as the end of `s` (searched once, not again). */
function foundOrEnd(s: string, at: number): number {
  return at === -1 ? s.length : at;
}

/**
 * For `flatArray`: read the literal of each integral value beside `values` (same order): one
 * from a double literal marks the array, an integer literal `-0` becomes 0. `text` holds numbers
 * and booleans only (JSON.parse read it), so its commas are exactly the separators: the literals of the other
 * values are skipped by `indexOf` (tensor data is mostly non-integral floats; a char-by-char walk of
 * the whole text cost twice JSON.parse itself on a 256-float row with one zero).
 */
function settleIntegralValues(text: string, values: number[]): void {
  if (!DOUBLE_FORM.test(text)) {
    for (let k = 0; k < values.length; k++) if (Object.is(values[k], -0)) values[k] = 0;
    return;
  }
  const last = values.length - 1;
  let start = 1;
  for (let k = 0; k <= last; k++) {
    // the closing `]` ends the last literal
    const end = k === last ? text.length - 1 : text.indexOf(',', start);
    const v = values[k] as number;
    if (Number.isInteger(v)) {
      let doubleForm = false;
      for (let at = start; at < end; at++) {
        const c = text.charCodeAt(at);
        if (c === 0x2e || c === 0x65 || c === 0x45) {
          doubleForm = true;
          break;
        }
      }
      if (doubleForm) (values as Marked)[DOUBLE_LITERALS] = true;
      else if (Object.is(v, -0)) values[k] = 0;
    }
    start = end + 1;
  }
}

const DOUBLE_FORM = /[.eE]/;

/** Read `"key" :` and push the object frame; returns the position of the member value. */
function readKey(s: string, i: number, stack: Frame[], obj: JsonObject): number {
  if (s.charCodeAt(i) !== 0x22) throw new ParseError('Missing a name for object member.', i);
  const r = readString(s, i);
  let j = skipWs(s, r.end);
  if (s.charCodeAt(j) !== 0x3a /* : */) throw new ParseError('Missing a colon after a name of object member.', j);
  j = skipWs(s, j + 1);
  stack.push({ kind: 'object', value: obj, key: r.value });
  return j;
}

function setMember(obj: JsonObject, key: string, value: JsonValue): void {
  setOwn(obj, key, value);
}

/**
 * `obj[key] = value` for a key a client chose: `__proto__` becomes an own entry instead of
 * replacing the object's prototype (and vanishing).
 */
export function setOwn<T>(obj: { [key: string]: T }, key: string, value: T): void {
  if (key === '__proto__') {
    Object.defineProperty(obj, key, { value, enumerable: true, writable: true, configurable: true });
  } else {
    obj[key] = value;
  }
}

function skipWs(s: string, i: number): number {
  for (;;) {
    const c = s.charCodeAt(i);
    if (c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09) i += 1;
    else return i;
  }
}

function readString(s: string, start: number): { value: string; end: number } {
  let i = start + 1;
  let chunkStart = i;
  let out = '';
  for (;;) {
    if (i >= s.length) throw new ParseError('Missing a closing quotation mark in string.', start);
    const c = s.charCodeAt(i);
    if (c === 0x22) {
      return { value: out + s.slice(chunkStart, i), end: i + 1 };
    }
    if (c === 0x5c /* \ */) {
      out += s.slice(chunkStart, i);
      const e = s.charCodeAt(i + 1);
      switch (e) {
        case 0x22: out += '"'; break;
        case 0x5c: out += '\\'; break;
        case 0x2f: out += '/'; break;
        case 0x62: out += '\b'; break;
        case 0x66: out += '\f'; break;
        case 0x6e: out += '\n'; break;
        case 0x72: out += '\r'; break;
        case 0x74: out += '\t'; break;
        case 0x75: {
          const hex = s.slice(i + 2, i + 6);
          if (!/^[0-9a-fA-F]{4}$/.test(hex)) throw new ParseError('Incorrect hex digit after \\u escape in string.', i + 2);
          const code = parseInt(hex, 16);
          if (code >= 0xd800 && code <= 0xdbff) {
            const low = s.slice(i + 8, i + 12);
            if (s.charCodeAt(i + 6) !== 0x5c || s.charCodeAt(i + 7) !== 0x75 || !/^[0-9a-fA-F]{4}$/.test(low)) {
              throw new ParseError('The surrogate pair in string is invalid.', i + 6);
            }
            const lowCode = parseInt(low, 16);
            if (lowCode < 0xdc00 || lowCode > 0xdfff) throw new ParseError('The surrogate pair in string is invalid.', i + 6);
            out += String.fromCharCode(code, lowCode);
            i += 6;
          } else {
            out += String.fromCharCode(code);
          }
          i += 4;
          break;
        }
        default:
          throw new ParseError('Invalid escape character in string.', i + 1);
      }
      i += 2;
      chunkStart = i;
      continue;
    }
    if (c < 0x20) throw new ParseError('Invalid encoding in string.', i);
    // Skip the run of plain characters in one native scan (megabyte strings are prompts and BYTES data).
    PLAIN_RUN.lastIndex = i + 1;
    PLAIN_RUN.test(s);
    i = PLAIN_RUN.lastIndex;
  }
}

/** Characters a string may hold unescaped; matches the empty run too, so `test` always succeeds. */
const PLAIN_RUN = /[^"\\\u0000-\u001f]*/y;

function readNumber(s: string, start: number): { value: number | bigint; doubleIntegral: boolean; end: number } {
  let i = start;
  if (s.charCodeAt(i) === 0x2d) i += 1;
  const intStart = i;
  let c = s.charCodeAt(i);
  if (c === 0x30) {
    i += 1;
  } else if (c >= 0x31 && c <= 0x39) {
    while ((c = s.charCodeAt(i)) >= 0x30 && c <= 0x39) i += 1;
  } else {
    throw new ParseError('Invalid value.', start);
  }
  let isDouble = false;
  if (s.charCodeAt(i) === 0x2e /* . */) {
    isDouble = true;
    i += 1;
    const fracStart = i;
    while ((c = s.charCodeAt(i)) >= 0x30 && c <= 0x39) i += 1;
    if (i === fracStart) throw new ParseError('Miss fraction part in number.', i);
  }
  c = s.charCodeAt(i);
  if (c === 0x65 || c === 0x45 /* e E */) {
    isDouble = true;
    i += 1;
    c = s.charCodeAt(i);
    if (c === 0x2b || c === 0x2d) i += 1;
    const expStart = i;
    while ((c = s.charCodeAt(i)) >= 0x30 && c <= 0x39) i += 1;
    if (i === expStart) throw new ParseError('Miss exponent in number.', i);
  }
  const literal = s.slice(start, i);
  if (!isDouble) {
    const digits = i - intStart;
    // Up to 15 digits always fits a double exactly.
    if (digits <= 15) return { value: Number(literal) || 0, doubleIntegral: false, end: i };
    // Every 64-bit integer has at most 20 digits (no leading zeros in JSON). Longer literals skip
    // BigInt, whose parse time grows faster than linearly (a megabyte literal would stall the door).
    if (digits <= 20) {
      const big = BigInt(literal);
      if (big >= INT64_MIN && big <= UINT64_MAX) {
        const asNumber = Number(big);
        return { value: Number.isSafeInteger(asNumber) ? asNumber : big, doubleIntegral: false, end: i };
      }
    }
    // Beyond 64 bits RapidJSON falls back to a double.
  }
  const value = Number(literal);
  if (!Number.isFinite(value)) throw new ParseError('Number too big to be stored in double.', start);
  return { value, doubleIntegral: Number.isInteger(value), end: i };
}

/**
 * Serialise a value the way RapidJSON's writer does for the shapes the front door emits:
 * `bigint` as plain digits, doubles with a fractional part (`1.0`), objects in insertion order.
 * `number` values are written as doubles only when wrapped with `jsonDouble`; bare numbers are
 * written as JavaScript prints them.
 */
export function stringifyJson(value: unknown): string {
  if (value === null || value === undefined) return 'null';
  switch (typeof value) {
    case 'string':
      return JSON.stringify(value);
    case 'number':
      return Number.isFinite(value) ? String(value) : formatDouble(value);
    case 'bigint':
      return value.toString();
    case 'boolean':
      return value ? 'true' : 'false';
    default:
      break;
  }
  if (value instanceof JsonDoubles) {
    // Appending costs less than a list of parts joined (tensor data: one string per element).
    const values = value.values;
    if (values.length === 0) return '[]';
    let out = `[${formatDouble(values[0] as number)}`;
    for (let k = 1; k < values.length; k++) out += `,${formatDouble(values[k] as number)}`;
    return `${out}]`;
  }
  // An integer typed array's join writes each element in decimal digits; 64-bit ones exactly.
  if (value instanceof JsonIntegers) {
    const values = value.values;
    return values instanceof BigInt64Array || values instanceof BigUint64Array ? wideIntegers(values) : `[${values.join(',')}]`;
  }
  if (Array.isArray(value)) {
    // Tensor data are long lists of strings (BYTES), integers or booleans: one native call instead of
    // one per element, where JSON.stringify writes each element as this function would (a finite
    // number as JavaScript prints it; not NaN / Infinity, which JSON.stringify writes as null).
    if (nativelyWritten(value)) return JSON.stringify(value);
    return `[${value.map(stringifyJson).join(',')}]`;
  }
  const parts: string[] = [];
  for (const [k, v] of Object.entries(value as Record<string, unknown>)) {
    if (v === undefined) continue;
    parts.push(`${JSON.stringify(k)}:${stringifyJson(v)}`);
  }
  return `{${parts.join(',')}}`;
}

/** Whether every element is a string, a boolean or a finite number (JSON.stringify writes them as `stringifyJson` does). */
function nativelyWritten(values: readonly unknown[]): boolean {
  for (let k = 0; k < values.length; k++) {
    const v = values[k];
    const t = typeof v;
    if (t === 'number') {
      if (!Number.isFinite(v)) return false;
    } else if (t !== 'string' && t !== 'boolean') return false;
  }
  return true;
}

/** A flat list of numbers to be written as doubles (RapidJSON prints `1.0`, not `1`). */
export class JsonDoubles {
  constructor(readonly values: ArrayLike<number>) {}
}

/**
 * 64-bit integers in decimal: each read as its two 32-bit words, printed as a number while it is a
 * safe integer (|v| < 2^53), as a bigint otherwise (a bigint per element, as `join` makes, costs twice).
 */
function wideIntegers(values: BigInt64Array | BigUint64Array): string {
  const n = values.length;
  const lo = new Uint32Array(values.buffer, values.byteOffset, 2 * n);
  const hi = values instanceof BigInt64Array ? new Int32Array(values.buffer, values.byteOffset, 2 * n) : lo;
  let out = '[';
  for (let k = 0; k < n; k++) {
    const h = hi[2 * k + 1]!;
    const digits = h >= -0x200000 && h < 0x200000 ? String(h * 4294967296 + lo[2 * k]!) : String(values[k]);
    out += k === 0 ? digits : `,${digits}`;
  }
  return `${out}]`;
}

/** Integer tensor data, written as decimal integers without an array of numbers built: the typed array's own `join`, 64-bit values by `wideIntegers`. */
export class JsonIntegers {
  constructor(readonly values: Int8Array | Uint8Array | Int16Array | Uint16Array | Int32Array | Uint32Array | BigInt64Array | BigUint64Array) {}
}

/** One number formatted as RapidJSON's `Writer::Double` would (Grisu shortest, `.0` when integral). */
export function formatDouble(v: number): string {
  // Below 1e21 in magnitude JavaScript prints no `e+`; the common cases are tested first.
  const small = v < 1e21 && v > -1e21;
  if (Number.isInteger(v)) return small ? (Object.is(v, -0) ? '-0.0' : `${v}.0`) : String(v).replace('e+', 'e');
  if (small) return String(v);
  if (Number.isNaN(v)) return 'NaN';
  return v > 0 ? 'Infinity' : '-Infinity';
}
