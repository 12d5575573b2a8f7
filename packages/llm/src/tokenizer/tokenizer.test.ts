import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import fc from 'fast-check';
import { mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildTinyTokenizerFiles, byteToUnicode, TINY_DECODER_SHAPE, tinySpecialTokenIds } from '@switchyard/onnx-builder';
import { isSwitchyardError } from '@switchyard/common';
import { tokenByteBound } from '../context-length.js';
import { Tokenizer } from './tokenizer.js';
import { readModelFolder, type TokenizerJson } from './tokenizer-files.js';

/** A temporary model folder with the tiny model's tokenizer files (what the repository plan writes). */
function writeTinyModelFolder(): string {
  const dir = mkdtempSync(join(tmpdir(), 'llm-tokenizer-'));
  for (const [name, text] of Object.entries(buildTinyTokenizerFiles())) writeFileSync(join(dir, name), text);
  return dir;
}

describe('Tokenizer (tiny byte-level BPE)', () => {
  let dir: string;
  let tok: Tokenizer;
  const ids = tinySpecialTokenIds();
  beforeAll(async () => {
    dir = writeTinyModelFolder();
    tok = await Tokenizer.fromModelFolder(dir);
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('has the model vocabulary size and the special tokens', () => {
    expect(tok.vocabSize).toBe(TINY_DECODER_SHAPE.vocabSize);
    expect(tok.tokenToId('<|endoftext|>')).toBe(ids.endoftext);
    expect(tok.tokenToId('<|im_start|>')).toBe(ids.imStart);
    expect(tok.tokenToId('<|im_end|>')).toBe(ids.imEnd);
    expect([...tok.specialTokenIds].sort()).toEqual([ids.endoftext, ids.imStart, ids.imEnd].sort());
    expect([...tok.eosTokenIds]).toEqual([ids.imEnd]);
    expect(tok.padTokenId).toBe(ids.endoftext);
    expect(tok.bosTokenId).toBe(ids.endoftext); // from config.json (tokenizer_config has bos_token null)
    expect(tok.idToToken(32)).toBe('Ġ'); // byte b has id b, GPT-2 byte-to-unicode form
  });

  it('merges learned words: common English compresses below one token per byte', () => {
    const text = 'The capital of France is Paris, and the end of the story is near.';
    const encoded = tok.encode(text);
    expect(encoded.length).toBeLessThan(text.length * 0.6);
    expect(encoded.every((id) => id >= 0 && id < TINY_DECODER_SHAPE.vocabSize)).toBe(true);
  });

  it.each([
    'Hello World the end',
    '  leading and trailing spaces  ',
    'tabs\tand\nnewlines\r\n',
    'Grüße aus Köln — naïve café',
    '日本語のテキスト、中文，한국어',
    'emoji 👋🏽 and 👨‍👩‍👧 families',
    "it's we're they'll 1234567 3.14",
    '',
  ])('round-trips %j exactly', (text) => {
    expect(tok.decode(tok.encode(text))).toBe(text);
  });

  it('matches special tokens in text as single ids; skipSpecialTokens drops them', () => {
    const text = '<|im_start|>user\nhi<|im_end|>\n';
    const encoded = tok.encode(text);
    expect(encoded[0]).toBe(ids.imStart);
    expect(encoded).toContain(ids.imEnd);
    expect(tok.decode(encoded)).toBe(text);
    expect(tok.decode(encoded, { skipSpecialTokens: true })).toBe('user\nhi\n');
    expect(tok.isSpecial(ids.imEnd)).toBe(true);
    expect(tok.isSpecial(32)).toBe(false);
  });

  it('a multibyte character split across tokens decodes whole only when complete', () => {
    const bytes = [...new TextEncoder().encode('€')]; // 3 bytes → byte tokens (no merge for them)
    const encoded = tok.encode('€');
    expect(encoded).toEqual(bytes); // byte b has id b
    expect(tok.decode(encoded)).toBe('€');
    expect(tok.decode(encoded.slice(0, 2))).toContain('\uFFFD');
  });

  it('addSpecialTokens does not invent BOS/EOS for this tokenizer', () => {
    expect(tok.encode('hi', { addSpecialTokens: true })).toEqual(tok.encode('hi'));
  });

  it('the files are deterministic and the vocabulary is dense', async () => {
    const a = buildTinyTokenizerFiles();
    expect(buildTinyTokenizerFiles()).toEqual(a);
    const files = await readModelFolder(dir);
    const vocabIds = Object.values(files.tokenizerJson.model.vocab as Record<string, number>).sort((x, y) => x - y);
    expect(vocabIds).toEqual(Array.from({ length: TINY_DECODER_SHAPE.vocabSize - 3 }, (_, i) => i));
    expect(files.modelConfig?.vocab_size).toBe(TINY_DECODER_SHAPE.vocabSize);
  });
});

describe('readModelFolder errors', () => {
  it('not_found without tokenizer.json, invalid_argument for broken JSON', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'llm-tokenizer-bad-'));
    try {
      await expect(readModelFolder(dir)).rejects.toSatisfy((e) => isSwitchyardError(e) && e.code === 'not_found');
      writeFileSync(join(dir, 'tokenizer.json'), '{ not json');
      await expect(readModelFolder(dir)).rejects.toSatisfy((e) => isSwitchyardError(e) && e.code === 'invalid_argument');
      writeFileSync(join(dir, 'tokenizer.json'), '{"version": "1.0"}');
      await expect(readModelFolder(dir)).rejects.toSatisfy((e) => isSwitchyardError(e) && e.code === 'invalid_argument');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('a file linked from outside the folder is refused, not read', async () => {
    const outside = writeTinyModelFolder();
    const dir = mkdtempSync(join(tmpdir(), 'llm-tokenizer-link-'));
    try {
      symlinkSync(join(outside, 'tokenizer.json'), join(dir, 'tokenizer.json'));
      await expect(readModelFolder(dir)).rejects.toSatisfy(
        (e) => isSwitchyardError(e) && e.code === 'invalid_argument' && e.message === `tokenizer.json of model folder '${dir}' must name a path inside that folder`,
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
      rmSync(outside, { recursive: true, force: true });
    }
  });
});

describe('Tokenizer vocabulary figures', () => {
  /** GPT-2's byte symbols: a vocabulary holding all 256 has a byte bound (see tokenByteBound). */
  const byteSymbols = byteToUnicode();

  it('vocabSize and maxTokenBytes are those of the JSON, whatever the ids, gaps and added tokens', () => {
    const token = fc.string({ unit: 'grapheme', minLength: 1, maxLength: 6 });
    fc.assert(
      fc.property(
        fc.dictionary(token, fc.nat(5000), { maxKeys: 40 }),
        fc.array(fc.record({ id: fc.nat(6000), content: token, special: fc.boolean() }), { maxLength: 6 }),
        fc.boolean(),
        fc.constantFrom('BPE', 'WordPiece'),
        (extra, added, allBytes, type) => {
          // Byte symbols first (ids 0..255 or a sparse half), then arbitrary tokens at arbitrary ids (collisions too).
          const vocab: Record<string, number> = {};
          byteSymbols.forEach((sym, i) => {
            if (allBytes || i % 2 === 0) vocab[sym] = i;
          });
          Object.assign(vocab, extra);
          const json = {
            version: '1.0',
            normalizer: null,
            pre_tokenizer: { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: true },
            post_processor: null,
            decoder: { type: 'ByteLevel' },
            added_tokens: added.map((t) => ({ ...t, single_word: false, lstrip: false, rstrip: false, normalized: false })),
            model: type === 'BPE' ? { type, vocab, merges: [], unk_token: null } : { type, vocab, unk_token: byteSymbols[0], continuing_subword_prefix: '##', max_input_chars_per_word: 100 },
          } as unknown as TokenizerJson;
          const tok = Tokenizer.fromJson(json, {});
          const ids = [...Object.values(vocab), ...added.map((t) => t.id)];
          expect(tok.vocabSize).toBe(Math.max(-1, ...ids) + 1);
          expect(tok.maxTokenBytes).toBe(tokenByteBound(json, {}));
        },
      ),
      { numRuns: 200 },
    );
  });
});

describe('Tokenizer sharing', () => {
  it('folders with the same tokenizer files share one tokenizer and one parsed tokenizer.json; other files, other tokenizers', async () => {
    const a = writeTinyModelFolder();
    const b = writeTinyModelFolder();
    const c = writeTinyModelFolder();
    try {
      // c's config.json names other end ids: its tokenizer differs (eosTokenIds), its tokenizer.json is the same
      const config = JSON.parse(readFileSync(join(c, 'config.json'), 'utf8')) as Record<string, unknown>;
      writeFileSync(join(c, 'config.json'), JSON.stringify({ ...config, eos_token_id: [1, 2] }));
      const [fa, fb, fc2] = await Promise.all([readModelFolder(a), readModelFolder(b), readModelFolder(c)]);
      expect(fb.tokenizerKey).toBe(fa.tokenizerKey);
      expect(fc2.tokenizerKey).not.toBe(fa.tokenizerKey);
      expect(fb.tokenizerJson).toBe(fa.tokenizerJson);
      expect(fc2.tokenizerJson).toBe(fa.tokenizerJson);
      const ta = Tokenizer.fromModelFolderFiles(fa);
      expect(Tokenizer.fromModelFolderFiles(fb)).toBe(ta);
      expect(await Tokenizer.fromModelFolder(b)).toBe(ta);
      const tc = Tokenizer.fromModelFolderFiles(fc2);
      expect(tc).not.toBe(ta);
      expect([...tc.eosTokenIds]).toEqual(expect.arrayContaining([1, 2]));
      expect(tc.encode('shared files, same ids')).toEqual(ta.encode('shared files, same ids'));
    } finally {
      for (const d of [a, b, c]) rmSync(d, { recursive: true, force: true });
    }
  });
});
