// What the tokenizer benches (detokenize.mjs, tokenize.mjs) share: the tokenizers they run on, each as
// ours and the library's own, and the side-by-side timing of two functions in alternating rounds.
import * as tokenizers from '@huggingface/tokenizers';
import { Tokenizer } from '@switchyard/llm';
import { buildFamilyModelFiles, buildTinyTokenizerFiles, MODEL_FAMILIES } from '@switchyard/onnx-builder';

/**
 * The tiny tokenizer (mock_llm's) and the four family tokenizers of test/fixtures/real_vocab_repository
 * (onnx-builder: the vocabularies and added tokens of Qwen3, Llama 3, Mistral and Gemma 3), each as
 * `{ name, json, ours, library }`: its tokenizer.json, our `Tokenizer` and @huggingface/tokenizers' own.
 */
export function tokenizerSets() {
  const sets = [['tiny (mock_llm)', { ...buildTinyTokenizerFiles() }], ...MODEL_FAMILIES.map((f) => [f, buildFamilyModelFiles(f).files])];
  return sets.map(([name, files]) => {
    const json = JSON.parse(files['tokenizer.json']);
    const config = JSON.parse(files['tokenizer_config.json'] ?? '{}');
    return { name, json, ours: Tokenizer.fromJson(json, config), library: new tokenizers.Tokenizer(json, config) };
  });
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

/** `ours()` and `library()` (each returning a time) warmed once, then `rounds` alternating rounds: their medians. */
export function alternatingMedians(ours, library, rounds) {
  ours();
  library();
  const o = [];
  const l = [];
  for (let r = 0; r < rounds; r++) {
    o.push(ours());
    l.push(library());
  }
  return { ours: median(o), library: median(l) };
}
