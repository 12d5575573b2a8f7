import { describe, expect, it } from 'vitest';
import { normalizeModelConfig, parseModelConfigText } from '@switchyard/model-config';
import { compileEngineOptions } from '../options.js';
import { sampledVocabSize } from './llm-backend.js';
import { compileLlmOptions, unknownLlmParameters } from './llm-options.js';

const config = (parameters: string) =>
  normalizeModelConfig(parseModelConfigText(`name: "m" backend: "llm" max_batch_size: 0 parameters [ ${parameters} ]`, 'config.pbtxt'), { modelName: 'm' });

describe('the generation_config model parameter', () => {
  it("is auto or vllm; absent, the worker's --generation-config applies", () => {
    expect(compileLlmOptions(config(''), 'llm').generationConfig).toBeUndefined();
    expect(compileLlmOptions(config('{ key: "generation_config" value: { string_value: "vllm" } }'), 'llm').generationConfig).toBe('vllm');
    expect(compileLlmOptions(config('{ key: "generation_config" value: { string_value: "auto" } }'), 'mocker').generationConfig).toBe('auto');
    expect(unknownLlmParameters(config('{ key: "generation_config" value: { string_value: "vllm" } }'))).toEqual([]);
    expect(() => compileLlmOptions(config('{ key: "generation_config" value: { string_value: "/models/x" } }'), 'llm')).toThrow(/parameter 'generation_config' must be 'auto' or 'vllm'/);
  });

  it('the engine option defaults to auto and refuses other modes', () => {
    expect(compileEngineOptions({ modelRepositories: ['/m'] }).generationConfig).toBe('auto');
    expect(() => compileEngineOptions({ modelRepositories: ['/m'], generationConfig: 'hf' as never })).toThrow(/auto' or 'vllm/);
  });
});

describe('sampledVocabSize', () => {
  it("takes config.json's vocab_size below the tokenizer's (Gemma 3: 262144 of 262145), never more than the tokenizer has", () => {
    expect(sampledVocabSize(262_145, 262_144)).toBe(262_144);
    expect(sampledVocabSize(151_669, 151_936)).toBe(151_669);
    expect(sampledVocabSize(384, undefined)).toBe(384);
    expect(sampledVocabSize(384, null)).toBe(384);
    expect(() => sampledVocabSize(384, '384')).toThrow(/vocab_size must be a positive integer/);
    expect(() => sampledVocabSize(384, 0)).toThrow(/vocab_size/);
  });
});

function parsingConfig(parameters: Record<string, string>) {
  const c = normalizeModelConfig(parseModelConfigText('name: "m" backend: "mocker" max_batch_size: 0', 'config.pbtxt'), { modelName: 'm' });
  c.parameters = Object.fromEntries(Object.entries(parameters).map(([k, v]) => [k, { string_value: v }]));
  return c;
}

describe('compileLlmOptions: chat output parsing parameters', () => {
  it('tool_call_parser enables auto tool choice unless enable_auto_tool_choice says false; reasoning_parser alone', () => {
    expect(compileLlmOptions(parsingConfig({}), 'mocker').outputParsing).toEqual({});
    expect(compileLlmOptions(parsingConfig({ tool_call_parser: 'hermes' }), 'mocker').outputParsing).toEqual({ toolCallParser: 'hermes', enableAutoToolChoice: true });
    expect(compileLlmOptions(parsingConfig({ tool_call_parser: 'mistral', enable_auto_tool_choice: 'false' }), 'llm').outputParsing).toEqual({
      toolCallParser: 'mistral',
      enableAutoToolChoice: false,
    });
    expect(compileLlmOptions(parsingConfig({ reasoning_parser: 'qwen3' }), 'mocker').outputParsing).toEqual({ reasoningParser: 'qwen3' });
    expect(unknownLlmParameters(parsingConfig({ tool_call_parser: 'hermes', reasoning_parser: 'qwen3', enable_auto_tool_choice: 'true' }))).toEqual([]);
  });

  it('an unknown parser name fails the load, naming the parameter and the known names', () => {
    expect(() => compileLlmOptions(parsingConfig({ tool_call_parser: 'hermes2' }), 'mocker')).toThrow(
      "unable to load model 'm': parameter 'tool_call_parser' must be one of hermes, llama3_json, mistral, pythonic, got 'hermes2'",
    );
    expect(() => compileLlmOptions(parsingConfig({ reasoning_parser: '__proto__' }), 'mocker')).toThrow("parameter 'reasoning_parser' must be one of deepseek_r1, qwen3");
  });
});
