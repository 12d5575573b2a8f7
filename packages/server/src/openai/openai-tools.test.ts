/**
 * Tool calls, reasoning and content parts on the OpenAI door, driven by the official openai SDK over
 * scripted endpoints (the tiny model's tokenizer; the reply is a script): templates get `tools`, the
 * history's tool calls and text parts as transformers gives them; outputs are parsed per model
 * (`outputParsing` on the card) or per door (`outputParsing` flags), streamed and not, alike.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import OpenAI, { type APIError } from 'openai';
import { ChatTemplate, type GenerateRequest, type OutputParsingConfig } from '@switchyard/llm';
import { ServerSettings } from '../settings.js';
import { SharedMemoryManager } from '../shared-memory.js';
import { FakeEngine } from '../test-support/fake-engine.js';
import { FakeLlmEndpoint, tinyTokenizer } from '../test-support/fake-llm-endpoint.js';
import { type HttpFrontDoor, createHttpServer } from '../http/http-server.js';

/** A Qwen-like template: tools in the system turn, tool calls and tool results in the history. */
const TOOL_TEMPLATE = new ChatTemplate(
  `{%- if tools %}<|im_start|>system\n<tools>{% for t in tools %}{{ t | tojson }}{% endfor %}</tools><|im_end|>\n{% endif %}` +
    `{%- for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}` +
    `{%- if m.tool_calls %}{% for c in m.tool_calls %}<tool_call>{"name": "{{ c.function.name }}", "arguments": {{ c.function.arguments | tojson }}}</tool_call>{% endfor %}{% endif %}` +
    `{%- if m.tool_call_id %} [{{ m.tool_call_id }}]{% endif %}<|im_end|>\n{% endfor %}` +
    `{%- if add_generation_prompt %}<|im_start|>assistant\n{% endif %}`,
);
/** A Gemma-3-like template: it iterates over content parts when content is a list. */
const PARTS_TEMPLATE = new ChatTemplate(
  `{% for m in messages %}{{ m.role }}:{% if m.content is string %}{{ m.content }}{% else %}{% for item in m.content %}[{{ item.type }}|{{ item.text }}]{% endfor %}{% endif %}\n{% endfor %}`,
);

const HERMES = 'Let me check.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "unit": "c"}}\n</tool_call>\n<tool_call>\n{"name": "get_time", "arguments": {"tz": "CET"}}\n</tool_call>';
const THINKING = '<think>\nThe user wants the weather.\n</think>\n\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>';
const tools: OpenAI.ChatCompletionTool[] = [
  { type: 'function', function: { name: 'get_weather', description: 'Current weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } } },
  { type: 'function', function: { name: 'get_time', parameters: { type: 'object', properties: {} } } },
];
const user: OpenAI.ChatCompletionMessageParam[] = [{ role: 'user', content: 'Weather in Paris?' }];

function endpoint(name: string, reply: string, outputParsing?: OutputParsingConfig, chatTemplate: ChatTemplate = TOOL_TEMPLATE): FakeLlmEndpoint {
  return new FakeLlmEndpoint({ name, reply: () => reply, chatTemplate, ...(outputParsing === undefined ? {} : { outputParsing }) });
}

describe('OpenAI door: tools, tool calls, reasoning, content parts (openai SDK)', () => {
  const engine = new FakeEngine();
  const hermes = endpoint('hermes', HERMES, { toolCallParser: 'hermes' });
  const llama = endpoint('llama', '<|python_tag|>{"name": "get_weather", "parameters": {"city": "Paris"}}', { toolCallParser: 'llama3_json' });
  const pythonic = endpoint('pythonic', '[get_weather(city="Paris"), get_time(tz=\'CET\')]', { toolCallParser: 'pythonic' });
  const mistral = endpoint('mistral', 'On it.[TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}', { toolCallParser: 'mistral' });
  const thinker = endpoint('thinker', THINKING, { toolCallParser: 'hermes', reasoningParser: 'qwen3' });
  const plain = endpoint('plain', 'Paris is sunny.', { toolCallParser: 'hermes' });
  const noParser = endpoint('no-parser', HERMES);
  const parts = endpoint('parts', 'ok', undefined, PARTS_TEMPLATE);
  // No parser at all; it answers what guided decoding would let a model write (a list of calls, or one call's arguments).
  const forced = new FakeLlmEndpoint({
    name: 'forced',
    chatTemplate: TOOL_TEMPLATE,
    reply: (r) => {
      const guided = r.sampling.guided_decoding;
      const schema = guided?.kind === 'json_schema' ? (guided.schema as { type?: string }) : undefined;
      return schema?.type === 'array' ? '[{"name": "get_weather", "parameters": {"city": "Paris"}}, {"parameters": {}, "name": "get_time"}]' : '{"city":"Paris"}';
    },
  });
  // A reasoning model under a forced choice: its engine leaves the reasoning free and constrains what follows `</think>`.
  const forcedThinker = new FakeLlmEndpoint({
    name: 'forced-thinker',
    chatTemplate: TOOL_TEMPLATE,
    outputParsing: { reasoningParser: 'qwen3' },
    reply: (r) => {
      const guided = r.sampling.guided_decoding;
      const schema = guided?.kind === 'json_schema' ? (guided.schema as { type?: string }) : undefined;
      return '<think>\nPick a tool.\n</think>\n\n' + (schema?.type === 'array' ? '[{"name": "get_time", "parameters": {}}]' : '{"city": "Paris"}');
    },
  });
  for (const e of [hermes, llama, pythonic, mistral, thinker, plain, noParser, parts, forced, forcedThinker]) engine.llms.set(e.card.name, e);
  let door: HttpFrontDoor;
  let client: OpenAI;
  const { tokenizer } = tinyTokenizer();
  const promptOf = (r: GenerateRequest): string => tokenizer.decode([...r.promptTokenIds]);

  beforeAll(async () => {
    door = createHttpServer({ engine, shm: new SharedMemoryManager({ enabled: false }), settings: new ServerSettings(), port: 0, host: '127.0.0.1' });
    client = new OpenAI({ baseURL: `http://127.0.0.1:${await door.listen()}/v1`, apiKey: 'x', maxRetries: 0 });
  });
  afterAll(async () => {
    await door.close();
  });

  /** A streamed chat: every chunk, and the message the SDK-style accumulation gives. */
  async function streamed(params: OpenAI.ChatCompletionCreateParamsStreaming) {
    const chunks: OpenAI.ChatCompletionChunk[] = [];
    for await (const c of await client.chat.completions.create(params)) chunks.push(c);
    let content = '';
    let reasoning = '';
    const calls: Array<{ id: string; type: string; function: { name: string; arguments: string } }> = [];
    for (const c of chunks) {
      const d = c.choices[0]?.delta as (OpenAI.ChatCompletionChunk.Choice.Delta & { reasoning_content?: string }) | undefined;
      if (d === undefined) continue;
      content += d.content ?? '';
      reasoning += d.reasoning_content ?? '';
      for (const t of d.tool_calls ?? []) {
        if (t.id !== undefined) calls[t.index] = { id: t.id, type: t.type!, function: { name: t.function!.name!, arguments: '' } };
        calls[t.index]!.function.arguments += t.function?.arguments ?? '';
      }
    }
    return { chunks, content, reasoning, calls, finish: chunks.at(-1)!.choices[0]?.finish_reason };
  }

  it('hermes: content before the calls, every call with a chatcmpl-tool id, finish_reason tool_calls', async () => {
    const r = await client.chat.completions.create({ model: 'hermes', messages: user, tools });
    const choice = r.choices[0]!;
    expect(choice.finish_reason).toBe('tool_calls');
    expect(choice.message.content).toBe('Let me check.\n');
    expect(choice.message.tool_calls).toEqual([
      { id: expect.stringMatching(/^chatcmpl-tool-[0-9a-f]{32}$/), type: 'function', function: { name: 'get_weather', arguments: '{"city": "Paris", "unit": "c"}' } },
      { id: expect.stringMatching(/^chatcmpl-tool-[0-9a-f]{32}$/), type: 'function', function: { name: 'get_time', arguments: '{"tz": "CET"}' } },
    ]);
    // The template got the tools as sent.
    expect(promptOf(hermes.requests.at(-1)!)).toContain(
      '<tools>{"type": "function", "function": {"name": "get_weather", "description": "Current weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}' +
        '{"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {}}}}</tools>',
    );
  });

  it('hermes streamed token by token: OpenAI delta shape, no marker text, the same calls as the whole response', async () => {
    const s = await streamed({ model: 'hermes', messages: user, tools, stream: true });
    expect(s.finish).toBe('tool_calls');
    expect(s.content).toBe('Let me check.\n');
    expect(s.calls.map((c) => c.function)).toEqual([
      { name: 'get_weather', arguments: '{"city": "Paris", "unit": "c"}' },
      { name: 'get_time', arguments: '{"tz": "CET"}' },
    ]);
    const deltas = s.chunks.flatMap((c) => c.choices[0]?.delta.tool_calls ?? []);
    // First delta of a call: index, id, type, name, empty arguments; then argument pieces only.
    expect(deltas[0]).toEqual({ index: 0, id: s.calls[0]!.id, type: 'function', function: { name: 'get_weather', arguments: '' } });
    const pieces = deltas.filter((d) => d.index === 0 && d.id === undefined);
    expect(pieces.length).toBeGreaterThan(3);
    for (const p of pieces) expect(Object.keys(p).sort()).toEqual(['function', 'index']);
    expect(s.chunks.some((c) => (c.choices[0]?.delta.content ?? '').includes('<'))).toBe(false);
  });

  it('llama3_json and pythonic models: their calls, content null', async () => {
    for (const [model, calls] of [
      ['llama', [{ name: 'get_weather', arguments: '{"city": "Paris"}' }]],
      ['pythonic', [{ name: 'get_weather', arguments: '{"city": "Paris"}' }, { name: 'get_time', arguments: '{"tz": "CET"}' }]],
    ] as const) {
      const r = await client.chat.completions.create({ model, messages: user, tools });
      expect(r.choices[0]!.message.content, model).toBeNull();
      expect(r.choices[0]!.message.tool_calls!.map((c) => (c as OpenAI.ChatCompletionMessageFunctionToolCall).function), model).toEqual(calls);
      const s = await streamed({ model, messages: user, tools, stream: true });
      expect(s.calls.map((c) => c.function), model).toEqual(calls);
      expect(s.content, model).toBe('');
    }
  });

  it("mistral (v13 form): the call, content before the marker, Mistral's 9-character ids", async () => {
    const r = await client.chat.completions.create({ model: 'mistral', messages: user, tools });
    expect(r.choices[0]!.message.content).toBe('On it.');
    const call = r.choices[0]!.message.tool_calls![0] as OpenAI.ChatCompletionMessageFunctionToolCall;
    expect(call.function).toEqual({ name: 'get_weather', arguments: '{"city": "Paris"}' });
    expect(call.id).toMatch(/^[A-Za-z0-9]{9}$/);
    const s = await streamed({ model: 'mistral', messages: user, tools, stream: true });
    expect(s.calls.map((c) => c.function)).toEqual([{ name: 'get_weather', arguments: '{"city": "Paris"}' }]);
    expect(s.calls[0]!.id).toMatch(/^[A-Za-z0-9]{9}$/);
  });

  it('qwen3 reasoning: reasoning_content apart, streamed as its own delta, tool calls after it', async () => {
    const r = await client.chat.completions.create({ model: 'thinker', messages: user, tools });
    const message = r.choices[0]!.message as OpenAI.ChatCompletionMessage & { reasoning_content?: string };
    expect(message.reasoning_content).toBe('\nThe user wants the weather.\n');
    expect(message.content).toBe('\n\n');
    expect(message.tool_calls).toHaveLength(1);
    const s = await streamed({ model: 'thinker', messages: user, tools, stream: true });
    expect(s.reasoning).toBe('\nThe user wants the weather.\n');
    expect(s.calls.map((c) => c.function.name)).toEqual(['get_weather']);
    // tool_choice none: no call parsing, the reasoning parser still runs.
    const none = await client.chat.completions.create({ model: 'thinker', messages: user, tools, tool_choice: 'none' });
    expect(none.choices[0]!.finish_reason).toBe('stop');
    expect(none.choices[0]!.message.content).toContain('<tool_call>');
    expect((none.choices[0]!.message as { reasoning_content?: string }).reasoning_content).toBe('\nThe user wants the weather.\n');
  });

  it('the history: assistant tool_calls reach the template with arguments as a mapping, tool results with tool_call_id', async () => {
    await client.chat.completions.create({
      model: 'plain',
      tools,
      messages: [
        ...user,
        { role: 'assistant', content: null, tool_calls: [{ id: 'call_7', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }] },
        { role: 'tool', tool_call_id: 'call_7', content: '21 C' },
      ],
    });
    const prompt = promptOf(plain.requests.at(-1)!);
    expect(prompt).toContain('<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>');
    expect(prompt).toContain('<|im_start|>tool\n21 C [call_7]<|im_end|>');
  });

  it('tool_choice: auto needs a parser (vLLM message)', async () => {
    const err = await client.chat.completions.create({ model: 'no-parser', messages: user, tools }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.BadRequestError);
    expect((err as APIError).message).toBe('400 "auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set');
    expect((err as APIError).param).toBe('tool_choice');
    // Without tools the same model serves plain chat.
    expect((await client.chat.completions.create({ model: 'no-parser', messages: user })).choices[0]!.message.content).toBe(HERMES);
  });

  it('tool_choice required and named: the schema rides on the request as guided decoding, the output is read with no parser', async () => {
    const required = await client.chat.completions.create({ model: 'forced', messages: user, tools, tool_choice: 'required' });
    expect(forced.requests.at(-1)!.sampling.guided_decoding).toEqual({ kind: 'json_schema', schema: expect.objectContaining({ type: 'array', minItems: 1 }) });
    const both = [
      { id: expect.stringMatching(/^chatcmpl-tool-[0-9a-f]{32}$/), type: 'function', function: { name: 'get_weather', arguments: '{"city": "Paris"}' } },
      { id: expect.any(String), type: 'function', function: { name: 'get_time', arguments: '{}' } },
    ];
    expect(required.choices[0]).toMatchObject({ finish_reason: 'tool_calls', message: { content: '', tool_calls: both } });
    expect(await streamed({ model: 'forced', messages: user, tools, tool_choice: 'required', stream: true })).toMatchObject({ content: '', calls: both, finish: 'tool_calls' });

    const choice = { type: 'function', function: { name: 'get_weather' } } as const;
    const named = await client.chat.completions.create({ model: 'forced', messages: user, tools, tool_choice: choice });
    expect(forced.requests.at(-1)!.sampling.guided_decoding).toEqual({ kind: 'json_schema', schema: (tools[0] as OpenAI.ChatCompletionFunctionTool).function.parameters });
    const one = [{ id: expect.any(String), type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }];
    expect(named.choices[0]).toMatchObject({ finish_reason: 'stop', message: { content: '', tool_calls: one } });
    expect(await streamed({ model: 'forced', messages: user, tools, tool_choice: choice, stream: true })).toMatchObject({ content: '', calls: one, finish: 'stop' });
  });

  it("a forced choice on a model with its own reasoning parser: reasoning_content apart, the calls read from the content after it", async () => {
    const required = await client.chat.completions.create({ model: 'forced-thinker', messages: user, tools, tool_choice: 'required' });
    const time = [{ id: expect.any(String), type: 'function', function: { name: 'get_time', arguments: '{}' } }];
    expect(required.choices[0]).toMatchObject({ finish_reason: 'tool_calls', message: { content: '', reasoning_content: '\nPick a tool.\n', tool_calls: time } });
    expect(await streamed({ model: 'forced-thinker', messages: user, tools, tool_choice: 'required', stream: true })).toMatchObject({ content: '', reasoning: '\nPick a tool.\n', calls: time, finish: 'tool_calls' });

    const choice = { type: 'function', function: { name: 'get_weather' } } as const;
    const named = await client.chat.completions.create({ model: 'forced-thinker', messages: user, tools, tool_choice: choice });
    // The arguments are the content as generated (vLLM), the newlines after `</think>` included.
    const weather = [{ id: expect.any(String), type: 'function', function: { name: 'get_weather', arguments: '\n\n{"city": "Paris"}' } }];
    expect(named.choices[0]).toMatchObject({ finish_reason: 'stop', message: { content: '', reasoning_content: '\nPick a tool.\n', tool_calls: weather } });
    expect(await streamed({ model: 'forced-thinker', messages: user, tools, tool_choice: choice, stream: true })).toMatchObject({ content: '', reasoning: '\nPick a tool.\n', calls: weather, finish: 'stop' });
  });

  it('a model without calls in its output answers content and finish_reason stop, tools or not', async () => {
    const r = await client.chat.completions.create({ model: 'plain', messages: user, tools });
    expect(r.choices[0]).toMatchObject({ finish_reason: 'stop', message: { content: 'Paris is sunny.' } });
    expect(r.choices[0]!.message.tool_calls).toBeUndefined();
  });

  it('content parts: a template that iterates over them gets the list; others get them joined; non-text parts are 400', async () => {
    const content: OpenAI.ChatCompletionContentPartText[] = [
      { type: 'text', text: 'a' },
      { type: 'text', text: 'b' },
    ];
    await client.chat.completions.create({ model: 'parts', messages: [{ role: 'user', content }, { role: 'assistant', content: 'plain' }] });
    expect(promptOf(parts.requests.at(-1)!)).toBe('user:[text|a][text|b]assistant:plain');
    await client.chat.completions.create({ model: 'plain', messages: [{ role: 'user', content }] });
    expect(promptOf(plain.requests.at(-1)!)).toContain('<|im_start|>user\na\nb<|im_end|>');
    const err = await client.chat.completions
      .create({ model: 'parts', messages: [{ role: 'user', content: [{ type: 'text', text: 'x' }, { type: 'image_url', image_url: { url: 'data:,' } }] }] })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.BadRequestError);
    expect((err as APIError).param).toBe('messages[0].content[1].type');
    expect((err as APIError).message).toContain('"image_url" is not supported: the model takes text only');
  });
});

describe('OpenAI door: parsers from the door flags (--enable-auto-tool-choice --tool-call-parser --reasoning-parser)', () => {
  const engine = new FakeEngine();
  const model = endpoint('m', THINKING);
  const own = endpoint('own', 'I think </think>answer', { reasoningParser: 'deepseek_r1' });
  // What guided decoding lets a model without its own reasoning parser write: the call from the first token.
  const forced = endpoint('forced', '[{"name": "get_time", "parameters": {}}]');
  engine.llms.set('m', model);
  engine.llms.set('own', own);
  engine.llms.set('forced', forced);
  let door: HttpFrontDoor;
  let client: OpenAI;
  beforeAll(async () => {
    door = createHttpServer({
      engine,
      shm: new SharedMemoryManager({ enabled: false }),
      settings: new ServerSettings(),
      port: 0,
      host: '127.0.0.1',
      outputParsing: { enableAutoToolChoice: true, toolCallParser: 'hermes', reasoningParser: 'qwen3' },
    });
    client = new OpenAI({ baseURL: `http://127.0.0.1:${await door.listen()}/v1`, apiKey: 'x', maxRetries: 0 });
  });
  afterAll(async () => {
    await door.close();
  });

  it("the door's parsers apply to models that name none; a model's own setting wins", async () => {
    const r = await client.chat.completions.create({ model: 'm', messages: user, tools });
    expect(r.choices[0]!.finish_reason).toBe('tool_calls');
    expect((r.choices[0]!.message as { reasoning_content?: string }).reasoning_content).toBe('\nThe user wants the weather.\n');
    const o = await client.chat.completions.create({ model: 'own', messages: user });
    expect(o.choices[0]!.message).toMatchObject({ content: 'answer', reasoning_content: 'I think ' });
  });

  it("a forced choice is read without the door's reasoning parser (the engine, knowing only the model's, constrains from the first token)", async () => {
    const r = await client.chat.completions.create({ model: 'forced', messages: user, tools, tool_choice: 'required' });
    expect(r.choices[0]).toMatchObject({ finish_reason: 'tool_calls', message: { content: '', tool_calls: [{ type: 'function', function: { name: 'get_time', arguments: '{}' } }] } });
    expect((r.choices[0]!.message as { reasoning_content?: string }).reasoning_content).toBeUndefined();
  });
});
