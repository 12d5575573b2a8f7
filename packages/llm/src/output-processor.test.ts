import { describe, expect, it } from 'vitest';
import { buildTinyTokenizerFiles, tinySpecialTokenIds } from '@switchyard/onnx-builder';
import type { GenerateOutput } from './llm-endpoint.js';
import { OutputProcessor, type ProcessedOutput } from './output-processor.js';
import { compileSamplingParams, type SamplingParams } from './sampling-params.js';
import { Tokenizer } from './tokenizer/tokenizer.js';

const files = buildTinyTokenizerFiles();
const config = JSON.parse(files['tokenizer_config.json']);
const tokenizer = Tokenizer.fromJson(JSON.parse(files['tokenizer.json']), config, JSON.parse(files['config.json']));
const { imEnd, imStart } = tinySpecialTokenIds();

const out = (tokenIds: number[], finishReason: GenerateOutput['finishReason'] = null, extra: Partial<GenerateOutput> = {}): GenerateOutput => ({
  tokenIds,
  finishReason,
  stopReason: null,
  ...extra,
});

function processor(params: SamplingParams = {}): OutputProcessor {
  return new OutputProcessor({ tokenizer, sampling: compileSamplingParams(params), promptTokenIds: tokenizer.encode('Say:'), eosTokenIds: [imEnd] });
}

describe('OutputProcessor', () => {
  const text = 'The quick brown fox jumps over the lazy dog.';
  const ids = tokenizer.encode(text);

  it('keeps special tokens in the text when a parser reads them (skipSpecialTokens false), never the EOS', () => {
    const keep = new OutputProcessor({ tokenizer, sampling: compileSamplingParams({}), promptTokenIds: [], eosTokenIds: [imEnd], skipSpecialTokens: false });
    keep.process(out([imStart, ...ids]));
    keep.process(out([imEnd], 'stop'));
    expect(keep.text).toBe(`<|im_start|>${text}`);
    const skip = processor();
    skip.process(out([imStart, ...ids], 'stop'));
    expect(skip.text).toBe(text);
  });

  it('streams the text, skips the EOS token, counts it', () => {
    const p = processor();
    let all = '';
    for (const id of ids) {
      const r = p.process(out([id]));
      expect(r.finishReason).toBeNull();
      all += r.text;
    }
    const last = p.process(out([imEnd], 'stop'));
    expect(last).toMatchObject({ text: '', finishReason: 'stop', stopReason: null, stoppedByString: false });
    expect(all).toBe(text);
    expect(p.text).toBe(text);
    expect(p.numTokens).toBe(ids.length + 1);
  });

  it('a stop string across tokens ends the sequence once, asks for the abort, and ignores later tokens', () => {
    const p = processor({ stop: ['zy d'] });
    const steps: ProcessedOutput[] = [];
    for (let i = 0; i < ids.length; i += 2) steps.push(p.process(out(ids.slice(i, i + 2), null, { logprobs: [-1, -2] })));
    const ended = steps.findIndex((s) => s.finishReason !== null);
    expect(steps[ended]).toMatchObject({ finishReason: 'stop', stopReason: 'zy d', stoppedByString: true });
    expect(steps.filter((s) => s.stoppedByString)).toHaveLength(1);
    expect(steps.slice(ended + 1).every((s) => s.text === '' && s.tokens.length === 0)).toBe(true);
    expect(p.text).toBe('The quick brown fox jumps over the la');
    expect(p.text).toBe(steps.map((s) => s.text).join(''));
    expect(p.numTokens).toBe(steps.slice(0, ended + 1).reduce((n, s) => n + s.tokens.length, 0));
    expect(steps[0]!.tokens).toEqual([
      { id: ids[0], logprob: -1 },
      { id: ids[1], logprob: -2 },
    ]);
  });

  it('the engine finishing (length, abort) releases held-back text', () => {
    const p = processor({ stop: ['The end'] });
    const the = tokenizer.encode('The');
    expect(p.process(out(the)).text).toBe(''); // could be the start of "The end"
    const r = p.process(out([], 'length'));
    expect(r).toMatchObject({ text: 'The', finishReason: 'length', stoppedByString: false });
    const a = processor();
    a.process(out(ids.slice(0, 2)));
    expect(a.process(out([], 'abort')).finishReason).toBe('abort');
  });

  it('special tokens are not text; stop_token_ids end with their id as stop reason', () => {
    const p = processor({ stop_token_ids: [imStart] });
    expect(p.process(out([ids[0]!, imStart])).stopReason).toBe(imStart);
    expect(p.text).toBe('The');
  });
});
