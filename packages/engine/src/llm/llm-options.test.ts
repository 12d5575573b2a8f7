import { describe, expect, it } from 'vitest';
import { normalizeModelConfig, parseModelConfigText } from '@switchyard/model-config';
import { compileLlmOptions, unknownLlmParameters } from './llm-options.js';

function config(parameters: Record<string, string>) {
  const c = normalizeModelConfig(parseModelConfigText('name: "m" backend: "mocker" max_batch_size: 0', 'config.pbtxt'), { modelName: 'm' });
  c.parameters = Object.fromEntries(Object.entries(parameters).map(([k, v]) => [k, { string_value: v }]));
  return c;
}

describe('compileLlmOptions: chat output parsing parameters', () => {
  it('tool_call_parser enables auto tool choice unless enable_auto_tool_choice says false; reasoning_parser alone', () => {
    expect(compileLlmOptions(config({}), 'mocker').outputParsing).toEqual({});
    expect(compileLlmOptions(config({ tool_call_parser: 'hermes' }), 'mocker').outputParsing).toEqual({ toolCallParser: 'hermes', enableAutoToolChoice: true });
    expect(compileLlmOptions(config({ tool_call_parser: 'mistral', enable_auto_tool_choice: 'false' }), 'llm').outputParsing).toEqual({
      toolCallParser: 'mistral',
      enableAutoToolChoice: false,
    });
    expect(compileLlmOptions(config({ reasoning_parser: 'qwen3' }), 'mocker').outputParsing).toEqual({ reasoningParser: 'qwen3' });
    expect(unknownLlmParameters(config({ tool_call_parser: 'hermes', reasoning_parser: 'qwen3', enable_auto_tool_choice: 'true' }))).toEqual([]);
  });

  it('an unknown parser name fails the load, naming the parameter and the known names', () => {
    expect(() => compileLlmOptions(config({ tool_call_parser: 'hermes2' }), 'mocker')).toThrow(
      "unable to load model 'm': parameter 'tool_call_parser' must be one of hermes, llama3_json, mistral, pythonic, got 'hermes2'",
    );
    expect(() => compileLlmOptions(config({ reasoning_parser: '__proto__' }), 'mocker')).toThrow("parameter 'reasoning_parser' must be one of deepseek_r1, qwen3");
  });
});
