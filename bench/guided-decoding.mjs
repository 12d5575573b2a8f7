// Guided decoding (response_format) on a 150k-token vocabulary. A program, not a test: prints the
// time per generated token with and without the JSON-schema constraint and their difference.
//
// Vocabulary: 151,936 ids (Qwen2's width), byte-level: the 256 bytes plus synthetic tokens shaped like a
// real BPE vocabulary's (words with and without a leading space, numbers, punctuation runs such as `"},`
// and `{"`, whitespace runs, CJK characters and partial UTF-8), seeded, so every run walks the same trie.
//   1. sampler: `sample()` on random logits over the full width (temperature 1, a fresh logits row per
//      token), unconstrained vs constrained by a schema (enum, integer, boolean, free string, array)
//      and by json_object; per token: mean, p50, p99, max (the max is a mask cache miss: a trie walk),
//      and the constraint's own work (mask + advance on a twin fed the same tokens), the added time itself;
//   2. engine: LlmEngine + OnnxExecutor on onnx-builder's tiny decoder built 151,936 logits wide
//      (decoder thread, KV, scheduling and sampling included), guided vs unguided requests of the same
//      token count.
//
//   node bench/guided-decoding.mjs [--quick]     (after `npm run build`)
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { compileSamplingParams, compileTokenConstraint, createSamplerState, LlmEngine, OnnxExecutor, sample, TokenVocabulary } from '@switchyard/llm';
import { buildTinyDecoderModel, TINY_DECODER_SHAPE } from '@switchyard/onnx-builder';
import { threadDecoderSession } from '@switchyard/engine/internal';

const VOCAB = 151_936;
const EOS = VOCAB - 1;

const SCHEMA = {
  type: 'object',
  properties: {
    answer: { enum: ['yes', 'no', 'maybe'] },
    count: { type: 'integer' },
    ok: { type: 'boolean' },
    note: { type: 'string' },
    tags: { type: 'array', items: { type: 'string' }, maxItems: 3 },
  },
  required: ['answer', 'count', 'ok', 'note', 'tags'],
  additionalProperties: false,
};

function lcg(seed) {
  let s = seed >>> 0;
  return () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 2 ** 32);
}

/** Token bytes of a synthetic byte-level vocabulary of VOCAB ids (the last few are special: no bytes). */
export function syntheticVocabulary(seed = 7) {
  const rand = lcg(seed);
  const pick = (s) => s[Math.floor(rand() * s.length)];
  const enc = new TextEncoder();
  const seen = new Set();
  const out = [];
  const add = (bytes) => {
    const key = Buffer.from(bytes).toString('latin1');
    if (seen.has(key)) return;
    seen.add(key);
    out.push(bytes);
  };
  for (let b = 0; b < 256; b++) add(Uint8Array.of(b));
  const letters = 'abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ';
  const punct = ['{', '}', '[', ']', '"', ':', ',', '.', '(', ')', '<', '>', '/', '\\', '-', '_', '=', '+', '*', ';', "'", '!', '?', '#', '\\n'];
  while (out.length < VOCAB - 3) {
    const r = rand();
    let text;
    if (r < 0.62) {
      const len = 2 + Math.floor(rand() * rand() * 12);
      text = (rand() < 0.55 ? ' ' : '') + Array.from({ length: len }, () => pick(letters)).join('');
    } else if (r < 0.7) {
      text = (rand() < 0.3 ? ' ' : '') + String(Math.floor(rand() * 1000));
    } else if (r < 0.84) {
      text = (rand() < 0.3 ? ' ' : '') + Array.from({ length: 1 + Math.floor(rand() * 4) }, () => pick(punct)).join('');
    } else if (r < 0.9) {
      text = pick([' ', '\n', '\t']).repeat(1 + Math.floor(rand() * 16));
    } else {
      const chars = Array.from({ length: 1 + Math.floor(rand() * 3) }, () => String.fromCodePoint(0x4e00 + Math.floor(rand() * 20000))).join('');
      const bytes = enc.encode(chars);
      add(rand() < 0.3 ? bytes.subarray(0, bytes.length - 1) : bytes); // partial UTF-8, as byte-level BPE has
      continue;
    }
    add(enc.encode(text));
  }
  while (out.length < VOCAB) out.push(null);
  return out;
}

const pct = (xs, p) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * p))];
const mean = (xs) => xs.reduce((a, b) => a + b, 0) / xs.length;

/** Per-token sample() times over `docs` generations (at most `maxTokens` each). */
function samplerRun(vocab, spec, docs, maxTokens) {
  const logits = new Float32Array(VOCAB);
  const scratch = new Float32Array(VOCAB);
  const times = [];
  const constraintTimes = [];
  let completed = 0;
  for (let d = 0; d < docs; d++) {
    const rand = lcg(1000 + d);
    const params = compileSamplingParams({ temperature: 1, seed: d, ...(spec !== null ? { guided_decoding: spec } : {}) });
    const state = createSamplerState(params, [], d, [], [EOS], spec === null ? null : compileTokenConstraint(spec, vocab, [EOS]));
    // The constraint's own work (mask + advance), on a twin driven by the same tokens: the time guided decoding adds.
    const twin = spec === null ? null : compileTokenConstraint(spec, vocab, [EOS]);
    for (let i = 0; i < maxTokens; i++) {
      for (let j = 0; j < VOCAB; j++) logits[j] = rand() * 6;
      scratch.set(logits);
      // The twin goes first, so its mask takes any cache miss (the sampler's then hits).
      let t2 = performance.now();
      twin?.mask(scratch);
      const constraintMs = performance.now() - t2;
      const t = performance.now();
      const { tokenId } = sample(logits, state);
      times.push(performance.now() - t);
      if (twin !== null) {
        t2 = performance.now();
        twin.advance(tokenId);
        constraintTimes.push(constraintMs + performance.now() - t2);
      }
      if (tokenId === EOS) {
        completed++;
        break;
      }
    }
  }
  const added = constraintTimes.length === 0 ? null : { meanMs: mean(constraintTimes), p50Ms: pct(constraintTimes, 0.5), p99Ms: pct(constraintTimes, 0.99), maxMs: Math.max(...constraintTimes) };
  return { tokens: times.length, completed, meanMs: mean(times), p50Ms: pct(times, 0.5), p99Ms: pct(times, 0.99), maxMs: Math.max(...times), added };
}

async function engineRun(modelFile, vocab, spec, requests, maxTokens) {
  const session = await threadDecoderSession(modelFile);
  const executor = OnnxExecutor.create(session, { numBlocks: 512, blockSize: 16, vocabSize: VOCAB, seed: 1, tokenVocabulary: () => vocab });
  const engine = new LlmEngine({ blockSize: 16, numBlocks: 512, maxModelLen: 512, executor, eosTokenIds: [EOS], vocabSize: VOCAB, scheduler: { maxNumSeqs: 1, maxNumBatchedTokens: 512 } });
  let tokens = 0;
  const start = performance.now();
  for (let r = 0; r < requests; r++) {
    const sampling = compileSamplingParams({ temperature: 1, seed: r, max_tokens: maxTokens[r], ...(spec !== null ? { guided_decoding: spec } : { ignore_eos: true }) });
    for await (const o of engine.generate({ requestId: `r${r}`, promptTokenIds: [1, 2, 3, 4, 5, 6, 7, 8], sampling })) tokens += o.tokenIds.length;
  }
  const ms = performance.now() - start;
  await engine.shutdown();
  await session.release();
  return { tokens, msPerToken: ms / tokens };
}

export async function measureGuidedDecoding({ quick = false } = {}) {
  let t = performance.now();
  const bytes = syntheticVocabulary();
  const vocab = TokenVocabulary.fromTokenBytes(bytes);
  const trieMs = performance.now() - t;
  const docs = quick ? 3 : 12;
  const schemaSpec = { kind: 'json_schema', schema: SCHEMA };
  const plain = samplerRun(vocab, null, docs, 200);
  const schema = samplerRun(vocab, schemaSpec, docs, 400);
  const object = samplerRun(vocab, { kind: 'json' }, docs, 400);
  // A cold mask inside a string (the widest walk): a fresh vocabulary, so no cache.
  const cold = TokenVocabulary.fromTokenBytes(bytes);
  const c = compileTokenConstraint(schemaSpec, cold, [EOS]);
  const prefix = '{"answer":"yes","count":1,"ok":true,"note":"';
  const byText = new Map(bytes.map((x, id) => [x === null ? null : Buffer.from(x).toString('latin1'), id]));
  for (const ch of prefix) c.advance(byText.get(ch));
  const row = new Float32Array(VOCAB);
  t = performance.now();
  c.mask(row);
  const coldStringMs = performance.now() - t;

  console.log(`\nGuided decoding, ${VOCAB.toLocaleString('en-US')}-token byte-level vocabulary (trie built in ${trieMs.toFixed(0)} ms, ${vocab.nodeCount.toLocaleString('en-US')} nodes)`);
  console.log('  sample() per token         mean      p50      p99      max   tokens  complete docs');
  for (const [label, r] of [['unconstrained', plain], ['json_schema', schema], ['json_object', object]]) {
    console.log(`  ${label.padEnd(22)} ${r.meanMs.toFixed(3).padStart(8)} ${r.p50Ms.toFixed(3).padStart(8)} ${r.p99Ms.toFixed(3).padStart(8)} ${r.maxMs.toFixed(1).padStart(8)} ${String(r.tokens).padStart(8)}  ${r.completed}/${docs}`);
  }
  for (const [label, r] of [['json_schema', schema], ['json_object', object]]) {
    const a = r.added;
    console.log(`  added by the constraint (mask + advance) ${label.padEnd(12)} mean ${a.meanMs.toFixed(3)} ms  p50 ${a.p50Ms.toFixed(3)} ms  p99 ${a.p99Ms.toFixed(3)} ms  max ${a.maxMs.toFixed(1)} ms per token`);
  }
  console.log(`  the first mask inside a string on a fresh vocabulary (splits the vocabulary once) ${coldStringMs.toFixed(1)} ms`);

  const dir = mkdtempSync(join(tmpdir(), 'switchyard-bench-guided-'));
  const modelFile = join(dir, 'model.onnx');
  writeFileSync(modelFile, buildTinyDecoderModel({ shape: { ...TINY_DECODER_SHAPE, vocabSize: VOCAB } }));
  try {
    const requests = quick ? 2 : 6;
    const guided = await engineRun(modelFile, vocab, schemaSpec, requests, Array(requests).fill(300));
    const perRequest = Math.max(1, Math.round(guided.tokens / requests));
    const unguided = await engineRun(modelFile, vocab, null, requests, Array(requests).fill(perRequest));
    console.log(`  engine, tiny decoder ${VOCAB.toLocaleString('en-US')} logits wide: unguided ${unguided.msPerToken.toFixed(3)} ms/token, guided ${guided.msPerToken.toFixed(3)} ms/token (+${(guided.msPerToken - unguided.msPerToken).toFixed(3)} ms, ${guided.tokens} tokens)`);
    return { vocab: VOCAB, trieMs, sampler: { plain, schema, object, coldStringMs }, engine: { guided, unguided } };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) await measureGuidedDecoding({ quick: process.argv.includes('--quick') });
