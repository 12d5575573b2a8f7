import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import OpenAI, { type APIError } from 'openai';
import { VERSION as OPENAI_SDK_VERSION } from 'openai/version';
import { internal } from '@switchyard/common';
import { ServerSettings } from '../settings.js';
import { SharedMemoryManager } from '../shared-memory.js';
import { FakeEngine } from '../test-support/fake-engine.js';
import { FakeLlmEndpoint, tinyTokenizer } from '../test-support/fake-llm-endpoint.js';
import { type HttpFrontDoor, createHttpServer } from '../http/http-server.js';
import { rawRequest } from '../http/http-test-client.js';

const REPLY = 'The quick brown fox jumps over the lazy dog.';
const MAX_INPUT = 1 << 20;

describe('OpenAI door (/v1) driven by the openai SDK', () => {
  const engine = new FakeEngine();
  const tiny = new FakeLlmEndpoint({ name: 'tiny', reply: () => REPLY, cachedTokens: 16 });
  const endless = new FakeLlmEndpoint({ name: 'endless', reply: () => REPLY, endless: true, delayMs: 2 });
  const noTemplate = new FakeLlmEndpoint({ name: 'org/no-template', chatTemplate: false });
  const short = new FakeLlmEndpoint({ name: 'short', contextLength: 8 });
  const failing = new FakeLlmEndpoint({ name: 'failing', failWith: internal('executor exploded'), failAfter: 2 });
  // Samples one id fewer than its tokenizer has (Gemma 3: 262,144 logits under 262,145 token ids).
  const narrow = new FakeLlmEndpoint({ name: 'narrow', vocabSize: tinyTokenizer().tokenizer.vocabSize - 1 });
  for (const e of [tiny, endless, noTemplate, short, failing, narrow]) engine.llms.set(e.card.name, e);
  let door: HttpFrontDoor;
  let port: number;
  let client: OpenAI;
  const { tokenizer, chatTemplate } = tinyTokenizer();
  const post = (path: string, body: string, headers: Record<string, string> = { 'Content-Type': 'application/json' }) =>
    rawRequest(port, 'POST', path, { body, headers });

  beforeAll(async () => {
    door = createHttpServer({
      engine,
      shm: new SharedMemoryManager({ enabled: false }),
      settings: new ServerSettings(),
      port: 0,
      host: '127.0.0.1',
      maxInputSize: MAX_INPUT,
    });
    port = await door.listen();
    client = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: 'x', maxRetries: 0 });
  });
  afterAll(async () => {
    await door.close();
  });

  it(`drives the SDK line this Node.js supports: openai ${OPENAI_SDK_VERSION} on Node.js ${process.version}`, () => {
    // vitest.config.ts resolves 'openai' to the openai7 alias (npm:openai@7.x) on Node.js 22 and newer.
    const nodeMajor = Number(process.versions.node.split('.')[0]);
    expect(OPENAI_SDK_VERSION.split('.')[0]).toBe(nodeMajor >= 22 ? '7' : '6');
  });

  it('models.list lists every ready LLM; models.retrieve takes ids with a slash; unknown ids are 404', async () => {
    const page = await client.models.list();
    expect(page.data.map((m) => m.id)).toEqual(['endless', 'failing', 'narrow', 'org/no-template', 'short', 'tiny']);
    expect(page.data[5]).toEqual({ id: 'tiny', object: 'model', created: 1_700_000_000, owned_by: 'switchyard', max_model_len: 512 });
    expect((await client.models.retrieve('org/no-template')).id).toBe('org/no-template');
    const err = await client.models.retrieve('nope').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.NotFoundError);
    expect((err as APIError).code).toBe('model_not_found');
  });

  it('chat completion (non-streaming): ChatML prompt ids in, the reply out, usage with cached tokens', async () => {
    const messages = [
      { role: 'system' as const, content: 'You are a helpful assistant.' },
      { role: 'user' as const, content: [{ type: 'text' as const, text: 'What is the capital' }, { type: 'text' as const, text: 'of France?' }] },
    ];
    const r = await client.chat.completions.create({ model: 'tiny', messages, temperature: 0, user: 'ignored' });
    expect(r.id).toMatch(/^chatcmpl-[0-9a-f]{32}$/);
    expect(r.object).toBe('chat.completion');
    expect(r.model).toBe('tiny');
    expect(Number.isInteger(r.created)).toBe(true);
    expect(r.choices).toHaveLength(1);
    expect(r.choices[0]).toMatchObject({ index: 0, message: { role: 'assistant', content: REPLY }, logprobs: null, finish_reason: 'stop' });

    const prompt = chatTemplate.render(
      [
        { role: 'system', content: 'You are a helpful assistant.' },
        { role: 'user', content: 'What is the capital\nof France?' },
      ],
      { add_generation_prompt: true },
    );
    const request = tiny.requests.at(-1)!;
    expect(request.requestId).toBe(r.id);
    expect(request.promptTokenIds).toEqual(tokenizer.encode(prompt));
    expect(request.sampling.temperature).toBe(0);
    expect(request.sampling.max_tokens).toBeNull();
    const completion = tokenizer.encode(REPLY).length + 1; // the reply, then EOS
    expect(r.usage).toEqual({
      prompt_tokens: request.promptTokenIds.length,
      completion_tokens: completion,
      total_tokens: request.promptTokenIds.length + completion,
      prompt_tokens_details: { cached_tokens: 16 },
    });
  });

  it('chat completion (streaming, include_usage): role first, text deltas, finish_reason, usage chunk, [DONE]', async () => {
    const stream = await client.chat.completions.create({
      model: 'tiny',
      messages: [{ role: 'user', content: 'hi' }],
      stream: true,
      stream_options: { include_usage: true },
      max_completion_tokens: 100,
    });
    const chunks: OpenAI.ChatCompletionChunk[] = [];
    for await (const chunk of stream) chunks.push(chunk);
    expect(chunks[0]!.choices[0]!.delta).toEqual({ role: 'assistant', content: '' });
    expect(chunks.every((c) => c.object === 'chat.completion.chunk' && c.id === chunks[0]!.id)).toBe(true);
    const withChoices = chunks.filter((c) => c.choices.length > 0);
    expect(withChoices.every((c) => c.usage === null)).toBe(true);
    expect(withChoices.map((c) => c.choices[0]!.delta.content ?? '').join('')).toBe(REPLY);
    expect(withChoices.slice(0, -1).every((c) => c.choices[0]!.finish_reason === null)).toBe(true);
    expect(withChoices.at(-1)!.choices[0]!.finish_reason).toBe('stop');
    const last = chunks.at(-1)!;
    expect(last.choices).toEqual([]);
    expect(last.usage).toMatchObject({ completion_tokens: tokenizer.encode(REPLY).length + 1, prompt_tokens_details: { cached_tokens: 16 } });
    expect(tiny.requests.at(-1)!.sampling.max_tokens).toBe(100);
  });

  it('the raw stream is data: events then [DONE], with text/event-stream', async () => {
    const r = await post('/v1/completions', JSON.stringify({ model: 'tiny', prompt: 'Hello', stream: true, max_tokens: 3 }));
    expect(r.status).toBe(200);
    expect(r.headers['content-type']).toBe('text/event-stream; charset=utf-8');
    const events = r.text.split('\n\n');
    expect(events.at(-1)).toBe('');
    expect(events.at(-2)).toBe('data: [DONE]');
    const chunks = events.slice(0, -2).map((e) => JSON.parse(e.replace(/^data: /, '')) as OpenAI.Completion);
    expect(chunks.at(-1)!.choices[0]!.finish_reason).toBe('length');
    expect(chunks.map((c) => c.choices[0]!.text).join('')).toBe(tokenizer.decode(tokenizer.encode(REPLY).slice(0, 3)));
    expect(chunks.every((c) => !('usage' in c))).toBe(true);
  });

  it('completions: text, token-id and one-element list prompts; default max_tokens 16; echo; logprobs 0', async () => {
    const r = await client.completions.create({ model: 'tiny', prompt: 'Hello world' });
    expect(r.id).toMatch(/^cmpl-/);
    expect(r.object).toBe('text_completion');
    expect(r.choices[0]).toMatchObject({ index: 0, finish_reason: 'length', logprobs: null });
    expect(r.choices[0]!.text).toBe(tokenizer.decode(tokenizer.encode(REPLY).slice(0, 16)));
    expect(tiny.requests.at(-1)!.promptTokenIds).toEqual(tokenizer.encode('Hello world'));
    expect(r.usage).toMatchObject({ prompt_tokens: tokenizer.encode('Hello world').length, completion_tokens: 16 });

    const ids = tokenizer.encode('Hello world');
    const byIds = await client.completions.create({ model: 'tiny', prompt: ids, max_tokens: 2, echo: true });
    expect(tiny.requests.at(-1)!.promptTokenIds).toEqual(ids);
    expect(byIds.choices[0]!.text).toBe(`Hello world${tokenizer.decode(tokenizer.encode(REPLY).slice(0, 2))}`);
    await client.completions.create({ model: 'tiny', prompt: ['Hello'], max_tokens: 1 });
    expect(tiny.requests.at(-1)!.promptTokenIds).toEqual(tokenizer.encode('Hello'));

    const lp = await client.completions.create({ model: 'tiny', prompt: 'Hello', max_tokens: 2, logprobs: 0 });
    const first = tokenizer.decode([tokenizer.encode(REPLY)[0]!]);
    expect(lp.choices[0]!.logprobs).toEqual({
      tokens: [first, expect.any(String)],
      token_logprobs: [-0.5, -0.5],
      top_logprobs: [{ [first]: -0.5 }, expect.any(Object)],
      text_offset: [0, first.length],
    });
  });

  it('chat logprobs: the chosen tokens, no alternatives', async () => {
    const r = await client.chat.completions.create({ model: 'tiny', messages: [{ role: 'user', content: 'hi' }], logprobs: true, max_tokens: 2 });
    const content = r.choices[0]!.logprobs!.content!;
    expect(content).toHaveLength(2);
    expect(content[0]).toEqual({ token: 'The', logprob: -0.5, bytes: [...Buffer.from('The')], top_logprobs: [] });
  });

  it('a stop string across token boundaries is never emitted and aborts the engine request', async () => {
    const ids = tokenizer.encode(REPLY);
    const pieces = ids.map((id) => tokenizer.decode([id]));
    const k = pieces.findIndex((p, i) => i > 0 && p.length >= 3 && (pieces[i + 1]?.length ?? 0) >= 3);
    expect(k).toBeGreaterThan(0);
    const stop = pieces[k]!.slice(-2) + pieces[k + 1]!.slice(0, 2); // spans two tokens
    const expected = REPLY.slice(0, REPLY.indexOf(stop));

    const r = await client.chat.completions.create({ model: 'endless', messages: [{ role: 'user', content: 'go' }], stop: [stop, 'never'] });
    expect(r.choices[0]!.message.content).toBe(expected);
    expect(r.choices[0]!.finish_reason).toBe('stop');
    expect((r.choices[0] as unknown as { stop_reason: unknown }).stop_reason).toBe(stop);
    expect(r.usage!.completion_tokens).toBe(k + 2);
    await vi.waitFor(() => expect(endless.abortedRequests).toContain(r.id));

    const stream = await client.completions.create({ model: 'endless', prompt: 'go', stop, stream: true, max_tokens: 200 });
    const texts: string[] = [];
    let id = '';
    for await (const chunk of stream) {
      id = chunk.id;
      texts.push(chunk.choices[0]?.text ?? '');
    }
    expect(texts.join('')).toBe(expected);
    await vi.waitFor(() => expect(endless.abortedRequests).toContain(id));
  });

  it('invalid sampling values are 400 invalid_request_error naming the field (SDK BadRequestError)', async () => {
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ temperature: -1 }, 'temperature'],
      [{ top_p: 0 }, 'top_p'],
      [{ n: 0 }, 'n'],
      [{ n: 129 }, 'n'],
      [{ top_logprobs: 2 }, 'top_logprobs'],
      [{ max_completion_tokens: 0 }, 'max_completion_tokens'],
      [{ stop: [''] }, 'stop'],
      [{ top_logprobs: 21, logprobs: true }, 'top_logprobs'],
    ];
    for (const [fields, param] of cases) {
      const err = await client.chat.completions
        .create({ model: 'tiny', messages: [{ role: 'user', content: 'hi' }], ...fields } as OpenAI.ChatCompletionCreateParamsNonStreaming)
        .catch((e: unknown) => e);
      expect(err, param).toBeInstanceOf(OpenAI.BadRequestError);
      expect((err as APIError).status).toBe(400);
      expect((err as APIError).param).toBe(param);
      expect((err as APIError).type).toBe('invalid_request_error');
    }
    expect(tiny.requests.every((r) => r.sampling.temperature >= 0)).toBe(true);
  });

  it("logit_bias ids are checked against the ids the model samples from (its card's vocabSize), not its tokenizer's", async () => {
    const last = tokenizer.vocabSize - 1;
    const chat = (model: string, id: number) =>
      client.chat.completions.create({ model, messages: [{ role: 'user', content: 'hi' }], logit_bias: { [String(id)]: 1 } }).catch((e: unknown) => e);
    const refused = await chat('narrow', last);
    expect(refused).toBeInstanceOf(OpenAI.BadRequestError);
    expect((refused as APIError).message).toContain(`token_id ${last} in logit_bias contains out-of-vocab token id`);
    expect(await chat('narrow', last - 1)).toMatchObject({ object: 'chat.completion' });
    expect(await chat('tiny', last)).toMatchObject({ object: 'chat.completion' });
    expect(await chat('tiny', last + 1)).toBeInstanceOf(OpenAI.BadRequestError);
    const completion = await client.completions.create({ model: 'narrow', prompt: 'hi', logit_bias: { [String(last)]: 1 } }).catch((e: unknown) => e);
    expect(completion).toBeInstanceOf(OpenAI.BadRequestError);
  });

  it('an unknown model is 404 model_not_found (SDK NotFoundError), streaming or not', async () => {
    for (const stream of [false, true]) {
      const err = await client.chat.completions.create({ model: 'gpt-9', messages: [{ role: 'user', content: 'hi' }], stream }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(OpenAI.NotFoundError);
      expect((err as APIError).code).toBe('model_not_found');
      expect((err as APIError).message).toContain('The model `gpt-9` does not exist.');
    }
  });

  it('a prompt longer than the context is a 400 before any stream starts', async () => {
    for (const stream of [false, true]) {
      const err = await client.completions.create({ model: 'short', prompt: 'The quick brown fox jumps over the lazy dog', stream }).catch((e: unknown) => e);
      expect(err, String(stream)).toBeInstanceOf(OpenAI.BadRequestError);
      expect((err as APIError).message).toContain('maximum context length');
    }
  });

  it('a model without a chat template refuses chat completions (400) but serves completions', async () => {
    const err = await client.chat.completions.create({ model: 'org/no-template', messages: [{ role: 'user', content: 'hi' }] }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.BadRequestError);
    expect((err as APIError).message).toContain('has no chat template');
    const r = await client.completions.create({ model: 'org/no-template', prompt: 'Hello', max_tokens: 1 });
    expect(r.choices[0]!.finish_reason).toBe('length');
  });

  it('malformed JSON, a non-object body, a non-JSON content type and an oversized body are 400 with OpenAI error bodies', async () => {
    const bad = await post('/v1/chat/completions', '{"model": "tiny", "messages": [');
    expect(bad.status).toBe(400);
    expect(bad.headers['content-type']).toBe('application/json');
    const body = bad.json() as { error: Record<string, unknown> };
    expect(body.error).toMatchObject({ type: 'invalid_request_error', param: null, code: null });
    expect(body.error.message).toContain('not valid JSON');

    expect((await post('/v1/completions', '[1, 2]')).json()).toMatchObject({ error: { type: 'invalid_request_error' } });
    const plain = await post('/v1/completions', '{"model":"tiny","prompt":"x"}', { 'Content-Type': 'text/plain' });
    expect(plain.status).toBe(400);
    expect((plain.json() as { error: { message: string } }).error.message).toContain('Content-Type');
    const big = await post('/v1/completions', JSON.stringify({ model: 'tiny', prompt: 'x'.repeat(MAX_INPUT) }));
    expect(big.status).toBe(400);
    expect((big.json() as { error: { message: string } }).error.message).toContain('exceeds the maximum allowed input size');
    const missing = await post('/v1/completions', JSON.stringify({ model: 'tiny' }));
    expect(missing.json()).toMatchObject({ error: { param: 'prompt' } });
  });

  it('an engine failure after the stream started is an SSE error event, then [DONE]', async () => {
    const stream = await client.completions.create({ model: 'failing', prompt: 'Hello', stream: true });
    const seen: string[] = [];
    const err = await (async () => {
      for await (const chunk of stream) seen.push(chunk.choices[0]!.text);
    })().catch((e: unknown) => e);
    expect(seen.join('')).toBe(tokenizer.decode(tokenizer.encode('Hello world! The quick brown fox.').slice(0, 2)));
    expect(err).toBeInstanceOf(OpenAI.APIError);
    expect((err as APIError).message).toContain('executor exploded');

    const raw = await post('/v1/completions', JSON.stringify({ model: 'failing', prompt: 'Hello', stream: true }));
    expect(raw.status).toBe(200);
    expect(raw.text).toContain('data: {"error":{"message":"executor exploded","type":"server_error","param":null,"code":null}}\n\ndata: [DONE]\n\n');
    // Non-streaming: the same failure is a 500.
    const plain = await post('/v1/completions', JSON.stringify({ model: 'failing', prompt: 'Hello' }));
    expect(plain.status).toBe(500);
  });

  it('a client that disconnects mid-stream aborts the generation', async () => {
    const stream = await client.chat.completions.create({ model: 'endless', messages: [{ role: 'user', content: 'go' }], stream: true });
    let id = '';
    let n = 0;
    for await (const chunk of stream) {
      id = chunk.id;
      if (++n === 3) break; // the SDK aborts the HTTP request
    }
    await vi.waitFor(() => expect(endless.abortedRequests).toContain(id));
    expect(endless.signals.get(id)!.aborted).toBe(true);
  });

  it('n choices: one engine request each (<index>_<id>, seed + index), the first alone until its first output', async () => {
    const before = tiny.requests.length;
    const r = await client.chat.completions.create({ model: 'tiny', messages: [{ role: 'user', content: 'hi' }], n: 3, seed: 5, max_tokens: 2 });
    const sent = tiny.requests.slice(before);
    expect(sent.map((q) => q.requestId)).toEqual([0, 1, 2].map((i) => `${i}_${r.id}`));
    expect(sent.map((q) => q.sampling.seed)).toEqual([5, 6, 7]);
    expect(r.choices.map((c) => [c.index, c.message.content])).toEqual([0, 1, 2].map((i) => [i, tokenizer.decode(tokenizer.encode(REPLY).slice(0, 2))]));
    // the prompt counted once, the completions summed; cached tokens are the fake's per request
    expect(r.usage).toMatchObject({ prompt_tokens: sent[0]!.promptTokenIds.length, completion_tokens: 6, prompt_tokens_details: { cached_tokens: 16 } });

    // without a seed each choice draws its own; one choice keeps the response id as its request id
    await client.chat.completions.create({ model: 'tiny', messages: [{ role: 'user', content: 'hi' }], n: 2, max_tokens: 1 });
    expect(tiny.requests.slice(-2).map((q) => q.sampling.seed)).toEqual([null, null]);
    const one = await client.completions.create({ model: 'tiny', prompt: 'x', max_tokens: 1 });
    expect(tiny.requests.at(-1)!.requestId).toBe(one.id);

    // a batch of prompts: prompt-major indexes, each prompt's choices from seed, seed + 1
    const batch = await client.completions.create({ model: 'tiny', prompt: ['a', 'b c'], n: 2, seed: 9, max_tokens: 1 });
    expect(batch.choices.map((c) => c.index)).toEqual([0, 1, 2, 3]);
    const last = tiny.requests.slice(-4);
    expect(last.map((q) => [q.requestId, q.sampling.seed, tokenizer.decode([...q.promptTokenIds])])).toEqual([
      [`0_${batch.id}`, 9, 'a'],
      [`1_${batch.id}`, 10, 'a'],
      [`2_${batch.id}`, 9, 'b c'],
      [`3_${batch.id}`, 10, 'b c'],
    ].sort((x, y) => last.findIndex((q) => q.requestId === x[0]) - last.findIndex((q) => q.requestId === y[0])));
    expect(batch.usage!.prompt_tokens).toBe(tokenizer.encode('a').length + tokenizer.encode('b c').length);
  });

  it('n choices: a failure of any choice is the whole answer (one error event mid-stream, a 500 otherwise)', async () => {
    const raw = await post('/v1/completions', JSON.stringify({ model: 'failing', prompt: 'Hello', stream: true, n: 2 }));
    expect(raw.text.match(/"error"/g)).toHaveLength(1);
    expect(raw.text.endsWith('data: [DONE]\n\n')).toBe(true);
    const plain = await post('/v1/chat/completions', JSON.stringify({ model: 'failing', messages: [{ role: 'user', content: 'hi' }], n: 3 }));
    expect(plain.status).toBe(500);
    expect(plain.json()).toMatchObject({ error: { message: 'executor exploded' } });
  });

  it('n choices: a client that disconnects aborts every choice', async () => {
    const stream = await client.chat.completions.create({ model: 'endless', messages: [{ role: 'user', content: 'go' }], stream: true, n: 2 });
    let id = '';
    const seen = new Set<number>();
    for await (const chunk of stream) {
      id = chunk.id;
      for (const c of chunk.choices) if (c.delta.content) seen.add(c.index);
      if (seen.size === 2) break;
    }
    await vi.waitFor(() => expect(endless.abortedRequests).toEqual(expect.arrayContaining([`0_${id}`, `1_${id}`])));
  });

  it('unknown /v1 paths are 404 and wrong methods 405, both with OpenAI bodies', async () => {
    const missing = await rawRequest(port, 'GET', '/v1/audio/speech');
    expect(missing.status).toBe(404);
    expect(missing.json()).toMatchObject({ error: { type: 'invalid_request_error' } });
    const wrong = await rawRequest(port, 'GET', '/v1/chat/completions');
    expect(wrong.status).toBe(405);
    expect(wrong.json()).toMatchObject({ error: { type: 'invalid_request_error' } });
    // With several LLMs the model is required.
    const noModel = await post('/v1/completions', JSON.stringify({ prompt: 'x' }));
    expect(noModel.status).toBe(400);
    expect(noModel.json()).toMatchObject({ error: { param: 'model' } });
  });
});
