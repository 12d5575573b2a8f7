/**
 * LLMs served by a real worker process: the tiny ONNX decoder (`backend: "llm"`, fp32 and fp16 KV) and
 * the simulated engine (`backend: "mocker"`), from test/fixtures/llm_repository with the files
 * onnx-builder generates. Clients: the official `openai` SDK on /v1, Triton's generate /
 * generate_stream over HTTP, ModelStreamInfer over gRPC, and the Prometheus metrics port.
 */
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { llmFixtureRepositoryFiles } from '@switchyard/onnx-builder';
import { startWorkerProcess, type WorkerProcess } from '@switchyard/testing';
import { validates } from '@switchyard/testing/fuzz';
import { guidedRoot, initialState, step, type JsonState } from '@switchyard/llm/internal';
import { fixtureRepository, type FixtureRepository } from './lib/fixture-repository.js';
import { isFinalResponse, loadGrpcClients, streamInfer, type GrpcClient } from './lib/grpc-client.js';
import { get, post, serializeStrings, deserializeStrings, serverSentEvents } from './lib/tensors.js';
import { waitFor } from './lib/wait-for.js';
import { batchedCompletionLogprobs, chatTopLogprobs, nChoicesShareThePrompt } from './lib/openai-choices.js';
import { STRUCTURED_SCHEMA } from './lib/structured-output.js';

let repo: FixtureRepository;
let worker: WorkerProcess;
let openai: OpenAI;
let grpcClient: GrpcClient;

beforeAll(async () => {
  repo = fixtureRepository('llm_repository', { files: Object.fromEntries(llmFixtureRepositoryFiles().map((f) => [f.path, f.build()])) });
  worker = await startWorkerProcess({ modelRepositories: [repo.path] });
  openai = new OpenAI({ baseURL: `${worker.httpUrl}/v1`, apiKey: 'unused', maxRetries: 0 });
  grpcClient = loadGrpcClients(worker.grpcAddress).inference;
});
afterAll(async () => {
  grpcClient?.close();
  await worker?.stop();
  repo?.remove();
});

const PROMPT = 'The quick brown fox jumps over the lazy dog';

/** One metric sample's value from the worker's /metrics text, or undefined. */
async function metric(name: string, labels: string): Promise<number | undefined> {
  const text = (await get(worker.metricsUrl + '/metrics')).body.toString('utf8');
  const line = text.split('\n').find((l) => l.startsWith(`${name}{${labels}}`));
  return line === undefined ? undefined : Number(line.split(' ').pop());
}

describe('KServe generate on an LLM', () => {
  it('generate answers one text_output (prompt + completion, vLLM backend style) with usage parameters', async () => {
    const res = await post(`${worker.httpUrl}/v2/models/tiny_llm/generate`, {
      text_input: PROMPT,
      parameters: { temperature: 0, max_tokens: 8 },
    });
    expect(res.status).toBe(200);
    const body = res.json();
    expect(body).toMatchObject({ model_name: 'tiny_llm', model_version: '1', finish_reason: 'length', completion_tokens: 8 });
    expect(body.text_output.startsWith(PROMPT)).toBe(true);
    expect(body.text_output.length).toBeGreaterThan(PROMPT.length);
    expect(body.prompt_tokens).toBeGreaterThan(0);
  });

  it('greedy output is the same for fp32 and fp16 KV models, and for exclude_input_in_output', async () => {
    const run = async (model: string) =>
      (await post(`${worker.httpUrl}/v2/models/${model}/generate`, { text_input: PROMPT, exclude_input_in_output: true, parameters: { temperature: 0, max_tokens: 12 } })).json();
    const a = await run('tiny_llm');
    const b = await run('tiny_llm');
    expect(a.text_output).toBe(b.text_output);
    expect(a.text_output.startsWith(PROMPT)).toBe(false);
    // fp16 rounding of the KV cache may change a late token, but the first tokens agree.
    const c = await run('tiny_llm_fp16');
    expect(c.completion_tokens).toBe(12);
  });

  it('generate_stream sends one event per text delta; the concatenation equals the non-streamed text', async () => {
    const body = { text_input: PROMPT, stream: true, exclude_input_in_output: true, parameters: { temperature: 0, max_tokens: 10 } };
    const res = await post(`${worker.httpUrl}/v2/models/tiny_llm/generate_stream`, body);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toContain('text/event-stream');
    const events = serverSentEvents(res.body);
    expect(events.length).toBeGreaterThan(1);
    expect(events.at(-1)).toMatchObject({ finish_reason: 'length', completion_tokens: 10 });
    const whole = (await post(`${worker.httpUrl}/v2/models/tiny_llm/generate`, { ...body, stream: false })).json();
    expect(events.map((e) => e.text_output).join('')).toBe(whole.text_output);
  });

  it('ModelStreamInfer streams deltas with triton_final_response on the last', async () => {
    const responses = await streamInfer(grpcClient, [
      {
        model_name: 'mock_llm',
        id: 'g1',
        inputs: [
          { name: 'text_input', datatype: 'BYTES', shape: [1] },
          { name: 'stream', datatype: 'BOOL', shape: [1] },
        ],
        parameters: { max_tokens: { int64_param: 6 } },
        raw_input_contents: [serializeStrings([PROMPT]), Buffer.from([1])],
      },
    ]);
    expect(responses.every((r) => r.error_message === '')).toBe(true);
    expect(isFinalResponse(responses.at(-1))).toBe(true);
    expect(responses.slice(0, -1).some(isFinalResponse)).toBe(false);
    const last = responses.at(-1).infer_response;
    expect(last.parameters.finish_reason.string_param).toBe('length');
    expect(Number(last.parameters.completion_tokens.int64_param)).toBe(6);
    const text = responses.map((r) => deserializeStrings(r.infer_response.raw_output_contents[0])[0]).join('');
    expect(text.length).toBeGreaterThan(0);
  });

  it('rejects bad sampling values and over-long prompts with 400, and keeps serving', async () => {
    const bad = await post(`${worker.httpUrl}/v2/models/tiny_llm/generate`, { text_input: PROMPT, parameters: { temperature: -1 } });
    expect(bad.status).toBe(400);
    expect(bad.json().error).toContain('temperature');
    const long = await post(`${worker.httpUrl}/v2/models/tiny_llm/generate`, { text_input: 'word '.repeat(600), parameters: { max_tokens: 4 } });
    expect(long.status).toBe(400);
    expect(long.json().error).toContain("maximum context length is 512 tokens");
    const ok = await post(`${worker.httpUrl}/v2/models/tiny_llm/generate`, { text_input: PROMPT, parameters: { max_tokens: 2 } });
    expect(ok.status).toBe(200);
  });
});

describe('OpenAI endpoints with the official SDK', () => {
  it('lists the LLMs', async () => {
    const models = await openai.models.list();
    expect(models.data.map((m) => m.id).sort()).toEqual(['mock_llm', 'tiny_llm', 'tiny_llm_fp16']);
    expect(models.data[0]).toMatchObject({ object: 'model', owned_by: 'switchyard' });
  });

  it('completions give the same greedy text as KServe generate', async () => {
    const c = await openai.completions.create({ model: 'tiny_llm', prompt: PROMPT, max_tokens: 12, temperature: 0 });
    const g = (await post(`${worker.httpUrl}/v2/models/tiny_llm/generate`, { text_input: PROMPT, exclude_input_in_output: true, parameters: { temperature: 0, max_tokens: 12 } })).json();
    expect(c.object).toBe('text_completion');
    expect(c.choices[0]!.text).toBe(g.text_output);
    expect(c.choices[0]!.finish_reason).toBe('length');
    expect(c.usage).toMatchObject({ completion_tokens: 12 });
  });

  it.each(['tiny_llm', 'tiny_llm_fp16'])('%s: a repeated chat prompt is served from the prefix cache (cached_tokens) with identical greedy output', async (model) => {
    const messages = [
      { role: 'system' as const, content: 'You are a helpful assistant that answers in one short sentence every time.' },
      { role: 'user' as const, content: 'Tell me about foxes and dogs and their famous jump, please.' },
    ];
    const first = await openai.chat.completions.create({ model, messages, max_tokens: 8, temperature: 0 });
    const second = await openai.chat.completions.create({ model, messages, max_tokens: 8, temperature: 0 });
    expect(first.object).toBe('chat.completion');
    expect(second.choices[0]!.message.content).toBe(first.choices[0]!.message.content);
    expect(first.usage!.prompt_tokens).toBeGreaterThan(16);
    expect(second.usage!.prompt_tokens_details?.cached_tokens).toBeGreaterThanOrEqual(16);
  });

  it('n = 3 choices: own seeds (seed + i), the prompt computed once and shared from the prefix cache, streamed with indexes', async () => {
    await nChoicesShareThePrompt(openai, 'tiny_llm', 'worker');
  });

  it('chat logprobs with top_logprobs: the greedy token leads its alternatives, streamed or not', async () => {
    await chatTopLogprobs(openai, 'tiny_llm');
  });

  it('completions: a batch of prompts × n with logprobs, indexed prompt-major', async () => {
    await batchedCompletionLogprobs(openai, 'tiny_llm');
  });

  it('streams chat chunks with usage at the end', async () => {
    const stream = await openai.chat.completions.create({
      model: 'mock_llm',
      messages: [{ role: 'user', content: 'hello there' }],
      max_tokens: 10,
      stream: true,
      stream_options: { include_usage: true },
    });
    const chunks = [];
    for await (const chunk of stream) chunks.push(chunk);
    expect(chunks[0]!.choices[0]!.delta.role).toBe('assistant');
    const finish = chunks.find((c) => c.choices[0]?.finish_reason != null);
    expect(finish!.choices[0]!.finish_reason).toBe('length');
    expect(chunks.at(-1)!.usage).toMatchObject({ completion_tokens: 10 });
  });

  it('answers OpenAI-shaped errors: unknown model 404, invalid temperature 400, too long 400', async () => {
    await expect(openai.completions.create({ model: 'nope', prompt: 'x', max_tokens: 1 })).rejects.toMatchObject({ status: 404 });
    await expect(openai.completions.create({ model: 'tiny_llm', prompt: 'x', temperature: -1 })).rejects.toMatchObject({ status: 400 });
    await expect(openai.completions.create({ model: 'tiny_llm', prompt: 'word '.repeat(600), max_tokens: 4 })).rejects.toMatchObject({ status: 400 });
    const malformed = await post(`${worker.httpUrl}/v1/chat/completions`, '{"model": "tiny_llm", "messages": [', { 'content-type': 'application/json' });
    expect(malformed.status).toBe(400);
    expect(malformed.json().error.message).toBeTruthy();
  });

  it('a body nested past the JSON bound is a 400 saying so, not a stack overflow in the chat template', async () => {
    const deep = '{"a":'.repeat(20_000) + '1' + '}'.repeat(20_000);
    const body = `{"model":"mock_llm","messages":[{"role":"user","content":"hi"}],"max_tokens":2,"chat_template_kwargs":${deep}}`;
    const res = await post(`${worker.httpUrl}/v1/chat/completions`, body, { 'content-type': 'application/json' });
    expect(res.status).toBe(400);
    expect(res.json().error).toMatchObject({ type: 'invalid_request_error', message: 'the request body is nested deeper than 128 arrays or objects (at position 737)' });
    const ok = await openai.chat.completions.create({ model: 'mock_llm', messages: [{ role: 'user', content: 'hi' }], max_tokens: 2, chat_template_kwargs: { a: { b: 1 } } } as never);
    expect(ok.choices).toHaveLength(1);
  });

  it('a body that is not UTF-8 is a 400, never a prompt with U+FFFD in it', async () => {
    const body = Buffer.concat([Buffer.from('{"model":"mock_llm","max_tokens":2,"prompt":"a'), Buffer.from([0xff, 0xfe]), Buffer.from('"}')]);
    const res = await post(`${worker.httpUrl}/v1/completions`, body, { 'content-type': 'application/json' });
    expect(res.status).toBe(400);
    expect(res.json().error).toMatchObject({ type: 'invalid_request_error', message: 'the request body is not valid JSON: it is not valid UTF-8' });
  });

  it('a client that disconnects mid-stream cancels the sequence and frees its KV blocks', async () => {
    const stream = await openai.chat.completions.create({ model: 'mock_llm', messages: [{ role: 'user', content: 'count to a thousand' }], max_tokens: 400, stream: true });
    let seen = 0;
    // Leaving the loop makes the SDK abort the HTTP response: the server sees the client go away.
    for await (const _ of stream) if (++seen === 3) break;
    expect(seen).toBe(3);
    await waitFor(async () => (await metric('vllm:num_requests_running', 'model="mock_llm"')) === 0, { timeoutMs: 10_000 });
    expect(await metric('vllm:num_kv_blocks_active', 'model="mock_llm"')).toBe(0);
    expect(await metric('vllm:request_success_total', 'finished_reason="abort",model="mock_llm"')).toBeGreaterThanOrEqual(1);
    // The engine keeps serving.
    const after = await openai.completions.create({ model: 'mock_llm', prompt: 'again', max_tokens: 3 });
    expect(after.usage!.completion_tokens).toBe(3);
  });
});

const STRUCTURED_FORMAT = { type: 'json_schema', json_schema: { name: 'verdict', schema: STRUCTURED_SCHEMA, strict: true } } as const;

describe('structured output (response_format) on the ONNX model', () => {
  it('chat.completions.parse() returns content that parses and validates, at temperature 0 and sampled', async () => {
    for (const temperature of [0, 1]) {
      const res = await openai.chat.completions.parse({
        model: 'tiny_llm',
        messages: [{ role: 'user', content: 'Is Paris the capital of France? Answer in JSON.' }],
        response_format: STRUCTURED_FORMAT,
        max_completion_tokens: 460,
        temperature,
        seed: 11,
      });
      const message = res.choices[0]!.message;
      expect(res.choices[0]!.finish_reason).toBe('stop');
      expect(validates(message.parsed, STRUCTURED_SCHEMA)).toBe(true);
      expect(message.parsed).toEqual(JSON.parse(message.content!));
    }
  });

  it('streams the same document as the non-streamed response; json_object gives an object', async () => {
    const request = { model: 'tiny_llm', messages: [{ role: 'user' as const, content: 'Give me JSON.' }], response_format: STRUCTURED_FORMAT, max_tokens: 460, temperature: 0 };
    const whole = await openai.chat.completions.create(request);
    const stream = openai.chat.completions.stream(request);
    let text = '';
    for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? '';
    const final = await stream.finalChatCompletion();
    expect(text).toBe(whole.choices[0]!.message.content);
    // (The SDK fills `parsed` on streams only for zod formats; the text is what matters.)
    expect(final.choices[0]!.message.content).toBe(text);
    expect(final.choices[0]!.finish_reason).toBe('stop');
    expect(validates(JSON.parse(text), STRUCTURED_SCHEMA)).toBe(true);
    const object = await openai.chat.completions.create({ ...request, response_format: { type: 'json_object' }, max_tokens: 460, temperature: 0 });
    if (object.choices[0]!.finish_reason === 'stop') {
      const value = JSON.parse(object.choices[0]!.message.content!) as unknown;
      expect(typeof value === 'object' && value !== null && !Array.isArray(value)).toBe(true);
    } else {
      // Cut by max_tokens: still a prefix of some JSON object.
      let state: JsonState | null = initialState(guidedRoot({ kind: 'json' }));
      for (const b of Buffer.from(object.choices[0]!.message.content!)) state = state === null ? null : step(state, b);
      expect(state).not.toBeNull();
    }
    // Completions take response_format too.
    const completion = await openai.completions.create({ model: 'tiny_llm', prompt: 'JSON:', max_tokens: 480, temperature: 0, response_format: STRUCTURED_FORMAT } as never);
    expect(validates(JSON.parse(completion.choices[0]!.text), STRUCTURED_SCHEMA)).toBe(true);
  });

  it('refuses unsupported schemas, bad formats and engines without logits with a 400 naming response_format', async () => {
    const refused = (body: object) => openai.chat.completions.create({ model: 'tiny_llm', messages: [{ role: 'user', content: 'x' }], max_tokens: 4, ...body } as never);
    await expect(
      refused({ response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'object', properties: { id: { type: 'string', pattern: '^[a-z]+$' } } } } } }),
    ).rejects.toMatchObject({ status: 400, param: 'response_format', message: '400 response_format.json_schema.schema: pattern is not supported (at #/properties/id)' });
    await expect(refused({ response_format: { type: 'yaml' } })).rejects.toMatchObject({ status: 400, param: 'response_format' });
    await expect(refused({ response_format: { type: 'json_object' }, ignore_eos: true })).rejects.toMatchObject({ status: 400, param: 'response_format' });
    await expect(refused({ model: 'mock_llm', response_format: { type: 'json_object' } })).rejects.toMatchObject({ status: 400 });
    // Still serving.
    const ok = await openai.chat.completions.create({ model: 'tiny_llm', messages: [{ role: 'user', content: 'x' }], max_tokens: 2 });
    expect(ok.choices).toHaveLength(1);
  });
});

describe('LLM metrics', () => {
  it('exports vllm:* families per model with TTFT/ITL histograms and token counters', async () => {
    const text = (await get(worker.metricsUrl + '/metrics')).body.toString('utf8');
    for (const family of [
      'vllm:num_requests_running',
      'vllm:num_requests_waiting',
      'vllm:kv_cache_usage_perc',
      'vllm:gpu_prefix_cache_hit_rate',
      'vllm:prompt_tokens_total',
      'vllm:generation_tokens_total',
      'vllm:time_to_first_token_seconds',
      'vllm:inter_token_latency_seconds',
    ]) {
      expect(text, family).toContain(`# TYPE ${family} `);
    }
    expect(await metric('vllm:time_to_first_token_seconds_count', 'model="tiny_llm"')).toBeGreaterThan(0);
    expect(await metric('vllm:generation_tokens_total', 'model="tiny_llm"')).toBeGreaterThan(0);
    expect(await metric('vllm:gpu_prefix_cache_hit_rate', 'model="tiny_llm"')).toBeGreaterThan(0);
  });
});
