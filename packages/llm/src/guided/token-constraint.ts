/**
 * `TokenConstraint`: the role a sampler calls to keep generation inside a language, token by token.
 * `compileTokenConstraint` turns a `GuidedDecoding` spec into one for a tokenizer's vocabulary
 * (`JsonTokenConstraint`: the JSON automaton of `json-automaton.ts`).
 *
 * The mask of a state: every token whose bytes the automaton can take from that state, found by
 * walking the vocabulary's trie with the automaton (shared prefixes are stepped once; a subtree is
 * skipped at the first byte no alternative takes), plus the end ids when the document is complete.
 * Masks are cached by state key per vocabulary (LRU, `MASK_CACHE_ENTRIES`): inside a string, between
 * array items and at other repeating states a mask costs one lookup.
 *
 * Called from `sample` only: synchronous, one sequence per constraint, never shared.
 */
import { guidedRoot, type GuidedDecoding } from './json-schema.js';
import { canContinue, initialState, isAccepting, stateKey, step, type JsonState } from './json-automaton.js';
import type { TokenVocabulary } from './token-vocabulary.js';

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
    const bits = canContinue(state) ? walk(this.vocab, state, words) : new Uint32Array(words);
    if (isAccepting(state)) for (const id of this.endTokenIds) if (id < this.vocab.size) bits[id >>> 5]! |= 1 << (id & 31);
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

/** Every token the automaton can take from `state`, by a depth-first walk of the trie. */
function walk(vocab: TokenVocabulary, state: JsonState, words: number): Uint32Array {
  const bits = new Uint32Array(words);
  const { childStart, childByte, childNode, tokenStart, tokenIds } = vocab;
  const visit = (node: number, s: JsonState): void => {
    const end = childStart[node + 1]!;
    for (let e = childStart[node]!; e < end; e++) {
      const next = step(s, childByte[e]!);
      if (next === null) continue;
      const c = childNode[e]!;
      for (let t = tokenStart[c]!, te = tokenStart[c + 1]!; t < te; t++) {
        const id = tokenIds[t]!;
        bits[id >>> 5]! |= 1 << (id & 31);
      }
      if (childStart[c + 1]! > childStart[c]!) visit(c, next);
    }
  };
  visit(0, state);
  return bits;
}
