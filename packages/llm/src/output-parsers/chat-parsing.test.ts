import { describe, expect, it } from 'vitest';
import { errorParam } from '../openai-protocol.js';
import { chatParsingFor, resolveOutputParsing } from './chat-parsing.js';

const id = () => 'chatcmpl-tool-1';
const door = { enableAutoToolChoice: true, toolCallParser: 'hermes', reasoningParser: 'deepseek_r1' };

describe('resolveOutputParsing', () => {
  it("a model that sets any parsing setting is parsed by its own alone; one that sets none by the door's flags", () => {
    expect(resolveOutputParsing(undefined, door)).toEqual(door);
    expect(resolveOutputParsing({}, door)).toEqual(door);
    expect(resolveOutputParsing({ toolCallParser: 'mistral' }, door)).toEqual({ toolCallParser: 'mistral', enableAutoToolChoice: true });
    expect(resolveOutputParsing({ reasoningParser: 'qwen3' }, door)).toEqual({ reasoningParser: 'qwen3', enableAutoToolChoice: false });
    expect(resolveOutputParsing({ toolCallParser: 'pythonic', enableAutoToolChoice: false }, door)).toEqual({ toolCallParser: 'pythonic', enableAutoToolChoice: false });
    expect(resolveOutputParsing(undefined, undefined)).toEqual({ enableAutoToolChoice: false });
  });
});

describe('chatParsingFor', () => {
  const refusal = (f: () => unknown): string => {
    try {
      f();
    } catch (e) {
      return `${errorParam(e)}: ${(e as Error).message}`;
    }
    return 'accepted';
  };

  it('none: no tool parsing (the reasoning parser still runs); nothing configured: no parsing at all', () => {
    expect(chatParsingFor({ enableAutoToolChoice: false }, { toolChoice: 'none' }, id)).toEqual({ parsing: undefined, skipSpecialTokens: true });
    const plan = chatParsingFor(door, { toolChoice: 'none' }, id);
    expect(plan.parsing!({}).parser.push('a</think><tool_call>')).toEqual([
      { type: 'reasoning', text: 'a' },
      { type: 'content', text: '<tool_call>' },
    ]);
  });

  it("auto needs auto tool choice and a parser (vLLM's message)", () => {
    expect(refusal(() => chatParsingFor({ toolCallParser: 'hermes', enableAutoToolChoice: false }, { toolChoice: 'auto' }, id))).toBe(
      'tool_choice: "auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set',
    );
    expect(refusal(() => chatParsingFor({ enableAutoToolChoice: true }, { toolChoice: 'auto' }, id))).toContain('"auto" tool choice requires');
  });

  it('required and named need no parser: their guided output is read as JSON, never as reasoning, with ids in the parser style', () => {
    for (const config of [{ enableAutoToolChoice: false }, door]) {
      const named = chatParsingFor(config, { toolChoice: { name: 'f' } }, (style) => style);
      expect(named.skipSpecialTokens).toBe(true);
      const n = named.parsing!({ promptText: '<think>' });
      expect(n.forced).toBe('named');
      expect(n.parser.push('{"a": 1}')).toEqual([
        { type: 'tool_call', index: 0, name: 'f' },
        { type: 'tool_args', index: 0, text: '{"a": 1}' },
      ]);
      const required = chatParsingFor(config, { toolChoice: 'required' }, (style) => style).parsing!({});
      expect(required.forced).toBe('required');
      expect(required.parser.push('[{"name": "g", "parameters": {}}]')).toEqual([
        { type: 'tool_call', index: 0, name: 'g' },
        { type: 'tool_args', index: 0, text: '{}' },
      ]);
      expect(required.toolCallId()).toBe('vllm');
    }
    expect(chatParsingFor({ toolCallParser: 'mistral' }, { toolChoice: 'required' }, (style) => style).parsing!({}).toolCallId()).toBe('mistral');
  });

  it("a model's own reasoning parser reads a forced choice's reasoning first and its calls from the content after </think>", () => {
    const model = { reasoningParser: 'qwen3' };
    const named = chatParsingFor(model, { toolChoice: { name: 'f' } }, id, model).parsing!({ promptText: '<|im_start|>assistant\n' });
    expect(named.forced).toBe('named');
    expect([...named.parser.push('<think>\nhm\n</think>\n\n{"a": 1}'), ...named.parser.finish()]).toEqual([
      { type: 'reasoning', text: '\nhm\n' },
      { type: 'tool_call', index: 0, name: 'f' },
      { type: 'tool_args', index: 0, text: '\n\n{"a": 1}' },
    ]);
    const required = chatParsingFor(model, { toolChoice: 'required' }, id, model).parsing!({});
    expect([...required.parser.push('<think>x</think>[{"name": "g", "parameters": {}}]'), ...required.parser.finish()]).toEqual([
      { type: 'reasoning', text: 'x' },
      { type: 'tool_call', index: 0, name: 'g' },
      { type: 'tool_args', index: 0, text: '{}' },
    ]);
    // The prompt ended the reasoning (enable_thinking false): all of it is the call.
    const off = chatParsingFor(model, { toolChoice: { name: 'f' } }, id, model).parsing!({ promptText: '<think>\n\n</think>\n\n' });
    expect([...off.parser.push('{"a": 1}'), ...off.parser.finish()]).toEqual([
      { type: 'tool_call', index: 0, name: 'f' },
      { type: 'tool_args', index: 0, text: '{"a": 1}' },
    ]);
  });

  it('mistral keeps special tokens in the text ([TOOL_CALLS] is one); the others do not', () => {
    expect(chatParsingFor({ toolCallParser: 'mistral', enableAutoToolChoice: true }, { toolChoice: 'auto' }, id).skipSpecialTokens).toBe(false);
    expect(chatParsingFor({ toolCallParser: 'mistral', enableAutoToolChoice: true }, { toolChoice: 'none' }, id).skipSpecialTokens).toBe(true);
    expect(chatParsingFor({ toolCallParser: 'hermes', enableAutoToolChoice: true }, { toolChoice: 'auto' }, id).skipSpecialTokens).toBe(true);
  });
});
