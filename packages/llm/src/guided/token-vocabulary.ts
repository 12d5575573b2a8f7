/**
 * `TokenVocabulary`: every token's bytes (what it adds to the output text) in a prefix tree, built
 * once per tokenizer, so a constraint walks shared prefixes once (`token-constraint.ts`).
 *
 * The trie is flat typed arrays (first-child / next-sibling lists, built in one pass over the tokens
 * sorted by bytes); `tokenStart` / `tokenIds` list the tokens whose bytes end at each node (several
 * tokens may share bytes). Tokens without bytes (special tokens, unknown ids, empty
 * strings) are not in the trie: a constraint never allows them, except the end ids it is given.
 */
import type { Tokenizer } from '../tokenizer/tokenizer.js';

/**
 * Tokens longer than this many bytes are left out (never generated under a constraint): no real
 * vocabulary has them, and the trie walk recurses once per byte.
 */
export const MAX_TOKEN_BYTES = 1024;

export class TokenVocabulary {
  private constructor(
    /** Width of the logits the masks cover (token ids are below it). */
    readonly size: number,
    /** Trie as first-child / next-sibling lists (-1: none), siblings in byte order; node 0 is the root. */
    readonly firstChild: Int32Array,
    readonly nextSibling: Int32Array,
    /** The byte on the edge into each node. */
    readonly nodeByte: Uint8Array,
    /** Tokens ending at node i: tokenIds[tokenStart[i] .. tokenStart[i+1]). */
    readonly tokenStart: Int32Array,
    readonly tokenIds: Int32Array,
    /** Trie nodes (the root is node 0). */
    readonly nodeCount: number,
    /** Each token's bytes; null for tokens never generated under a constraint. */
    readonly tokenBytes: ReadonlyArray<Uint8Array | null>,
  ) {}

  /** Per-constraint-kind data derived from this vocabulary once (e.g. `token-constraint.ts`'s string classes). */
  readonly derived = new Map<string, unknown>();

  /** From each token's bytes (`null`: never generated under a constraint; so are tokens over `MAX_TOKEN_BYTES`). */
  static fromTokenBytes(tokenBytes: ReadonlyArray<Uint8Array | null>): TokenVocabulary {
    let tokens = tokenBytes;
    // Sorted, each token shares its prefix with the path of the one before: one pass, nodes in
    // preorder, children created in byte order, end nodes non-decreasing.
    const ids: number[] = [];
    tokens = tokens.map((b) => (b !== null && b.length > MAX_TOKEN_BYTES ? null : b));
    tokens.forEach((b, id) => {
      if (b !== null && b.length > 0) ids.push(id);
    });
    // Latin-1 strings compare code unit by code unit, i.e. byte by byte, and natively.
    const keys = tokens.map((b) => (b === null ? '' : Buffer.from(b.buffer, b.byteOffset, b.byteLength).toString('latin1')));
    ids.sort((a, b) => (keys[a]! < keys[b]! ? -1 : keys[a]! > keys[b]! ? 1 : a - b));
    let total = 1;
    for (const id of ids) total += tokens[id]!.length;
    const firstChild = new Int32Array(total).fill(-1);
    const nextSibling = new Int32Array(total).fill(-1);
    const nodeByte = new Uint8Array(total);
    const lastChild = new Int32Array(total).fill(-1);
    const endNode = new Int32Array(ids.length);
    const path: number[] = [0]; // path[d]: node at depth d of the previous token
    let prev: Uint8Array = new Uint8Array(0);
    let n = 1;
    ids.forEach((id, k) => {
      const bytes = tokens[id]!;
      let common = 0;
      while (common < prev.length && common < bytes.length && prev[common] === bytes[common]) common++;
      path.length = common + 1;
      for (let d = common; d < bytes.length; d++) {
        const parent = path[d]!;
        const node = n++;
        nodeByte[node] = bytes[d]!;
        if (lastChild[parent] === -1) firstChild[parent] = node;
        else nextSibling[lastChild[parent]!] = node;
        lastChild[parent] = node;
        path.push(node);
      }
      endNode[k] = path[bytes.length]!;
      prev = bytes;
    });
    const tokenStart = new Int32Array(n + 1);
    const tokenIds = new Int32Array(ids.length);
    let k = 0;
    for (let node = 0; node <= n; node++) {
      tokenStart[node] = k;
      while (k < ids.length && endNode[k] === node) tokenIds[k] = ids[k++]!;
    }
    return new TokenVocabulary(tokens.length, firstChild.subarray(0, n), nextSibling.subarray(0, n), nodeByte.subarray(0, n), tokenStart, tokenIds, n, tokens);
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
