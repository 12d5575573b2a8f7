import { describe, expect, it } from 'vitest';
import { InvalidParamError } from '@switchyard/llm';
import { MAX_EMBEDDING_INPUTS, MAX_EMBEDDING_TOKEN_IDS, parseEmbeddingsRequest } from './embeddings-request.js';

const refusal = (body: unknown): { param: string | null; message: string } => {
  try {
    parseEmbeddingsRequest(body);
  } catch (e) {
    return { param: e instanceof InvalidParamError ? e.param : null, message: (e as Error).message };
  }
  throw new Error('accepted');
};

describe('parseEmbeddingsRequest', () => {
  it('takes the four input forms OpenAI accepts', () => {
    expect(parseEmbeddingsRequest({ model: 'm', input: 'a' }).inputs).toEqual([{ text: 'a' }]);
    expect(parseEmbeddingsRequest({ input: ['a', 'b'] }).inputs).toEqual([{ text: 'a' }, { text: 'b' }]);
    expect(parseEmbeddingsRequest({ input: [1, 2] }).inputs).toEqual([{ ids: [1, 2] }]);
    expect(parseEmbeddingsRequest({ input: [[1], [2, 3]] }).inputs).toEqual([{ ids: [1] }, { ids: [2, 3] }]);
    const r = parseEmbeddingsRequest({ model: 'm', input: 'a', encoding_format: 'base64', dimensions: 8, user: 'u', truncate_prompt_tokens: -1, extra: 1 });
    expect(r).toEqual({ model: 'm', inputs: [{ text: 'a' }], encodingFormat: 'base64', dimensions: 8, truncatePromptTokens: -1 });
    expect(parseEmbeddingsRequest({ input: 'a', encoding_format: null }).encodingFormat).toBe('float');
  });

  it('refuses malformed fields, naming them', () => {
    expect(refusal([]).param).toBe('body');
    expect(refusal({}).param).toBe('input');
    expect(refusal({ input: [] }).param).toBe('input');
    expect(refusal({ input: 3 }).param).toBe('input');
    expect(refusal({ input: ['a', 2] }).param).toBe('input');
    expect(refusal({ input: [1, 'a'] }).param).toBe('input');
    expect(refusal({ input: [1, -1] }).param).toBe('input');
    expect(refusal({ input: [1.5] }).param).toBe('input');
    expect(refusal({ input: [[1], 2] }).param).toBe('input');
    expect(refusal({ input: [[1], []] }).param).toBe('input');
    expect(refusal({ input: [{}] }).param).toBe('input');
    expect(refusal({ input: 'a', model: '' }).param).toBe('model');
    expect(refusal({ input: 'a', encoding_format: 'int8' }).param).toBe('encoding_format');
    expect(refusal({ input: 'a', dimensions: 1.5 }).param).toBe('dimensions');
    expect(refusal({ input: 'a', truncate_prompt_tokens: '3' }).param).toBe('truncate_prompt_tokens');
    expect(refusal({ input: 'a', user: 1 }).param).toBe('user');
  });

  it('bounds the input count and the token ids through the limit mechanism', () => {
    expect(refusal({ input: Array(MAX_EMBEDDING_INPUTS + 1).fill('a') }).message).toBe(
      `'input' is ${MAX_EMBEDDING_INPUTS + 1} inputs, above the limit of ${MAX_EMBEDDING_INPUTS} inputs (the inputs of one embeddings request)`,
    );
    expect(parseEmbeddingsRequest({ input: Array(MAX_EMBEDDING_INPUTS).fill('a') }).inputs).toHaveLength(MAX_EMBEDDING_INPUTS);
    const many = Array.from({ length: 2 }, () => Array(MAX_EMBEDDING_TOKEN_IDS / 2 + 1).fill(1));
    expect(refusal({ input: many }).message).toContain(`above the limit of ${MAX_EMBEDDING_TOKEN_IDS} tokens`);
  });
});
