/**
 * A forced tool choice (`tool_choice: "required"`, a named function) end to end, with the official
 * openai SDK, streaming and not, on a standalone worker process and through a router process in front
 * of a cluster worker. Guided decoding forces the call, so the model is the tiny random decoder of
 * test/fixtures/llm_repository (onnx-builder), whose sampling really follows the mask: whatever it
 * writes, the reply must name a tool and carry arguments that parse and validate against that tool's
 * parameters. No tool-call parser is configured anywhere: none is needed.
 */
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { llmFixtureRepositoryFiles } from '@switchyard/onnx-builder';
import { startWorkerProcess, type WorkerProcess } from '@switchyard/testing';
import { validates } from '@switchyard/testing/fuzz';
import { fixtureRepository, type FixtureRepository } from './lib/fixture-repository.js';
import { startCluster, type Cluster } from './support/cluster.js';

/** Parameters the tiny decoder finishes well inside its 512-token context (enums, an integer, a boolean). */
const PARAMETERS: Record<string, Record<string, unknown>> = {
  get_weather: {
    type: 'object',
    properties: { city: { enum: ['Paris', 'Oslo', 'Lima'] }, days: { type: 'integer' }, metric: { type: 'boolean' } },
    required: ['city', 'days', 'metric'],
    additionalProperties: false,
  },
  get_time: { type: 'object', properties: { tz: { enum: ['CET', 'UTC'] } }, required: ['tz'], additionalProperties: false },
};
const tools: OpenAI.ChatCompletionFunctionTool[] = Object.entries(PARAMETERS).map(([name, parameters]) => ({
  type: 'function',
  function: { name, description: `The ${name.slice(4)}`, parameters, strict: true },
}));
const messages: OpenAI.ChatCompletionMessageParam[] = [{ role: 'user', content: 'Weather in Paris for two days?' }];
const NAMED = { type: 'function', function: { name: 'get_weather' } } as const;
const LOAD = ['--model-control-mode=explicit', '--load-model=tiny_llm', '--load-model=mock_llm'];

type Call = { id: string; name: string; arguments: string };

/** A call names one of the tools and its arguments parse and validate against that tool's parameters. */
function expectValidCall(call: { name: string; arguments: string }, name?: string): void {
  if (name !== undefined) expect(call.name).toBe(name);
  const parameters = PARAMETERS[call.name];
  expect(parameters, call.name).toBeDefined();
  expect(validates(JSON.parse(call.arguments), parameters), call.arguments).toBe(true);
}

function functionCalls(message: OpenAI.ChatCompletionMessage): Call[] {
  return (message.tool_calls ?? []).map((c) => {
    const f = (c as OpenAI.ChatCompletionMessageFunctionToolCall).function;
    return { id: c.id, name: f.name, arguments: f.arguments };
  });
}

/** A streamed reply: each call's first delta carries id, type and name (arguments ''), later ones only arguments. */
async function streamed(client: OpenAI, request: OpenAI.ChatCompletionCreateParamsNonStreaming) {
  const stream = await client.chat.completions.create({ ...request, stream: true, stream_options: { include_usage: true } });
  let content = '';
  let finish: string | null = null;
  const calls: Call[] = [];
  for await (const chunk of stream) {
    const choice = chunk.choices[0];
    if (choice === undefined) continue;
    finish = choice.finish_reason ?? finish;
    content += choice.delta.content ?? '';
    for (const t of choice.delta.tool_calls ?? []) {
      if (t.id !== undefined) {
        expect(t).toEqual({ index: calls.length, id: t.id, type: 'function', function: { name: expect.any(String), arguments: '' } });
        calls[t.index] = { id: t.id, name: t.function!.name!, arguments: '' };
      } else {
        expect(t.function).toEqual({ arguments: expect.any(String) });
        calls[t.index]!.arguments += t.function!.arguments!;
      }
    }
  }
  return { content, finish, calls };
}

const withoutIds = (calls: readonly Call[]) => calls.map(({ name, arguments: a }) => ({ name, arguments: a }));

function itForcesToolChoice(client: () => OpenAI): void {
  const base = { model: 'tiny_llm', messages, tools, max_tokens: 480, temperature: 0 } as const;

  it("a named function: one call to it whose arguments validate, content '', finish_reason stop; the stream is the same call", async () => {
    const r = await client().chat.completions.create({ ...base, tool_choice: NAMED });
    const choice = r.choices[0]!;
    expect(choice.finish_reason).toBe('stop');
    expect(choice.message.content).toBe('');
    const calls = functionCalls(choice.message);
    expect(calls).toHaveLength(1);
    expect(calls[0]!.id).toMatch(/^chatcmpl-tool-[0-9a-f]{32}$/);
    expectValidCall(calls[0]!, 'get_weather');
    const s = await streamed(client(), { ...base, tool_choice: NAMED });
    expect(s).toMatchObject({ content: '', finish: 'stop' });
    expect(withoutIds(s.calls)).toEqual(withoutIds(calls));
  });

  it('a named function, sampled: chat.completions.parse() gives parsed_arguments that validate', async () => {
    for (const seed of [1, 2]) {
      const r = await client().chat.completions.parse({ ...base, tool_choice: { type: 'function', function: { name: 'get_time' } }, temperature: 1, seed });
      const calls = r.choices[0]!.message.tool_calls ?? [];
      expect(calls).toHaveLength(1);
      const call = calls[0] as { function: { name: string; arguments: string; parsed_arguments: unknown } };
      expect(call.function.name).toBe('get_time');
      expect(call.function.parsed_arguments).toEqual(JSON.parse(call.function.arguments));
      expect(validates(call.function.parsed_arguments, PARAMETERS['get_time'])).toBe(true);
    }
  });

  it("required: calls of the tools whose arguments validate, content '', finish_reason tool_calls; the stream is the same calls", async () => {
    // The random decoder would go on listing calls to max_tokens: a bias on `]` (token 93) closes the
    // list at its first chance. The mask still decides what may come; the bias only picks among it.
    const request = { ...base, tool_choice: 'required', logit_bias: { '93': 100 } } as const;
    const r = await client().chat.completions.create(request);
    const choice = r.choices[0]!;
    expect(choice.finish_reason).toBe('tool_calls');
    expect(choice.message.content).toBe('');
    const calls = functionCalls(choice.message);
    expect(calls.length).toBeGreaterThanOrEqual(1);
    for (const call of calls) expectValidCall(call);
    const s = await streamed(client(), request);
    expect(s).toMatchObject({ content: '', finish: 'tool_calls' });
    expect(withoutIds(s.calls)).toEqual(withoutIds(calls));
    // Sampled, with n choices: every choice holds valid calls.
    const n = await client().chat.completions.create({ ...request, temperature: 1, seed: 5, n: 2 });
    expect(n.choices).toHaveLength(2);
    for (const c of n.choices) {
      expect(c.finish_reason).toBe('tool_calls');
      expect(c.message.tool_calls!.length).toBeGreaterThanOrEqual(1);
      for (const call of functionCalls(c.message)) expectValidCall(call);
    }
  });

  it('required, cut by max_tokens: finish_reason length, several calls with distinct ids, all but the cut one valid; the stream is the same', async () => {
    const request = { ...base, tool_choice: 'required' } as const;
    const r = await client().chat.completions.create(request);
    expect(r.choices[0]!.finish_reason).toBe('length');
    const calls = functionCalls(r.choices[0]!.message);
    expect(calls.length).toBeGreaterThanOrEqual(2);
    expect(new Set(calls.map((c) => c.id)).size).toBe(calls.length);
    for (const call of calls.slice(0, -1)) expectValidCall(call);
    expect(PARAMETERS[calls.at(-1)!.name]).toBeDefined();
    const s = await streamed(client(), request);
    expect(s.finish).toBe('length');
    expect(withoutIds(s.calls)).toEqual(withoutIds(calls));
  });

  it('a tool whose parameters the automaton cannot follow is a 400 naming them; an engine without logits is a 400', async () => {
    const patterned: OpenAI.ChatCompletionFunctionTool = { type: 'function', function: { name: 'lookup', parameters: { type: 'object', properties: { id: { type: 'string', pattern: '^[a-z]+$' } } } } };
    const err = await client()
      .chat.completions.create({ ...base, tools: [...tools, patterned], tool_choice: 'required' })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.BadRequestError);
    expect(err).toMatchObject({ status: 400, param: 'tools[2].function.parameters', message: '400 tools[2].function.parameters: pattern is not supported (at #/properties/id)' });
    // The same tool is fine when the choice cannot call it.
    const ok = await client().chat.completions.create({ ...base, tools: [...tools, patterned], tool_choice: NAMED });
    expectValidCall(functionCalls(ok.choices[0]!.message)[0]!, 'get_weather');
    const mock = await client()
      .chat.completions.create({ ...base, model: 'mock_llm', tool_choice: NAMED })
      .catch((e: unknown) => e);
    expect(mock).toMatchObject({ status: 400 });
    expect((mock as Error).message).toContain('guided decoding');
  });
}

describe('a forced tool choice on a standalone worker', () => {
  let repo: FixtureRepository;
  let worker: WorkerProcess;
  let openai: OpenAI;
  beforeAll(async () => {
    repo = fixtureRepository('llm_repository', { files: Object.fromEntries(llmFixtureRepositoryFiles().map((f) => [f.path, f.build()])) });
    worker = await startWorkerProcess({ modelRepositories: [repo.path], args: LOAD });
    openai = new OpenAI({ baseURL: `${worker.httpUrl}/v1`, apiKey: 'unused', maxRetries: 0 });
  });
  afterAll(async () => {
    await worker?.stop();
    repo?.remove();
  });
  itForcesToolChoice(() => openai);
});

describe('a forced tool choice through the router (the schema travels to the worker as guided decoding)', () => {
  let cluster: Cluster;
  let openai: OpenAI;
  beforeAll(async () => {
    cluster = await startCluster({ workers: [LOAD], waitForModels: ['tiny_llm', 'mock_llm'] });
    openai = new OpenAI({ baseURL: `${cluster.router.httpUrl}/v1`, apiKey: 'unused', maxRetries: 0 });
  }, 120_000);
  afterAll(async () => {
    await cluster?.stop();
  });
  itForcesToolChoice(() => openai);
});
