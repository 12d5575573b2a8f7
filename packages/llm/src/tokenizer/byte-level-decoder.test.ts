import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import * as tokenizers from '@huggingface/tokenizers';
import { buildFamilyModelFiles, buildTinyTokenizerFiles, MODEL_FAMILIES } from '@switchyard/onnx-builder';
import { ByteLevelDecoder } from './byte-level-decoder.js';
import { Tokenizer } from './tokenizer.js';

/** The library's own tokenizer, what `ByteLevelDecoder` must match. */
interface Library {
  decode(ids: number[], options: { skip_special_tokens: boolean; clean_up_tokenization_spaces: boolean }): string;
  encode(text: string, options: { add_special_tokens: boolean }): { ids: number[] };
  readonly model: { readonly vocab: ReadonlyArray<string | undefined> };
  readonly added_tokens: ReadonlyArray<{ readonly id: number; readonly content: string }>;
  readonly special_tokens: readonly string[];
  readonly decoder: { readonly byte_decoder: Record<string, string> };
}
const LibraryTokenizer = (tokenizers as unknown as { Tokenizer: new (json: object, config: object) => Library }).Tokenizer;

const TOKENIZERS: ReadonlyArray<readonly [string, Readonly<Record<string, string>>]> = [
  ['tiny', { ...buildTinyTokenizerFiles() }],
  ...MODEL_FAMILIES.map((f) => [f, buildFamilyModelFiles(f).files] as const),
];

describe('ByteLevelDecoder: the text @huggingface/tokenizers decodes, exactly', () => {
  for (const [name, files] of TOKENIZERS) {
    const json = JSON.parse(files['tokenizer.json']!) as object;
    const config = JSON.parse(files['tokenizer_config.json'] ?? '{}') as object;
    const lib = new LibraryTokenizer(json, config);
    const tok = Tokenizer.fromJson(json as never, config as never);
    const direct = new ByteLevelDecoder({
      vocab: lib.model.vocab,
      addedContents: lib.added_tokens.map((t) => t.content),
      specialContents: lib.special_tokens,
      byteDecoder: lib.decoder.byte_decoder,
    });
    const vocabSize = lib.model.vocab.length;
    const addedIds = lib.added_tokens.map((t) => t.id);
    const expected = (ids: number[], skip: boolean): string => lib.decode(ids, { skip_special_tokens: skip, clean_up_tokenization_spaces: false });
    // ids of every kind: any in the vocabulary, added and special ones often, text the tokenizer encodes
    // (whole and cut anywhere: split UTF-8 characters), and ids past the vocabulary (the library's own path)
    const anyId = fc.oneof(
      { weight: 6, arbitrary: fc.integer({ min: 0, max: vocabSize - 1 }) },
      { weight: 2, arbitrary: fc.constantFrom(...addedIds) },
      { weight: 1, arbitrary: fc.integer({ min: vocabSize, max: vocabSize + 5 }) },
    );
    const encoded = fc.tuple(fc.string({ unit: 'binary', maxLength: 40 }), fc.nat(), fc.nat()).map(([text, a, b]) => {
      const ids = lib.encode(text, { add_special_tokens: false }).ids;
      return ids.slice(Math.min(a, b) % (ids.length + 1), Math.max(a, b) % (ids.length + 1) || undefined);
    });
    const idLists = fc.oneof(fc.array(anyId, { minLength: 1, maxLength: 12 }), encoded.filter((ids) => ids.length > 0));

    it(`${name}: Tokenizer.decode equals the library's decode, special tokens skipped or not`, () => {
      expect((tok as unknown as { byteLevel?: unknown }).byteLevel).toBeInstanceOf(ByteLevelDecoder); // the path under test
      fc.assert(
        fc.property(idLists, fc.boolean(), (ids, skip) => {
          expect(tok.decode(ids, { skipSpecialTokens: skip })).toBe(expected(ids, skip));
        }),
        { numRuns: 400 },
      );
    });

    it(`${name}: ASCII tokens after a cut UTF-8 character decode as the library decodes the whole run`, () => {
      // the single-byte tokens (every byte-level vocabulary has the 256; a test tokenizer may lack some)
      const idOfByte = new Map<number, number>();
      for (const [ch, byte] of Object.entries(lib.decoder.byte_decoder)) {
        const id = lib.model.vocab.indexOf(ch);
        if (id >= 0) idOfByte.set(Number(byte), id);
      }
      const runs = [
        [0xc3, 0x61], // a lead byte, then 'a'
        [0xe2, 0x82, 0x61, 0xac], // two bytes of '€', 'a', its last byte
        [0x61, 0xf0, 0x9f, 0x62, 0x98, 0x80, 0x63], // a four-byte character cut by 'b'
        [0xc3, 0xa9, 0x61], // a whole 'é', then 'a'
        [0x80, 0x61, 0xff], // stray continuation and invalid bytes around 'a'
      ];
      let checked = 0;
      for (const bytes of runs) {
        const ids = bytes.map((b) => idOfByte.get(b));
        if (ids.some((id) => id === undefined)) continue;
        for (const skip of [false, true]) expect(direct.decode(ids as number[], skip)).toBe(expected(ids as number[], skip));
        checked++;
      }
      if (name !== 'tiny') expect(checked).toBe(runs.length);
    });

    it(`${name}: the decoder renders every in-vocabulary id itself (no fallback) and matches`, () => {
      fc.assert(
        fc.property(fc.array(fc.oneof(fc.integer({ min: 0, max: vocabSize - 1 }), fc.constantFrom(...addedIds)), { minLength: 1, maxLength: 12 }), fc.boolean(), (ids, skip) => {
          fc.pre(ids.every((id) => lib.model.vocab[id] !== undefined));
          const got = direct.decode(ids, skip);
          expect(got).toBeDefined();
          expect(got).toBe(expected(ids, skip));
        }),
        { numRuns: 400 },
      );
      expect(direct.decode([vocabSize + 1], false)).toBeUndefined(); // no token: the library decides
    });
  }

  it('a token with a character outside the byte table is left to the library', () => {
    const d = new ByteLevelDecoder({ vocab: ['a', 'é!', 'b'], addedContents: [], specialContents: [], byteDecoder: { a: 97, b: 98, '!': 33 } });
    expect(d.decode([0, 2], false)).toBe('ab');
    expect(d.decode([0, 1, 2], false)).toBeUndefined();
    expect(d.decode([2, 0, 2], false)).toBe('bab'); // and the failed id left nothing behind
    expect(d.decode([-1], false)).toBeUndefined();
    expect(d.decode([0.5], false)).toBeUndefined();
  });
});
