import * as tokenizers from '@huggingface/tokenizers';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { MODEL_FAMILIES, buildFamilyModelFiles, buildTinyTokenizerFiles } from '@switchyard/onnx-builder';
import { installFastByteLevel } from './byte-level-pretokenizer.js';
import { Tokenizer } from './tokenizer.js';
import type { TokenizerConfigJson, TokenizerJson } from './tokenizer-files.js';

type Library = { encode(text: string, options?: { add_special_tokens?: boolean }): { ids: number[] }; pre_tokenizer: unknown };
const LibraryTokenizer = (tokenizers as unknown as { Tokenizer: new (json: object, config: object) => Library }).Tokenizer;

/** The tiny tokenizer (mock_llm's) and the four family tokenizers (Qwen3, Llama 3, Mistral, Gemma 3 vocabularies and added tokens). */
const SETS: Array<[string, Record<string, string>]> = [['tiny', buildTinyTokenizerFiles() as unknown as Record<string, string>], ...MODEL_FAMILIES.map((f): [string, Record<string, string>] => [f, buildFamilyModelFiles(f).files as unknown as Record<string, string>])];

const CORPUS = [
  '',
  ' ',
  'Hello, world!',
  "It's the router's job: don't re-prefill what we'll reuse.",
  '  leading and trailing  \n\n\tindented\r\nwindows line\r',
  'x = [1, 22, 333, 4444]; y = x.map((v) => v * 2) // ~!@#$%^&*()_+{}|:"<>?`-=[]\\;\',./',
  'naïve café — 東京 🚀 Ünïcödé, مرحبا, שלום, Привет',
  'e\u0301 combining, zero\u200bwidth, nbsp\u00a0here, bom\ufeff',
  'lone \ud800 surrogate and \udfff low',
  'control \u0000\u0001\u001f\u007f chars',
  '<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n',
  '<s>[INST] tools [/INST]</s> <bos><start_of_turn>user',
  '1234567890 3.14159 -42 1e10',
  '   \n   \n',
];

describe('installFastByteLevel', () => {
  for (const [name, files] of SETS) {
    const json = JSON.parse(files['tokenizer.json']!) as TokenizerJson;
    const config = JSON.parse(files['tokenizer_config.json'] ?? '{}') as TokenizerConfigJson;
    const ours = Tokenizer.fromJson(json, config);
    const library = new LibraryTokenizer(json, config);

    it(`${name}: encodes exactly as the library, with and without special tokens`, () => {
      for (const text of CORPUS) {
        for (const add of [false, true]) {
          expect(ours.encode(text, { addSpecialTokens: add }), JSON.stringify(text)).toEqual(library.encode(text, { add_special_tokens: add }).ids);
        }
      }
      fc.assert(
        fc.property(
          fc.oneof(
            { weight: 3, arbitrary: fc.string({ unit: 'binary', maxLength: 80 }) },
            { weight: 3, arbitrary: fc.string({ unit: 'grapheme', maxLength: 60 }) },
            { weight: 1, arbitrary: fc.array(fc.constantFrom(' ', '\n', '\t', 'a', 'Z', '0', "'s", '’', 'é', '🚀', '<|im_end|>', '\r', '\u00a0'), { maxLength: 40 }).map((a) => a.join('')) },
          ),
          (text) => {
            expect(ours.encode(text)).toEqual(library.encode(text, { add_special_tokens: false }).ids);
          },
        ),
        { numRuns: 300 },
      );
    });
  }

  it('reads the prefix space and the regex switch as the library does (truthiness of its fields)', () => {
    const [, files] = SETS[0]!;
    const json = JSON.parse(files['tokenizer.json']!) as TokenizerJson & { pre_tokenizer: Record<string, unknown> };
    for (const over of [{ add_prefix_space: true }, { add_prefix_space: 1 }, { use_regex: false }, { use_regex: 0 }, { use_regex: null }]) {
      const variant = { ...json, pre_tokenizer: { ...json.pre_tokenizer, ...over } } as unknown as TokenizerJson;
      const ours = Tokenizer.fromJson(variant, {});
      const library = new LibraryTokenizer(variant, {});
      for (const text of CORPUS) expect(ours.encode(text), `${JSON.stringify(over)} ${JSON.stringify(text)}`).toEqual(library.encode(text, { add_special_tokens: false }).ids);
    }
  });

  it('installs on a byte-level pre-tokenizer alone or inside a sequence, and nowhere else', () => {
    for (const [, files] of SETS) {
      const json = JSON.parse(files['tokenizer.json']!) as TokenizerJson;
      expect(installFastByteLevel(new LibraryTokenizer(json, {}).pre_tokenizer)).toBe(1);
    }
    expect(installFastByteLevel(undefined)).toBe(0);
    expect(installFastByteLevel(null)).toBe(0);
    // another pre-tokenizer type, or a byte table that is not one character per byte: left to the library
    expect(installFastByteLevel({ config: { type: 'Whitespace' }, pre_tokenize_text: () => [] })).toBe(0);
    const odd = { config: { type: 'ByteLevel' }, pattern: /x/gu, byte_encoder: { 0: 'ab' }, pre_tokenize_text: () => [] };
    expect(installFastByteLevel(odd)).toBe(0);
    expect(installFastByteLevel({ tokenizers: [odd, { config: { type: 'Split' } }] })).toBe(0);
  });
});
