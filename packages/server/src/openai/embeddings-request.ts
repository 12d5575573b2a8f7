/**
 * OpenAI's `POST /v1/embeddings` request, decoded and checked (pure): `input` as a string, a list of
 * strings, a list of token ids or a list of lists of token ids (OpenAI accepts all four), `model`,
 * `encoding_format` (`float` | `base64`), `dimensions`, `user` (ignored) and vLLM's
 * `truncate_prompt_tokens`. Other fields are ignored, as vLLM does.
 *
 * Bounds, through the one limit mechanism (`enforceLimits`): at most MAX_EMBEDDING_INPUTS inputs
 * (OpenAI's 2048) and MAX_EMBEDDING_TOKEN_IDS token ids over all inputs given as ids (OpenAI's 300,000
 * tokens per request). Text inputs are bounded by the body size here and by the model's maximum
 * sequence length after tokenizing (each longer one is refused), so their tokens are bounded too.
 * Refusals are `InvalidParamError`s naming the field.
 */
import { describeValue, enforceLimits } from '@switchyard/common';
import { InvalidParamError } from '@switchyard/llm';

export const MAX_EMBEDDING_INPUTS = 2048;
export const MAX_EMBEDDING_TOKEN_IDS = 300_000;

/** One input: text to tokenize on the model's side, or token ids as given. */
export type EmbeddingInput = { readonly text: string } | { readonly ids: readonly number[] };

export interface EmbeddingsRequest {
  readonly model: string | undefined;
  readonly inputs: readonly EmbeddingInput[];
  readonly encodingFormat: 'float' | 'base64';
  readonly dimensions: number | undefined;
  readonly truncatePromptTokens: number | undefined;
}

const present = (v: unknown): boolean => v !== undefined && v !== null;
const isTokenId = (v: unknown): v is number => typeof v === 'number' && Number.isSafeInteger(v) && v >= 0;

function inputsOf(input: unknown): EmbeddingInput[] {
  const bad = (why: string): never => {
    throw new InvalidParamError('input', why);
  };
  if (typeof input === 'string') return [{ text: input }];
  if (!Array.isArray(input)) return bad(`input must be a string, a list of strings, a list of token ids or a list of lists of token ids, got ${describeValue(input)}`);
  if (input.length === 0) return bad('input must not be empty');
  const first = input[0];
  if (typeof first !== 'number') enforceLimits('', [{ what: "'input'", value: input.length, max: MAX_EMBEDDING_INPUTS, unit: 'inputs', why: 'the inputs of one embeddings request' }]);
  if (typeof first === 'string') {
    return input.map((s, i) => (typeof s === 'string' ? { text: s } : bad(`input[${i}] must be a string like input[0], got ${describeValue(s)}`)));
  }
  if (typeof first === 'number') {
    enforceLimits('', [{ what: "the token ids of 'input'", value: input.length, max: MAX_EMBEDDING_TOKEN_IDS, unit: 'tokens', why: 'the tokens of one embeddings request' }]);
    input.forEach((id, i) => isTokenId(id) || bad(`input[${i}] must be a token id (an integer >= 0), got ${describeValue(id)}`));
    return [{ ids: input as number[] }];
  }
  if (Array.isArray(first)) {
    let total = 0;
    const out = input.map((ids, i): EmbeddingInput => {
      if (!Array.isArray(ids)) return bad(`input[${i}] must be a list of token ids like input[0], got ${describeValue(ids)}`);
      if (ids.length === 0) return bad(`input[${i}] must not be empty`);
      total += ids.length;
      ids.forEach((id, j) => isTokenId(id) || bad(`input[${i}][${j}] must be a token id (an integer >= 0), got ${describeValue(id)}`));
      return { ids: ids as number[] };
    });
    enforceLimits('', [{ what: "the token ids of 'input'", value: total, max: MAX_EMBEDDING_TOKEN_IDS, unit: 'tokens', why: 'the tokens of one embeddings request' }]);
    return out;
  }
  return bad(`input must be a string, a list of strings, a list of token ids or a list of lists of token ids, got a list of ${describeValue(first)}`);
}

export function parseEmbeddingsRequest(body: unknown): EmbeddingsRequest {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw new InvalidParamError('body', 'the request body must be a JSON object');
  const o = body as Record<string, unknown>;
  const model = o['model'];
  if (present(model) && (typeof model !== 'string' || model === '')) throw new InvalidParamError('model', `model must be a non-empty string, got ${describeValue(model)}`);
  if (!present(o['input'])) throw new InvalidParamError('input', 'input is required');
  const inputs = inputsOf(o['input']);
  const format = o['encoding_format'] ?? 'float';
  if (format !== 'float' && format !== 'base64') throw new InvalidParamError('encoding_format', `encoding_format must be 'float' or 'base64', got ${describeValue(format)}`);
  const integer = (key: string): number | undefined => {
    const v = o[key];
    if (!present(v)) return undefined;
    if (typeof v !== 'number' || !Number.isSafeInteger(v)) throw new InvalidParamError(key, `${key} must be an integer, got ${describeValue(v)}`);
    return v;
  };
  const dimensions = integer('dimensions');
  const truncatePromptTokens = integer('truncate_prompt_tokens');
  if (present(o['user']) && typeof o['user'] !== 'string') throw new InvalidParamError('user', `user must be a string, got ${describeValue(o['user'])}`);
  return { model: model as string | undefined, inputs, encodingFormat: format, dimensions, truncatePromptTokens };
}
