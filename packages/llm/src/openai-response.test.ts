import { describe, expect, it } from 'vitest';
import { buildTinyTokenizerFiles } from '@switchyard/onnx-builder';
import { ChatAssembler, CompletionAssembler, openAiUsage } from './openai-response.js';
import type { ProcessedOutput } from './output-processor.js';
import { Tokenizer } from './tokenizer.js';

const files = buildTinyTokenizerFiles();
const config = JSON.parse(files['tokenizer_config.json']);
const tokenizer = Tokenizer.fromJson(JSON.parse(files['tokenizer.json']), config, JSON.parse(files['config.json']));

describe('assemblers', () => {
  const head = { id: 'chatcmpl-1', created: 5, model: 'tiny' };
  const tokenText = (id: number) => tokenizer.decode([id]);
  const step = (text: string, finishReason: ProcessedOutput['finishReason'] = null): ProcessedOutput => ({
    text,
    tokens: [{ id: 1, logprob: -1 }],
    finishReason,
    stopReason: null,
    stoppedByString: false,
  });

  it('chat: role chunk first, no empty deltas, finish on the last choice chunk, usage chunk', () => {
    const a = new ChatAssembler({ head, includeUsage: true, logprobs: false, tokenText });
    const chunks = [...a.add(step('He')), ...a.add(step('')), ...a.add(step('llo', 'stop'))];
    expect(chunks.map((c) => c.choices[0]!.delta)).toEqual([{ role: 'assistant', content: '' }, { content: 'He' }, { content: 'llo' }]);
    expect(chunks.map((c) => c.choices[0]!.finish_reason)).toEqual([null, null, 'stop']);
    expect(chunks.every((c) => c.usage === null && c.object === 'chat.completion.chunk')).toBe(true);
    const usage = openAiUsage(3, 3, 1);
    expect(a.usageChunk(usage)).toEqual({ id: 'chatcmpl-1', object: 'chat.completion.chunk', created: 5, model: 'tiny', choices: [], usage });
    expect(a.response(usage)).toEqual({
      id: 'chatcmpl-1',
      object: 'chat.completion',
      created: 5,
      model: 'tiny',
      choices: [{ index: 0, message: { role: 'assistant', content: 'Hello' }, logprobs: null, finish_reason: 'stop', stop_reason: null }],
      usage: { prompt_tokens: 3, completion_tokens: 3, total_tokens: 6, prompt_tokens_details: { cached_tokens: 1 } },
    });
  });

  it('completion: echo comes first, usage stays off the chunks unless asked', () => {
    const a = new CompletionAssembler({ head: { ...head, id: 'cmpl-1' }, includeUsage: false, logprobs: false, tokenText }, 'Say: ');
    const chunks = [...a.add(step('')), ...a.add(step('hi', 'length'))];
    expect(chunks.map((c) => c.choices[0]!.text)).toEqual(['Say: ', 'hi']);
    expect(chunks.every((c) => !('usage' in c))).toBe(true);
    expect(a.response(openAiUsage(1, 2, 0)).choices[0]).toMatchObject({ text: 'Say: hi', finish_reason: 'length' });
  });
});
