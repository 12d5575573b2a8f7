import { describe, expect, it } from 'vitest';
import { buildTinyTokenizerFiles, tinySpecialTokenIds } from '@switchyard/onnx-builder';
import { isSwitchyardError } from '@switchyard/common';
import { ChatTemplate } from './chat-template.js';
import { refuseOverlongPromptText, tokenByteBound } from './context-length.js';
import { chatPrompt, completionPrompt, textPromptTokens } from './preprocessor.js';
import { OFF_LOOP_TOKENIZE_CHARS, Tokenizer } from './tokenizer/tokenizer.js';
import type { TokenizerJson } from './tokenizer/tokenizer-files.js';

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
  it("refuses with vLLM's message and 'at least', as invalid_argument, on every prompt path", async () => {
    const bound = tokenizer.maxTokenBytes!;
    const text = 'x'.repeat(512 * bound);
    const expected = `This model's maximum context length is 512 tokens. However, your request has at least 512 input tokens. Please reduce the length of the input messages.`;
    for (const fn of [
      () => completionPrompt(endpoint, { text }),
      () => chatPrompt(endpoint, [{ role: 'user', content: text }]),
      () => textPromptTokens(endpoint, text, true),
    ]) {
      const e = (await fn().catch((err: unknown) => err)) as Error;
      expect(isSwitchyardError(e) && e.code).toBe('invalid_argument');
      expect(e.message).toMatch(/^This model's maximum context length is 512 tokens\. However, your request has at least \d+ input tokens\./);
    }
    expect(((await completionPrompt(endpoint, { text }).catch((err: unknown) => err)) as Error).message).toBe(expected);
  });

  it('lets through every text one byte short of the proof (the engine then counts exactly)', () => {
    const bound = tokenizer.maxTokenBytes!;
    expect(() => refuseOverlongPromptText('x'.repeat(511 * bound), 512, bound)).not.toThrow();
    expect(() => refuseOverlongPromptText('é'.repeat(Math.floor((511 * bound) / 2)), 512, bound)).not.toThrow();
    expect(() => refuseOverlongPromptText('x'.repeat(511 * bound + 1), 512, bound)).toThrow(/at least 512 input tokens/);
    expect(() => refuseOverlongPromptText('x'.repeat(10 ** 7), 512, undefined)).not.toThrow();
  });

  it('refuses a 20 MB prompt at once (it took seconds to tokenize)', async () => {
    const text = 'hello world '.repeat(20 * 1024 * 1024 / 12);
    const start = performance.now();
    await expect(completionPrompt(endpoint, { text })).rejects.toThrow(/maximum context length is 512 tokens/);
    expect(performance.now() - start).toBeLessThan(1000);
  });
});

describe('prompts given as token ids', () => {
  it("are refused with vLLM's exact count before they are checked or decoded", async () => {
    const ids = new Array<number>(2_000_000).fill(1);
    const start = performance.now();
    await expect(completionPrompt(endpoint, { tokenIds: ids })).rejects.toThrow(
      "This model's maximum context length is 512 tokens. However, your request has 2000000 input tokens. Please reduce the length of the input messages.",
    );
    expect(performance.now() - start).toBeLessThan(1000);
    expect((await completionPrompt(endpoint, { tokenIds: [1, 2, 3] })).promptTokenIds).toEqual([1, 2, 3]);
  });
});

describe('long prompts are tokenized off the event loop', () => {
  it('encodeOffLoop gives the ids encode gives, short and long, with and without special tokens, many at once', async () => {
    const long = Array.from({ length: 9000 }, (_, i) => ['alpha ', 'é ', '<|im_start|>', '日本 ', '\n'][i % 5]).join('');
    expect(long.length).toBeGreaterThanOrEqual(OFF_LOOP_TOKENIZE_CHARS);
    for (const text of ['hello', long]) {
      for (const addSpecialTokens of [false, true]) {
        expect(await tokenizer.encodeOffLoop(text, { addSpecialTokens })).toEqual(tokenizer.encode(text, { addSpecialTokens }));
      }
    }
    const other = Tokenizer.fromJson(tokenizerJson, config);
    const all = await Promise.all([tokenizer.encodeOffLoop(long), other.encodeOffLoop(long + 'x'), tokenizer.encodeOffLoop(long + 'y')]);
    expect(all).toEqual([tokenizer.encode(long), tokenizer.encode(long + 'x'), tokenizer.encode(long + 'y')]);
  });

  it('keeps timers firing while a 2 MB prompt is tokenized', async () => {
    const text = 'hello world '.repeat((2 * 1024 * 1024) / 12);
    let ticks = 0;
    let worstGap = 0;
    let last = performance.now();
    const timer = setInterval(() => {
      const now = performance.now();
      worstGap = Math.max(worstGap, now - last);
      last = now;
      ticks += 1;
    }, 10);
    try {
      const ids = await tokenizer.encodeOffLoop(text);
      expect(ids.length).toBeGreaterThan(100_000);
    } finally {
      clearInterval(timer);
    }
    expect(ticks).toBeGreaterThan(0);
    expect(worstGap).toBeLessThan(500); // tokenizing on the loop held it for seconds
  }, 60_000);
});
