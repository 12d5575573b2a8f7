/**
 * A faster byte-level pre-tokenization for @huggingface/tokenizers, giving exactly the library's
 * pieces. Byte-level BPE tokenizers (GPT-2's byte-to-unicode alphabet: Llama 3, Qwen, Mistral's
 * Tekken and most current chat models) turn every pre-token into one character per UTF-8 byte. The
 * library does it, for every word of every prompt, with a `TextEncoder.encode` (a native call and a
 * fresh byte array), an `Array.from` through the byte table and a `join`: about half of its encode
 * time. An ASCII word's bytes are its character codes, and the byte table maps most printable ASCII
 * characters to themselves, so here such a word is mapped character by character, and returned as it
 * is when no character changes; any other word is encoded to UTF-8 and mapped byte by byte, as the
 * library does, into one string.
 *
 * `installFastByteLevel` replaces `pre_tokenize_text` on each byte-level pre-tokenizer instance of a
 * library tokenizer, alone or inside a sequence; the regex split and the prefix space are the
 * library's, read from the instance. It installs nothing where an instance does not look as expected,
 * so the library keeps its own method there.
 */

/** What the fast path reads from the library's byte-level pre-tokenizer instance. */
interface ByteLevelPreTokenizer {
  readonly config?: { readonly type?: unknown };
  readonly add_prefix_space?: unknown;
  readonly use_regex?: unknown;
  readonly pattern?: unknown;
  readonly byte_encoder?: unknown;
  pre_tokenize_text?: unknown;
}

/**
 * Installs the fast path on every byte-level pre-tokenizer under `preTokenizer` (the library's
 * `Tokenizer.pre_tokenizer`); returns how many it installed.
 */
export function installFastByteLevel(preTokenizer: unknown): number {
  // (the library's pre-tokenizers are callable objects: functions with the class's prototype)
  if ((typeof preTokenizer !== 'object' && typeof preTokenizer !== 'function') || preTokenizer === null) return 0;
  const sequence = (preTokenizer as { tokenizers?: unknown }).tokenizers;
  if (Array.isArray(sequence)) return sequence.reduce((n: number, p) => n + installFastByteLevel(p), 0);
  const p = preTokenizer as ByteLevelPreTokenizer;
  if (p.config?.type !== 'ByteLevel' || typeof p.pre_tokenize_text !== 'function') return 0;
  if (!(p.pattern instanceof RegExp) || !p.pattern.global || typeof p.byte_encoder !== 'object' || p.byte_encoder === null) return 0;
  const table = byteTable(p.byte_encoder as Record<number, unknown>);
  if (table === undefined) return 0;
  // read as the library reads them: the instance's fields (defaults applied), by truthiness
  const addPrefixSpace = Boolean(p.add_prefix_space);
  const useRegex = Boolean(p.use_regex);
  const pattern = p.pattern;
  p.pre_tokenize_text = (text: string): string[] => {
    const t = addPrefixSpace && !text.startsWith(' ') ? ` ${text}` : text;
    const words = useRegex ? (t.match(pattern) ?? []) : [t];
    const out = new Array<string>(words.length);
    for (let i = 0; i < words.length; i++) out[i] = byteLevelWord(words[i]!, table);
    return out;
  };
  return 1;
}

/** The byte table as an array (byte → its character), and which ASCII bytes map to themselves. */
interface ByteTable {
  readonly chars: readonly string[];
  readonly same: Uint8Array;
}

/**
 * The library's byte table read into a `ByteTable`; undefined when it does not hold one single
 * character for each of the 256 bytes (then the library keeps its own method).
 */
function byteTable(byteEncoder: Record<number, unknown>): ByteTable | undefined {
  const chars: string[] = [];
  const same = new Uint8Array(128);
  for (let b = 0; b < 256; b++) {
    const c = byteEncoder[b];
    if (typeof c !== 'string' || c.length !== 1) return undefined;
    chars.push(c);
    if (b < 128) same[b] = c.charCodeAt(0) === b ? 1 : 0;
  }
  return { chars, same };
}

const utf8 = new TextEncoder();

/**
 * One pre-token in the byte alphabet: each UTF-8 byte of `word` as its table character. An ASCII
 * word's bytes are its character codes (and the word itself comes back when none changes); any other
 * word is encoded as the library does it (TextEncoder: a lone surrogate becomes U+FFFD's bytes).
 */
function byteLevelWord(word: string, table: ByteTable): string {
  let changes = false;
  for (let i = 0; i < word.length; i++) {
    const c = word.charCodeAt(i);
    if (c >= 0x80) return mapBytes(utf8.encode(word), table.chars);
    if (table.same[c] === 0) changes = true;
  }
  if (!changes) return word;
  let out = '';
  for (let i = 0; i < word.length; i++) out += table.chars[word.charCodeAt(i)]!;
  return out;
}

function mapBytes(bytes: Uint8Array, chars: readonly string[]): string {
  let out = '';
  for (let i = 0; i < bytes.length; i++) out += chars[bytes[i]!]!;
  return out;
}
