import { describe, expect, it } from 'vitest';
import { isSwitchyardError } from '@switchyard/common';
import {
  DEFAULT_COMPLETION_MAX_TOKENS,
  InvalidParamError,
  decodeJsonBody,
  jsonNestingOverflow,
  errorParam,
  parseChatCompletionRequest,
  parseCompletionRequest,
} from './openai-protocol.js';

const chat = (fields: Record<string, unknown>) => parseChatCompletionRequest({ model: 'm', messages: [{ role: 'user', content: 'hi' }], ...fields });
const completion = (fields: Record<string, unknown>) => parseCompletionRequest({ model: 'm', prompt: 'hi', ...fields });

/** The `param` of the InvalidParamError `f` throws (fails if it throws anything else). */
function paramOf(f: () => unknown): string | null {
  try {
    f();
  } catch (e) {
    expect(isSwitchyardError(e) && e.code === 'invalid_argument').toBe(true);
    return errorParam(e);
  }
  throw new Error('expected a refusal');
}

describe('parseChatCompletionRequest', () => {
  it('takes string and text-part contents, defaults and ignores unknown fields', () => {
    const r = parseChatCompletionRequest({
      model: 'm',
      messages: [
        { role: 'system', content: 'sys' },
        { role: 'user', content: [{ type: 'text', text: 'a' }, { type: 'text', text: 'b' }], name: 'bob' },
        { role: 'assistant', content: null, tool_calls: [] },
      ],
      user: 'u',
      some_future_field: { x: 1 },
    });
    expect(r.messages).toEqual([
      { role: 'system', content: 'sys' },
      { role: 'user', content: 'a\nb', name: 'bob' },
      { role: 'assistant', content: '' },
    ]);
    expect(r).toMatchObject({ model: 'm', stream: false, includeUsage: false, logprobs: false, addSpecialTokens: false, chatTemplateKwargs: {} });
    expect(r.sampling).toMatchObject({ temperature: 1, max_tokens: null, stop: [], logprobs: false });
  });

  it('passes sampling fields through by their OpenAI / vLLM names; max_completion_tokens wins', () => {
    const r = chat({
      temperature: 0.5,
      top_p: 0.9,
      top_k: 5,
      min_p: 0.1,
      seed: 7,
      stop: 'x',
      stop_token_ids: [3],
      ignore_eos: true,
      frequency_penalty: 1,
      presence_penalty: -1,
      repetition_penalty: 1.2,
      logit_bias: { '5': 200, '0007': -3.5 },
      min_tokens: 4,
      skip_special_tokens: false,
      spaces_between_special_tokens: false,
      max_tokens: 10,
      max_completion_tokens: 20,
      n: 1,
      logprobs: true,
      top_logprobs: 0,
      stream: true,
      stream_options: { include_usage: true },
    });
    expect(r.sampling).toEqual({
      temperature: 0.5,
      top_p: 0.9,
      top_k: 5,
      min_p: 0.1,
      seed: 7,
      stop: ['x'],
      stop_token_ids: [3],
      ignore_eos: true,
      frequency_penalty: 1,
      presence_penalty: -1,
      repetition_penalty: 1.2,
      max_tokens: 20,
      default_max_tokens: null,
      logprobs: true,
      logit_bias: { '5': 100, '7': -3.5 },
      min_tokens: 4,
      skip_special_tokens: false,
      spaces_between_special_tokens: false,
      guided_decoding: null,
    });
    expect(r).toMatchObject({ stream: true, includeUsage: true, logprobs: true });
    expect(chat({ max_tokens: 10, max_completion_tokens: null }).sampling.max_tokens).toBe(10);
  });

  it('maps response_format to guided decoding, and names it when refused', () => {
    expect(chat({ response_format: { type: 'json_object' } }).sampling.guided_decoding).toEqual({ kind: 'json' });
    expect(chat({ response_format: { type: 'text' } }).sampling.guided_decoding).toBeNull();
    const schema = { type: 'object', properties: { a: { type: 'integer' } } };
    const r = chat({ response_format: { type: 'json_schema', json_schema: { name: 'a', schema } } });
    expect(r.samplingFields.guided_decoding).toEqual({ kind: 'json_schema', schema });
    expect(paramOf(() => chat({ response_format: { type: 'json_schema', json_schema: { name: 'a', schema: { type: 'string', format: 'uri' } } } }))).toBe('response_format');
    expect(paramOf(() => chat({ response_format: 'json' }))).toBe('response_format');
    expect(paramOf(() => chat({ response_format: { type: 'json_object' }, ignore_eos: true }))).toBe('response_format');
  });

  it('names the refused field in `param`', () => {
    expect(paramOf(() => chat({ temperature: -0.1 }))).toBe('temperature');
    expect(paramOf(() => chat({ temperature: 'hot' }))).toBe('temperature');
    expect(paramOf(() => chat({ top_k: 1.5 }))).toBe('top_k');
    expect(paramOf(() => chat({ stop: [1] }))).toBe('stop');
    expect(paramOf(() => chat({ repetition_penalty: 0 }))).toBe('repetition_penalty');
    expect(paramOf(() => chat({ max_completion_tokens: 0 }))).toBe('max_completion_tokens');
    expect(paramOf(() => chat({ max_tokens: 2.5 }))).toBe('max_tokens');
    expect(paramOf(() => chat({ n: 2 }))).toBe('n');
    expect(paramOf(() => chat({ logit_bias: { abc: 1 } }))).toBe('logit_bias');
    expect(paramOf(() => chat({ logit_bias: { '-1': 1 } }))).toBe('logit_bias');
    expect(paramOf(() => chat({ logit_bias: { '3': 'up' } }))).toBe('logit_bias');
    expect(paramOf(() => chat({ logit_bias: [1] }))).toBe('logit_bias');
    expect(paramOf(() => chat({ min_tokens: -1 }))).toBe('min_tokens');
    expect(paramOf(() => chat({ min_tokens: 5, max_tokens: 4 }))).toBe('min_tokens');
    expect(paramOf(() => chat({ skip_special_tokens: 'no' }))).toBe('skip_special_tokens');
    expect(paramOf(() => chat({ spaces_between_special_tokens: 0 }))).toBe('spaces_between_special_tokens');
    expect(paramOf(() => chat({ stream: 'yes' }))).toBe('stream');
    expect(paramOf(() => chat({ stream_options: { include_usage: true } }))).toBe('stream_options');
    expect(paramOf(() => chat({ stream: true, stream_options: { include_usage: 1 } }))).toBe('stream_options.include_usage');
    expect(paramOf(() => chat({ top_logprobs: 2 }))).toBe('top_logprobs');
    expect(paramOf(() => chat({ model: 3 }))).toBe('model');
    expect(paramOf(() => chat({ messages: [] }))).toBe('messages');
    expect(paramOf(() => chat({ messages: [{ content: 'x' }] }))).toBe('messages[0].role');
    expect(paramOf(() => chat({ messages: [{ role: 'user', content: [{ type: 'image_url', image_url: {} }] }] }))).toBe('messages[0].content[0].type');
    expect(paramOf(() => parseChatCompletionRequest([]))).toBeNull();
  });
});

describe('parseCompletionRequest', () => {
  it('accepts text, one-element text lists, token ids and one-element id lists', () => {
    expect(completion({}).prompt).toEqual({ text: 'hi' });
    expect(completion({ prompt: ['a'] }).prompt).toEqual({ text: 'a' });
    expect(completion({ prompt: [1, 2] }).prompt).toEqual({ tokenIds: [1, 2] });
    expect(completion({ prompt: [[1, 2]] }).prompt).toEqual({ tokenIds: [1, 2] });
    expect(paramOf(() => completion({ prompt: ['a', 'b'] }))).toBe('prompt');
    expect(paramOf(() => completion({ prompt: [[1], [2]] }))).toBe('prompt');
    expect(paramOf(() => completion({ prompt: [] }))).toBe('prompt');
    expect(paramOf(() => completion({ prompt: undefined }))).toBe('prompt');
  });

  it('defaults max_tokens to 16 and add_special_tokens to true; logprobs 0 and echo', () => {
    const r = completion({});
    expect(r.sampling.max_tokens).toBe(DEFAULT_COMPLETION_MAX_TOKENS);
    expect(r).toMatchObject({ addSpecialTokens: true, logprobs: null, echo: false });
    expect(completion({ max_tokens: null }).sampling.max_tokens).toBe(16);
    expect(completion({ logprobs: 0 })).toMatchObject({ logprobs: 0, sampling: { logprobs: true } });
    expect(completion({ echo: true }).echo).toBe(true);
    expect(paramOf(() => completion({ logprobs: 2 }))).toBe('logprobs');
    expect(paramOf(() => completion({ logprobs: true }))).toBe('logprobs');
    expect(paramOf(() => completion({ echo: true, logprobs: 0 }))).toBe('echo');
    expect(paramOf(() => completion({ best_of: 2 }))).toBe('best_of');
  });
});

describe('decodeJsonBody', () => {
  it('parses JSON and refuses malformed bodies with invalid_argument', () => {
    expect(decodeJsonBody(new TextEncoder().encode('{"a":1}'))).toEqual({ a: 1 });
    expect(() => decodeJsonBody('{')).toThrow(/not valid JSON/);
    expect(errorParam(new InvalidParamError('x', 'm'))).toBe('x');
  });

  it('refuses bodies nested past the bound of client JSON before parsing them', () => {
    const deep = '{"a":'.repeat(200) + '1' + '}'.repeat(200);
    let error: unknown;
    try {
      decodeJsonBody(`{"chat_template_kwargs":${deep}}`);
    } catch (e) {
      error = e;
    }
    expect(error).toMatchObject({ code: 'invalid_argument', message: 'the request body is nested deeper than 128 arrays or objects (at position 659)' });
    expect(decodeJsonBody(`{"x":${'['.repeat(127)}${']'.repeat(127)}}`)).toBeTruthy();
  });

  it('refuses bodies that are not UTF-8 instead of decoding them with U+FFFD', () => {
    const body = Uint8Array.from([...new TextEncoder().encode('{"prompt":"'), 0x61, 0xff, ...new TextEncoder().encode('"}')]);
    expect(() => decodeJsonBody(body)).toThrow('the request body is not valid JSON: it is not valid UTF-8');
    expect(decodeJsonBody(new TextEncoder().encode('{"prompt":"é"}'))).toEqual({ prompt: 'é' });
  });

  it('jsonNestingOverflow finds the first opener past the bound; brackets in strings do not count', () => {
    expect(jsonNestingOverflow('['.repeat(128) + ']'.repeat(128))).toBe(-1);
    expect(jsonNestingOverflow('['.repeat(129) + ']'.repeat(129))).toBe(128);
    expect(jsonNestingOverflow('{"a":{"b":[1]}}', 2)).toBe(10);
    expect(jsonNestingOverflow('[[],[],[[]]]', 2)).toBe(8);
    expect(jsonNestingOverflow(`["${'['.repeat(300)}"]`)).toBe(-1);
    expect(jsonNestingOverflow(`["\\"${'{'.repeat(300)}", "\\\\"]`)).toBe(-1);
    expect(jsonNestingOverflow(`["\\\\", [[1]]]`, 2)).toBe(8);
  });
});
