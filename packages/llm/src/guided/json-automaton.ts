/**
 * An incremental, byte-level pushdown automaton for JSON constrained by a compiled schema
 * (`json-schema.ts`). Pure and persistent: a `JsonState` is immutable, `step(state, byte)` returns the
 * next state or null (the byte cannot continue any valid document), so a caller can branch (the token
 * trie walk) without copying.
 *
 * A state is a small set of alternatives (unions keep one per open option; most states have one),
 * each a linked stack of immutable frames. Every state the automaton can reach has a way to finish a
 * valid document (the schema compiler refuses unsatisfiable schemas, counts and lengths are capped
 * only where completion stays possible), so a token mask built on it is never empty.
 *
 * Output rules beyond JSON itself: whitespace runs are at most `MAX_WS` bytes, numbers at most
 * `MAX_NUMBER_BYTES`, nesting at most `MAX_GUIDED_DEPTH`; strings are well-formed UTF-8 (no overlong
 * forms or surrogates), control characters escaped; nothing (not even whitespace) follows the root
 * value; object keys never repeat.
 */
import { MAX_GUIDED_DEPTH, minDepth, type ArrayNode, type LiteralNode, type ObjectNode, type SchemaNode } from './json-schema.js';

export const MAX_WS = 16;
export const MAX_NUMBER_BYTES = 24;

type Frame = ValueFrame | ObjectFrame | ArrayFrame | StringFrame | LiteralFrame | NumberFrame | DoneFrame;

interface Base {
  readonly up: Frame | null;
  readonly depth: number;
}
/** Expecting a value of `node` (whitespace first). */
interface ValueFrame extends Base {
  readonly t: 'value';
  readonly node: SchemaNode;
  readonly ws: number;
}
/** phase 0: after `{`; 1: after `,`; 2: after a key (expects `:`); 3: after a value; 4: inside the value of `key`. */
interface ObjectFrame extends Base {
  readonly t: 'obj';
  readonly node: ObjectNode;
  readonly phase: 0 | 1 | 2 | 3 | 4;
  readonly seen: readonly string[];
  readonly key: string;
  readonly ws: number;
}
/** phase 0: after `[`; 1: after a value; 2: inside a value. `n`: items so far (clamped where it no longer matters). */
interface ArrayFrame extends Base {
  readonly t: 'arr';
  readonly node: ArrayNode;
  readonly phase: 0 | 1 | 2;
  readonly n: number;
  readonly ws: number;
}
/**
 * Inside a string. `key`: an object key of a parent with free keys (bytes accumulated as latin1
 * characters in `acc`). `esc`: 0 none, 1 after `\`, 2..5 that many minus 2 hex digits of `\u` read.
 * `u8`: UTF-8 continuation bytes still due, the next in [lo, hi].
 */
interface StringFrame extends Base {
  readonly t: 'str';
  readonly key: boolean;
  readonly acc: string;
  readonly esc: number;
  readonly u8: number;
  readonly lo: number;
  readonly hi: number;
}
/** Matching canonical texts (enum/const values, or a closed object's keys when `keyOf` is set). */
interface LiteralFrame extends Base {
  readonly t: 'lit';
  readonly texts: readonly Uint8Array[];
  readonly pos: number;
  /** Closed-object keys: text → key. */
  readonly keyOf: ReadonlyMap<Uint8Array, string> | null;
}
/** JSON number grammar states: 0 after `-`, 1 after a leading 0, 2 int digits, 3 after `.`, 4 fraction digits, 5 after e, 6 after e sign, 7 exponent digits. */
interface NumberFrame extends Base {
  readonly t: 'num';
  readonly integer: boolean;
  readonly s: number;
  readonly len: number;
}
/** The root value is complete. */
interface DoneFrame extends Base {
  readonly t: 'done';
}

/** An automaton state: one or more alternatives (deduplicated). Immutable. */
export type JsonState = readonly Frame[];

export function initialState(root: SchemaNode): JsonState {
  return [{ t: 'value', node: root, ws: 0, up: null, depth: 0 }];
}

/** The state after `byte`, or null when no alternative can take it. */
export function step(state: JsonState, byte: number): JsonState | null {
  if (state.length === 1) {
    out.length = 0;
    stepFrame(state[0]!, byte, out);
    if (out.length === 0) return null;
    if (out.length === 1) return [out[0]!];
    return dedupe(out);
  }
  const all: Frame[] = [];
  for (const f of state) {
    out.length = 0;
    stepFrame(f, byte, out);
    all.push(...out);
  }
  return all.length === 0 ? null : all.length === 1 ? all : dedupe(all);
}
const out: Frame[] = [];

/** True when the bytes so far form a complete document (ending here is valid). */
export function isAccepting(state: JsonState): boolean {
  return state.some((f) => f.t === 'done' || (f.up === null && completable(f)));
}

/** True when some alternative can take another byte (false: a complete document that can only end). */
export function canContinue(state: JsonState): boolean {
  return state.some((f) => f.t !== 'done');
}

/**
 * True when the state is one alternative inside a string, after a whole character (and not in an
 * escape): `stringTokenClass` then decides every token but those it says to walk.
 */
export function inPlainString(state: JsonState): boolean {
  if (state.length !== 1) return false;
  const f = state[0]!;
  return f.t === 'str' && f.esc === 0 && f.u8 === 0;
}

/**
 * What a token does inside a string after a whole character, whatever the stack: `allowed` (plain
 * string bytes only, possibly ending inside a UTF-8 character), `never` (a control character or a
 * malformed UTF-8 sequence comes before any quote or backslash), or `walk` (it reaches a quote or a
 * backslash: the automaton must decide).
 */
export function stringTokenClass(bytes: Uint8Array): 'allowed' | 'never' | 'walk' {
  let u8 = 0;
  let lo = 0x80;
  let hi = 0xbf;
  for (const b of bytes) {
    if (u8 > 0) {
      if (b < lo || b > hi) return 'never';
      u8--;
      lo = 0x80;
      hi = 0xbf;
      continue;
    }
    if (b < 0x80) {
      if (b === 0x22 || b === 0x5c) return 'walk';
      if (b < 0x20) return 'never';
      continue;
    }
    if (b >= 0xc2 && b <= 0xdf) u8 = 1;
    else if (b === 0xe0) (u8 = 2), (lo = 0xa0);
    else if ((b >= 0xe1 && b <= 0xec) || b === 0xee || b === 0xef) u8 = 2;
    else if (b === 0xed) (u8 = 2), (hi = 0x9f);
    else if (b === 0xf0) (u8 = 3), (lo = 0x90);
    else if (b >= 0xf1 && b <= 0xf3) u8 = 3;
    else if (b === 0xf4) (u8 = 3), (hi = 0x8f);
    else return 'never';
  }
  return 'allowed';
}

/** A string that identifies the state (for caching masks): equal keys ⇒ same future. */
export function stateKey(state: JsonState): string {
  if (state.length === 1) return frameKey(state[0]!);
  return state.map(frameKey).sort().join('|');
}

// ---------------------------------------------------------------------------------------------------

const nodeIds = new WeakMap<object, number>();
let nextNodeId = 1;
function nodeId(n: object): number {
  let id = nodeIds.get(n);
  if (id === undefined) nodeIds.set(n, (id = nextNodeId++));
  return id;
}

function frameKey(f: Frame | null): string {
  let s = '';
  for (; f !== null; f = f.up) {
    switch (f.t) {
      case 'value':
        s += `v${nodeId(f.node)},${f.ws};`;
        break;
      case 'obj':
        s += `o${nodeId(f.node)},${f.phase},${f.ws},${JSON.stringify(f.seen)},${f.phase >= 2 ? JSON.stringify(f.key) : ''};`;
        break;
      case 'arr':
        s += `a${nodeId(f.node)},${f.phase},${f.n},${f.ws};`;
        break;
      case 'str':
        s += `s${f.key ? 1 : 0},${f.esc},${f.u8},${f.lo},${f.hi},${f.key && keyMatters(f) ? JSON.stringify(f.acc) : ''};`;
        break;
      case 'lit':
        s += `l${f.pos},${f.keyOf === null ? 0 : 1},${f.texts.map(nodeId).join(',')};`;
        break;
      case 'num':
        s += `n${f.integer ? 1 : 0},${f.s},${f.len};`;
        break;
      case 'done':
        s += 'd;';
        break;
    }
  }
  return s;
}

/**
 * Whether a key's bytes so far can still change what follows: only through the duplicate check at
 * its closing quote, so not when it has no escape and no key already seen starts with its bytes.
 */
function keyMatters(f: StringFrame): boolean {
  const obj = f.up as ObjectFrame;
  if (obj.seen.length === 0) return false;
  if (f.acc.includes('\\')) return true;
  return obj.seen.some((k) => Buffer.from(k, 'utf8').toString('latin1').startsWith(f.acc));
}

function dedupe(frames: Frame[]): Frame[] {
  const seen = new Map<string, Frame>();
  for (const f of frames) {
    const k = frameKey(f);
    if (!seen.has(k)) seen.set(k, f);
  }
  return [...seen.values()];
}

const isWs = (b: number): boolean => b === 0x20 || b === 0x0a || b === 0x0d || b === 0x09;
const isDigit = (b: number): boolean => b >= 0x30 && b <= 0x39;

/** Can this frame's value end here (a number or literal that needs no more bytes)? */
function completable(f: Frame): boolean {
  if (f.t === 'num') return f.s === 1 || f.s === 2 || f.s === 4 || f.s === 7;
  if (f.t === 'lit') return f.keyOf === null && f.texts.some((t) => t.length === f.pos);
  return false;
}

/** Push the states `f` reaches on `b` into `into`. */
function stepFrame(f: Frame, b: number, into: Frame[]): void {
  switch (f.t) {
    case 'value':
      if (isWs(b)) {
        if (f.ws < MAX_WS) into.push({ ...f, ws: f.ws + 1 });
        return;
      }
      startValue(f.node, b, f.up, f.depth, into);
      return;
    case 'obj':
      return stepObject(f, b, into);
    case 'arr':
      return stepArray(f, b, into);
    case 'str':
      return stepString(f, b, into);
    case 'lit':
      return stepLiteral(f, b, into);
    case 'num':
      return stepNumber(f, b, into);
    case 'done':
      return;
  }
}

/** A value of `node` begins with `b`, under `up`. */
function startValue(node: SchemaNode, b: number, up: Frame | null, depth: number, into: Frame[]): void {
  switch (node.k) {
    case 'union':
      for (const o of node.options) startValue(o, b, up, depth, into);
      return;
    case 'object':
      if (b === 0x7b && depth + minDepth(node) <= MAX_GUIDED_DEPTH) into.push({ t: 'obj', node, phase: 0, seen: [], key: '', ws: 0, up, depth: depth + 1 });
      return;
    case 'array':
      if (b === 0x5b && depth + minDepth(node) <= MAX_GUIDED_DEPTH) into.push({ t: 'arr', node, phase: 0, n: 0, ws: 0, up, depth: depth + 1 });
      return;
    case 'string':
      if (b === 0x22) into.push({ t: 'str', key: false, acc: '', esc: 0, u8: 0, lo: 0, hi: 0, up, depth });
      return;
    case 'number':
      if (b === 0x2d) into.push({ t: 'num', integer: node.integer, s: 0, len: 1, up, depth });
      else if (b === 0x30) into.push({ t: 'num', integer: node.integer, s: 1, len: 1, up, depth });
      else if (isDigit(b)) into.push({ t: 'num', integer: node.integer, s: 2, len: 1, up, depth });
      return;
    case 'literal':
      literalStart(node, b, up, depth, into);
      return;
  }
}

function literalStart(node: LiteralNode, b: number, up: Frame | null, depth: number, into: Frame[]): void {
  const texts = node.texts.filter((t) => t[0] === b);
  if (texts.length === 0) return;
  const f: LiteralFrame = { t: 'lit', texts, pos: 1, keyOf: null, up, depth };
  // A one-byte literal (a one-digit number) may already be complete.
  into.push(f);
}

/** The value that `up` was waiting for is complete. */
function completeValue(up: Frame | null, depth: number): Frame {
  if (up === null) return { t: 'done', up: null, depth };
  if (up.t === 'obj') return { ...up, phase: 3, seen: [...up.seen, up.key].sort(), key: '', ws: 0 };
  if (up.t === 'arr') {
    const node = up.node;
    let n = up.n + 1;
    // Beyond minItems an unbounded array's count no longer matters: clamp it, so states (and mask caches) repeat.
    if (node.max === Infinity && n > node.min) n = node.min;
    return { ...up, phase: 1, n, ws: 0 };
  }
  throw new Error(`json automaton: a value completed under a ${up.t} frame`);
}

/** A finished key of an object whose value now follows (after `:`). */
function completeKey(obj: ObjectFrame, key: string): Frame {
  return { ...obj, phase: 2, key, ws: 0 };
}

/** A value ended before `b`: pop it and let its parent take `b`. */
function popAndStep(f: Frame, b: number, into: Frame[]): void {
  stepFrame(completeValue(f.up, f.depth), b, into);
}

function objectCanTakeKey(f: ObjectFrame): boolean {
  if (f.node.additional !== null) return true;
  return f.node.keyTexts.some((k) => !f.seen.includes(k.key));
}

function objectCanClose(f: ObjectFrame): boolean {
  return f.node.required.every((r) => f.seen.includes(r));
}

function stepObject(f: ObjectFrame, b: number, into: Frame[]): void {
  if (isWs(b) && f.phase !== 4) {
    if (f.ws < MAX_WS) into.push({ ...f, ws: f.ws + 1 });
    return;
  }
  switch (f.phase) {
    case 0:
    case 1:
      if (b === 0x22 && objectCanTakeKey(f)) {
        const inObj = f;
        if (f.node.additional === null) {
          const keyOf = new Map<Uint8Array, string>();
          for (const k of f.node.keyTexts) if (!f.seen.includes(k.key)) keyOf.set(k.text, k.key);
          into.push({ t: 'lit', texts: [...keyOf.keys()], pos: 0, keyOf, up: inObj, depth: f.depth });
        } else {
          into.push({ t: 'str', key: true, acc: '', esc: 0, u8: 0, lo: 0, hi: 0, up: inObj, depth: f.depth });
        }
      } else if (b === 0x7d && f.phase === 0 && objectCanClose(f)) {
        into.push(completeValue(f.up, f.depth - 1));
      }
      return;
    case 2:
      if (b === 0x3a) {
        const node = f.node.props.get(f.key) ?? f.node.additional!;
        into.push({ t: 'value', node, ws: 0, up: { ...f, phase: 4, ws: 0 }, depth: f.depth });
      }
      return;
    case 3:
      if (b === 0x2c && objectCanTakeKey(f)) into.push({ ...f, phase: 1, ws: 0 });
      else if (b === 0x7d && objectCanClose(f)) into.push(completeValue(f.up, f.depth - 1));
      return;
    default:
      return;
  }
}

function stepArray(f: ArrayFrame, b: number, into: Frame[]): void {
  if (isWs(b)) {
    if (f.ws < MAX_WS) into.push({ ...f, ws: f.ws + 1 });
    return;
  }
  const node = f.node;
  if (f.phase === 0) {
    if (b === 0x5d) {
      if (node.min === 0) into.push(completeValue(f.up, f.depth - 1));
      return;
    }
    if (node.max > 0) startValue(node.items, b, { ...f, phase: 2, ws: 0 }, f.depth, into);
    return;
  }
  if (f.phase === 1) {
    if (b === 0x2c && f.n < node.max) into.push({ t: 'value', node: node.items, ws: 0, up: { ...f, phase: 2, ws: 0 }, depth: f.depth });
    else if (b === 0x5d && f.n >= node.min) into.push(completeValue(f.up, f.depth - 1));
  }
}

function stepString(f: StringFrame, b: number, into: Frame[]): void {
  const acc = f.key ? f.acc + String.fromCharCode(b) : '';
  if (f.u8 > 0) {
    if (b >= f.lo && b <= f.hi) into.push({ ...f, acc, u8: f.u8 - 1, lo: 0x80, hi: 0xbf });
    return;
  }
  if (f.esc === 1) {
    if (b === 0x75 /* u */) into.push({ ...f, acc, esc: 2 });
    else if (b === 0x22 || b === 0x5c || b === 0x2f || b === 0x62 || b === 0x66 || b === 0x6e || b === 0x72 || b === 0x74) into.push({ ...f, acc, esc: 0 });
    return;
  }
  if (f.esc >= 2) {
    const hex = isDigit(b) || (b >= 0x41 && b <= 0x46) || (b >= 0x61 && b <= 0x66);
    if (hex) into.push({ ...f, acc, esc: f.esc === 5 ? 0 : f.esc + 1 });
    return;
  }
  if (b === 0x22) {
    if (!f.key) {
      into.push(completeValue(f.up, f.depth));
      return;
    }
    const obj = f.up as ObjectFrame;
    const key = JSON.parse(`"${Buffer.from(f.acc, 'latin1').toString('utf8')}"`) as string;
    if (!obj.seen.includes(key)) into.push(completeKey(obj, key));
    return;
  }
  if (b === 0x5c) {
    into.push({ ...f, acc, esc: 1 });
    return;
  }
  if (b < 0x20) return;
  if (b < 0x80) {
    into.push(f.key ? { ...f, acc } : f);
    return;
  }
  // UTF-8 lead bytes (RFC 3629 table: no overlong forms, no surrogates, nothing past U+10FFFF).
  let n = 0;
  let lo = 0x80;
  let hi = 0xbf;
  if (b >= 0xc2 && b <= 0xdf) n = 1;
  else if (b === 0xe0) (n = 2), (lo = 0xa0);
  else if ((b >= 0xe1 && b <= 0xec) || b === 0xee || b === 0xef) n = 2;
  else if (b === 0xed) (n = 2), (hi = 0x9f);
  else if (b === 0xf0) (n = 3), (lo = 0x90);
  else if (b >= 0xf1 && b <= 0xf3) n = 3;
  else if (b === 0xf4) (n = 3), (hi = 0x8f);
  else return;
  into.push({ ...f, acc, u8: n, lo, hi });
}

function stepLiteral(f: LiteralFrame, b: number, into: Frame[]): void {
  const texts = f.texts.filter((t) => t.length > f.pos && t[f.pos] === b);
  if (texts.length > 0) {
    if (f.keyOf !== null) {
      // Keys end with their closing quote, which no other key text has at that position: done at once.
      const done = texts.find((t) => t.length === f.pos + 1);
      if (done !== undefined) {
        into.push(completeKey(f.up as ObjectFrame, f.keyOf.get(done)!));
        return;
      }
    }
    into.push({ ...f, texts, pos: f.pos + 1 });
  }
  if (completable(f)) popAndStep(f, b, into);
}

function stepNumber(f: NumberFrame, b: number, into: Frame[]): void {
  const room = MAX_NUMBER_BYTES - f.len;
  const next = (s: number): void => void into.push({ ...f, s, len: f.len + 1 });
  // A byte that needs another digit after it is taken only when there is room for that digit too.
  switch (f.s) {
    case 0:
      if (b === 0x30) return next(1);
      if (isDigit(b)) return next(2);
      return;
    case 1:
    case 2:
      if (f.s === 2 && isDigit(b) && room >= 1) return next(2);
      if (!f.integer && b === 0x2e && room >= 2) return next(3);
      if (!f.integer && (b === 0x65 || b === 0x45) && room >= 2) return next(5);
      break;
    case 3:
      if (isDigit(b)) return next(4);
      return;
    case 4:
      if (isDigit(b) && room >= 1) return next(4);
      if ((b === 0x65 || b === 0x45) && room >= 2) return next(5);
      break;
    case 5:
      if (isDigit(b)) return next(7);
      if ((b === 0x2b || b === 0x2d) && room >= 2) return next(6);
      return;
    case 6:
      if (isDigit(b)) return next(7);
      return;
    case 7:
      if (isDigit(b) && room >= 1) return next(7);
      break;
  }
  popAndStep(f, b, into);
}
