/**
 * Guided decoding on a reasoning model: free until the end marker, constrained after it (the marker
 * itself not fed to the constraint), constrained at once when the prompt's last marker is the end one
 * (vLLM's `is_reasoning_end`), and the same state when the tokens up to here come as prior output (a
 * migrated request). Over the tiny tokenizer, its `<|im_start|>` and `<|endoftext|>` standing for
 * `<think>` and `</think>`.
 */
import { describe, expect, it } from 'vitest';
import { buildTinyTokenizerFiles, tinySpecialTokenIds } from '@switchyard/onnx-builder';
import { Tokenizer } from '../tokenizer/tokenizer.js';
import { compileSamplingParams } from '../sampling-params.js';
import { createSamplerState, sample } from '../sampling.js';
import type { GuidedDecoding } from './json-schema.js';
import { gateOnReasoning, reasoningEnded, reasoningMarkersOf, ReasoningGate, type ReasoningMarkers } from './reasoning-gate.js';
import { compileTokenConstraint, type TokenConstraint } from './token-constraint.js';
import { TokenVocabulary } from './token-vocabulary.js';

const files = buildTinyTokenizerFiles();
const tokenizer = Tokenizer.fromJson(JSON.parse(files['tokenizer.json']), JSON.parse(files['tokenizer_config.json']), JSON.parse(files['config.json']));
const vocab = TokenVocabulary.fromTokenizer(tokenizer);
const { imStart, endoftext, imEnd: EOS } = tinySpecialTokenIds();
const MARKERS: ReasoningMarkers = { startId: imStart, endId: endoftext };
const SPEC: GuidedDecoding = { kind: 'json_schema', schema: { type: 'object', properties: { a: { enum: [1, 2] } }, required: ['a'], additionalProperties: false } };
/** What a JSON document may start with: whitespace, or the object's brace. */
const JSON_START = /^(\s+|\{.*)$/s;
const ids = (text: string): number[] => tokenizer.encode(text, { addSpecialTokens: false });

/** Logits that favour `id` (every other token equal below it). */
function favour(id: number): Float32Array {
  const l = new Float32Array(vocab.size);
  l[id] = 10;
  return l;
}

function constraint(): TokenConstraint {
  return compileTokenConstraint(SPEC, vocab, [EOS]);
}

describe('guided decoding after the reasoning', () => {
  it("vLLM's is_reasoning_end: the last marker among the ids is the end one", () => {
    expect(reasoningEnded([], MARKERS)).toBe(false);
    expect(reasoningEnded([5, endoftext, 7], MARKERS)).toBe(true);
    expect(reasoningEnded([imStart, 5, endoftext, 9], MARKERS)).toBe(true);
    expect(reasoningEnded([endoftext, imStart, 5], MARKERS)).toBe(false);
    expect(reasoningEnded([5, 6], MARKERS)).toBe(false);
    // Without a single-token <think> only the end marker counts.
    expect(reasoningEnded([endoftext, imStart], { startId: undefined, endId: endoftext })).toBe(true);
  });

  it('the reasoning is free, the end marker opens the constraint, the token after it is its first', () => {
    const gate = gateOnReasoning(constraint(), MARKERS, ids('hello'));
    expect(gate).toBeInstanceOf(ReasoningGate);
    const state = createSamplerState(compileSamplingParams({ temperature: 0 }), [], 0, [], [EOS], gate);
    const prose = ids('no json here');
    // While reasoning, whatever the model favours is taken, EOS included it would be.
    for (const t of prose) expect(sample(favour(t), state).tokenId).toBe(t);
    expect(gate.isComplete()).toBe(false);
    expect(sample(favour(endoftext), state).tokenId).toBe(endoftext);
    expect((gate as ReasoningGate).active).toBe(true);
    // Now the schema holds: the favoured prose token is masked, only whitespace or `{` may start.
    const first = sample(favour(prose[0]!), state).tokenId;
    expect(tokenizer.decode([first])).toMatch(JSON_START);
    const out = [first];
    for (let i = 0; i < 200; i++) {
      const t = sample(favour(prose[i % prose.length]!), state).tokenId;
      if (t === EOS) break;
      out.push(t);
    }
    expect(JSON.parse(tokenizer.decode(out))).toEqual({ a: 1 });
    expect(gate.isComplete()).toBe(true);
  });

  it('a prompt that already ended the reasoning (Qwen3 enable_thinking false) is constrained from the first token', () => {
    const prompt = [...ids('question'), imStart, ...ids('\n\n'), endoftext, ...ids('\n\n')];
    const inner = constraint();
    expect(gateOnReasoning(inner, MARKERS, prompt)).toBe(inner);
    const state = createSamplerState(compileSamplingParams({ temperature: 0 }), prompt, 0, [], [EOS], gateOnReasoning(constraint(), MARKERS, prompt));
    expect(tokenizer.decode([sample(favour(ids('x')[0]!), state).tokenId])).toMatch(JSON_START);
    // A prompt whose reasoning was opened again after an earlier end (a later <think>) is not.
    expect(gateOnReasoning(inner, MARKERS, [endoftext, imStart])).toBeInstanceOf(ReasoningGate);
  });

  it('prior output tokens (a migrated request) put the gate where the uninterrupted run was', () => {
    const params = compileSamplingParams({ temperature: 0 });
    const reasoning = [...ids('think'), endoftext];
    const full = createSamplerState(params, [], 0, [], [EOS], gateOnReasoning(constraint(), MARKERS, []));
    const run: number[] = [];
    for (const t of reasoning) run.push(sample(favour(t), full).tokenId);
    const x = ids('x')[0]!;
    run.push(sample(favour(x), full).tokenId, sample(favour(x), full).tokenId);
    expect(run.slice(0, reasoning.length)).toEqual(reasoning);
    // Continued after the reasoning and the first constrained token: constrained, from the same state.
    const continued = createSamplerState(params, [], 0, run.slice(0, reasoning.length + 1), [EOS], gateOnReasoning(constraint(), MARKERS, []));
    expect(sample(favour(x), continued).tokenId).toBe(run[reasoning.length + 1]);
    // Continued inside the reasoning: still free.
    const early = createSamplerState(params, [], 0, ids('thi'), [EOS], gateOnReasoning(constraint(), MARKERS, []));
    expect(sample(favour(x), early).tokenId).toBe(x);
  });

  it('min_tokens does not count a complete document while reasoning: EOS stays masked', () => {
    // An inner constraint whose document is already complete (an empty schema's, say): only the gate's own answer counts.
    const complete: TokenConstraint = { mask: () => {}, advance: () => true, isComplete: () => true };
    const gate = gateOnReasoning(complete, MARKERS, []);
    expect(gate.isComplete()).toBe(false);
    const state = createSamplerState(compileSamplingParams({ temperature: 0, min_tokens: 3 }), [], 0, [], [EOS], gate);
    expect(sample(favour(EOS), state).tokenId).not.toBe(EOS);
  });

  it("a tokenizer's markers: `</think>` must be one token", () => {
    expect(reasoningMarkersOf({ tokenToId: (t) => ({ '<think>': 7, '</think>': 8 })[t] })).toEqual({ startId: 7, endId: 8 });
    expect(reasoningMarkersOf({ tokenToId: (t) => ({ '</think>': 8 })[t] })).toEqual({ startId: undefined, endId: 8 });
    expect(reasoningMarkersOf(tokenizer)).toBeUndefined();
  });
});
