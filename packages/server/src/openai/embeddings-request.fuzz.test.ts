/**
 * Fuzz properties of the embeddings decode edge (`parseEmbeddingsRequest`): any JSON value is a parsed
 * request or an invalid_argument (naming the field when one is to blame), within the time bound.
 */
import { describe, expect, it } from 'vitest';
import { errorParam } from '@switchyard/llm';
import { fc, fuzz, hostileNumber, mutatedJson, parsesOrRefuses, type JsonValue } from '@switchyard/testing/fuzz';
import { parseEmbeddingsRequest } from './embeddings-request.js';

const body = fc.record(
  {
    model: fc.constantFrom('tiny_embed', 'm'),
    input: fc.oneof(
      fc.string({ maxLength: 8 }),
      fc.array(fc.string({ maxLength: 8 }), { minLength: 1, maxLength: 4 }),
      fc.array(fc.nat(500), { minLength: 1, maxLength: 6 }),
      fc.array(fc.array(fc.nat(500), { minLength: 1, maxLength: 4 }), { minLength: 1, maxLength: 3 }),
    ),
    encoding_format: fc.constantFrom('float', 'base64'),
    dimensions: fc.integer({ min: 1, max: 64 }),
    truncate_prompt_tokens: fc.integer({ min: -1, max: 64 }),
    user: fc.string({ maxLength: 4 }),
  },
  { requiredKeys: ['input'] },
) as fc.Arbitrary<JsonValue>;

describe('parseEmbeddingsRequest (fuzz)', () => {
  it('parses every valid body, keeping one entry per input', () => {
    fuzz(body, (b) => {
      const r = parseEmbeddingsRequest(b);
      const input = (b as { input: unknown }).input;
      expect(r.inputs.length).toBe(typeof input === 'string' || typeof (input as unknown[])[0] === 'number' ? 1 : (input as unknown[]).length);
    });
  });

  it('parses or refuses any JSON value, and bodies with one field corrupted', () => {
    fuzz(fc.oneof(fc.jsonValue({ maxDepth: 4 }), mutatedJson(body)), (v) => {
      parsesOrRefuses(() => parseEmbeddingsRequest(v));
    });
  });

  it('names the refused field', () => {
    const fields = fc.constantFrom('model', 'input', 'encoding_format', 'dimensions', 'truncate_prompt_tokens', 'user');
    fuzz(fc.tuple(fields, fc.oneof(hostileNumber(), fc.constantFrom<JsonValue>(true, {}, [[]], [{}]))), ([field, value]) => {
      const r = parsesOrRefuses(() => parseEmbeddingsRequest({ input: 'x', [field]: value }));
      if (!r.ok) expect(errorParam(r.error)).toBe(field);
    });
  });
});
