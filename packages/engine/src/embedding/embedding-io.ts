/**
 * The KServe interface of an `embedding` model, shared by the backend and the doors that call it (the
 * OpenAI `/v1/embeddings` route on a worker and on a router): one request is one or more sequences
 * (its batch dimension), each given as text or as token ids.
 *
 * Inputs (both optional; a request gives exactly one):
 * - `text_input` BYTES `[1]`: the text, tokenized by the model's tokenizer (special tokens added);
 * - `input_ids` INT64 `[-1]` (ragged: sequences of different lengths batch together): token ids as is.
 * Request parameters: `dimensions` (Matryoshka truncation then renormalisation, as vLLM; refused for a
 * model whose config.json is not Matryoshka-capable), `truncate_prompt_tokens` (vLLM's: keep the last
 * k tokens; -1 = the model's maximum length).
 * Outputs: `embedding` FP32 `[dim]` and `prompt_tokens` INT32 `[1]` (tokens the sequence counted).
 */
export const EMBEDDING_BACKEND = 'embedding';
export const EMBEDDING_TEXT_INPUT = 'text_input';
export const EMBEDDING_IDS_INPUT = 'input_ids';
export const EMBEDDING_OUTPUT = 'embedding';
export const EMBEDDING_TOKENS_OUTPUT = 'prompt_tokens';
export const EMBEDDING_DIMENSIONS_PARAMETER = 'dimensions';
export const EMBEDDING_TRUNCATE_PARAMETER = 'truncate_prompt_tokens';

/** vLLM's refusal of a sequence longer than the model's maximum length. */
export function embeddingTooLongMessage(maxLength: number, tokens: number): string {
  return `This model's maximum context length is ${maxLength} tokens. However, you requested ${tokens} tokens in the input for embedding generation. Please reduce the length of the input.`;
}
