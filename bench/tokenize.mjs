// Prompt tokenisation: CPU per token of `Tokenizer.encode` (with its byte-level pre-tokenization,
// tokenizer/byte-level-pretokenizer.ts) beside @huggingface/tokenizers' own `encode`, on the same text,
// for the tiny tokenizer (mock_llm's) and the four family tokenizers of test/fixtures/real_vocab_repository
// (onnx-builder: the vocabularies and added tokens of Qwen3, Llama 3, Mistral and Gemma 3). What every
// chat or completion prompt costs a worker or router before its first token (on the event loop for
// short prompts, on a preprocessing thread for long ones). The ids are checked equal first. Rounds
// alternate the two; medians. A program, not a test. In process, no servers.
//
//   node bench/tokenize.mjs [--quick]     (after `npm run build`)
import { fileURLToPath } from 'node:url';
import { alternatingMedians, tokenizerSets } from './lib/tokenizer-sets.mjs';

// English prose and code (most prompts), then a little of other scripts
const TEXT =
  'The router forwards each request to the worker that already holds the longest prefix of its prompt, ' +
  "so the prefill it would repeat is skipped; when no worker holds one, the least loaded worker wins. It's cheap.\n" +
  'def route(request):\n    return min(workers, key=lambda w: w.load)  # 42 workers, 3.5 ms\n' +
  'Émile asked: "¿Dónde está la biblioteca?" — 東京 🚀 naïve café.\n';

/** µs per token of `encode` over `text`, `passes` times. */
function timePerToken(encode, text, passes) {
  const t0 = process.hrtime.bigint();
  let tokens = 0;
  for (let p = 0; p < passes; p++) tokens += encode(text).length;
  return Number(process.hrtime.bigint() - t0) / 1000 / tokens;
}

export function measureTokenize({ quick = false } = {}) {
  const rounds = quick ? 3 : 7;
  const passes = quick ? 10 : 40;
  const text = TEXT.repeat(8);
  const rows = [];
  for (const { name, ours, library } of tokenizerSets()) {
    const oursEncode = (t) => ours.encode(t);
    const libraryEncode = (t) => library.encode(t, { add_special_tokens: false }).ids;
    // same ids, or the comparison means nothing
    if (JSON.stringify(oursEncode(text)) !== JSON.stringify(libraryEncode(text))) throw new Error(`${name}: the two encoders disagree`);
    const m = alternatingMedians(() => timePerToken(oursEncode, text, passes), () => timePerToken(libraryEncode, text, passes), rounds);
    rows.push({
      tokenizer: name,
      tokens: oursEncode(text).length,
      'library us/token': +m.library.toFixed(3),
      'ours us/token': +m.ours.toFixed(3),
      'ours/library': +(m.ours / m.library).toFixed(3),
    });
  }
  console.log('\nprompt tokenisation: CPU per token, Tokenizer.encode vs the library\'s encode, same text (English prose and code, some other scripts)');
  console.table(rows);
  return { rows };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) measureTokenize({ quick: process.argv.includes('--quick') });
