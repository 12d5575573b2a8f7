/**
 * What real model folders bring, on a worker and through a router (test/fixtures/llm_variants_repository
 * with onnx-builder's llmVariantRepositoryFiles): generation_config.json's end ids and sampling
 * defaults (vLLM's `--generation-config auto|vllm`), the vLLM / OpenAI sampling fields logit_bias,
 * min_tokens, ignore_eos, skip_special_tokens and seed, Optimum's merged decoder (`use_cache_branch`),
 * a tokenizer wider than the logits (Gemma 3) and a malformed generation_config.json. Client: the
 * official `openai` SDK, streaming and not.
 */
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WIDE_VOCAB_EXTRA_TOKEN_ID, llmVariantRepositoryFiles, tinySpecialTokenIds } from '@switchyard/onnx-builder';
import { startWorkerProcess, type WorkerProcess } from '@switchyard/testing';
import { fixtureRepository, type FixtureRepository } from './lib/fixture-repository.js';
import { startCluster, type Cluster } from './support/cluster.js';
import { get, post } from './lib/tensors.js';

const FIXTURE = 'llm_variants_repository';
const files = (): Record<string, Uint8Array> => Object.fromEntries(llmVariantRepositoryFiles().map((f) => [f.path, f.build()]));
const GOOD_MODELS = ['plain_llm', 'gen_llm', 'gen_llm_vllm', 'merged_llm', 'wide_vocab_llm'];
const { endoftext, imStart, imEnd } = tinySpecialTokenIds();
const MESSAGES = [{ role: 'user' as const, content: 'The quick brown fox jumps over the lazy dog' }];
/** Neither end id can be chosen: greedy output runs to its length. */
const NO_END = { [String(endoftext)]: -100, [String(imEnd)]: -100 };
/** Type-level room for vLLM's extra request fields (the SDK sends unknown fields as they are). */
type Extra = Record<string, unknown>;

let repo: FixtureRepository;
let worker: WorkerProcess;
let cluster: Cluster;
let direct: OpenAI;
let routed: OpenAI;

beforeAll(async () => {
  repo = fixtureRepository(FIXTURE, { files: files() });
  const load = GOOD_MODELS.map((m) => `--load-model=${m}`);
  [worker, cluster] = await Promise.all([
    startWorkerProcess({ modelRepositories: [repo.path], args: ['--model-control-mode=explicit', ...load] }),
    startCluster({ fixture: FIXTURE, files: files(), workers: [['--model-control-mode=explicit', '--load-model=plain_llm', '--load-model=gen_llm', '--load-model=merged_llm']], waitForModels: ['plain_llm', 'gen_llm', 'merged_llm'] }),
  ]);
  direct = new OpenAI({ baseURL: `${worker.httpUrl}/v1`, apiKey: 'unused', maxRetries: 0 });
  routed = new OpenAI({ baseURL: `${cluster.router.httpUrl}/v1`, apiKey: 'unused', maxRetries: 0 });
}, 120_000);
afterAll(async () => {
  await Promise.allSettled([worker?.stop(), cluster?.stop()]);
  repo?.remove();
});

async function chat(client: OpenAI, model: string, fields: Extra) {
  const r = await client.chat.completions.create({ model, messages: MESSAGES, ...fields } as OpenAI.ChatCompletionCreateParamsNonStreaming);
  const choice = r.choices[0]!;
  return { text: choice.message.content ?? '', finish: choice.finish_reason, stopReason: (choice as unknown as { stop_reason: unknown }).stop_reason, tokens: r.usage!.completion_tokens };
}

async function chatStream(client: OpenAI, model: string, fields: Extra) {
  const stream = await client.chat.completions.create({ model, messages: MESSAGES, stream: true, stream_options: { include_usage: true }, ...fields } as OpenAI.ChatCompletionCreateParamsStreaming);
  let text = '';
  let finish: string | null = null;
  let tokens = -1;
  for await (const chunk of stream) {
    for (const c of chunk.choices) {
      text += c.delta.content ?? '';
      if (c.finish_reason !== null) finish = c.finish_reason;
    }
    if (chunk.usage) tokens = chunk.usage.completion_tokens;
  }
  return { text, finish, tokens };
}

describe.each([
  ['worker', () => direct, () => worker.httpUrl],
  ['router', () => routed, () => cluster.router.httpUrl],
])('through the %s', (_where, client, httpUrl) => {
  it("KServe generate takes the model's defaults too, and the new fields from sampling_parameters", async () => {
    const generate = async (sampling: Extra) =>
      (await post(`${httpUrl()}/v2/models/gen_llm/generate`, { text_input: 'hello there', exclude_input_in_output: true, sampling_parameters: JSON.stringify(sampling) })).json();
    // default_max_tokens (16) capped by max_new_tokens (6); greedy as the plain model
    const implicit = await generate({ logit_bias: NO_END });
    expect(implicit).toMatchObject({ finish_reason: 'length', completion_tokens: 6 });
    const plain = (await post(`${httpUrl()}/v2/models/plain_llm/generate`, { text_input: 'hello there', exclude_input_in_output: true, sampling_parameters: JSON.stringify({ logit_bias: NO_END, temperature: 0, max_tokens: 6 }) })).json();
    expect(implicit.text_output).toBe(plain.text_output);
    expect(await generate({ logit_bias: { [String(endoftext)]: 100 }, min_tokens: 2 })).toMatchObject({ finish_reason: 'stop', completion_tokens: 3 });
    const bad = await post(`${httpUrl()}/v2/models/gen_llm/generate`, { text_input: 'hi', sampling_parameters: JSON.stringify({ logit_bias: { '999': 1 } }) });
    expect(bad.status).toBe(400);
    expect(bad.json().error).toMatch(/token_id 999 in logit_bias contains out-of-vocab token id/);
  });

  it("generation_config.json's sampling fields are the defaults: greedy and max_new_tokens, as the same request spelled out", async () => {
    const implicit = await chat(client(), 'gen_llm', { logit_bias: NO_END });
    const spelled = await chat(client(), 'plain_llm', { logit_bias: NO_END, temperature: 0, max_tokens: 6 });
    expect(implicit).toMatchObject({ finish: 'length', tokens: 6 });
    expect(implicit.text).toBe(spelled.text);
    // the model's max_new_tokens caps a request's own max_tokens too (vLLM takes the least)
    expect(await chat(client(), 'gen_llm', { logit_bias: NO_END, temperature: 0, max_tokens: 10 })).toMatchObject({ tokens: 6 });
    expect(await chat(client(), 'gen_llm', { logit_bias: NO_END, max_tokens: 3 })).toMatchObject({ tokens: 3, text: (await chat(client(), 'plain_llm', { logit_bias: NO_END, temperature: 0, max_tokens: 3 })).text });
  });

  it("generation_config.json's extra end id stops generation, stop_reason naming it (vLLM); ignore_eos and a model without it go on", async () => {
    const bias = { [String(endoftext)]: 100 };
    expect(await chat(client(), 'gen_llm', { logit_bias: bias })).toEqual({ text: '', finish: 'stop', stopReason: endoftext, tokens: 1 });
    expect(await chatStream(client(), 'gen_llm', { logit_bias: bias })).toEqual({ text: '', finish: 'stop', tokens: 1 });
    expect(await chat(client(), 'gen_llm', { logit_bias: bias, ignore_eos: true, max_tokens: 3 })).toMatchObject({ finish: 'length', tokens: 3 });
    expect(await chat(client(), 'plain_llm', { logit_bias: bias, max_tokens: 3 })).toMatchObject({ finish: 'length', tokens: 3 });
  });

  it('min_tokens holds the end ids back until reached, streaming and not', async () => {
    const fields = { logit_bias: { [String(endoftext)]: 100 }, min_tokens: 3, max_tokens: 10 };
    const whole = await chat(client(), 'gen_llm', fields);
    expect(whole).toMatchObject({ finish: 'stop', stopReason: endoftext, tokens: 4 });
    expect(await chatStream(client(), 'gen_llm', fields)).toEqual({ text: whole.text, finish: 'stop', tokens: 4 });
    // the tokenizer's own EOS too
    expect(await chat(client(), 'plain_llm', { logit_bias: { [String(imEnd)]: 100 }, min_tokens: 2, max_tokens: 10 })).toMatchObject({ finish: 'stop', stopReason: null, tokens: 3 });
  });

  it('skip_special_tokens=false shows special tokens in the text; by default they are dropped', async () => {
    const fields = { logit_bias: { [String(imStart)]: 100 }, max_tokens: 3 };
    expect(await chat(client(), 'plain_llm', { ...fields, skip_special_tokens: false })).toMatchObject({ text: '<|im_start|>'.repeat(3), tokens: 3 });
    expect(await chatStream(client(), 'plain_llm', { ...fields, skip_special_tokens: false })).toMatchObject({ text: '<|im_start|>'.repeat(3) });
    expect(await chat(client(), 'plain_llm', fields)).toMatchObject({ text: '', tokens: 3 });
  });

  it('logit_bias: ids outside the vocabulary and keys that are not ids are 400 naming logit_bias; values are clamped to ±100', async () => {
    for (const logit_bias of [{ '384': 1 }, { x: 1 }, { '1': 'up' }]) {
      const err = await client().chat.completions.create({ model: 'plain_llm', messages: MESSAGES, logit_bias } as unknown as OpenAI.ChatCompletionCreateParamsNonStreaming).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(OpenAI.BadRequestError);
      expect((err as InstanceType<typeof OpenAI.BadRequestError>).param).toBe('logit_bias');
    }
    // a bias past the range is clamped, not refused
    expect(await chat(client(), 'plain_llm', { logit_bias: { [String(imStart)]: 1e6 }, max_tokens: 2, skip_special_tokens: false })).toMatchObject({ text: '<|im_start|>'.repeat(2) });
  });

  it('seed makes sampling at temperature 1 repeatable', async () => {
    const fields = { temperature: 1, seed: 42, max_tokens: 8, logit_bias: NO_END };
    const a = await chat(client(), 'plain_llm', fields);
    expect((await chat(client(), 'plain_llm', fields)).text).toBe(a.text);
  });

  it("Optimum's merged decoder (use_cache_branch) serves the plain model's tokens, streaming and not, one at a time and batched", async () => {
    const fields = { temperature: 0, ignore_eos: true, max_tokens: 12 };
    const expected = await chat(client(), 'plain_llm', fields);
    expect(await chat(client(), 'merged_llm', fields)).toEqual(expected);
    expect((await chatStream(client(), 'merged_llm', fields)).text).toBe(expected.text);
    const together = await Promise.all([1, 2, 3].map(() => chat(client(), 'merged_llm', fields)));
    for (const r of together) expect(r).toEqual(expected);
  });
});

describe('on the worker', () => {
  it("generation_config vllm keeps vLLM's neutral defaults; the file's end ids still stop", async () => {
    // neither greedy nor capped at max_new_tokens: what temperature 1 gives the plain model with the same seed
    const sampled = await chat(direct, 'gen_llm_vllm', { logit_bias: NO_END, max_tokens: 16, seed: 3 });
    expect(sampled).toMatchObject({ finish: 'length', tokens: 16 });
    expect(sampled.text).toBe((await chat(direct, 'plain_llm', { logit_bias: NO_END, max_tokens: 16, seed: 3, temperature: 1 })).text);
    expect(await chat(direct, 'gen_llm_vllm', { logit_bias: { [String(endoftext)]: 100 } })).toMatchObject({ finish: 'stop', stopReason: endoftext, tokens: 1 });
  });

  it("a tokenizer with one id more than the logits (Gemma 3) loads and serves, config.json's vocab_size sizing the sampled logits", async () => {
    const r = await chat(direct, 'wide_vocab_llm', { temperature: 0, max_tokens: 5, logit_bias: NO_END });
    expect(r).toMatchObject({ finish: 'length', tokens: 5 });
    expect(r.text).toBe((await chat(direct, 'plain_llm', { temperature: 0, max_tokens: 5, logit_bias: NO_END })).text);
    const streamed = await chatStream(direct, 'wide_vocab_llm', { temperature: 1, seed: 9, max_tokens: 20, ignore_eos: true });
    expect(streamed).toMatchObject({ finish: 'length', tokens: 20 });
    // the tokenizer's extra id has no embedding row: refused as the client's error, never run
    for (const prompt of [[1, 2, WIDE_VOCAB_EXTRA_TOKEN_ID], 'look: <image_soft_token>']) {
      const err = await direct.completions.create({ model: 'wide_vocab_llm', prompt, max_tokens: 2 }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(OpenAI.BadRequestError);
      expect((err as Error).message).toMatch(/token id 384 is out of the model's vocabulary \(0\.\.383\)/);
    }
    expect(await chat(direct, 'wide_vocab_llm', { max_tokens: 2 })).toMatchObject({ tokens: 2 });
  });

  it('a malformed generation_config.json fails the load with a clear reason; the worker keeps serving', async () => {
    const res = await post(`${worker.httpUrl}/v2/repository/models/bad_gen_llm/load`, {});
    expect(res.status).toBe(400);
    expect(res.json().error).toMatch(/generation_config\.json .*not valid JSON/);
    const index = (await post(`${worker.httpUrl}/v2/repository/index`, {})).json() as Array<{ name: string; state: string; reason: string }>;
    expect(index.find((m) => m.name === 'bad_gen_llm')).toMatchObject({ state: 'UNAVAILABLE' });
    expect((await get(`${worker.httpUrl}/v2/models/plain_llm/ready`)).status).toBe(200);
    expect(await chat(direct, 'plain_llm', { max_tokens: 2 })).toMatchObject({ tokens: 2 });
  });
});
