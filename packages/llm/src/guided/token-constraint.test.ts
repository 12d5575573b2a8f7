/**
 * Token-level guided decoding over the tiny byte-level BPE tokenizer: masks equal a token-by-token
 * check, the trie walk agrees with it, end ids only at completion (and then alone), and sampling
 * random logits under a constraint always yields a document that parses and validates.
 */
import { describe, expect, it } from 'vitest';
import { buildTinyTokenizerFiles, tinySpecialTokenIds } from '@switchyard/onnx-builder';
import { fc, fuzz, validates } from '@switchyard/testing/fuzz';
import { Tokenizer } from '../tokenizer/tokenizer.js';
import { compileSamplingParams } from '../sampling-params.js';
import { createSamplerState, sample } from '../sampling.js';
import { initialState, isAccepting, step, type JsonState } from './json-automaton.js';
import { guidedRoot, type GuidedDecoding } from './json-schema.js';
import { compileTokenConstraint, JsonTokenConstraint } from './token-constraint.js';
import { MAX_TOKEN_BYTES, TokenVocabulary } from './token-vocabulary.js';

const files = buildTinyTokenizerFiles();
const tokenizer = Tokenizer.fromJson(JSON.parse(files['tokenizer.json']), JSON.parse(files['tokenizer_config.json']), JSON.parse(files['config.json']));
const vocab = TokenVocabulary.fromTokenizer(tokenizer);
const EOS = tinySpecialTokenIds().imEnd;

const SCHEMA = {
  type: 'object',
  properties: { answer: { enum: ['yes', 'no'] }, count: { type: 'integer' }, note: { type: 'string' }, tags: { type: 'array', items: { type: 'boolean' }, maxItems: 3 } },
  required: ['answer', 'count'],
  additionalProperties: false,
};
const SPEC: GuidedDecoding = { kind: 'json_schema', schema: SCHEMA };

/** The allowed ids of `state` by stepping every token on its own. */
function bruteForce(state: JsonState, ends: readonly number[]): number[] {
  const out: number[] = [];
  vocab.tokenBytes.forEach((bytes, id) => {
    if (bytes === null) return;
    let s: JsonState | null = state;
    for (const b of bytes) if ((s = step(s, b)) === null) return;
    out.push(id);
  });
  if (isAccepting(state)) out.push(...ends);
  return out.sort((a, b) => a - b);
}

function maskedIds(c: JsonTokenConstraint, width = vocab.size): number[] {
  const logits = new Float32Array(width);
  c.mask(logits);
  return [...logits.keys()].filter((i) => logits[i] !== -Infinity);
}

describe('TokenVocabulary', () => {
  it('maps byte-level tokens back to their bytes and leaves special tokens out', () => {
    expect(vocab.size).toBe(tokenizer.vocabSize);
    for (const id of tokenizer.specialTokenIds) expect(vocab.tokenBytes[id]).toBeNull();
    let whole = 0;
    for (let id = 0; id < vocab.size; id++) {
      const bytes = vocab.tokenBytes[id];
      const text = tokenizer.decode([id]);
      if (bytes === null || bytes === undefined || text.includes('\uFFFD')) continue;
      expect(Buffer.from(bytes).equals(Buffer.from(text, 'utf8'))).toBe(true);
      whole++;
    }
    expect(whole).toBeGreaterThan(200);
    const text = 'The capital of France is Paris.';
    const ids = tokenizer.encode(text);
    expect(Buffer.concat(ids.map((id) => vocab.tokenBytes[id]!)).toString('utf8')).toBe(text);
  });

  it('leaves out tokens longer than MAX_TOKEN_BYTES', () => {
    const enc = new TextEncoder();
    const v = TokenVocabulary.fromTokenBytes([enc.encode('"'.padEnd(MAX_TOKEN_BYTES + 1, 'a')), enc.encode('{'), enc.encode('}'), null]);
    expect(v.tokenBytes[0]).toBeNull();
    const c = compileTokenConstraint({ kind: 'json' }, v, [3]) as JsonTokenConstraint;
    expect(c.advance(1)).toBe(true);
    const logits = new Float32Array(4);
    c.mask(logits);
    expect([...logits]).toEqual([-Infinity, -Infinity, 0, -Infinity]);
  });
});

describe('JsonTokenConstraint', () => {
  it('masks exactly the tokens the automaton can take, with the end ids only once complete', () => {
    const c = compileTokenConstraint(SPEC, vocab, [EOS]) as JsonTokenConstraint;
    let state = initialState(guidedRoot(SPEC));
    const text = '{"answer": "yes", "note": "The café \\"is\\" near 日本\\u00e9.", "count": 42, "tags": [true]}';
    for (const id of tokenizer.encode(text)) {
      expect(maskedIds(c)).toEqual(bruteForce(state, [EOS]));
      expect(c.isComplete()).toBe(false);
      expect(c.advance(id)).toBe(true);
      for (const b of vocab.tokenBytes[id]!) state = step(state, b)!;
    }
    expect(c.isComplete()).toBe(true);
    // Complete and nothing can follow: the end id is forced.
    expect(maskedIds(c)).toEqual([EOS]);
    // Logits wider than the vocabulary (a padded LM head): the padding is masked too.
    expect(maskedIds(c, vocab.size + 10)).toEqual([EOS]);
    expect(c.advance(EOS)).toBe(true);
  });

  it('masks free keys and strings of json_object exactly too', () => {
    const c = compileTokenConstraint({ kind: 'json' }, vocab, [EOS]) as JsonTokenConstraint;
    let state = initialState(guidedRoot({ kind: 'json' }));
    for (const id of tokenizer.encode('{"The world": ["é", {"x\\n": null}], "n": -1.5e3}')) {
      expect(maskedIds(c)).toEqual(bruteForce(state, [EOS]));
      expect(c.advance(id)).toBe(true);
      for (const b of vocab.tokenBytes[id]!) state = step(state, b)!;
    }
    expect(maskedIds(c)).toEqual([EOS]);
  });

  it('a continuation resumes the document after its prior tokens; min_tokens yields to a complete document', () => {
    const prior = tokenizer.encode('{"answer": "no", "count": 1, "tags": [');
    const params = compileSamplingParams({ temperature: 0, guided_decoding: SPEC, min_tokens: 50 });
    const state = createSamplerState(params, [], 0, prior, [EOS], compileTokenConstraint(SPEC, vocab, [EOS]));
    const logits = new Float32Array(vocab.size);
    logits[EOS] = 10;
    logits[tokenizer.encode(']')[0]!] = 5;
    logits[tokenizer.encode('}')[0]!] = 4;
    // Inside the array: EOS is out (incomplete and below min_tokens); `]` then `}` finish it; then EOS is forced.
    expect(sample(logits, state).tokenId).toBe(tokenizer.encode(']')[0]);
    expect(sample(logits, state).tokenId).toBe(tokenizer.encode('}')[0]);
    expect(state.constraint!.isComplete()).toBe(true);
    expect(sample(logits, state).tokenId).toBe(EOS);
  });

  it('a vocabulary missing a byte the document needs ends the sequence instead of leaving nothing', () => {
    const v = TokenVocabulary.fromTokenBytes([new TextEncoder().encode('{'), null]);
    const c = compileTokenConstraint({ kind: 'json_schema', schema: { type: 'object', properties: { a: { type: 'null' } }, required: ['a'] } }, v, [1]) as JsonTokenConstraint;
    expect(c.advance(0)).toBe(true);
    const logits = new Float32Array(2);
    c.mask(logits);
    expect([...logits]).toEqual([-Infinity, 0]);
  });

  it('a token outside the language leaves only the end ids', () => {
    const c = compileTokenConstraint({ kind: 'json' }, vocab, [EOS]) as JsonTokenConstraint;
    expect(c.advance(tokenizer.encode('x')[0]!)).toBe(false);
    expect(maskedIds(c)).toEqual([EOS]);
  });

  it('random logits sampled under the constraint always give a document that parses and validates', () => {
    let complete = 0;
    fuzz(
      fc.tuple(fc.integer(), fc.constantFrom<GuidedDecoding>(SPEC, { kind: 'json' })),
      ([seed, spec]) => {
        const params = compileSamplingParams({ temperature: 1, seed, guided_decoding: spec });
        const state = createSamplerState(params, [], 0, [], [EOS], compileTokenConstraint(spec, vocab, [EOS]));
        let rng = seed >>> 0;
        const logits = new Float32Array(vocab.size);
        const out: number[] = [];
        for (let i = 0; i < 400; i++) {
          for (let j = 0; j < logits.length; j++) {
            rng = (Math.imul(rng, 1664525) + 1013904223) >>> 0;
            logits[j] = (rng / 2 ** 32) * 8;
          }
          // Push the structural tokens up, so documents finish inside the budget.
          for (const ch of ['"', '}', ']', ',', '1', 'true', ' "']) logits[tokenizer.encode(ch)[0]!] = logits[tokenizer.encode(ch)[0]!]! + 3;
          const { tokenId } = sample(logits, state);
          if (tokenId === EOS) break;
          out.push(tokenId);
        }
        if (state.constraint!.isComplete()) {
          complete++;
          const value = JSON.parse(tokenizer.decode(out)) as unknown;
          expect(validates(value, spec.kind === 'json' ? { type: 'object' } : SCHEMA)).toBe(true);
        }
      },
      { scale: 0.2, timeLimitMs: 10_000 },
    );
    expect(complete).toBeGreaterThan(10);
  });
});
