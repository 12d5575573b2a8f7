/**
 * `TokenVocabulary`: every token's bytes (what it adds to the output text) in a prefix tree, built
 * once per tokenizer, so a constraint walks shared prefixes once (`token-constraint.ts`).
 *
 * The trie is flat typed arrays: node i's children are `childStart[i] .. childStart[i+1]` in
 * `childByte` / `childNode` (sorted by byte); `tokensAt[i]` lists the tokens whose bytes end at node i
 * (several tokens may share bytes). Tokens without bytes (special tokens, unknown ids, empty
 * strings) are not in the trie: a constraint never allows them, except the end ids it is given.
 */
import type { Tokenizer } from '../tokenizer.js';

export class TokenVocabulary {
  private constructor(
    /** Width of the logits the masks cover (token ids are below it). */
    readonly size: number,
    readonly childStart: Int32Array,
    readonly childByte: Uint8Array,
    readonly childNode: Int32Array,
    readonly tokenStart: Int32Array,
    readonly tokenIds: Int32Array,
    /** Trie nodes (the root is node 0). */
    readonly nodeCount: number,
    /** Each token's bytes; null for tokens never generated under a constraint. */
    readonly tokenBytes: ReadonlyArray<Uint8Array | null>,
  ) {}

  /** From each token's bytes (`null`: never generated under a constraint). */
  static fromTokenBytes(tokens: ReadonlyArray<Uint8Array | null>): TokenVocabulary {
    // Build with per-node maps, then flatten breadth-first.
    const children: Array<Map<number, number>> = [new Map()];
    const ends: number[][] = [[]];
    tokens.forEach((bytes, id) => {
      if (bytes === null || bytes.length === 0) return;
      let node = 0;
      for (const b of bytes) {
        let next = children[node]!.get(b);
        if (next === undefined) {
          next = children.length;
          children.push(new Map());
          ends.push([]);
          children[node]!.set(b, next);
        }
        node = next;
      }
      ends[node]!.push(id);
    });
    const n = children.length;
    const childStart = new Int32Array(n + 1);
    const childByte = new Uint8Array(n - 1);
    const childNode = new Int32Array(n - 1);
    let e = 0;
    for (let i = 0; i < n; i++) {
      childStart[i] = e;
      for (const [b, c] of [...children[i]!].sort((x, y) => x[0] - y[0])) {
        childByte[e] = b;
        childNode[e++] = c;
      }
    }
    childStart[n] = e;
    const tokenStart = new Int32Array(n + 1);
    const all: number[] = [];
    for (let i = 0; i < n; i++) {
      tokenStart[i] = all.length;
      all.push(...ends[i]!);
    }
    tokenStart[n] = all.length;
    return new TokenVocabulary(tokens.length, childStart, childByte, childNode, tokenStart, Int32Array.from(all), n, tokens);
  }

  /**
   * From a tokenizer: byte-level BPE tokens map back through GPT-2's byte table (exact bytes, partial
   * UTF-8 characters included); other tokenizers use each token's own decoded text. Special tokens
   * have no bytes.
   */
  static fromTokenizer(tokenizer: Tokenizer, size: number = tokenizer.vocabSize): TokenVocabulary {
    const unicodeToByte = new Map<string, number>();
    BYTE_SYMBOLS.forEach((s, b) => unicodeToByte.set(s, b));
    const enc = new TextEncoder();
    const byteLevel = BYTE_SYMBOLS.every((s) => tokenizer.tokenToId(s) !== undefined);
    const tokens: Array<Uint8Array | null> = new Array(size).fill(null);
    for (let id = 0; id < size; id++) {
      if (tokenizer.isSpecial(id)) continue;
      const token = tokenizer.idToToken(id);
      if (token === undefined || token === '') continue;
      let bytes: Uint8Array | null = null;
      if (byteLevel) {
        const out = new Uint8Array(token.length);
        let ok = true;
        for (let i = 0; i < token.length && ok; i++) {
          const b = unicodeToByte.get(token[i]!);
          if (b === undefined) ok = false;
          else out[i] = b;
        }
        bytes = ok ? out : enc.encode(token); // an added (non-byte-level) token is its own text
      } else {
        const text = tokenizer.decode([id]);
        bytes = text.includes('\uFFFD') ? null : enc.encode(text);
      }
      tokens[id] = bytes;
    }
    return TokenVocabulary.fromTokenBytes(tokens);
  }
}

/** GPT-2's `bytes_to_unicode`: printable bytes stand for themselves, the rest are shifted past U+00FF. */
const BYTE_SYMBOLS: readonly string[] = (() => {
  const printable = (b: number): boolean => (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
  const out: string[] = [];
  let shifted = 0;
  for (let b = 0; b < 256; b++) out.push(String.fromCodePoint(printable(b) ? b : 256 + shifted++));
  return out;
})();
