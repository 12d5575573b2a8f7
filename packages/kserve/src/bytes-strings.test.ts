import { describe, expect, it } from 'vitest';
import { SwitchyardError } from '@switchyard/common';
import { isUtf8 } from 'node:buffer';
import { fc, fuzz } from '@switchyard/testing/fuzz';
import { bytesElementCount, bytesElementsEnd, deserializeStringElements, serializeStringElements, utf8ByteLength, utf8StringElements } from './bytes-strings.js';
import { deserializeBytesElements, serializeBytesElements } from './tensor.js';

const enc = new TextEncoder();
// a BOM that starts an element is content, kept as read (TextDecoder would drop it by default)
const dec = new TextDecoder('utf-8', { ignoreBOM: true });
/** The per-element reference shapes these functions replace. */
const reference = (strings: string[]) => serializeBytesElements(strings.map((s) => enc.encode(s)));

const SAMPLES = ['', 'a', 'hello', 'é', 'naïve café', '日本語', '😀 emoji', 'x'.repeat(64), 'y'.repeat(65) + 'é', 'z'.repeat(10_000), '\u0000\u007f\u0080', 'lone \ud800 surrogate', '\udc00'];

describe('serializeStringElements', () => {
  it('writes exactly what TextEncoder per element writes, lone surrogates as U+FFFD', () => {
    expect(Buffer.from(serializeStringElements(SAMPLES))).toEqual(Buffer.from(reference(SAMPLES)));
    for (const s of SAMPLES) expect(utf8ByteLength(s)).toBe(enc.encode(s).byteLength);
  });

  it('handles no elements and many', () => {
    expect(serializeStringElements([]).byteLength).toBe(0);
    const many = Array.from({ length: 10_000 }, (_, i) => (i % 3 === 0 ? 'é' : String(i)));
    expect(Buffer.from(serializeStringElements(many))).toEqual(Buffer.from(reference(many)));
  });
});

describe('strings and BYTES, against the per-element reference (property)', () => {
  // any UTF-16 code units: lone and paired surrogates, every plane; short (by hand) and long (native)
  const unit = fc.oneof(fc.integer({ min: 0, max: 0x7f }), fc.integer({ min: 0x80, max: 0x7ff }), fc.integer({ min: 0x800, max: 0xffff }), fc.integer({ min: 0xd800, max: 0xdfff }));
  const text = fc.oneof(fc.array(unit, { maxLength: 70 }).map((u) => String.fromCharCode(...u)), fc.string({ unit: 'grapheme', maxLength: 40 }));
  // element bytes: UTF-8 of a string, or any bytes (mostly not UTF-8)
  const element = fc.oneof(text.map((t) => enc.encode(t)), fc.uint8Array({ maxLength: 12 }));

  it('writes and measures strings as TextEncoder does', () => {
    fuzz(fc.array(text, { maxLength: 12 }), (strings) => {
      expect(Buffer.from(serializeStringElements(strings))).toEqual(Buffer.from(reference(strings)));
      for (const t of strings) expect(utf8ByteLength(t)).toBe(enc.encode(t).byteLength);
    });
  });

  it('reads elements as TextDecoder does, and as text only when every element is UTF-8', () => {
    fuzz(fc.array(element, { maxLength: 12 }), (elements) => {
      const data = serializeBytesElements(elements);
      expect(deserializeStringElements(data)).toEqual(elements.map((e) => dec.decode(e)));
      const strings = utf8StringElements(data, elements.length);
      const invalid = elements.findIndex((e) => !isUtf8(e));
      if (invalid === -1) expect(strings).toEqual(elements.map((e) => dec.decode(e)));
      else expect(strings).toEqual({ invalid });
    });
  });
});

describe('the whole tensor as one text (every prefix four ASCII bytes)', () => {
  // elements on both sides of the 128-byte line: prefixes with a byte >= 0x80 take the element-by-element path
  const piece = fc.constantFrom('a', 'é', '日', '😀', '\ud800', '\udc00', '\u0000', '\ufeff', 'x'.repeat(60));
  const text = fc.array(piece, { maxLength: 8 }).map((p) => p.join(''));

  it('writes and reads back what the per-element reference does, with a tail of other bytes and a `count`', () => {
    fuzz(fc.tuple(fc.array(text, { maxLength: 10 }), fc.uint8Array({ maxLength: 6 })), ([strings, tail]) => {
      const data = serializeStringElements(strings);
      expect(Buffer.from(data)).toEqual(Buffer.from(reference(strings)));
      const withTail = new Uint8Array(data.byteLength + tail.byteLength);
      withTail.set(data);
      withTail.set(tail, data.byteLength);
      const decoded = strings.map((t) => dec.decode(enc.encode(t)));
      expect(deserializeStringElements(withTail, 'T', strings.length)).toEqual(decoded);
      expect(deserializeStringElements(data)).toEqual(decoded);
    });
  });

  it('keeps a surrogate ending one element apart from one starting the next', () => {
    const strings = ['a\ud83d', '\ude00b', '\ud83d\ude00'];
    expect(Buffer.from(serializeStringElements(strings))).toEqual(Buffer.from(reference(strings)));
    expect(deserializeStringElements(serializeStringElements(strings))).toEqual(['a\ufffd', '\ufffdb', '😀']);
  });

  it('reads a prefix whose bytes happen to be UTF-8 (43,459 = C3 A9 00 00, an é) as a length, not as text', () => {
    const strings = ['é', 'b'.repeat(0xa9c3), 'é'];
    const data = serializeStringElements(strings);
    expect(Array.from(data.subarray(6, 10))).toEqual([0xc3, 0xa9, 0, 0]);
    expect(Buffer.from(data)).toEqual(Buffer.from(reference(strings)));
    expect(deserializeStringElements(data)).toEqual(strings);
  });

  it('counts a four-byte character as two UTF-16 units and keeps a leading BOM', () => {
    const strings = ['😀😀', '\ufeffx', '', 'é日😀a'];
    expect(deserializeStringElements(serializeStringElements(strings))).toEqual(strings);
  });
});

describe('deserializeStringElements', () => {
  it('reads what TextDecoder per element reads, invalid UTF-8 replaced', () => {
    const invalid = new Uint8Array([0xff, 0x61, 0xc3]);
    const data = serializeBytesElements([...SAMPLES.map((s) => enc.encode(s)), invalid]);
    const expected = deserializeBytesElements(data).map((e) => dec.decode(e));
    expect(deserializeStringElements(data)).toEqual(expected);
  });

  it('reads only the first `count` elements when asked, from a view at an odd offset', () => {
    const body = serializeStringElements(['ab', 'cd', 'é']);
    const padded = new Uint8Array(body.byteLength + 3);
    padded.set(body, 3);
    expect(deserializeStringElements(padded.subarray(3), 'T', 2)).toEqual(['ab', 'cd']);
    expect(deserializeStringElements(padded.subarray(3), 'T')).toEqual(['ab', 'cd', 'é']);
  });

  it('passes non-ASCII elements to the given decoder (a fatal one refuses invalid UTF-8)', () => {
    const data = serializeBytesElements([enc.encode('ok'), new Uint8Array([0xff])]);
    expect(() => deserializeStringElements(data, 'T', undefined, new TextDecoder('utf-8', { fatal: true }))).toThrow(TypeError);
  });

  it("refuses truncated data with Triton's wording, as deserializeBytesElements", () => {
    const cases = [new Uint8Array([1, 0]), new Uint8Array([5, 0, 0, 0, 0x61])];
    for (const data of cases) {
      const message = (() => {
        try {
          deserializeBytesElements(data, 'T');
        } catch (e) {
          return (e as Error).message;
        }
        return '';
      })();
      expect(message).not.toBe('');
      for (const fn of [() => deserializeStringElements(data, 'T'), () => bytesElementCount(data, 'T'), () => deserializeStringElements(data, 'T', 1)]) {
        let caught: unknown;
        try {
          fn();
        } catch (e) {
          caught = e;
        }
        expect(caught).toBeInstanceOf(SwitchyardError);
        expect((caught as SwitchyardError).code).toBe('invalid_argument');
        expect((caught as SwitchyardError).message).toBe(message);
      }
    }
  });
});

describe('bytesElementsEnd / bytesElementCount', () => {
  it('finds element boundaries without reading past the data', () => {
    const data = serializeStringElements(['a', 'bcd', '']);
    expect(bytesElementCount(data)).toBe(3);
    expect(bytesElementsEnd(data, 0)).toBe(0);
    expect(bytesElementsEnd(data, 1)).toBe(5);
    expect(bytesElementsEnd(data, 2)).toBe(12);
    expect(bytesElementsEnd(data, 3)).toBe(16);
    expect(bytesElementsEnd(data, 4)).toBe(-1);
    expect(bytesElementsEnd(data.subarray(0, 10), 2)).toBe(-1);
    const huge = new Uint8Array([0xff, 0xff, 0xff, 0xff]);
    expect(bytesElementsEnd(huge, 1)).toBe(-1);
  });
});
