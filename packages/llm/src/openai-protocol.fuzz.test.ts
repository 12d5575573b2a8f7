/**
 * Fuzz properties of the OpenAI decode edge (`decodeJsonBody`, `parseChatCompletionRequest`,
 * `parseCompletionRequest`, and `compileSamplingParams` behind them): any body is a parsed request
 * or an invalid_argument (naming the field when it is one), within the time bound.
 */
import { describe, expect, it } from 'vitest';
import { DEEP_NESTING, eachNodeReplaced, fc, fuzz, hostileNumber, jsonText, mutatedJson, nestedText, parsesOrRefuses, type JsonValue } from '@switchyard/testing/fuzz';
import { decodeJsonBody, errorParam, parseChatCompletionRequest, parseCompletionRequest } from './openai-protocol.js';
import { compileSamplingParams } from './sampling-params.js';

const enc = new TextEncoder();

const sampling = fc.record(
  {
    model: fc.constantFrom('tiny', 'mock'),
    temperature: fc.double({ min: 0, max: 2, noNaN: true }),
    top_p: fc.double({ min: 0.01, max: 1, noNaN: true }),
    top_k: fc.integer({ min: -1, max: 50 }),
    min_p: fc.double({ min: 0, max: 1, noNaN: true }),
    seed: fc.integer(),
    stop: fc.oneof(fc.string({ minLength: 1, maxLength: 4 }), fc.array(fc.string({ minLength: 1, maxLength: 4 }), { maxLength: 3 })),
    stop_token_ids: fc.array(fc.nat(1000), { maxLength: 3 }),
    ignore_eos: fc.boolean(),
    frequency_penalty: fc.double({ min: -2, max: 2, noNaN: true }),
    presence_penalty: fc.double({ min: -2, max: 2, noNaN: true }),
    repetition_penalty: fc.double({ min: 0.1, max: 2, noNaN: true }),
    n: fc.constant(1),
    stream: fc.constant(true),
    stream_options: fc.record({ include_usage: fc.boolean() }),
    add_special_tokens: fc.boolean(),
  },
  { requiredKeys: ['stream'] }, // stream_options needs it
);

const message = fc.record({
  role: fc.constantFrom('system', 'user', 'assistant'),
  content: fc.oneof(fc.string({ maxLength: 8 }), fc.array(fc.record({ type: fc.constant('text'), text: fc.string({ maxLength: 6 }) }), { maxLength: 2 }), fc.constant(null)),
});

const chatBody = fc
  .tuple(sampling, fc.array(message, { minLength: 1, maxLength: 3 }), fc.integer({ min: 1, max: 64 }), fc.boolean())
  .map(([s, messages, max, logprobs]) => ({ ...s, messages, max_completion_tokens: max, logprobs, top_logprobs: 0, chat_template_kwargs: { enable_thinking: false } }) as JsonValue);

const completionBody = fc
  .tuple(sampling, fc.oneof(fc.string({ maxLength: 8 }), fc.array(fc.nat(1000), { minLength: 1, maxLength: 4 }), fc.tuple(fc.string({ maxLength: 4 }))), fc.integer({ min: 1, max: 64 }), fc.boolean())
  .map(([s, prompt, max, echo]) => ({ ...s, prompt, max_tokens: max, echo, best_of: 1 }) as JsonValue);

/** A parse either succeeds or refuses as invalid_argument; a refusal names a param when it is about one. */
function check(parse: () => unknown): void {
  const r = parsesOrRefuses(parse);
  if (!r.ok) expect(r.error.message.length).toBeGreaterThan(0);
}

describe('OpenAI request decoding (fuzz)', () => {
  it('decodes any bytes as JSON or refuses them', () => {
    fuzz(fc.uint8Array({ maxLength: 64 }), (bytes) => check(() => decodeJsonBody(bytes)));
  });

  it('parses valid chat and completion requests', () => {
    fuzz(fc.tuple(chatBody, completionBody), ([chat, completion]) => {
      const c = parseChatCompletionRequest(decodeJsonBody(enc.encode(JSON.stringify(chat))));
      expect(c.messages.length).toBeGreaterThan(0);
      const p = parseCompletionRequest(decodeJsonBody(JSON.stringify(completion)));
      expect(p.sampling.max_tokens).toBe((completion as { max_tokens: number }).max_tokens);
    });
  });

  it('parses or refuses any JSON value as a chat or completion request', () => {
    fuzz(fc.jsonValue({ maxDepth: 4 }), (v) => {
      check(() => parseChatCompletionRequest(v));
      check(() => parseCompletionRequest(v));
    });
  });

  it('parses or refuses chat and completion requests with one field corrupted, naming the field', () => {
    fuzz(fc.tuple(mutatedJson(chatBody), mutatedJson(completionBody)), ([chat, completion]) => {
      check(() => parseChatCompletionRequest(decodeJsonBody(jsonText(chat))));
      check(() => parseCompletionRequest(decodeJsonBody(jsonText(completion))));
    });
  });

  it('refuses chat and completion requests with any one field nested 10^5 deep, as a body or as a value', () => {
    const chat: JsonValue = { model: 'm', messages: [{ role: 'user', content: [{ type: 'text', text: 'hi' }] }], temperature: 0.5, stop: ['a'], stream: true, stream_options: { include_usage: true }, n: 1, chat_template_kwargs: { k: 1 } };
    const completion: JsonValue = { model: 'm', prompt: [1, 2], max_tokens: 4, top_p: 0.9, seed: 1, stop_token_ids: [1], logprobs: 0, echo: false };
    for (const [valid, parse] of [[chat, parseChatCompletionRequest], [completion, parseCompletionRequest]] as const) {
      for (const { path, text } of eachNodeReplaced(valid, nestedText(DEEP_NESTING))) {
        expect(parsesOrRefuses(() => parse(decodeJsonBody(text))).ok, path).toBe(false);
        // The value-level parsers are total too, whoever parsed the JSON.
        parsesOrRefuses(() => parse(JSON.parse(text)));
      }
    }
  });

  it('names the refused sampling field', () => {
    const fields = fc.constantFrom('temperature', 'top_p', 'top_k', 'min_p', 'seed', 'frequency_penalty', 'presence_penalty', 'repetition_penalty', 'max_tokens');
    fuzz(fc.tuple(fields, fc.oneof(hostileNumber(), fc.constantFrom<JsonValue>('1', true, [], {}))), ([field, value]) => {
      const r = parsesOrRefuses(() => parseCompletionRequest({ prompt: 'x', [field]: value }));
      if (!r.ok) expect(errorParam(r.error)).toBe(field);
      else expect(() => compileSamplingParams({ [field]: value })).not.toThrow();
    });
  });
});
