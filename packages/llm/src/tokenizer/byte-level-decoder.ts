/**
 * `ByteLevelDecoder`: decoding for byte-level BPE tokenizers (the GPT-2 byte-to-unicode alphabet:
 * Llama 3, Qwen, Mistral's Tekken, Gemma 3 and most current chat models) that gives exactly the text
 * @huggingface/tokenizers' `decode` gives (without cleanup), at a fraction of its cost.
 *
 * Why: streaming detokenisation decodes a short window twice per generated token, on the event loop
 * of every worker and router that streams text. The library, for each token of each window, scans its
 * added-token list (`Array.find`) and, skipping special tokens, its special-token list
 * (`Array.includes`), then maps every character through its byte table into a fresh array: 4-17 µs per
 * three-token window on the test tokenizers, growing with the added-token count (Mistral's 771, Llama
 * 3's 256). Here each id's bytes are computed once and both lists are sets.
 *
 * The library's algorithm, reproduced: ids → token strings (`vocab[id]`); with `skipSpecial`, tokens
 * whose string is a special token's are dropped; then runs of tokens between added tokens are each
 * turned into bytes (every character through the byte table) and decoded as UTF-8 (not fatal, BOM
 * kept), while an added token's string passes through as it is; the pieces are concatenated.
 *
 * `decode` answers undefined — the caller then asks the library — for anything it does not render
 * the library's way by construction: an id with no token (the library would use its unknown token), or
 * a token with a character outside the byte table (the library would write a 0 byte for it).
 */

/** What the decoder needs from a byte-level tokenizer. */
export interface ByteLevelParts {
  /** id → token string, added tokens included. */
  readonly vocab: ReadonlyArray<string | undefined>;
  /** Every added token's content: passed through as text, not as bytes. */
  readonly addedContents: Iterable<string>;
  /** The token strings `skipSpecial` drops. */
  readonly specialContents: Iterable<string>;
  /** The byte table: one character → its byte (a number, or its decimal string as the library keeps it). */
  readonly byteDecoder: Readonly<Record<string, number | string>>;
}

/** `start` of an id not looked at yet / of one whose token has a character outside the byte table. */
const UNKNOWN = -1;
const NOT_BYTES = -2;

export class ByteLevelDecoder {
  private readonly vocab: ReadonlyArray<string | undefined>;
  private readonly added: ReadonlySet<string>;
  private readonly special: ReadonlySet<string>;
  private readonly byteDecoder: Readonly<Record<string, number | string>>;
  /**
   * Each id's bytes, computed on first use, packed in `arena` at [start, start + length): two ints per
   * vocabulary entry and the bytes of the ids seen, however many (a fresh typed array per id would cost
   * ~100 bytes of overhead each over a 262k vocabulary). Allocated at the first decode: a tokenizer
   * that only encodes (a prompt preprocessing thread's twin) never pays for them.
   */
  private start = new Int32Array(0);
  private length = new Int32Array(0);
  /**
   * Each packed id's text when all its bytes are ASCII (most tokens of most text): such a token is
   * appended as this string, with no bytes copied and no UTF-8 decode. Decoding a run of bytes in two
   * parts, cut before an ASCII byte, gives what decoding it whole gives (an incomplete sequence ends
   * at the ASCII byte either way, as one U+FFFD), so a pending run is decoded before it.
   */
  private asciiText: (string | undefined)[] = [];
  private arena = new Uint8Array(4096);
  private used = 0;
  private readonly utf8 = new TextDecoder('utf-8', { fatal: false, ignoreBOM: true });
  /** Scratch for one run's bytes; grows as needed. */
  private scratch = new Uint8Array(256);

  constructor(parts: ByteLevelParts) {
    this.vocab = parts.vocab;
    this.added = new Set(parts.addedContents);
    this.special = new Set(parts.specialContents);
    this.byteDecoder = parts.byteDecoder;
  }

  /** The text of `ids`, or undefined when the library must decode them (see the file comment). */
  decode(ids: readonly number[], skipSpecial: boolean): string | undefined {
    if (this.start.length !== this.vocab.length) {
      this.start = new Int32Array(this.vocab.length).fill(UNKNOWN);
      this.length = new Int32Array(this.vocab.length);
      this.asciiText = [];
    }
    let out = '';
    let run = 0; // bytes of the current run in `scratch`
    let inRun = false;
    for (const id of ids) {
      const token = Number.isInteger(id) && id >= 0 ? this.vocab[id] : undefined;
      if (token === undefined) return undefined;
      if (skipSpecial && this.special.has(token)) continue;
      if (this.added.has(token)) {
        if (inRun) out += this.utf8.decode(this.scratch.subarray(0, run));
        out += token;
        run = 0;
        inRun = false;
        continue;
      }
      const at = this.start[id] === UNKNOWN ? this.pack(id, token) : this.start[id]!;
      if (at === NOT_BYTES) return undefined;
      const text = this.asciiText[id];
      if (text !== undefined) {
        if (inRun) out += this.utf8.decode(this.scratch.subarray(0, run));
        out += text;
        run = 0;
        inRun = false;
        continue;
      }
      const n = this.length[id]!;
      if (run + n > this.scratch.length) {
        const grown = new Uint8Array(Math.max(2 * this.scratch.length, run + n));
        grown.set(this.scratch.subarray(0, run));
        this.scratch = grown;
      }
      this.scratch.set(this.arena.subarray(at, at + n), run);
      run += n;
      inRun = true;
    }
    if (inRun) out += this.utf8.decode(this.scratch.subarray(0, run));
    return out;
  }

  /** Put the id's bytes in the arena; returns where they start, or NOT_BYTES. */
  private pack(id: number, token: string): number {
    const from = this.used;
    for (const ch of token) {
      // the library writes Uint8Array([..., table[ch], ...]): a decimal string converts to its number
      const byte = Object.hasOwn(this.byteDecoder, ch) ? Number(this.byteDecoder[ch]) : NaN;
      if (!Number.isInteger(byte) || byte < 0 || byte > 255) {
        this.used = from;
        this.start[id] = NOT_BYTES;
        return NOT_BYTES;
      }
      if (this.used === this.arena.length) {
        const grown = new Uint8Array(2 * this.arena.length);
        grown.set(this.arena);
        this.arena = grown;
      }
      this.arena[this.used++] = byte;
    }
    this.start[id] = from;
    this.length[id] = this.used - from;
    const bytes = this.arena.subarray(from, this.used);
    if (bytes.every((b) => b < 0x80)) this.asciiText[id] = String.fromCharCode(...bytes);
    return from;
  }
}
