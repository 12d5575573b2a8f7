/**
 * Tool calls and reasoning end to end, with the official openai SDK, streaming and not, on a
 * standalone worker process and through a router process in front of two cluster workers. The
 * models are scripted decoders built by onnx-builder (test/lib/scripted-llm.ts, configs in
 * test/fixtures/tool_call_repository) that answer, whatever the prompt, a tool call in one parser's
 * format; each names its parsers in its config (`tool_call_parser`, `reasoning_parser`), except
 * `scripted_plain`, which the processes' flags parse (`--enable-auto-tool-choice
 * --tool-call-parser hermes --reasoning-parser deepseek_r1`).
 */
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startWorkerProcess, type WorkerProcess } from '@switchyard/testing';
import { fixtureRepository, type FixtureRepository } from './lib/fixture-repository.js';
import { scriptedModelFiles } from './lib/scripted-llm.js';
import { startCluster, type Cluster } from './support/cluster.js';

const WEATHER = { name: 'get_weather', arguments: '{"city": "Paris", "days": [1, 2]}' };
const TIME = { name: 'get_time', arguments: '{"tz": "CET"}' };

/** Each model's reply and what the client must see. */
const MODELS: Record<string, { reply: string; content: string | null; reasoning?: string; calls: Array<{ name: string; arguments: string }> }> = {
  scripted_hermes: {
    reply: '<think>\nThe user wants the weather.\n</think>\n\nChecking.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "days": [1, 2]}}\n</tool_call>\n<tool_call>\n{"name": "get_time", "arguments": {"tz": "CET"}}\n</tool_call>',
    content: '\n\nChecking.\n',
    reasoning: '\nThe user wants the weather.\n',
    calls: [WEATHER, TIME],
  },
  scripted_llama3: { reply: '<|python_tag|>{"name": "get_weather", "parameters": {"city": "Paris", "days": [1, 2]}}', content: null, calls: [WEATHER] },
  scripted_mistral: { reply: '[TOOL_CALLS] [{"name": "get_weather", "arguments": {"city": "Paris", "days": [1, 2]}}, {"name": "get_time", "arguments": {"tz": "CET"}}]', content: null, calls: [WEATHER, TIME] },
  scripted_pythonic: { reply: "[get_weather(city='Paris', days=(1, 2)), get_time(tz=\"CET\")]", content: null, calls: [WEATHER, TIME] },
  scripted_plain: {
    reply: 'The user wants the weather.</think>Sure.<tool_call>{"name": "get_time", "arguments": {"tz": "CET"}}</tool_call>',
    content: 'Sure.',
    reasoning: 'The user wants the weather.',
    calls: [TIME],
  },
};
const FLAGS = ['--enable-auto-tool-choice', '--tool-call-parser=hermes', '--reasoning-parser=deepseek_r1'];
const files = (): Record<string, Uint8Array> => Object.assign({}, ...Object.entries(MODELS).map(([model, m]) => scriptedModelFiles(model, m.reply)));

const tools: OpenAI.ChatCompletionTool[] = [
  { type: 'function', function: { name: 'get_weather', description: 'The weather', parameters: { type: 'object', properties: { city: { type: 'string' }, days: { type: 'array' } } } } },
  { type: 'function', function: { name: 'get_time', parameters: { type: 'object', properties: { tz: { type: 'string' } } } } },
];
const messages: OpenAI.ChatCompletionMessageParam[] = [{ role: 'user', content: 'Weather and time in Paris?' }];

async function streamed(client: OpenAI, model: string) {
  const stream = await client.chat.completions.create({ model, messages, tools, stream: true, stream_options: { include_usage: true } });
  let content = '';
  let reasoning = '';
  let finish: string | null = null;
  const calls: Array<{ id: string; name: string; arguments: string }> = [];
  let firstDeltas = 0;
  for await (const chunk of stream) {
    const choice = chunk.choices[0];
    if (choice === undefined) continue;
    const d = choice.delta as OpenAI.ChatCompletionChunk.Choice.Delta & { reasoning_content?: string };
    finish = choice.finish_reason ?? finish;
    content += d.content ?? '';
    reasoning += d.reasoning_content ?? '';
    for (const t of d.tool_calls ?? []) {
      if (t.id !== undefined) {
        firstDeltas++;
        expect(t).toMatchObject({ type: 'function', function: { name: expect.any(String), arguments: '' } });
        calls[t.index] = { id: t.id, name: t.function!.name!, arguments: '' };
      }
      calls[t.index]!.arguments += t.function?.arguments ?? '';
    }
  }
  expect(firstDeltas).toBe(calls.length);
  return { content, reasoning, finish, calls: calls.map(({ name, arguments: a }) => ({ name, arguments: a })) };
}

/** Every scripted model, streamed and not: the calls, content and reasoning its parsers give. */
function itParsesEveryFormat(client: () => OpenAI): void {
  for (const [model, m] of Object.entries(MODELS)) {
    it(`${model}: message.tool_calls and delta.tool_calls, finish_reason tool_calls`, async () => {
      const r = await client().chat.completions.create({ model, messages, tools });
      const choice = r.choices[0]!;
      const message = choice.message as OpenAI.ChatCompletionMessage & { reasoning_content?: string };
      expect(choice.finish_reason).toBe('tool_calls');
      expect(message.content).toBe(m.content);
      expect(message.reasoning_content).toBe(m.reasoning);
      expect(message.tool_calls!.map((c) => (c as OpenAI.ChatCompletionMessageFunctionToolCall).function)).toEqual(m.calls);
      // vLLM's ids; Mistral's templates take only 9 letters and digits
      for (const c of message.tool_calls!) expect(c.id).toMatch(model === 'scripted_mistral' ? /^[A-Za-z0-9]{9}$/ : /^chatcmpl-tool-[0-9a-f]{32}$/);
      expect(await streamed(client(), model)).toEqual({ content: m.content ?? '', reasoning: m.reasoning ?? '', finish: 'tool_calls', calls: m.calls });
    });
  }

  it('the template gets the tools and the history: a tool round trip, then tool_choice none leaves the text alone', async () => {
    const bare = await client().chat.completions.create({ model: 'scripted_hermes', messages });
    const withTools = await client().chat.completions.create({ model: 'scripted_hermes', messages, tools });
    expect(withTools.usage!.prompt_tokens).toBeGreaterThan(bare.usage!.prompt_tokens + 20);
    const call = withTools.choices[0]!.message.tool_calls![0]!;
    const followUp = await client().chat.completions.create({
      model: 'scripted_hermes',
      tools,
      messages: [...messages, withTools.choices[0]!.message, { role: 'tool', tool_call_id: call.id, content: '21 C, sunny' }],
    });
    expect(followUp.usage!.prompt_tokens).toBeGreaterThan(withTools.usage!.prompt_tokens);
    const none = await client().chat.completions.create({ model: 'scripted_hermes', messages, tools, tool_choice: 'none' });
    expect(none.choices[0]!.finish_reason).toBe('stop');
    expect(none.choices[0]!.message.content).toContain('<tool_call>');
  });

  // tool_choice required and named are forced by guided decoding (test/llm-tool-choice.test.ts, on a
  // model whose sampling follows the mask; a scripted decoder ignores it)
  it('an image part to a text-only model is a 400 naming its type', async () => {
    const err = await client()
      .chat.completions.create({ model: 'scripted_hermes', messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'data:,' } }] }] })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.BadRequestError);
    expect((err as InstanceType<typeof OpenAI.APIError>).message).toContain('"image_url" is not supported');
  });
}

describe('tool calls on a standalone worker', () => {
  let repo: FixtureRepository;
  let worker: WorkerProcess;
  let openai: OpenAI;
  beforeAll(async () => {
    repo = fixtureRepository('tool_call_repository', { files: files() });
    worker = await startWorkerProcess({ modelRepositories: [repo.path], args: FLAGS });
    openai = new OpenAI({ baseURL: `${worker.httpUrl}/v1`, apiKey: 'unused', maxRetries: 0 });
  });
  afterAll(async () => {
    await worker?.stop();
    repo?.remove();
  });
  itParsesEveryFormat(() => openai);
});

describe('tool calls through the router (two cluster workers; the router parses with the cards and its own flags)', () => {
  let cluster: Cluster;
  let openai: OpenAI;
  beforeAll(async () => {
    cluster = await startCluster({ fixture: 'tool_call_repository', files: files(), routerArgs: FLAGS, waitForModels: Object.keys(MODELS) });
    openai = new OpenAI({ baseURL: `${cluster.router.httpUrl}/v1`, apiKey: 'unused', maxRetries: 0 });
  }, 120_000);
  afterAll(async () => {
    await cluster?.stop();
  });
  itParsesEveryFormat(() => openai);
});
