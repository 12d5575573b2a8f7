/**
 * BYTES tensors (uint32 little-endian length + bytes per element) ↔ JavaScript strings, and walks
 * over their elements, without one allocation per element.
 *
 * Why this file: a 4 MB tensor of 800k one-byte strings is common in fuzzing and abuse, and the
 * naive shapes (`TextEncoder.encode` per string, `subarray` + `TextDecoder.decode` per element)
 * allocate one typed array per element; on one event loop four such requests kept the garbage
 * collector and the loop busy for seconds. Here strings are measured with `utf8ByteLength` and
 * written into one buffer, and elements are read as substrings of one latin1 image of the data
 * (a latin1 string has one character per byte, so byte offsets are string offsets): ASCII elements
 * cost a substring. From the first short non-ASCII element on, the rest of the data is decoded as
 * UTF-8 at once where that text holds each element whole (every length prefix four ASCII bytes, the
 * span valid UTF-8), and short non-ASCII elements are substrings of it too: a native read per element
 * cost 3.7x more on 1,024 elements of `token <i> é`. Long non-ASCII elements, and every one where that
 * text cannot be had, cost one native UTF-8 read of the data's own buffer each (`toString('utf8', ...)`,
 * a third cheaper than a `TextDecoder` call on a subarray); an element whose read holds U+FFFD and is
 * not valid UTF-8 is decoded again by the caller's decoder, so replacement (or refusal) is that
 * decoder's exactly.
 */
import { isUtf8 } from 'node:buffer';
import { invalidArgument } from '@switchyard/common';

const utf8 = new TextDecoder('utf-8');

/** Strings longer than this are measured and written natively; shorter ones by hand (a native call costs more). */
const SHORT_STRING = 64;

/** UTF-8 byte length of `s` (lone surrogates count as U+FFFD, 3 bytes, as TextEncoder writes them). */
export function utf8ByteLength(s: string): number {
  const n = s.length;
  if (n > SHORT_STRING) return Buffer.byteLength(s, 'utf8');
  let bytes = n;
  for (let k = 0; k < n; k++) {
    const c = s.charCodeAt(k);
    if (c < 0x80) continue;
    if (c < 0x800) bytes += 1;
    else if (c >= 0xd800 && c <= 0xdbff && k + 1 < n && (s.charCodeAt(k + 1) & 0xfc00) === 0xdc00) {
      bytes += 2; // a surrogate pair: 2 UTF-16 units, 4 bytes
      k++;
    } else bytes += 2; // the rest of the BMP, and a lone surrogate (U+FFFD): 3 bytes
  }
  return bytes;
}

/**
 * Serialise strings as BYTES elements, UTF-8 encoded (lone surrogates become U+FFFD, as
 * `TextEncoder` does). One output buffer, no per-element arrays.
 */
export function serializeStringElements(strings: readonly string[]): Uint8Array {
  let total = 0;
  for (const s of strings) total += 4 + utf8ByteLength(s);
  // Never from Node's shared pool: the tensor owns its buffer, so it can be transferred to a thread.
  const out = Buffer.allocUnsafeSlow(total);
  let off = 0;
  for (const s of strings) {
    const start = off + 4;
    const end = writeUtf8(out, s, start);
    const len = end - start;
    // the length prefix byte by byte: writeUInt32LE's checks cost more than the four stores
    out[off] = len & 0xff;
    out[off + 1] = (len >>> 8) & 0xff;
    out[off + 2] = (len >>> 16) & 0xff;
    out[off + 3] = len >>> 24;
    off = end;
  }
  return new Uint8Array(out.buffer, out.byteOffset, out.byteLength);
}

/**
 * Writes `s` at `start` as UTF-8 (a lone surrogate as U+FFFD, as TextEncoder), returns the end
 * offset. A short string is encoded by hand: cheaper than a native call per element.
 */
function writeUtf8(out: Buffer, s: string, start: number): number {
  const n = s.length;
  if (n > SHORT_STRING) return start + out.write(s, start, 'utf8');
  let at = start;
  for (let k = 0; k < n; k++) {
    let c = s.charCodeAt(k);
    if (c < 0x80) {
      out[at++] = c;
      continue;
    }
    if (c < 0x800) {
      out[at++] = 0xc0 | (c >> 6);
      out[at++] = 0x80 | (c & 0x3f);
      continue;
    }
    if (c >= 0xd800 && c <= 0xdfff) {
      const low = k + 1 < n ? s.charCodeAt(k + 1) : 0;
      if (c <= 0xdbff && (low & 0xfc00) === 0xdc00) {
        const cp = 0x10000 + ((c - 0xd800) << 10) + (low - 0xdc00);
        out[at++] = 0xf0 | (cp >> 18);
        out[at++] = 0x80 | ((cp >> 12) & 0x3f);
        out[at++] = 0x80 | ((cp >> 6) & 0x3f);
        out[at++] = 0x80 | (cp & 0x3f);
        k++;
        continue;
      }
      c = 0xfffd; // a lone surrogate
    }
    out[at++] = 0xe0 | (c >> 12);
    out[at++] = 0x80 | ((c >> 6) & 0x3f);
    out[at++] = 0x80 | (c & 0x3f);
  }
  return at;
}

/** The uint32 little-endian length prefix at `off`, read byte by byte (unaligned DataView reads cost ~5x more). */
function lengthAt(d: Uint8Array, off: number): number {
  return ((d[off] as number) | ((d[off + 1] as number) << 8) | ((d[off + 2] as number) << 16) | ((d[off + 3] as number) << 24)) >>> 0;
}

/**
 * The byte offset just past the first `count` elements of BYTES `data`, or -1 when `data` holds
 * fewer complete elements. Never reads past `data`.
 */
export function bytesElementsEnd(data: Uint8Array, count: number): number {
  let off = 0;
  for (let k = 0; k < count; k++) {
    if (off + 4 > data.byteLength) return -1;
    const len = lengthAt(data, off);
    if (len > data.byteLength - off - 4) return -1;
    off += 4 + len;
  }
  return off;
}

/**
 * Number of elements of BYTES `data`. Throws invalid_argument with Triton's wording (as
 * `deserializeBytesElements`) when the data is truncated.
 */
export function bytesElementCount(data: Uint8Array, tensorName = ''): number {
  let off = 0;
  let count = 0;
  while (off < data.byteLength) {
    if (off + 4 > data.byteLength) {
      throw invalidArgument(`incomplete string length indicator for inference input '${tensorName}', expecting 4 bytes but only ${data.byteLength - off} bytes available`);
    }
    const len = lengthAt(data, off);
    off += 4;
    if (off + len > data.byteLength) {
      throw invalidArgument(`incomplete string data for inference input '${tensorName}', expecting string of length ${len} but only ${data.byteLength - off} bytes available`);
    }
    off += len;
    count += 1;
  }
  return count;
}

/**
 * The first `count` elements of BYTES `data` as strings (all of them when `count` is undefined).
 * Elements that are not valid UTF-8 go through `decoder` (default: UTF-8 with replacement; pass a
 * fatal one to refuse invalid UTF-8). Throws invalid_argument with Triton's wording when the data is
 * truncated before `count` elements (or, for all elements, anywhere).
 */
export function deserializeStringElements(data: Uint8Array, tensorName = '', count?: number, decoder: { decode(bytes: Uint8Array): string } = utf8): string[] {
  const n = count ?? bytesElementCount(data, tensorName);
  const out = new Array<string>(n);
  if (n === 0) return out;
  const bytes = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  // One character per byte; ASCII elements are substrings of it.
  const image = bytes.toString('latin1');
  // From the first short non-ASCII element on, the rest of the elements as one UTF-8 text (`utf8Text`),
  // short non-ASCII elements substrings of it; false where it cannot be: each is then read on its own.
  let text: string | false | undefined;
  // where the element being read starts in `text`
  let at = 0;
  let off = 0;
  for (let k = 0; k < n; k++) {
    if (off + 4 > bytes.byteLength) {
      throw invalidArgument(`incomplete string length indicator for inference input '${tensorName}', expecting 4 bytes but only ${bytes.byteLength - off} bytes available`);
    }
    const len = lengthAt(bytes, off);
    off += 4;
    at += 4;
    if (len > bytes.byteLength - off) {
      throw invalidArgument(`incomplete string data for inference input '${tensorName}', expecting string of length ${len} but only ${bytes.byteLength - off} bytes available`);
    }
    const end = off + len;
    let i = off;
    while (i < end && (bytes[i] as number) < 0x80) i++;
    if (i === end) {
      out[k] = image.slice(off, end);
      at += len;
    } else {
      if (text === undefined && len <= SHORT_STRING) {
        text = utf8Text(bytes, off - 4, n - k);
        at = 4;
      }
      if (typeof text === 'string' && len <= SHORT_STRING) {
        // one UTF-16 unit per character, two for a four-byte one: a continuation byte adds none
        let units = len;
        for (; i < end; i++) {
          const b = bytes[i] as number;
          if (b < 0x80) continue;
          if (b < 0xc0) units -= 1;
          else if (b >= 0xf0) units += 1;
        }
        out[k] = text.slice(at, at + units);
        at += units;
      } else {
        // A long element costs one native read whatever its characters. Within `text` it is valid
        // UTF-8, so the read's length is its length there.
        const s = nonAscii(bytes, off, end, decoder);
        out[k] = s;
        at += s.length;
      }
    }
    off = end;
  }
  return out;
}

/**
 * The `count` elements of `bytes` from `start` (a length prefix) as one UTF-8 text, whose substrings
 * are those elements, or false. It is when every prefix's four bytes are ASCII (each below 0x80: a
 * length under 128, and many more), so that each decodes to four characters and no multi-byte
 * sequence crosses into or out of one, and the span is valid UTF-8, so that each element is. False
 * for a prefix with a byte of 0x80 or more, invalid UTF-8, or data that ends before `count` elements
 * (read element by element, which replaces or refuses, and says where the data ends).
 */
function utf8Text(bytes: Buffer, start: number, count: number): string | false {
  let off = start;
  for (let k = 0; k < count; k++) {
    if (off + 4 > bytes.byteLength) return false;
    const len = lengthAt(bytes, off);
    if ((len & 0x80808080) !== 0 || len > bytes.byteLength - off - 4) return false;
    off += 4 + len;
  }
  const span = bytes.subarray(start, off);
  return isUtf8(span) ? span.toString('utf8') : false;
}

/** A non-ASCII element: read natively; only an element that is not valid UTF-8 goes to `decoder`. */
function nonAscii(bytes: Buffer, start: number, end: number, decoder: { decode(bytes: Uint8Array): string }): string {
  const s = bytes.toString('utf8', start, end);
  if (s.indexOf('\ufffd') === -1) return s;
  const element = bytes.subarray(start, end);
  return isUtf8(element) ? s : decoder.decode(element);
}

/**
 * The first `count` elements of BYTES `data` (which holds them: see `bytesElementCount`) as strings
 * when each is valid UTF-8, else the index of the first that is not, for a JSON response (which can
 * only carry text): one pass of `deserializeStringElements`, with a fatal decoder for an element
 * whose read is not clean; `firstUnfitStringElement` names it only then.
 */
export function utf8StringElements(data: Uint8Array, count: number): string[] | { readonly invalid: number } {
  try {
    return deserializeStringElements(data, '', count, fatalUtf8);
  } catch (e) {
    if (!(e instanceof TypeError)) throw e;
    return { invalid: firstUnfitStringElement(data, count)?.index ?? 0 };
  }
}

const fatalUtf8 = new TextDecoder('utf-8', { fatal: true });

/**
 * Where the first `count` elements of BYTES `data` stop being text: the index of the first element
 * that is not valid UTF-8 (`reason: 'utf8'`) or, with `refuseNul`, that holds a NUL byte
 * (`'nul'`); undefined when all are fine. ASCII elements are checked byte by byte, others with one
 * `isUtf8` call, so no array is made per element. `data` must hold `count` complete elements.
 */
export function firstUnfitStringElement(data: Uint8Array, count: number, refuseNul = false): { index: number; reason: 'utf8' | 'nul' } | undefined {
  let off = 0;
  for (let k = 0; k < count; k++) {
    const len = lengthAt(data, off);
    const start = off + 4;
    const end = start + len;
    let ascii = true;
    for (let i = start; i < end; i++) {
      const b = data[i] as number;
      if (b === 0 && refuseNul) return { index: k, reason: 'nul' };
      if (b >= 0x80) {
        ascii = false;
        break;
      }
    }
    if (!ascii) {
      const element = data.subarray(start, end);
      if (!isUtf8(element)) return { index: k, reason: 'utf8' };
      if (refuseNul && element.includes(0)) return { index: k, reason: 'nul' };
    }
    off = end;
  }
  return undefined;
}
