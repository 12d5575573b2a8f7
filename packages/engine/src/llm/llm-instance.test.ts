/**
 * LlmInstance through the engine (the simulated `mocker` LLM): the final response's usage
 * parameters, streamed and not, also when a stop string ends the generation.
 */
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { serializeBytesElements, type InferRequest, type Parameters } from '@switchyard/kserve';
import { llmFixtureRepositoryFiles } from '@switchyard/onnx-builder';
import { silentLogger } from '@switchyard/common';
import type { LlmEndpoint } from '@switchyard/llm';
import type { ResponseSender } from '../backend.js';
import { type Engine, createEngine } from '../engine.js';
import { LlmInstance } from './llm-instance.js';
import { normalizeRequest } from '../request-normalizer.js';
import type { InferResult } from '../types.js';

/** The simulated LLM (as test/fixtures/llm_repository/mock_llm); onnx-builder generates its tokenizer files. */
const MOCK_LLM_CONFIG = `name: "mock_llm"
backend: "mocker"
max_batch_size: 0
model_transaction_policy { decoupled: True }
input [
  { name: "text_input" data_type: TYPE_STRING dims: [ 1 ] },
  { name: "stream" data_type: TYPE_BOOL dims: [ 1 ] optional: true }
]
output [ { name: "text_output" data_type: TYPE_STRING dims: [ -1 ] } ]
parameters [
  { key: "block_size" value: { string_value: "16" } },
  { key: "num_gpu_blocks" value: { string_value: "64" } },
  { key: "max_model_len" value: { string_value: "512" } },
  { key: "speedup_ratio" value: { string_value: "50" } }
]
`;

let root: string;
let engine: Engine;
const PROMPT = 'Tell me a long story about the sea and the wind and the boats';

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'switchyard-llm-instance-'));
  for (const f of llmFixtureRepositoryFiles()) {
    if (!f.path.startsWith('mock_llm/')) continue;
    await mkdir(join(root, f.path, '..'), { recursive: true });
    await writeFile(join(root, f.path), f.build());
  }
  await writeFile(join(root, 'mock_llm', 'config.pbtxt'), MOCK_LLM_CONFIG);
  engine = await createEngine({ modelRepositories: [root] });
});
afterAll(async () => {
  await engine?.shutdown();
  await rm(root, { recursive: true, force: true });
});

function request(parameters: Parameters): InferRequest {
  const text = serializeBytesElements([new TextEncoder().encode(PROMPT)]);
  return { id: 'r', modelName: 'mock_llm', modelVersion: undefined, parameters, inputs: [{ name: 'text_input', datatype: 'BYTES', shape: [1], data: text, parameters: {} }], outputs: [] };
}

function run(parameters: Parameters): Promise<InferResult[]> {
  return new Promise((resolve) => {
    const results: InferResult[] = [];
    engine.submit(request(parameters), (r) => {
      results.push(r);
      if (r.final) resolve(results);
    });
  });
}

describe('LlmInstance usage parameters', () => {
  const promptTokens = (): number => engine.llmEndpoint('mock_llm')!.tokenizer.encode(PROMPT, { addSpecialTokens: true }).length;

  it.each([true, false])('reports the prompt tokens when a stop string ends the generation (stream %s)', async (stream) => {
    // The mocker samples pseudo-random tokens: within 64 of them one of these letters shows up.
    const results = await run({ stream, max_tokens: 64, stop: JSON.stringify(['e', 'a', 'o', 't', 'i', 'n', ' ']) });
    const last = results.at(-1)!;
    expect(last.error).toBeUndefined();
    expect(last.response!.parameters).toMatchObject({ finish_reason: 'stop', prompt_tokens: promptTokens() });
    expect(Number(last.response!.parameters['completion_tokens'])).toBeGreaterThan(0);
  });

  it('refuses a text_input that is not UTF-8 instead of generating from an altered prompt', async () => {
    const bad: InferRequest = { ...request({}), inputs: [{ name: 'text_input', datatype: 'BYTES', shape: [1], data: serializeBytesElements([Uint8Array.of(0x68, 0x69, 0xff)]), parameters: {} }] };
    const result = await new Promise<InferResult>((resolve) => engine.submit(bad, (r) => r.final && resolve(r)));
    expect([result.error?.code, result.error?.message]).toEqual(['invalid_argument', "input 'text_input' is not valid UTF-8"]);
  });

  it('reports the prompt tokens when max_tokens ends the generation', async () => {
    const results = await run({ stream: true, max_tokens: 3 });
    expect(results.at(-1)!.error).toBeUndefined();
    expect(results.at(-1)!.response!.parameters).toMatchObject({ finish_reason: 'length', prompt_tokens: promptTokens(), completion_tokens: 3 });
  });
});

describe('LlmInstance end of sequence', () => {
  it("stops on the EOS ids of its endpoint's card, not on the tokenizer's (the mocker generates to max_tokens)", async () => {
    const real = engine.llmEndpoint('mock_llm')!;
    const eos = [...real.tokenizer.eosTokenIds][0]!;
    expect(eos).toBeDefined();
    expect(real.card.eosTokenIds).toEqual([]);
    // an endpoint that samples the tokenizer's EOS id second, as a mocker may
    const tokens = [real.tokenizer.encode('sea', { addSpecialTokens: false })[0]!, eos, real.tokenizer.encode('wind', { addSpecialTokens: false })[0]!];
    const endpoint: LlmEndpoint = {
      card: real.card,
      tokenizer: real.tokenizer,
      chatTemplate: undefined,
      metrics: () => real.metrics(),
      async *generate(r) {
        for (const t of tokens) yield { tokenIds: [t], finishReason: null, stopReason: null };
        yield { tokenIds: [], finishReason: 'length', stopReason: null, usage: { promptTokens: r.promptTokenIds.length, completionTokens: 3, cachedTokens: 0 } };
      },
    };
    const instance = new LlmInstance({ name: 'eos', endpoint, defaultMaxTokens: 3, logger: silentLogger });
    const req = request({ max_tokens: 3, exclude_input_in_output: true });
    const results: Array<{ response?: unknown; final: boolean }> = [];
    const done = new Promise<void>((resolve) => {
      const sender: ResponseSender = {
        send: (response, final) => {
          results.push({ response, final });
          if (final) resolve();
          return true;
        },
        cancelled: false,
        onCancel: () => {},
      };
      void instance.execute([normalizeRequest(engine.modelConfig('mock_llm'), req)], [sender]);
    });
    await done;
    expect(results).toHaveLength(1);
    expect((results[0]!.response as { parameters: Parameters }).parameters).toMatchObject({ finish_reason: 'length', completion_tokens: 3 });
  });
});
