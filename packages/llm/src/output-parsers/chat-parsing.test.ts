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

  it("auto needs auto tool choice and a parser (vLLM's message); required and named need a parser and say what they require", () => {
    expect(refusal(() => chatParsingFor({ toolCallParser: 'hermes', enableAutoToolChoice: false }, { toolChoice: 'auto' }, id))).toBe(
      'tool_choice: "auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set',
    );
    expect(refusal(() => chatParsingFor({ enableAutoToolChoice: true }, { toolChoice: 'auto' }, id))).toContain('"auto" tool choice requires');
    expect(refusal(() => chatParsingFor({ enableAutoToolChoice: false }, { toolChoice: 'required' }, id))).toContain("tool_choice 'required' needs a tool call parser");
    expect(refusal(() => chatParsingFor({ enableAutoToolChoice: false }, { toolChoice: { name: 'f' } }, id))).toContain("tool_choice naming 'f' needs a tool call parser");
    // required and named work without auto tool choice
    expect(chatParsingFor({ toolCallParser: 'hermes', enableAutoToolChoice: false }, { toolChoice: 'required' }, id).parsing!({}).require).toBe('any');
    expect(chatParsingFor({ toolCallParser: 'hermes' }, { toolChoice: { name: 'f' } }, id).parsing!({}).require).toEqual({ name: 'f' });
  });

  it('mistral keeps special tokens in the text ([TOOL_CALLS] is one); the others do not', () => {
    expect(chatParsingFor({ toolCallParser: 'mistral', enableAutoToolChoice: true }, { toolChoice: 'auto' }, id).skipSpecialTokens).toBe(false);
    expect(chatParsingFor({ toolCallParser: 'mistral', enableAutoToolChoice: true }, { toolChoice: 'none' }, id).skipSpecialTokens).toBe(true);
    expect(chatParsingFor({ toolCallParser: 'hermes', enableAutoToolChoice: true }, { toolChoice: 'auto' }, id).skipSpecialTokens).toBe(true);
  });
});
