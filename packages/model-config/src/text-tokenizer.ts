/**
 * Tokenizer for protobuf text format (what `config.pbtxt` is written in).
 *
 * Follows the token rules of protobuf's C++ `io::Tokenizer` as used by `TextFormat`: `#`
 * comments, identifiers, decimal/hex/octal integers, floats (with an optional `f` suffix),
 * single- or double-quoted strings with C escapes, and one-character symbols. Positions are
 * 1-based line and column of a token's first character.
 */

export type TokenKind = 'ident' | 'int' | 'float' | 'string' | 'symbol' | 'eof';

export interface Token {
  readonly kind: TokenKind;
  /** Source text of the token (for strings: including the quotes). */
  readonly text: string;
  /** For 'string' tokens: the decoded bytes. */
  readonly bytes?: Uint8Array;
  readonly line: number;
  readonly col: number;
}

/** A tokenizer failure at a position; the parser adds the file name. */
export class TextFormatSyntaxError extends Error {
  constructor(
    readonly line: number,
    readonly col: number,
    readonly what: string,
  ) {
    super(`${line}:${col}: ${what}`);
  }
}

const SYMBOLS = new Set(['{', '}', '[', ']', '<', '>', ':', ';', ',', '-', '/', '.', '+', '=', '(', ')']);

const isDigit = (c: string): boolean => c >= '0' && c <= '9';
const isHex = (c: string): boolean => isDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
const isOctal = (c: string): boolean => c >= '0' && c <= '7';
const isIdentStart = (c: string): boolean => (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c === '_';
const isIdentPart = (c: string): boolean => isIdentStart(c) || isDigit(c);

/** Split text-format source into tokens, ending with one 'eof' token. */
export function tokenize(src: string): Token[] {
  const tokens: Token[] = [];
  let i = 0;
  let line = 1;
  let col = 1;
  const at = (k: number): string => src[k] ?? '';
  const fail = (what: string, l = line, c = col): never => {
    throw new TextFormatSyntaxError(l, c, what);
  };
  const advance = (n: number): void => {
    for (let k = 0; k < n; k++) {
      if (src[i] === '\n') {
        line++;
        col = 1;
      } else {
        col++;
      }
      i++;
    }
  };

  while (i < src.length) {
    const c = at(i);
    if (c === ' ' || c === '\t' || c === '\n' || c === '\r' || c === '\v' || c === '\f') {
      advance(1);
      continue;
    }
    if (c === '#') {
      while (i < src.length && src[i] !== '\n') advance(1);
      continue;
    }
    const startLine = line;
    const startCol = col;
    const start = i;

    if (isIdentStart(c)) {
      let j = i + 1;
      while (isIdentPart(at(j))) j++;
      tokens.push({ kind: 'ident', text: src.slice(i, j), line: startLine, col: startCol });
      advance(j - i);
      continue;
    }

    if (isDigit(c) || (c === '.' && isDigit(at(i + 1)))) {
      let j = i;
      let isFloat = false;
      if (c === '0' && (at(i + 1) === 'x' || at(i + 1) === 'X')) {
        j = i + 2;
        if (!isHex(at(j))) fail('"0x" must be followed by hex digits.', startLine, startCol);
        while (isHex(at(j))) j++;
      } else if (c === '0' && isDigit(at(i + 1))) {
        j = i + 1;
        while (isDigit(at(j))) {
          if (!isOctal(at(j))) fail('Numbers starting with leading zero must be in octal.', startLine, startCol);
          j++;
        }
      } else {
        while (isDigit(at(j))) j++;
        if (at(j) === '.') {
          isFloat = true;
          j++;
          while (isDigit(at(j))) j++;
        }
        if (at(j) === 'e' || at(j) === 'E') {
          isFloat = true;
          j++;
          if (at(j) === '+' || at(j) === '-') j++;
          if (!isDigit(at(j))) fail('"e" must be followed by exponent.', startLine, startCol);
          while (isDigit(at(j))) j++;
        }
        if (isFloat && (at(j) === 'f' || at(j) === 'F')) j++;
      }
      if (isIdentPart(at(j)) || at(j) === '.') {
        fail('Need space between number and identifier.', startLine, startCol);
      }
      tokens.push({ kind: isFloat ? 'float' : 'int', text: src.slice(start, j), line: startLine, col: startCol });
      advance(j - i);
      continue;
    }

    if (c === '"' || c === "'") {
      const { bytes, end } = readString(src, i, startLine, startCol);
      tokens.push({ kind: 'string', text: src.slice(i, end), bytes, line: startLine, col: startCol });
      advance(end - i);
      continue;
    }

    if (SYMBOLS.has(c)) {
      tokens.push({ kind: 'symbol', text: c, line: startLine, col: startCol });
      advance(1);
      continue;
    }
    fail(`Invalid character ${JSON.stringify(c)}.`);
  }
  tokens.push({ kind: 'eof', text: '', line, col });
  return tokens;
}

const SIMPLE_ESCAPES: Record<string, number> = {
  a: 0x07,
  b: 0x08,
  f: 0x0c,
  n: 0x0a,
  r: 0x0d,
  t: 0x09,
  v: 0x0b,
  '\\': 0x5c,
  '?': 0x3f,
  "'": 0x27,
  '"': 0x22,
};

const utf8 = new TextEncoder();

/**
 * Decode one quoted literal starting at `start`; returns its bytes and the index past the quote.
 * Runs of plain characters are encoded at once and escapes written as bytes into one growing
 * buffer (one encoder call and array spread per character made a megabyte literal take seconds).
 */
function readString(src: string, start: number, line: number, col: number): { bytes: Uint8Array; end: number } {
  const quote = src[start];
  const out = new ByteSink();
  let i = start + 1;
  let run = i;
  const fail = (what: string): never => {
    throw new TextFormatSyntaxError(line, col, what);
  };
  for (;;) {
    const c = src[i];
    if (c === undefined || c === '\n') fail('String literals cannot cross line boundaries.');
    if (c === quote) {
      out.text(src.slice(run, i));
      return { bytes: out.bytes(), end: i + 1 };
    }
    if (c !== '\\') {
      i += 1;
      continue;
    }
    out.text(src.slice(run, i));
    const e = src[i + 1] ?? '';
    const simple = SIMPLE_ESCAPES[e];
    if (simple !== undefined) {
      out.byte(simple);
      i += 2;
    } else if (isOctal(e)) {
      let j = i + 1;
      let v = 0;
      while (j < i + 4 && isOctal(src[j] ?? '')) v = v * 8 + Number(src[j++]);
      out.byte(v & 0xff);
      i = j;
    } else if (e === 'x' || e === 'X') {
      let j = i + 2;
      let v = 0;
      while (j < i + 4 && isHex(src[j] ?? '')) v = v * 16 + parseInt(src[j++] ?? '0', 16);
      if (j === i + 2) fail('Expected hex digits for escape sequence.');
      out.byte(v);
      i = j;
    } else if (e === 'u' || e === 'U') {
      const n = e === 'u' ? 4 : 8;
      const hex = src.slice(i + 2, i + 2 + n);
      if (hex.length !== n || ![...hex].every(isHex)) fail('Expected hex digits for escape sequence.');
      const cp = parseInt(hex, 16);
      if (cp > 0x10ffff) fail('Invalid unicode escape sequence.');
      out.text(String.fromCodePoint(cp));
      i += 2 + n;
    } else {
      fail('Invalid escape sequence in string literal.');
    }
    run = i;
  }
}

/** A growing byte buffer for string literals. */
class ByteSink {
  private buf = new Uint8Array(64);
  private length = 0;

  byte(v: number): void {
    this.reserve(1);
    this.buf[this.length++] = v;
  }

  /** UTF-8 of `s` (a lone surrogate becomes U+FFFD, as TextEncoder writes it). */
  text(s: string): void {
    if (s.length === 0) return;
    this.reserve(3 * s.length);
    this.length += utf8.encodeInto(s, this.buf.subarray(this.length)).written;
  }

  bytes(): Uint8Array {
    return this.buf.slice(0, this.length);
  }

  private reserve(n: number): void {
    if (this.length + n <= this.buf.length) return;
    const grown = new Uint8Array(Math.max(2 * this.buf.length, this.length + n));
    grown.set(this.buf.subarray(0, this.length));
    this.buf = grown;
  }
}
