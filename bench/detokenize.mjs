// Streaming detokenisation: CPU per generated token of `IncrementalDetokenizer` (what every text stream,
// on workers and routers, runs on its event loop per token: two decodes of a short window), with the
// decode our `Tokenizer` gives and with @huggingface/tokenizers' own `decode`, side by side on the same
// token stream. A program, not a test. In process, no servers.
//
// Tokenizers: the tiny one (mock_llm's) and the four family tokenizers of test/fixtures/real_vocab_repository
// (onnx-builder, the vocabularies and added tokens of Qwen3, Llama 3, Mistral and Gemma 3). The stream is
// an English paragraph with a chat turn's special tokens, encoded once; it is detokenized with special
// tokens skipped (the OpenAI endpoints' default) and kept. Rounds alternate the two decoders; medians.
//
//   node bench/detokenize.mjs [--quick]     (after `npm run build`)
import { fileURLToPath } from 'node:url';
import { IncrementalDetokenizer } from '@switchyard/llm';
import { alternatingMedians, tokenizerSets } from './lib/tokenizer-sets.mjs';

const TEXT =
  'The router forwards each request to the worker that already holds the longest prefix of its prompt, ' +
  'so the prefill it would repeat is skipped; when no worker holds one, the least loaded worker wins. ' +
  'Émile asked: "¿Dónde está la biblioteca?" — 東京 🚀 naïve café. ';

/** µs per token to detokenize `ids` (a fresh detokenizer per pass, `passes` passes). */
function timePerToken(decode, ids, passes) {
  const t0 = process.hrtime.bigint();
  let chars = 0;
  for (let p = 0; p < passes; p++) {
    const d = new IncrementalDetokenizer(decode);
    for (const id of ids) chars += d.push(id).length;
    chars += d.flush().length;
  }
  const us = Number(process.hrtime.bigint() - t0) / 1000 / (passes * ids.length);
  if (chars === 0) throw new Error('nothing decoded');
  return us;
}

export function measureDetokenize({ quick = false } = {}) {
  const rounds = quick ? 3 : 7;
  const passes = quick ? 20 : 60;
  const rows = [];
  for (const { name, json, ours, library } of tokenizerSets()) {
    // a chat turn: the special tokens the template writes around the text, then the text
    const special = [...ours.specialTokenIds].slice(0, 2);
    const ids = [...special, ...ours.encode(TEXT.repeat(4)), ...special];
    for (const skip of [true, false]) {
      const oursDecode = (w) => ours.decode(w, { skipSpecialTokens: skip });
      // what Tokenizer.decode did before: the library, an empty window being ''
      const libraryDecode = (w) => (w.length === 0 ? '' : library.decode([...w], { skip_special_tokens: skip, clean_up_tokenization_spaces: false }));
      // same text, or the comparison means nothing
      const a = new IncrementalDetokenizer(oursDecode);
      const b = new IncrementalDetokenizer(libraryDecode);
      const ta = ids.map((id) => a.push(id)).join('') + a.flush();
      const tb = ids.map((id) => b.push(id)).join('') + b.flush();
      if (ta !== tb) throw new Error(`${name}: the two decoders disagree`);
      const m = alternatingMedians(() => timePerToken(oursDecode, ids, passes), () => timePerToken(libraryDecode, ids, passes), rounds);
      rows.push({
        tokenizer: name,
        'added tokens': json.added_tokens?.length ?? 0,
        'special skipped': skip,
        tokens: ids.length,
        'library us/token': +m.library.toFixed(2),
        'ours us/token': +m.ours.toFixed(2),
        'ours/library': +(m.ours / m.library).toFixed(3),
      });
    }
  }
  console.log('\nstreaming detokenisation: CPU per generated token (IncrementalDetokenizer, two window decodes per token), Tokenizer.decode vs the library\'s decode, same text');
  console.table(rows);
  return { rows };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) measureDetokenize({ quick: process.argv.includes('--quick') });
