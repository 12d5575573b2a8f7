/**
 * The context-length rule's messages (vLLM's wording) and the early refusal of prompts whose text
 * alone proves they cannot fit, before any tokenisation.
 *
 * Why early: tokenising costs ~0.5 µs per byte on the event loop, so a 20 MB prompt held a worker
 * (or a router) for 10+ s just to learn it is too long. A tokenizer in which every input byte is
 * covered by exactly one token's bytes, and no token covers more than `maxTokenBytes` bytes, turns
 * any text of B UTF-8 bytes into at least ⌈B / maxTokenBytes⌉ tokens: when that is already over
 * the context, the prompt is refused at once. `tokenByteBound` derives `maxTokenBytes` from
 * tokenizer.json and answers undefined whenever the tokenizer could drop or absorb bytes
 * (normalizers, unknown tokens, whitespace-stripping added tokens, non byte-level models): then
 * nothing is refused early and the exact count decides, as before.
 */
import { invalidArgument, type SwitchyardError } from '@switchyard/common';
import type { TokenizerConfigJson, TokenizerJson } from './tokenizer/tokenizer-files.js';

/** vLLM's refusal of a prompt of `promptTokens` tokens that leaves no room to generate. */
export function promptTooLongError(limit: number, promptTokens: number): SwitchyardError {
  return invalidArgument(
    `This model's maximum context length is ${limit} tokens. However, your request has ${promptTokens} input tokens. Please reduce the length of the input messages.`,
  );
}

/** vLLM's refusal of prompt + max_tokens over the context. */
export function requestTooLongError(limit: number, promptTokens: number, maxTokens: number): SwitchyardError {
  return invalidArgument(
    `This model's maximum context length is ${limit} tokens. However, you requested ${promptTokens + maxTokens} tokens (${promptTokens} in the messages, ${maxTokens} in the completion). Please reduce the length of the messages or completion.`,
  );
}

/**
 * Refuse `text` (the whole prompt as it will be tokenized) when its byte length proves it has at
 * least `contextLength` tokens. The message is vLLM's, with "at least": the exact count is
 * precisely what is not computed. Cost: one UTF-8 length.
 */
export function refuseOverlongPromptText(text: string, contextLength: number, maxTokenBytes: number | undefined): void {
  if (maxTokenBytes === undefined) return;
  // Cheap first: a string's UTF-8 length is at most 3 bytes per UTF-16 unit.
  if (text.length * 3 <= (contextLength - 1) * maxTokenBytes) return;
  const atLeast = Math.ceil(Buffer.byteLength(text, 'utf8') / maxTokenBytes);
  if (atLeast >= contextLength) {
    throw invalidArgument(
      `This model's maximum context length is ${contextLength} tokens. However, your request has at least ${atLeast} input tokens. Please reduce the length of the input messages.`,
    );
  }
}

/** Pre-tokenizers that split text without dropping any of it (Split's "Removed" drops the match). */
function keepsEveryByte(pre: Record<string, unknown>): boolean {
  switch (pre['type']) {
    case 'ByteLevel':
    case 'Digits':
      return true;
    case 'Split':
      return pre['behavior'] !== 'Removed';
    default:
      return false;
  }
}

/**
 * The most input bytes one token can cover, or undefined when the tokenizer gives no such bound.
 * Bounded: a BPE model without normalizer, behind a ByteLevel pre-tokenizer (alone or in a
 * Sequence with splitters that keep every byte), whose vocabulary holds all 256 byte symbols (so no
 * byte is unknown or dropped), and whose added tokens strip no whitespace around them. The bound is
 * the longest vocabulary token in bytes (one byte per byte-level symbol) or added token (its UTF-8
 * content).
 */
export function tokenByteBound(
  tokenizerJson: TokenizerJson,
  tokenizerConfig: TokenizerConfigJson = {},
  /**
   * The vocabulary's tokens, when the caller holds them in something faster to iterate than the JSON
   * object (the tokenizer library's token → id map); added tokens among them change nothing, as they
   * count below by their UTF-8 length, never less than their length in UTF-16 units. Default: the JSON's keys.
   */
  vocabTokens?: Iterable<string>,
): number | undefined {
  const model = tokenizerJson.model;
  if (model.type !== 'BPE' || model.vocab === undefined || Array.isArray(model.vocab)) return undefined;
  if (tokenizerJson['normalizer'] !== null && tokenizerJson['normalizer'] !== undefined) return undefined;
  const pre = tokenizerJson['pre_tokenizer'] as Record<string, unknown> | null | undefined;
  if (pre === null || pre === undefined) return undefined;
  const steps = pre['type'] === 'Sequence' ? ((pre['pretokenizers'] as Array<Record<string, unknown>> | undefined) ?? []) : [pre];
  if (!steps.some((p) => p['type'] === 'ByteLevel') || !steps.every(keepsEveryByte)) return undefined;

  const vocab = model.vocab as Readonly<Record<string, number>>;
  for (const symbol of BYTE_SYMBOLS) if (!(symbol in vocab)) return undefined;
  let max = 1;
  for (const token of vocabTokens ?? Object.keys(vocab)) {
    // Byte-level symbols are single BMP characters, one per byte.
    if (token.length > max) max = token.length;
  }
  const stripping = (t: unknown): boolean => {
    const o = t as { lstrip?: unknown; rstrip?: unknown } | null;
    return o !== null && typeof o === 'object' && (o.lstrip === true || o.rstrip === true);
  };
  for (const t of tokenizerJson.added_tokens ?? []) {
    if (stripping(t)) return undefined;
    max = Math.max(max, Buffer.byteLength(t.content, 'utf8'));
  }
  const decoderEntries = tokenizerConfig['added_tokens_decoder'];
  if (decoderEntries !== null && typeof decoderEntries === 'object') {
    for (const t of Object.values(decoderEntries as Record<string, unknown>)) {
      if (stripping(t)) return undefined;
    }
  }
  return max;
}

/** GPT-2's byte → symbol table (`bytes_to_unicode`): printable bytes stand for themselves, the rest are shifted past U+00FF. */
const BYTE_SYMBOLS: readonly string[] = (() => {
  const out: string[] = [];
  let shifted = 0;
  for (let b = 0; b < 256; b++) {
    const printable = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
    out.push(String.fromCharCode(printable ? b : 256 + shifted++));
  }
  return out;
})();
