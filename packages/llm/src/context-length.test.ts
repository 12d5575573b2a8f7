import { describe, expect, it } from 'vitest';
import { buildTinyTokenizerFiles, tinySpecialTokenIds } from '@switchyard/onnx-builder';
import { isSwitchyardError } from '@switchyard/common';
import { ChatTemplate } from './chat-template.js';
import { refuseOverlongPromptText, tokenByteBound } from './context-length.js';
import { chatPrompt, completionPrompt, textPromptTokens } from './preprocessor.js';
import { Tokenizer } from './tokenizer.js';
import type { TokenizerJson } from './tokenizer-files.js';

const files = buildTinyTokenizerFiles();
const tokenizerJson = JSON.parse(files['tokenizer.json']) as TokenizerJson;
const config = JSON.parse(files['tokenizer_config.json']);
const tokenizer = Tokenizer.fromJson(tokenizerJson, config, JSON.parse(files['config.json']));
const chatTemplate = ChatTemplate.fromTokenizerConfig(config);
const card = { name: 'tiny', kind: 'mocker' as const, blockSize: 16, contextLength: 512, totalKvBlocks: 8, eosTokenIds: [tinySpecialTokenIds().imEnd], created: 1 };
const endpoint = { card, tokenizer, chatTemplate };

function thrown(fn: () => unknown): Error {
  try {
    fn();
  } catch (e) {
    return e as Error;
  }
  throw new Error('expected a throw');
}

describe('tokenByteBound', () => {
  it('bounds the tiny byte-level BPE by its longest token, and the bound holds on any text', () => {
    const bound = tokenByteBound(tokenizerJson, config);
    expect(bound).toBeDefined();
    expect(tokenizer.maxTokenBytes).toBe(bound);
    // No token of any text covers more bytes than the bound, special tokens included.
    const texts = ['', 'hello world', 'é日本😀 \u0000\n\t', '<|im_start|>user\nhi<|im_end|>', 'the '.repeat(500), '\ud800 lone', 'abc'.repeat(333) + '<|endoftext|>'];
    for (const text of texts) {
      const ids = tokenizer.encode(text);
      expect(ids.length).toBeGreaterThanOrEqual(Math.ceil(Buffer.byteLength(text) / bound!));
    }
  });

  it('gives no bound when the tokenizer may drop or absorb bytes', () => {
    const variant = (patch: Record<string, unknown>) => tokenByteBound({ ...tokenizerJson, ...patch } as TokenizerJson, config);
    expect(variant({ normalizer: { type: 'NFKC' } })).toBeUndefined();
    expect(variant({ pre_tokenizer: { type: 'Whitespace' } })).toBeUndefined();
    expect(variant({ pre_tokenizer: null })).toBeUndefined();
    expect(variant({ pre_tokenizer: { type: 'Sequence', pretokenizers: [{ type: 'Split', behavior: 'Removed' }, { type: 'ByteLevel' }] } })).toBeUndefined();
    expect(variant({ pre_tokenizer: { type: 'Sequence', pretokenizers: [{ type: 'Split', behavior: 'Isolated' }, { type: 'ByteLevel' }] } })).toBeDefined();
    expect(variant({ model: { ...tokenizerJson.model, type: 'WordPiece' } })).toBeUndefined();
    const vocab = { ...(tokenizerJson.model.vocab as Record<string, number>) };
    delete vocab['Ā']; // the symbol of byte 0x00
    expect(variant({ model: { ...tokenizerJson.model, vocab } })).toBeUndefined();
    const added = (tokenizerJson.added_tokens ?? []).map((t, i) => (i === 0 ? { ...t, lstrip: true } : t));
    expect(variant({ added_tokens: added })).toBeUndefined();
  });
});

describe('refusing prompts that cannot fit, before tokenizing', () => {
  it("refuses with vLLM's message and 'at least', as invalid_argument, on every prompt path", () => {
    const bound = tokenizer.maxTokenBytes!;
    const text = 'x'.repeat(512 * bound);
    const expected = `This model's maximum context length is 512 tokens. However, your request has at least 512 input tokens. Please reduce the length of the input messages.`;
    for (const fn of [
      () => completionPrompt(endpoint, { text }),
      () => chatPrompt(endpoint, [{ role: 'user', content: text }]),
      () => textPromptTokens(endpoint, text, true),
    ]) {
      const e = thrown(fn);
      expect(isSwitchyardError(e) && e.code).toBe('invalid_argument');
      expect(e.message).toMatch(/^This model's maximum context length is 512 tokens\. However, your request has at least \d+ input tokens\./);
    }
    expect(thrown(() => completionPrompt(endpoint, { text })).message).toBe(expected);
  });

  it('lets through every text one byte short of the proof (the engine then counts exactly)', () => {
    const bound = tokenizer.maxTokenBytes!;
    expect(() => refuseOverlongPromptText('x'.repeat(511 * bound), 512, bound)).not.toThrow();
    expect(() => refuseOverlongPromptText('é'.repeat(Math.floor((511 * bound) / 2)), 512, bound)).not.toThrow();
    expect(() => refuseOverlongPromptText('x'.repeat(511 * bound + 1), 512, bound)).toThrow(/at least 512 input tokens/);
    expect(() => refuseOverlongPromptText('x'.repeat(10 ** 7), 512, undefined)).not.toThrow();
  });

  it('refuses a 20 MB prompt at once (it took seconds to tokenize)', () => {
    const text = 'hello world '.repeat(20 * 1024 * 1024 / 12);
    const start = performance.now();
    expect(() => completionPrompt(endpoint, { text })).toThrow(/maximum context length is 512 tokens/);
    expect(performance.now() - start).toBeLessThan(1000);
  });
});
