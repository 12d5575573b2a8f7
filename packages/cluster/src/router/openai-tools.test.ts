/**
 * Tool calls and reasoning through the router's OpenAI door (memory twins, the openai SDK): the
 * router renders the template and parses the output itself, with the parsers the worker's card
 * names; a stream migrated to another worker halfway through a tool call parses the same calls as
 * one that was not. A forced tool choice sends its schema to the worker as guided decoding, on every
 * attempt, and is read without the card's parsers.
 */
import { afterEach, describe, expect, it } from 'vitest';
import OpenAI from 'openai';
import { MemoryRoutingTable } from '@switchyard/kv-router';
import type { ModelCard } from '@switchyard/runtime';
import { type HttpFrontDoor, ServerSettings, SharedMemoryManager, createHttpServer } from '@switchyard/server';
import { type RouterCore, startRouterCore } from './router-core.js';
import { FakeLlmWorker, llmCard, scriptedReply } from './test-support/fake-llm-worker.js';
import { LLM, MockCluster, NS, waitFor } from './test-support/mock-cluster.js';

let cluster: MockCluster | undefined;
let router: RouterCore | undefined;
let door: HttpFrontDoor | undefined;
afterEach(async () => {
  await door?.close();
  await router?.close();
  await cluster?.close();
  door = undefined;
  router = undefined;
  cluster = undefined;
});

const REPLY =
  '<think>\nThe user asks for the weather.\n</think>\n\nChecking.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "days": [1, 2]}}\n</tool_call>\n<tool_call>\n{"name": "get_time", "arguments": {"tz": "CET"}}\n</tool_call>';
const tools: OpenAI.ChatCompletionTool[] = [
  { type: 'function', function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } } },
  { type: 'function', function: { name: 'get_time', parameters: { type: 'object', properties: {} } } },
];
const EXPECTED_CALLS = [
  { name: 'get_weather', arguments: '{"city": "Paris", "days": [1, 2]}' },
  { name: 'get_time', arguments: '{"tz": "CET"}' },
];

/** A router over two scripted workers whose card names the parsers; `crashes` cuts one stream. */
async function setUp(crashes: { left: number }, crashInside?: string, replyText = REPLY): Promise<{ client: OpenAI; workers: FakeLlmWorker[]; crashAfter: number }> {
  cluster = new MockCluster();
  const card = await llmCard(cluster);
  const withParsing = { ...card, metadata: { ...(card.metadata as object), outputParsing: { toolCallParser: 'hermes', reasoningParser: 'qwen3' } } } as ModelCard;
  router = await startRouterCore({ ...cluster.routerRoles(), routingTable: new MemoryRoutingTable(), namespace: NS, routerId: 'r', stallProbeMs: 100 });
  const tokenizer = (): NonNullable<ReturnType<RouterCore['registry']['model']>>['text'] => router!.registry.model(LLM)?.text;
  const workers: FakeLlmWorker[] = [];
  // the reply's token ids, with the tokenizer the router uses (known once the cards are in)
  let reply: number[] = [];
  let crashAfter = 0;
  for (let i = 0; i < 2; i++) {
    workers.push(
      await FakeLlmWorker.start(cluster, withParsing, undefined, async function* (...args) {
        yield* scriptedReply(reply, { crashAfter, crashes })(...args);
      }),
    );
  }
  await waitFor(() => router!.registry.model(LLM)?.instances.size === 2, 5000, 'two instances');
  const text = tokenizer()!.tokenizer;
  reply = text.encode(replyText);
  // the first token count whose text reaches `crashInside`
  if (crashInside !== undefined) while (!text.decode(reply.slice(0, crashAfter)).includes(crashInside)) crashAfter++;
  door = createHttpServer({ engine: router.engine, shm: new SharedMemoryManager({ enabled: false }), settings: new ServerSettings(), port: 0, host: '127.0.0.1' });
  const client = new OpenAI({ baseURL: `http://127.0.0.1:${await door.listen()}/v1`, apiKey: 'x', maxRetries: 0 });
  return { client, workers, crashAfter };
}

async function streamedCalls(client: OpenAI, toolChoice?: OpenAI.ChatCompletionToolChoiceOption) {
  const stream = await client.chat.completions.create({ model: LLM, messages: [{ role: 'user', content: 'Weather?' }], tools, stream: true, ...(toolChoice === undefined ? {} : { tool_choice: toolChoice }) });
  let content = '';
  let reasoning = '';
  let finish: string | null | undefined;
  const calls: Array<{ id: string; name: string; arguments: string }> = [];
  for await (const chunk of stream) {
    const d = chunk.choices[0]?.delta as (OpenAI.ChatCompletionChunk.Choice.Delta & { reasoning_content?: string }) | undefined;
    if (d === undefined) continue;
    finish = chunk.choices[0]!.finish_reason ?? finish;
    content += d.content ?? '';
    reasoning += d.reasoning_content ?? '';
    for (const t of d.tool_calls ?? []) {
      if (t.id !== undefined) calls[t.index] = { id: t.id, name: t.function!.name!, arguments: '' };
      calls[t.index]!.arguments += t.function?.arguments ?? '';
    }
  }
  return { content, reasoning, finish, calls: calls.map(({ name, arguments: a }) => ({ name, arguments: a })) };
}

describe("the router's OpenAI door parses tool calls and reasoning with the card's parsers", () => {
  it('non-streaming and streaming give the same calls, reasoning and content', async () => {
    const { client, workers } = await setUp({ left: 0 });
    const r = await client.chat.completions.create({ model: LLM, messages: [{ role: 'user', content: 'Weather?' }], tools });
    const message = r.choices[0]!.message as OpenAI.ChatCompletionMessage & { reasoning_content?: string };
    expect(r.choices[0]!.finish_reason).toBe('tool_calls');
    expect(message.reasoning_content).toBe('\nThe user asks for the weather.\n');
    expect(message.content).toBe('\n\nChecking.\n');
    expect(message.tool_calls!.map((c) => (c as OpenAI.ChatCompletionMessageFunctionToolCall).function)).toEqual(EXPECTED_CALLS);
    expect(await streamedCalls(client)).toEqual({ content: '\n\nChecking.\n', reasoning: '\nThe user asks for the weather.\n', finish: 'tool_calls', calls: EXPECTED_CALLS });
    expect(workers.flatMap((w) => w.received)).toHaveLength(2);
  });

  it('a stream migrated in the middle of a tool call parses the same calls as an unmigrated one', async () => {
    const { client, workers, crashAfter } = await setUp({ left: 1 }, '"Par');
    const migrated = await streamedCalls(client);
    // one attempt died inside the first call's arguments; another worker continued from there
    const attempts = workers.flatMap((w) => w.received);
    expect(attempts).toHaveLength(2);
    expect(attempts.map((a) => a.wire.outputTokenIds?.length ?? 0).sort((a, b) => a - b)).toEqual([0, crashAfter]);
    expect(migrated).toEqual({ content: '\n\nChecking.\n', reasoning: '\nThe user asks for the weather.\n', finish: 'tool_calls', calls: EXPECTED_CALLS });
  });

  it("tool_choice 'required': the schema goes to the worker on every attempt; a migrated stream reads the same calls, with no tool-call parser, after the card's reasoning parser", async () => {
    // The card names a reasoning parser, so the worker constrains only after `</think>`: the reasoning comes first.
    const list = '<think>\nPick tools.\n</think>\n\n[{"name": "get_weather", "parameters": {"city": "Paris", "days": [1, 2]}}, {"name": "get_time", "parameters": {"tz": "CET"}}]';
    const { client, workers } = await setUp({ left: 1 }, '"Par', list);
    const migrated = await streamedCalls(client, 'required');
    const attempts = workers.flatMap((w) => w.received);
    expect(attempts).toHaveLength(2);
    for (const a of attempts) expect(a.wire.sampling['guided_decoding']).toMatchObject({ kind: 'json_schema', schema: { type: 'array', minItems: 1 } });
    expect(migrated).toEqual({ content: '', reasoning: '\nPick tools.\n', finish: 'tool_calls', calls: EXPECTED_CALLS });
    const whole = await client.chat.completions.create({ model: LLM, messages: [{ role: 'user', content: 'Weather?' }], tools, tool_choice: 'required' });
    expect(whole.choices[0]).toMatchObject({ finish_reason: 'tool_calls', message: { content: '', reasoning_content: '\nPick tools.\n' } });
    expect(whole.choices[0]!.message.tool_calls!.map((c) => (c as OpenAI.ChatCompletionMessageFunctionToolCall).function)).toEqual(EXPECTED_CALLS);
  });
});
