// The ONNX LLM executor on the tiny decoder (issue 4). A program, not a test: prints tables and ratios
// and returns them for bench/run.mjs to store; nothing here gates CI.
//
// Engine: LlmEngine + OnnxExecutor over the worker's own path — the decoder on a SessionThread (its own
// worker thread), scheduling / KV gather-scatter / sampling on the event loop — with the tiny model
// from onnx-builder (2 layers, 64 hidden, 4 heads / 2 KV heads, 384-token vocabulary, fp32 KV).
//   1. continuous batching: output tokens/s with 1 stream vs 16 concurrent streams (greedy, 64 tokens
//      each, distinct 32-token prompts, no prefix reuse);
//   2. prefix caching: time to first token of a 384-token prompt whose first 368 tokens are cached
//      (the same system prompt, a different 16-token question) vs the same prompts on an engine with
//      prefix caching off.
//
//   node bench/llm-onnx.mjs [--quick]     (after `npm run build`)
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { compileSamplingParams, LlmEngine, OnnxExecutor } from '@switchyard/llm';
import { buildTinyDecoderModel, TINY_DECODER_SHAPE } from '@switchyard/onnx-builder';
import { threadDecoderSession } from '@switchyard/engine/internal';

const V = TINY_DECODER_SHAPE.vocabSize - 3;

async function engineFor(modelFile, { prefixCaching = true } = {}) {
  const session = await threadDecoderSession(modelFile);
  const executor = OnnxExecutor.create(session, { numBlocks: 1024, blockSize: 16, vocabSize: TINY_DECODER_SHAPE.vocabSize });
  const engine = new LlmEngine({
    blockSize: 16,
    numBlocks: 1024,
    enablePrefixCaching: prefixCaching,
    maxModelLen: 512,
    executor,
    scheduler: { maxNumSeqs: 64, maxNumBatchedTokens: 512 },
  });
  return { engine, close: async () => (await engine.shutdown(), await session.release()) };
}

const prompt = (len, seed) => Array.from({ length: len }, (_, i) => (seed * 7919 + i * 131) % V);

/** Run one generation; resolves with its TTFT and token count (ms on performance.now()). */
async function generate(engine, id, tokens, maxTokens) {
  const start = performance.now();
  let first;
  let n = 0;
  for await (const o of engine.generate({ requestId: id, promptTokenIds: tokens, sampling: compileSamplingParams({ temperature: 0, max_tokens: maxTokens, ignore_eos: true }) })) {
    if (first === undefined && o.tokenIds.length > 0) first = performance.now() - start;
    n += o.tokenIds.length;
  }
  return { ttftMs: first, tokens: n };
}

async function throughput(engine, streams, rounds, maxTokens) {
  let tokens = 0;
  const start = performance.now();
  for (let r = 0; r < rounds; r++) {
    const res = await Promise.all(Array.from({ length: streams }, (_, s) => generate(engine, `t${streams}-${r}-${s}`, prompt(32, r * 100 + s), maxTokens)));
    tokens += res.reduce((a, x) => a + x.tokens, 0);
  }
  const seconds = (performance.now() - start) / 1000;
  return { streams, tokens, seconds, tokensPerSecond: tokens / seconds };
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

async function ttftCachedVsNot(modelFile, runs) {
  const system = prompt(368, 999);
  const out = {};
  for (const [label, prefixCaching] of [['cached', true], ['uncached', false]]) {
    const { engine, close } = await engineFor(modelFile, { prefixCaching });
    await generate(engine, `${label}-warm`, [...system, ...prompt(16, 1)], 1); // fills the cache (when on)
    const ttfts = [];
    for (let i = 0; i < runs; i++) ttfts.push((await generate(engine, `${label}-${i}`, [...system, ...prompt(16, 2 + i)], 1)).ttftMs);
    out[label] = { ttftP50Ms: median(ttfts), cachedTokens: engine.metrics().prefixCacheHits };
    await close();
  }
  out.ratio = out.uncached.ttftP50Ms / out.cached.ttftP50Ms;
  return out;
}

export async function measureOnnxLlm({ quick = false } = {}) {
  const dir = mkdtempSync(join(tmpdir(), 'switchyard-bench-llm-'));
  const modelFile = join(dir, 'model.onnx');
  writeFileSync(modelFile, buildTinyDecoderModel());
  try {
    const maxTokens = 64;
    const { engine, close } = await engineFor(modelFile);
    await throughput(engine, 4, 1, 8); // warm up
    const one = await throughput(engine, 1, quick ? 2 : 6, maxTokens);
    const sixteen = await throughput(engine, 16, quick ? 1 : 3, maxTokens);
    await close();
    const batching = { one, sixteen, gain: sixteen.tokensPerSecond / one.tokensPerSecond };
    const prefix = await ttftCachedVsNot(modelFile, quick ? 5 : 20);
    console.log('\nONNX LLM executor, tiny decoder (worker thread session), greedy');
    console.log(`  1 stream    ${one.tokensPerSecond.toFixed(0).padStart(7)} tokens/s`);
    console.log(`  16 streams  ${sixteen.tokensPerSecond.toFixed(0).padStart(7)} tokens/s   continuous batching gain ${batching.gain.toFixed(2)}x`);
    console.log(`  TTFT p50, 384-token prompt: 368 cached ${prefix.cached.ttftP50Ms.toFixed(2)} ms vs prefix caching off ${prefix.uncached.ttftP50Ms.toFixed(2)} ms   ratio ${prefix.ratio.toFixed(2)}x`);
    return { batching, prefix };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) await measureOnnxLlm({ quick: process.argv.includes('--quick') });
