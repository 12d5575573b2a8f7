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
      { role: 'user', content: [{ type: 'text', text: 'a' }, { type: 'text', text: 'b' }], name: 'bob' },
      { role: 'assistant', content: '' },
    ]);
    expect(r).toMatchObject({ tools: undefined, toolChoice: 'none' });
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
      top_logprobs: 0,
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
    expect(paramOf(() => chat({ n: 0 }))).toBe('n');
    expect(paramOf(() => chat({ n: 129 }))).toBe('n');
    expect(paramOf(() => chat({ n: 1.5 }))).toBe('n');
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
    expect(paramOf(() => chat({ top_logprobs: 2 }))).toBe('top_logprobs'); // without logprobs: true
    expect(paramOf(() => chat({ top_logprobs: 21, logprobs: true }))).toBe('top_logprobs');
    expect(paramOf(() => chat({ top_logprobs: -1, logprobs: true }))).toBe('top_logprobs');
    expect(paramOf(() => chat({ model: 3 }))).toBe('model');
    expect(paramOf(() => chat({ messages: [] }))).toBe('messages');
    expect(paramOf(() => chat({ messages: [{ content: 'x' }] }))).toBe('messages[0].role');
    expect(paramOf(() => chat({ messages: [{ role: 'user', content: [{ type: 'image_url', image_url: {} }] }] }))).toBe('messages[0].content[0].type');
    expect(paramOf(() => parseChatCompletionRequest([]))).toBeNull();
  });
});

describe('parseChatCompletionRequest: tools and tool calls', () => {
  const tool = { type: 'function', function: { name: 'get_weather', description: 'Weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } } };

  it('keeps tools as sent, assistant tool_calls with parsed arguments, and tool_call_id', () => {
    const r = chat({
      tools: [tool],
      messages: [
        { role: 'user', content: 'weather?' },
        { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city": "Paris"}' } }] },
        { role: 'tool', tool_call_id: 'call_1', content: '20 C' },
      ],
    });
    expect(r.tools).toEqual([tool]);
    expect(r.toolChoice).toBe('auto');
    expect(r.messages[1]).toEqual({ role: 'assistant', content: '', tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: { city: 'Paris' } } }] });
    expect(r.messages[2]).toEqual({ role: 'tool', content: '20 C', tool_call_id: 'call_1' });
    const withReasoning = chat({ messages: [{ role: 'assistant', content: 'x', reasoning_content: 'because' }, { role: 'assistant', content: 'y', reasoning: 'so' }] });
    expect(withReasoning.messages).toEqual([
      { role: 'assistant', content: 'x', reasoning_content: 'because' },
      { role: 'assistant', content: 'y', reasoning_content: 'so' },
    ]);
  });

  it('tool_choice: none, auto, required, a named function; vLLM refusals', () => {
    expect(chat({ tools: [tool], tool_choice: 'none' }).toolChoice).toBe('none');
    expect(chat({ tool_choice: 'none' }).toolChoice).toBe('none');
    expect(chat({ tools: [tool], tool_choice: 'required' }).toolChoice).toBe('required');
    expect(chat({ tools: [], tool_choice: 'required' })).toMatchObject({ toolChoice: 'none', tools: undefined });
    expect(chat({ tools: [tool], tool_choice: { type: 'function', function: { name: 'get_weather' } } }).toolChoice).toEqual({ name: 'get_weather' });
    const refused = (fields: Record<string, unknown>): string => {
      try {
        chat(fields);
      } catch (e) {
        return `${errorParam(e)}: ${(e as Error).message}`;
      }
      return 'accepted';
    };
    expect(refused({ tool_choice: 'auto' })).toBe('tool_choice: When using `tool_choice`, `tools` must be set.');
    expect(refused({ tools: [tool], tool_choice: { type: 'function', function: { name: 'other' } } })).toBe(
      'tool_choice: The tool specified in `tool_choice` does not match any of the specified `tools`',
    );
    expect(refused({ tools: [tool], tool_choice: 'sometimes' })).toContain('Only named tools, "none", "auto" or "required" are supported.');
    expect(refused({ tools: [{ type: 'retrieval' }] })).toMatch(/^tools\[0\]\.type: /);
    expect(refused({ tools: [{ type: 'function', function: { name: '' } }] })).toMatch(/^tools\[0\]\.function\.name: /);
    expect(refused({ tools: 'x' })).toMatch(/^tools: /);
    expect(refused({ messages: [{ role: 'assistant', content: null, tool_calls: [{ id: 'c', type: 'function', function: { name: 'f', arguments: '{bad' } }] }] })).toMatch(
      /^messages\[0\]\.tool_calls\[0\]\.function\.arguments: .*not valid JSON/,
    );
    expect(refused({ messages: [{ role: 'tool', content: 'x', tool_call_id: 3 }] })).toMatch(/^messages\[0\]\.tool_call_id: /);
    expect(refused({ messages: [{ role: 'user', content: [{ type: 'input_audio', input_audio: {} }] }] })).toMatch(
      /^messages\[0\]\.content\[0\]\.type: messages\[0\]\.content\[0\]\.type "input_audio" is not supported: the model takes text only, so only 'text' parts are$/,
    );
  });
});

describe('parseCompletionRequest', () => {
  it('accepts text, token ids, and batches of either', () => {
    expect(completion({}).prompts).toEqual([{ text: 'hi' }]);
    expect(completion({ prompt: ['a'] }).prompts).toEqual([{ text: 'a' }]);
    expect(completion({ prompt: [1, 2] }).prompts).toEqual([{ tokenIds: [1, 2] }]);
    expect(completion({ prompt: [[1, 2]] }).prompts).toEqual([{ tokenIds: [1, 2] }]);
    expect(completion({ prompt: ['a', 'b'] }).prompts).toEqual([{ text: 'a' }, { text: 'b' }]);
    expect(completion({ prompt: [[1], [2, 3]] }).prompts).toEqual([{ tokenIds: [1] }, { tokenIds: [2, 3] }]);
    expect(paramOf(() => completion({ prompt: ['a', [1]] }))).toBe('prompt');
    expect(paramOf(() => completion({ prompt: [[1], []] }))).toBe('prompt');
    expect(paramOf(() => completion({ prompt: [[1], ['a']] }))).toBe('prompt');
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
    expect(completion({ logprobs: 5 })).toMatchObject({ logprobs: 5, sampling: { logprobs: true, top_logprobs: 5 } });
    expect(completion({ logprobs: 20 }).sampling.top_logprobs).toBe(20);
    expect(paramOf(() => completion({ logprobs: 21 }))).toBe('logprobs');
    expect(paramOf(() => completion({ logprobs: -1 }))).toBe('logprobs');
    expect(paramOf(() => completion({ logprobs: true }))).toBe('logprobs');
    expect(paramOf(() => completion({ echo: true, logprobs: 0 }))).toBe('echo');
    expect(paramOf(() => completion({ best_of: 2 }))).toBe('best_of');
    expect(paramOf(() => completion({ best_of: 0 }))).toBe('best_of');
    expect(completion({ best_of: 1, n: 2 }).n).toBe(2);
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

describe('n, top_logprobs and batched prompts', () => {
  it('n defaults to 1 and takes 1..128 on both endpoints', () => {
    expect(parseChatCompletionRequest({ messages: [{ role: 'user', content: 'x' }] }).n).toBe(1);
    expect(parseChatCompletionRequest({ messages: [{ role: 'user', content: 'x' }], n: 128 }).n).toBe(128);
    expect(parseCompletionRequest({ prompt: 'x', n: 3 }).n).toBe(3);
  });

  it('chat top_logprobs goes into the sampling only with logprobs', () => {
    const r = parseChatCompletionRequest({ messages: [{ role: 'user', content: 'x' }], logprobs: true, top_logprobs: 20 });
    expect(r.sampling).toMatchObject({ logprobs: true, top_logprobs: 20 });
    expect(r.samplingFields).toMatchObject({ logprobs: true, top_logprobs: 20 });
    const none = parseChatCompletionRequest({ messages: [{ role: 'user', content: 'x' }], logprobs: false, top_logprobs: 0 });
    expect(none.sampling).toMatchObject({ logprobs: false, top_logprobs: 0 });
  });

  it('bounds prompts × n', () => {
    const prompts = Array.from({ length: 9 }, () => 'p');
    expect(parseCompletionRequest({ prompt: prompts, n: 113 }).prompts).toHaveLength(9);
    let err: unknown;
    try {
      parseCompletionRequest({ prompt: prompts, n: 114 });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(InvalidParamError);
    expect((err as InvalidParamError).param).toBe('prompt');
  });
});
