/**
 * `TokenConstraint`: the role a sampler calls to keep generation inside a language, token by token.
 * `compileTokenConstraint` turns a `GuidedDecoding` spec into one for a tokenizer's vocabulary
 * (`JsonTokenConstraint`: the JSON automaton of `json-automaton.ts`).
 *
 * The mask of a state: every token whose bytes the automaton can take from that state, found by
 * walking the vocabulary's trie with the automaton (shared prefixes are stepped once; a subtree is
 * skipped at the first byte no alternative takes), plus the end ids when the document is complete.
 * Inside a string (the widest walk: nearly every token fits) the tokens made only of plain string
 * bytes are allowed as a precomputed bitset, and only those that reach a quote or a backslash (a few
 * percent of a vocabulary) are walked, in their own trie. Masks are cached
 * by state key per vocabulary (LRU, `MASK_CACHE_ENTRIES`): at repeating states a mask costs one lookup.
 *
 * Called from `sample` only: synchronous, one sequence per constraint, never shared.
 */
import { guidedRoot, type GuidedDecoding } from './json-schema.js';
import { canContinue, inPlainString, initialState, isAccepting, stringTokenClass, stateKey, step, type JsonState } from './json-automaton.js';
import { TokenVocabulary } from './token-vocabulary.js';

export interface TokenConstraint {
  /** Set the logits of every token not allowed next to -Infinity (in place; ids past the vocabulary too). */
  mask(logits: Float32Array): void;
  /**
   * The sequence took `tokenId`. False (and the constraint then allows only the end ids) when the
   * token was not allowed: a continuation carrying foreign tokens ends rather than breaks.
   */
  advance(tokenId: number): boolean;
  /** The output so far is a complete document: an end id may follow (and, when nothing else can, must). */
  isComplete(): boolean;
}

/** Masks kept per vocabulary (each (vocab/32) words: 19 KiB at 150k tokens). */
export const MASK_CACHE_ENTRIES = 256;

const caches = new WeakMap<TokenVocabulary, Map<string, Uint32Array>>();

/**
 * A constraint for `spec` over `vocab`; `endTokenIds` end the sequence (allowed once the document is
 * complete, and then the only ones allowed when nothing can follow). Compiles the schema
 * (invalid_argument for what `compileJsonSchema` refuses).
 */
export function compileTokenConstraint(spec: GuidedDecoding, vocab: TokenVocabulary, endTokenIds: Iterable<number>): TokenConstraint {
  return new JsonTokenConstraint(vocab, initialState(guidedRoot(spec)), [...endTokenIds]);
}

export class JsonTokenConstraint implements TokenConstraint {
  /** null: a token outside the language was taken; only end ids are allowed. */
  private state: JsonState | null;
  private readonly cache: Map<string, Uint32Array>;

  constructor(
    private readonly vocab: TokenVocabulary,
    initial: JsonState,
    private readonly endTokenIds: readonly number[],
  ) {
    this.state = initial;
    let cache = caches.get(vocab);
    if (cache === undefined) caches.set(vocab, (cache = new Map()));
    this.cache = cache;
  }

  isComplete(): boolean {
    return this.state === null || isAccepting(this.state);
  }

  mask(logits: Float32Array): void {
    const bits = this.allowed();
    const v = logits.length;
    for (let w = 0; w * 32 < v; w++) {
      const word = w < bits.length ? bits[w]! : 0;
      if (word === -1 >>> 0) continue;
      const end = Math.min(v, w * 32 + 32);
      for (let i = w * 32; i < end; i++) if ((word & (1 << (i & 31))) === 0) logits[i] = -Infinity;
    }
  }

  advance(tokenId: number): boolean {
    if (this.state === null) return this.endTokenIds.includes(tokenId);
    if (this.endTokenIds.includes(tokenId)) {
      const ok = isAccepting(this.state);
      this.state = null;
      return ok;
    }
    const bytes = this.vocab.tokenBytes[tokenId] ?? null;
    let s: JsonState | null = bytes === null ? null : this.state;
    for (let i = 0; s !== null && i < bytes!.length; i++) s = step(s, bytes![i]!);
    this.state = s;
    return s !== null;
  }

  /** The allowed tokens of the current state as a bitset over the vocabulary. */
  allowed(): Uint32Array {
    const words = (this.vocab.size + 31) >>> 5;
    const state = this.state;
    if (state === null) return this.onlyEnds(words);
    const key = stateKey(state);
    const hit = this.cache.get(key);
    if (hit !== undefined) {
      this.cache.delete(key); // LRU: most recent last
      this.cache.set(key, hit);
      return hit;
    }
    let bits: Uint32Array;
    if (!canContinue(state)) bits = new Uint32Array(words);
    else if (inPlainString(state)) {
      const classes = stringClasses(this.vocab);
      bits = classes.plain.slice();
      walk(classes.others, state, bits);
    } else bits = walk(this.vocab, state, new Uint32Array(words));
    if (isAccepting(state)) for (const id of this.endTokenIds) if (id < this.vocab.size) bits[id >>> 5]! |= 1 << (id & 31);
    // A vocabulary without some byte the document needs (never a byte-level one) would leave nothing:
    // end the sequence rather than fail the whole batch's step.
    if (bits.every((w) => w === 0)) bits = this.onlyEnds(words);
    this.cache.set(key, bits);
    if (this.cache.size > MASK_CACHE_ENTRIES) this.cache.delete(this.cache.keys().next().value!);
    return bits;
  }

  private onlyEnds(words: number): Uint32Array {
    const bits = new Uint32Array(words);
    for (const id of this.endTokenIds) if (id < this.vocab.size) bits[id >>> 5]! |= 1 << (id & 31);
    return bits;
  }
}

/** Adds to `bits` every token of `vocab` the automaton can take from `state` (a depth-first walk of the trie). */
function walk(vocab: TokenVocabulary, state: JsonState, bits: Uint32Array): Uint32Array {
  const { firstChild, nextSibling, nodeByte, tokenStart, tokenIds } = vocab;
  const visit = (node: number, s: JsonState): void => {
    for (let c = firstChild[node]!; c !== -1; c = nextSibling[c]!) {
      const next = step(s, nodeByte[c]!);
      if (next === null) continue;
      for (let t = tokenStart[c]!, te = tokenStart[c + 1]!; t < te; t++) {
        const id = tokenIds[t]!;
        bits[id >>> 5]! |= 1 << (id & 31);
      }
      if (firstChild[c] !== -1) visit(c, next);
    }
  };
  visit(0, state);
  return bits;
}

interface StringClasses {
  /** Tokens `stringTokenClass` allows in any string. */
  readonly plain: Uint32Array;
  /** Tokens it says to walk (they reach a quote or backslash), in their own trie (same ids). */
  readonly others: TokenVocabulary;
}

/** The vocabulary split for strings, computed once per vocabulary. */
function stringClasses(vocab: TokenVocabulary): StringClasses {
  const known = vocab.derived.get('json-string') as StringClasses | undefined;
  if (known !== undefined) return known;
  const plain = new Uint32Array((vocab.size + 31) >>> 5);
  const others = vocab.tokenBytes.map((bytes, id) => {
    if (bytes === null) return null;
    const kind = stringTokenClass(bytes);
    if (kind === 'allowed') plain[id >>> 5]! |= 1 << (id & 31);
    return kind === 'walk' ? bytes : null;
  });
  const classes = { plain, others: TokenVocabulary.fromTokenBytes(others) };
  vocab.derived.set('json-string', classes);
  return classes;
}
