import { describe, expect, it } from 'vitest';
import { IncrementalDetokenizer, type TextDeltaSource } from './detokenizer.js';
import { compileSamplingParams, type SamplingParams } from './sampling-params.js';
import { StopChecker, type StopStep } from './stop-checker.js';

/** Token id i decodes to pieces[i]; no held bytes. */
function pieceSource(pieces: string[]): TextDeltaSource {
  return { push: (id) => pieces[id]!, flush: () => '' };
}
const EOS = 99;
function run(pieces: string[], ids: number[], p: SamplingParams): { out: string; last: StopStep; steps: number } {
  const c = new StopChecker(compileSamplingParams(p), pieceSource(pieces), [EOS]);
  let out = '';
  let last: StopStep = { text: '', finishReason: null, stopReason: null };
  let steps = 0;
  for (const id of ids) {
    last = c.step(id);
    steps++;
    out += last.text;
    if (last.finishReason !== null) break;
  }
  if (last.finishReason === null) {
    last = c.finish('abort');
    out += last.text;
  }
  return { out, last, steps };
}

describe('StopChecker', () => {
  const P = ['Hello', ' wor', 'ld', ' E', 'N', 'D', ' more', 'E', 'x', 'abcENDxyz'];

  it('stops on a stop string split across tokens and never emits it', () => {
    const r = run(P, [0, 1, 2, 3, 4, 5, 6], { stop: ['END'] });
    expect(r.out).toBe('Hello world ');
    expect(r.last).toMatchObject({ finishReason: 'stop', stopReason: 'END' });
    expect(r.steps).toBe(6);
  });

  it('holds back a partial match and releases it when the match fails', () => {
    const c = new StopChecker(compileSamplingParams({ stop: 'END' }), pieceSource(P));
    expect(c.step(0).text).toBe('Hello');
    expect(c.step(3).text).toBe(' '); // "E" held
    expect(c.step(4).text).toBe(''); // "EN" held
    expect(c.step(8).text).toBe('ENx');
    expect(c.finish('abort')).toEqual({ text: '', finishReason: 'abort', stopReason: null });
  });

  it('cuts inside a token and picks the earliest of several stop strings', () => {
    expect(run(P, [9], { stop: ['END'] }).out).toBe('abc');
    expect(run(P, [9], { stop: ['xyz', 'cE'] })).toMatchObject({ out: 'ab', last: { stopReason: 'cE' } });
    expect(run(P, [9], { stop: ['bc', 'bcEND'] }).last.stopReason).toBe('bcEND');
  });

  it('ends on EOS and stop token ids without emitting their text; ignore_eos skips EOS', () => {
    const pieces = [...P];
    pieces[EOS] = '</s>';
    expect(run(pieces, [0, EOS, 1], {}).out).toBe('Hello');
    expect(run(pieces, [0, EOS, 1], {}).last).toMatchObject({ finishReason: 'stop', stopReason: null });
    expect(run(pieces, [0, 1, 2], { stop_token_ids: [1] }).last).toMatchObject({ finishReason: 'stop', stopReason: 1 });
    expect(run(pieces, [0, EOS, 1], { ignore_eos: true, max_tokens: 3 }).out).toBe('Hello</s> wor');
  });

  it('finishes with "length" at max_tokens, releasing held text, unless that token stops first', () => {
    const r = run(P, [0, 3, 4, 1], { stop: 'END', max_tokens: 3 });
    expect(r).toMatchObject({ out: 'Hello EN', steps: 3, last: { finishReason: 'length' } });
    expect(run(P, [0, 3, 4, 5], { stop: 'END', max_tokens: 4 }).last.finishReason).toBe('stop');
    expect(run(P, [0, EOS], { max_tokens: 2 }).last.finishReason).toBe('stop');
  });

  it('releases held text on an engine-side finish and rejects steps after it', () => {
    const c = new StopChecker(compileSamplingParams({ stop: 'END' }), pieceSource(P));
    c.step(3);
    expect(c.finish('length')).toEqual({ text: 'E', finishReason: 'length', stopReason: null });
    expect(c.finishReason).toBe('length');
    expect(() => c.step(0)).toThrow(/after finish/);
  });

  it('matches a multibyte stop string split byte by byte through the detokeniser', () => {
    const text = 'abc 世界 def';
    const bytes = new TextEncoder().encode(text);
    const td = new TextDecoder();
    const detok = new IncrementalDetokenizer((ids) => td.decode(Uint8Array.from(ids.map((i) => bytes[i]!))));
    const c = new StopChecker(compileSamplingParams({ stop: '界 d' }), detok);
    let out = '';
    let step: StopStep | null = null;
    for (let i = 0; i < bytes.length; i++) {
      step = c.step(i);
      expect(step.text).not.toContain('\uFFFD');
      out += step.text;
      if (step.finishReason) break;
    }
    expect(out).toBe('abc 世');
    expect(step).toMatchObject({ finishReason: 'stop', stopReason: '界 d' });
  });
});
