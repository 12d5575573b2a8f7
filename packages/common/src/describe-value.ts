/**
 * The one way a value someone sent is quoted in an error message (`expected a string, got [1,2]`):
 * JSON text as `JSON.stringify` writes it, bounded in nesting and in length. Every decode edge that
 * quotes a value (OpenAI and KServe LLM request fields, the model-config JSON override, the
 * cluster's messages) goes through it, because the value is the sender's: `JSON.stringify` and `String` recurse once per level, so
 * an array nested 10^5 deep (a few hundred bytes of `[`, which `JSON.parse` reads without
 * recursing) would end the refusal in "Maximum call stack size exceeded", and a 64 MB string
 * would be copied into the message whole.
 */

/** Longest text `describeValue` returns by default, in UTF-16 units, the ellipsis included. */
export const DEFAULT_DESCRIBE_MAX_LENGTH = 120;
/** Arrays and objects nested deeper than this print as `[…]` / `{…}`. */
export const DESCRIBE_MAX_DEPTH = 8;

const ELLIPSIS = '…';

/**
 * `value` as JSON text for a message: the same text as `JSON.stringify` for a small JSON value;
 * `undefined`, `NaN`, infinities and bigints (digits only) as JavaScript prints them; typed arrays
 * as their type and byte length; arrays and objects past `DESCRIBE_MAX_DEPTH` as `[…]` / `{…}`;
 * cut to `maxLength` (ending in `…`). The recursion is at most `DESCRIBE_MAX_DEPTH` deep and the
 * work is bounded by `maxLength`, whatever the size or depth of `value` (an object's keys are
 * enumerated once by `for…in`).
 */
export function describeValue(value: unknown, maxLength: number = DEFAULT_DESCRIBE_MAX_LENGTH): string {
  const out = new BoundedText(Math.max(1, maxLength));
  write(out, value, 0);
  return out.text();
}

class BoundedText {
  private readonly parts: string[] = [];
  private length = 0;
  /** Set once the text has reached the limit: writers stop there. */
  full = false;

  constructor(private readonly limit: number) {}

  /** Room left before the limit (one more unit than the limit, so that a cut is seen). */
  get room(): number {
    return this.limit + 1 - this.length;
  }

  add(s: string): void {
    if (this.full) return;
    const piece = s.length > this.room ? s.slice(0, this.room) : s;
    this.parts.push(piece);
    this.length += piece.length;
    if (this.length > this.limit) this.full = true;
  }

  text(): string {
    const s = this.parts.join('');
    if (!this.full) return s;
    // Never end on half of a surrogate pair.
    let end = this.limit - 1;
    const last = s.charCodeAt(end - 1);
    if (last >= 0xd800 && last <= 0xdbff) end--;
    return `${s.slice(0, end)}${ELLIPSIS}`;
  }
}

function write(out: BoundedText, v: unknown, depth: number): void {
  if (out.full) return;
  switch (typeof v) {
    case 'string':
      // Quote only what can show: a huge string is never copied whole.
      out.add(JSON.stringify(v.length > out.room ? v.slice(0, out.room) : v));
      return;
    case 'number':
      out.add(Number.isFinite(v) ? JSON.stringify(v) : String(v));
      return;
    case 'bigint':
      out.add(v.toString());
      return;
    case 'boolean':
    case 'undefined':
    case 'symbol':
      out.add(String(v));
      return;
    case 'function':
      out.add('function');
      return;
    default:
      break;
  }
  if (v === null) {
    out.add('null');
    return;
  }
  if (ArrayBuffer.isView(v)) {
    out.add(`${v.constructor.name}(${v.byteLength} bytes)`);
    return;
  }
  const isArray = Array.isArray(v);
  if (depth >= DESCRIBE_MAX_DEPTH) {
    out.add(isArray ? `[${ELLIPSIS}]` : `{${ELLIPSIS}}`);
    return;
  }
  if (isArray) {
    out.add('[');
    for (let i = 0; i < v.length && !out.full; i++) {
      if (i > 0) out.add(',');
      write(out, v[i], depth + 1);
    }
    out.add(']');
    return;
  }
  out.add('{');
  let first = true;
  for (const key in v as object) {
    if (out.full) break;
    if (!Object.prototype.hasOwnProperty.call(v, key)) continue;
    if (!first) out.add(',');
    first = false;
    out.add(`${JSON.stringify(key.length > out.room ? key.slice(0, out.room) : key)}:`);
    write(out, (v as Record<string, unknown>)[key], depth + 1);
  }
  out.add('}');
}
