import { describe, expect, it } from 'vitest';
import { buildTinyTokenizerFiles } from '@switchyard/onnx-builder';
import { ChatAssembler, CompletionAssembler, openAiUsage, withChoices } from './openai-response.js';
import type { ProcessedOutput } from './output-processor.js';
import { Tokenizer } from './tokenizer/tokenizer.js';

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

  it('each choice carries its index in chunks and body; withChoices joins the bodies in order', () => {
    const a = new ChatAssembler({ head, includeUsage: false, logprobs: false, tokenText, index: 0 });
    const b = new ChatAssembler({ head, includeUsage: false, logprobs: false, tokenText, index: 1 });
    const chunks = [...b.add(step('x', 'stop')), ...a.add(step('y', 'length'))];
    expect(chunks.map((c) => c.choices[0]!.index)).toEqual([1, 1, 0, 0]);
    const usage = openAiUsage(3, 2, 0);
    const body = withChoices([a.response(usage), b.response(usage)]);
    expect(body.choices.map((c) => [c.index, c.message.content, c.finish_reason])).toEqual([
      [0, 'y', 'length'],
      [1, 'x', 'stop'],
    ]);
    expect(body.usage).toEqual(usage);
  });

  it('logprobs: alternatives best first, -Infinity reported as -9999 (JSON has no infinities)', () => {
    const withTop: ProcessedOutput = {
      text: 'ab',
      tokens: [
        { id: 5, logprob: -0.2, top: { tokenIds: [5, 6], logprobs: [-0.2, -1.9] } },
        { id: 7, logprob: -Infinity, top: { tokenIds: [8, 7], logprobs: [-0.01, -Infinity] } },
      ],
      finishReason: 'length',
      stopReason: null,
      stoppedByString: false,
    };
    const chat = new ChatAssembler({ head, includeUsage: false, logprobs: true, tokenText });
    chat.add(withTop);
    const content = chat.response(openAiUsage(1, 2, 0)).choices[0]!.logprobs!.content;
    const t = (id: number) => tokenText(id);
    const bytes = (id: number) => [...new TextEncoder().encode(t(id))];
    expect(content).toEqual([
      { token: t(5), logprob: -0.2, bytes: bytes(5), top_logprobs: [{ token: t(5), logprob: -0.2, bytes: bytes(5) }, { token: t(6), logprob: -1.9, bytes: bytes(6) }] },
      { token: t(7), logprob: -9999, bytes: bytes(7), top_logprobs: [{ token: t(8), logprob: -0.01, bytes: bytes(8) }, { token: t(7), logprob: -9999, bytes: bytes(7) }] },
    ]);
    expect(JSON.parse(JSON.stringify(content))).toEqual(content);

    const completion = new CompletionAssembler({ head, includeUsage: false, logprobs: true, tokenText });
    const [chunk] = completion.add(withTop);
    const lp = chunk!.choices[0]!.logprobs!;
    expect(lp.tokens).toEqual([t(5), t(7)]);
    expect(lp.token_logprobs).toEqual([-0.2, -9999]);
    // The chosen token first, then the alternatives not already listed.
    expect(lp.top_logprobs).toEqual([{ [t(5)]: -0.2, [t(6)]: -1.9 }, { [t(7)]: -9999, [t(8)]: -0.01 }]);
    expect(Object.keys(lp.top_logprobs[1]!)).toEqual([t(7), t(8)]);
  });
});
