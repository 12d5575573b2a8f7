/**
 * The OpenAI front end on model folders of the real families at their real vocabulary widths (Qwen3
 * 151,936 logits over 151,669 token ids, Llama 3 128,256, Mistral 32,768, Gemma 3 262,144 logits over
 * 262,145 token ids), with the families' chat template shapes, special tokens at their real ids and
 * generation_config.json end ids: tool calls (hermes, llama3_json, mistral, pythonic), reasoning,
 * structured output (on a reasoning model: constrained after `</think>`), usage and extra end ids, with the official openai SDK, streaming and not, on a
 * standalone worker and through a router in front of one cluster worker. The decoders are scripted
 * (onnx-builder `REAL_VOCAB_MODELS`, test/fixtures/real_vocab_repository): whatever the prompt, they
 * answer their reply, and keep to it past any end id, so text after an end id shows when it fails to stop.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildFamilyModelFiles, realVocabRepositoryFiles, REAL_VOCAB_MODELS, type RealVocabModelName } from '@switchyard/onnx-builder';
import { repoRoot, startWorkerProcess, type WorkerProcess } from '@switchyard/testing';
import { fixtureRepository, type FixtureRepository } from './lib/fixture-repository.js';
import { startCluster, type Cluster } from './support/cluster.js';

const FIXTURE = 'real_vocab_repository';
const MODELS = Object.keys(REAL_VOCAB_MODELS) as RealVocabModelName[];

/** Generated files `scripts/generate-models.mjs --if-absent` has not written yet (normally none). */
function missingFiles(): Record<string, Uint8Array> {
  const dir = join(repoRoot(), 'test/fixtures', FIXTURE);
  return Object.fromEntries(realVocabRepositoryFiles().filter((f) => !existsSync(join(dir, f.path))).map((f) => [f.path, f.build()]));
}

/** Completion tokens of `name`'s reply up to and including `end` (the id that must stop it). */
function tokensThrough(name: RealVocabModelName, end: string): number {
  const { family, reply } = REAL_VOCAB_MODELS[name];
  const cut = reply.indexOf(end);
  expect(cut).toBeGreaterThan(0);
  return buildFamilyModelFiles(family).encode(reply.slice(0, cut + end.length)).length;
}

const WEATHER = { name: 'get_weather', arguments: '{"city": "Paris", "days": [1, 2]}' };
const TIME = { name: 'get_time', arguments: '{"tz": "CET"}' };
const tools: OpenAI.ChatCompletionTool[] = [
  { type: 'function', function: { name: 'get_weather', description: 'The weather', parameters: { type: 'object', properties: { city: { type: 'string' }, days: { type: 'array' } }, required: ['city'] } } },
  { type: 'function', function: { name: 'get_time', parameters: { type: 'object', properties: { tz: { type: 'string' } } } } },
];
const messages: OpenAI.ChatCompletionMessageParam[] = [{ role: 'user', content: 'Weather and time in Paris?' }];

/** What each tool-calling model's parsers must give; `end`: the end id its reply stops at. */
const EXPECTED: Partial<Record<RealVocabModelName, { content: string | null; reasoning?: string; calls: Array<{ name: string; arguments: string }>; end: string; idPattern: RegExp }>> = {
  qwen3_hermes: {
    content: '\n\nChecking the weather ☀️ in Zürich.\n',
    reasoning: '\nThe user wants the weather and the time.\n',
    calls: [WEATHER, TIME],
    end: '<|endoftext|>',
    idPattern: /^chatcmpl-tool-[0-9a-f]{32}$/,
  },
  llama3_json: { content: null, calls: [WEATHER], end: '<|end_of_text|>', idPattern: /^chatcmpl-tool-[0-9a-f]{32}$/ },
  mistral_tools: { content: null, calls: [WEATHER, TIME], end: '</s>', idPattern: /^[A-Za-z0-9]{9}$/ },
  gemma3_pythonic: { content: null, calls: [WEATHER, TIME], end: '<end_of_turn>', idPattern: /^chatcmpl-tool-[0-9a-f]{32}$/ },
};

type Body = OpenAI.ChatCompletionCreateParamsNonStreaming;

async function streamed(client: OpenAI, body: Body) {
  const stream = await client.chat.completions.create({ ...body, stream: true, stream_options: { include_usage: true } });
  let content = '';
  let reasoning = '';
  let finish: string | null = null;
  let usage: OpenAI.CompletionUsage | undefined;
  const calls: Array<{ id: string; name: string; arguments: string }> = [];
  for await (const chunk of stream) {
    usage = chunk.usage ?? usage;
    const choice = chunk.choices[0];
    if (choice === undefined) continue;
    const d = choice.delta as OpenAI.ChatCompletionChunk.Choice.Delta & { reasoning_content?: string };
    finish = choice.finish_reason ?? finish;
    content += d.content ?? '';
    reasoning += d.reasoning_content ?? '';
    for (const t of d.tool_calls ?? []) {
      if (t.id !== undefined) calls[t.index] = { id: t.id, name: t.function!.name!, arguments: '' };
      calls[t.index]!.arguments += t.function?.arguments ?? '';
    }
  }
  return { content, reasoning, finish, usage, calls };
}

function itServesEveryFamily(client: () => OpenAI): void {
  for (const [model, m] of Object.entries(EXPECTED) as Array<[RealVocabModelName, NonNullable<(typeof EXPECTED)[RealVocabModelName]>]>) {
    it(`${model}: tool calls in message and in delta.tool_calls, finish_reason tool_calls, usage up to its end id`, async () => {
      // Gemma's template iterates content parts: send them as a list.
      const body: Body =
        model === 'gemma3_pythonic'
          ? { model, tools, messages: [{ role: 'system', content: [{ type: 'text', text: 'Be brief.' }] }, { role: 'user', content: [{ type: 'text', text: 'Weather and time' }, { type: 'text', text: 'in Paris?' }] }] }
          : { model, tools, messages };
      // generation_config.json's sampling defaults apply here (Qwen3: temperature 0.6, top_k 20, top_p 0.95);
      // the scripted logits leave every other token e^-50 behind, so the reply is the same. Other requests are greedy (faster).
      const r = await client().chat.completions.create(body);
      const choice = r.choices[0]!;
      const message = choice.message as OpenAI.ChatCompletionMessage & { reasoning_content?: string };
      expect(choice.finish_reason).toBe('tool_calls');
      expect(message.content).toBe(m.content);
      expect(message.reasoning_content).toBe(m.reasoning);
      expect(message.tool_calls!.map((c) => (c as OpenAI.ChatCompletionMessageFunctionToolCall).function)).toEqual(m.calls);
      for (const c of message.tool_calls!) expect(c.id).toMatch(m.idPattern);
      const completion = tokensThrough(model, m.end);
      expect(r.usage).toMatchObject({ completion_tokens: completion, total_tokens: r.usage!.prompt_tokens + completion });
      expect(r.usage!.prompt_tokens).toBeGreaterThan(60); // the tools are in the prompt

      const s = await streamed(client(), { ...body, temperature: 0 });
      expect({ content: s.content, reasoning: s.reasoning, finish: s.finish, calls: s.calls.map(({ name, arguments: a }) => ({ name, arguments: a })) }).toEqual({
        content: m.content ?? '',
        reasoning: m.reasoning ?? '',
        finish: 'tool_calls',
        calls: m.calls,
      });
      for (const c of s.calls) expect(c.id).toMatch(m.idPattern);
      expect(s.usage).toMatchObject({ prompt_tokens: r.usage!.prompt_tokens, completion_tokens: completion });
    });
  }

  it("generation_config.json's extra end ids stop generation: Qwen3's <|endoftext|> 151643 and Llama 3's <|end_of_text|> 128001", async () => {
    for (const [model, end] of [
      ['qwen3_hermes', '<|endoftext|>'],
      ['llama3_json', '<|end_of_text|>'],
    ] as const) {
      const through = tokensThrough(model, end);
      const r = await client().chat.completions.create({ model, messages, temperature: 0 });
      expect(r.usage!.completion_tokens).toBe(through);
      expect(r.choices[0]!.finish_reason).toBe('stop');
      expect(JSON.stringify(r.choices[0]!.message)).not.toContain('after the end');
      // The decoder does write past it: with ignore_eos the text after the end id comes out.
      const past = tokensThrough(model, ' Text after the end.');
      const on = await client().chat.completions.create({ model, messages, max_tokens: past, ignore_eos: true, temperature: 0 } as Body);
      expect(on.choices[0]!.finish_reason).toBe('length');
      expect(on.usage!.completion_tokens).toBe(past);
      expect(on.choices[0]!.message.content).toContain(' Text after the end.');
    }
  });

  it('a tool round trip renders the history in each template (Qwen3 tool_response, Mistral 9-character ids)', async () => {
    for (const model of ['qwen3_hermes', 'mistral_tools'] as const) {
      const first = await client().chat.completions.create({ model, messages, tools, temperature: 0 });
      const calls = first.choices[0]!.message.tool_calls!;
      const followUp = await client().chat.completions.create({
        model,
        tools,
        temperature: 0,
        messages: [...messages, first.choices[0]!.message, ...calls.map((c): OpenAI.ChatCompletionToolMessageParam => ({ role: 'tool', tool_call_id: c.id, content: '21 C, sunny' }))],
      });
      expect(followUp.usage!.prompt_tokens).toBeGreaterThan(first.usage!.prompt_tokens + 20);
      // Qwen3 answers in a new assistant turn, so the decoder replays its script; Mistral continues
      // right after [/TOOL_RESULTS], past the [/INST] its script counts from.
      if (model === 'qwen3_hermes') expect(followUp.choices[0]!.finish_reason).toBe('tool_calls');
    }
  });

  it('response_format json_object and json_schema (strict, parse()) on the 151,936-wide vocabulary, streamed too', async () => {
    const object = await client().chat.completions.create({ model: 'qwen3_json', messages, temperature: 0, response_format: { type: 'json_object' } });
    const expected = { city: 'Paris', temperature: 21, sunny: true, note: 'Zürich ☀️' };
    expect(JSON.parse(object.choices[0]!.message.content!)).toEqual(expected);
    expect(object.choices[0]!.finish_reason).toBe('stop');
    const schema = {
      type: 'object',
      properties: { city: { type: 'string' }, temperature: { type: 'integer' }, sunny: { type: 'boolean' }, note: { type: 'string' } },
      required: ['city', 'temperature', 'sunny', 'note'],
      additionalProperties: false,
    };
    const parsed = await client().chat.completions.parse({ model: 'qwen3_json', messages, temperature: 0, response_format: { type: 'json_schema', json_schema: { name: 'weather', schema, strict: true } } });
    expect(parsed.choices[0]!.message.parsed).toEqual(expected);
    const s = await streamed(client(), { model: 'qwen3_json', messages, temperature: 0, response_format: { type: 'json_object' } });
    expect(JSON.parse(s.content)).toEqual(expected);
    expect(s.usage!.completion_tokens).toBe(object.usage!.completion_tokens);
  });

  it('qwen3_hermes (reasoning_parser qwen3): structured output and forced tool choices reason freely, then the schema holds after </think>', async () => {
    // The decoder's script goes on past `</think>` with prose and a hermes call, which the schema forbids:
    // its scripted token is then masked, and among the equal rest the lowest id wins (temperature 0), so
    // the content is the schema's document, not the script. Without the gate the first token (the
    // script's <think>) would already be masked and no reasoning would come out.
    const reasoning = EXPECTED.qwen3_hermes!.reasoning;
    const answer = { type: 'object', properties: { answer: { enum: ['yes', 'no'] } }, required: ['answer'], additionalProperties: false };
    const r = await client().chat.completions.create({ model: 'qwen3_hermes', messages, temperature: 0, response_format: { type: 'json_schema', json_schema: { name: 'answer', schema: answer, strict: true } } });
    const message = r.choices[0]!.message as OpenAI.ChatCompletionMessage & { reasoning_content?: string };
    expect(message.reasoning_content).toBe(reasoning);
    expect(JSON.parse(message.content!)).toEqual({ answer: 'no' });
    expect(r.choices[0]!.finish_reason).toBe('stop');
    const s = await streamed(client(), { model: 'qwen3_hermes', messages, temperature: 0, response_format: { type: 'json_schema', json_schema: { name: 'answer', schema: answer } } });
    expect({ reasoning: s.reasoning, content: s.content }).toEqual({ reasoning, content: message.content });

    const pick: OpenAI.ChatCompletionTool[] = [{ type: 'function', function: { name: 'pick', parameters: answer } }];
    const named = await client().chat.completions.create({ model: 'qwen3_hermes', messages, tools: pick, temperature: 0, tool_choice: { type: 'function', function: { name: 'pick' } } });
    const call = named.choices[0]!.message.tool_calls![0] as OpenAI.ChatCompletionMessageFunctionToolCall;
    expect((named.choices[0]!.message as { reasoning_content?: string }).reasoning_content).toBe(reasoning);
    expect(call.function.name).toBe('pick');
    expect(JSON.parse(call.function.arguments)).toEqual({ answer: 'no' });
    // 'required' takes a list of calls, and `,` (a lower id than `]`) would add more forever: a slight bias closes it after one.
    const close = String(buildFamilyModelFiles('qwen3').encode(']')[0]);
    const required = await streamed(client(), { model: 'qwen3_hermes', messages, tools: pick, temperature: 0, tool_choice: 'required', logit_bias: { [close]: 1 } });
    expect(required.reasoning).toBe(reasoning);
    expect(required.finish).toBe('tool_calls');
    expect(required.calls.map((c) => ({ name: c.name, args: JSON.parse(c.arguments) as unknown }))).toEqual([{ name: 'pick', args: { answer: 'no' } }]);

    // enable_thinking false renders `<think>\n\n</think>\n\n` into the prompt: the reasoning has ended, so
    // the schema holds from the first token (the script's <think> is masked) and nothing is reasoning.
    const off = await client().chat.completions.create({ model: 'qwen3_hermes', messages, temperature: 0, response_format: { type: 'json_schema', json_schema: { name: 'answer', schema: answer } }, chat_template_kwargs: { enable_thinking: false } } as Body);
    const offMessage = off.choices[0]!.message as OpenAI.ChatCompletionMessage & { reasoning_content?: string };
    expect(offMessage.reasoning_content).toBeUndefined();
    expect(JSON.parse(offMessage.content!)).toEqual({ answer: 'no' });
  });

  it("Gemma 3's template gets content parts as a list (each part trimmed, joined with nothing), not one joined string", async () => {
    const usage = async (content: OpenAI.ChatCompletionUserMessageParam['content']) =>
      (await client().chat.completions.create({ model: 'gemma3_pythonic', messages: [{ role: 'user', content }], max_tokens: 1, temperature: 0 })).usage!.prompt_tokens;
    const parts = await usage([{ type: 'text', text: ' Weather and time ' }, { type: 'text', text: 'in Paris?' }]);
    expect(parts).toBe(await usage('Weather and timein Paris?'));
    expect(parts).not.toBe(await usage('Weather and time\nin Paris?'));
  });

  it("Gemma 3: the tokenizer's id 262144 has no logit (config.json's vocab_size 262144): a prompt or a logit_bias naming it is a 400", async () => {
    const ok = await client().completions.create({ model: 'gemma3_pythonic', prompt: [2, 105, 2364], max_tokens: 3, logit_bias: { '262143': 1 } });
    expect(ok.usage!.completion_tokens).toBe(3);
    const prompt = await client()
      .completions.create({ model: 'gemma3_pythonic', prompt: [2, 262144], max_tokens: 3 })
      .catch((e: unknown) => e);
    expect(prompt).toBeInstanceOf(OpenAI.BadRequestError);
    const bias = await client()
      .chat.completions.create({ model: 'gemma3_pythonic', messages, logit_bias: { '262144': 1 } })
      .catch((e: unknown) => e);
    expect(bias).toBeInstanceOf(OpenAI.BadRequestError);
    expect((bias as InstanceType<typeof OpenAI.APIError>).message).toContain('token_id 262144 in logit_bias contains out-of-vocab token id');
  });
}

describe('real vocabulary widths on a standalone worker', () => {
  let repo: FixtureRepository;
  let worker: WorkerProcess;
  let openai: OpenAI;
  beforeAll(async () => {
    repo = fixtureRepository(FIXTURE, { files: missingFiles() });
    worker = await startWorkerProcess({ modelRepositories: [repo.path] });
    openai = new OpenAI({ baseURL: `${worker.httpUrl}/v1`, apiKey: 'unused', maxRetries: 0 });
  }, 120_000);
  afterAll(async () => {
    await worker?.stop();
    repo?.remove();
  });
  itServesEveryFamily(() => openai);
});

describe('real vocabulary widths through the router (one cluster worker; the router renders and parses)', () => {
  let cluster: Cluster;
  let openai: OpenAI;
  beforeAll(async () => {
    cluster = await startCluster({ fixture: FIXTURE, files: missingFiles(), workers: [[]], waitForModels: MODELS });
    openai = new OpenAI({ baseURL: `${cluster.router.httpUrl}/v1`, apiKey: 'unused', maxRetries: 0 });
  }, 120_000);
  afterAll(async () => {
    await cluster?.stop();
  });
  itServesEveryFamily(() => openai);
});
