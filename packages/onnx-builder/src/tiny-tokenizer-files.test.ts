import { describe, it, expect } from 'vitest';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { llmFixtureRepositoryFiles } from './repository-plan.js';
import { buildTinyTokenizerFiles, byteToUnicode, CHATML_TEMPLATE, TINY_DECODER_SHAPE, tinySpecialTokenIds } from './tiny-tokenizer-files.js';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));

describe('buildTinyTokenizerFiles', () => {
  const files = buildTinyTokenizerFiles();
  const tokenizer = JSON.parse(files['tokenizer.json']) as {
    added_tokens: Array<{ id: number; content: string; special: boolean }>;
    model: { vocab: Record<string, number>; merges: string[] };
  };
  const config = JSON.parse(files['config.json']) as Record<string, unknown>;
  const tokenizerConfig = JSON.parse(files['tokenizer_config.json']) as Record<string, unknown>;

  it('is deterministic', () => {
    expect(buildTinyTokenizerFiles()).toEqual(files);
  });

  it('byte b has id b; merges fill the vocabulary up to the three special tokens', () => {
    const chars = byteToUnicode();
    expect(new Set(chars).size).toBe(256);
    chars.forEach((c, b) => expect(tokenizer.model.vocab[c]).toBe(b));
    const ids = Object.values(tokenizer.model.vocab).sort((a, b) => a - b);
    expect(ids).toEqual(Array.from({ length: TINY_DECODER_SHAPE.vocabSize - 3 }, (_, i) => i));
    for (const merge of tokenizer.model.merges) {
      const [a, b] = merge.split(' ') as [string, string];
      expect(tokenizer.model.vocab[a], merge).toBeDefined();
      expect(tokenizer.model.vocab[b], merge).toBeDefined();
      expect(tokenizer.model.vocab[a + b], merge).toBeDefined();
    }
    expect(new Set(tokenizer.model.merges).size).toBe(tokenizer.model.merges.length);
  });

  it('special tokens take the last ids and are named in both configs', () => {
    const ids = tinySpecialTokenIds();
    expect(tokenizer.added_tokens.map((t) => [t.content, t.id, t.special])).toEqual([
      ['<|endoftext|>', ids.endoftext, true],
      ['<|im_start|>', ids.imStart, true],
      ['<|im_end|>', ids.imEnd, true],
    ]);
    expect(config['vocab_size']).toBe(TINY_DECODER_SHAPE.vocabSize);
    expect(config['eos_token_id']).toBe(ids.imEnd);
    expect(config['num_key_value_heads']).toBeLessThan(config['num_attention_heads'] as number);
    expect(tokenizerConfig['eos_token']).toBe('<|im_end|>');
    expect(tokenizerConfig['chat_template']).toBe(CHATML_TEMPLATE);
  });
});

describe('llmFixtureRepositoryFiles', () => {
  it('lays out HF model folders with a hand-written config.pbtxt beside each', () => {
    const files = llmFixtureRepositoryFiles();
    const hf = ['tokenizer.json', 'tokenizer_config.json', 'config.json'];
    expect(files.map((f) => f.path)).toEqual([
      ...['tiny_llm', 'tiny_llm_fp16'].flatMap((m) => ['model.onnx', ...hf].map((n) => `${m}/1/${n}`)),
      ...hf.map((n) => `mock_llm/1/${n}`),
    ]);
    for (const model of new Set(files.map((f) => f.path.split('/')[0]!))) {
      const configPath = join(ROOT, 'test/fixtures/llm_repository', model, 'config.pbtxt');
      expect(existsSync(configPath), configPath).toBe(true);
      const text = readFileSync(configPath, 'utf8');
      expect(text).toContain(`name: "${model}"`);
      expect(text).toContain(model === 'mock_llm' ? 'backend: "mocker"' : 'backend: "llm"');
    }
    const again = llmFixtureRepositoryFiles();
    files.forEach((f, i) => expect(Buffer.from(f.build()).equals(Buffer.from(again[i]!.build())), f.path).toBe(true));
  });
});
