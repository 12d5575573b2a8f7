import { describe, expect, it } from 'vitest';
import { buildTinyTokenizerFiles, tinySpecialTokenIds } from '@switchyard/onnx-builder';
import { isSwitchyardError } from '@switchyard/common';
import { ChatTemplate } from './chat-template.js';
import { chatPrompt, completionPrompt } from './preprocessor.js';
import { Tokenizer } from './tokenizer/tokenizer.js';

const files = buildTinyTokenizerFiles();
const config = JSON.parse(files['tokenizer_config.json']);
const tokenizer = Tokenizer.fromJson(JSON.parse(files['tokenizer.json']), config, JSON.parse(files['config.json']));
const chatTemplate = ChatTemplate.fromTokenizerConfig(config);
const card = { name: 'tiny', kind: 'mocker' as const, blockSize: 16, contextLength: 512, totalKvBlocks: 8, eosTokenIds: [tinySpecialTokenIds().imEnd], created: 1 };

describe('preprocessor', () => {
  it('renders chat with the generation prompt and tokenizes it', async () => {
    const r = await chatPrompt({ card, tokenizer, chatTemplate }, [{ role: 'user', content: 'hi' }]);
    expect(r.promptText).toBe('<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n');
    expect(r.promptTokenIds).toEqual(tokenizer.encode(r.promptText));
  });

  it('refuses chat for a model without a chat template, and out-of-vocabulary or empty prompts', async () => {
    const noTemplate = () => chatPrompt({ card, tokenizer, chatTemplate: undefined }, [{ role: 'user', content: 'hi' }]);
    await expect(noTemplate()).rejects.toThrow(/has no chat template/);
    const e = await noTemplate().catch((err: unknown) => err);
    expect(isSwitchyardError(e) && e.code).toBe('invalid_argument');
    await expect(completionPrompt({ card, tokenizer, chatTemplate }, { tokenIds: [1, tokenizer.vocabSize] })).rejects.toThrow(/out of the vocabulary/);
    await expect(completionPrompt({ card, tokenizer, chatTemplate }, { text: '' })).rejects.toThrow(/must not be empty/);
    expect((await completionPrompt({ card, tokenizer, chatTemplate }, { tokenIds: tokenizer.encode('Hello') })).promptText).toBe('Hello');
  });
});
