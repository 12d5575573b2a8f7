// Event-loop CPU per generated token of the ONNX LLM path at a real vocabulary width. A program, not a
// test: prints, per sampling mode, the CPU time the event-loop thread and the whole process spent per
// token, and the decoder thread's share.
//
// Model: the scripted Qwen3 decoder of test/fixtures/real_vocab_repository (onnx-builder's
// buildRealVocabDecoder('qwen3_json'), written to a temporary folder: 151,936 logits wide, a
// one-element KV), so what is left per token is the engine's own work: scheduling, KV gather/scatter,
// the logits crossing from the decoder thread, and sampling. Modes: greedy, temperature 1, and
// temperature 1 with top-5 logprobs; each request generates `--tokens` tokens past EOS (ignore_eos).
// Two paths side by side: `thread` (the decoder thread samples, the server's path) and `event loop`
// (a session that returns the logits, sampled by the executor on the event loop: the path before
// sampling moved to the thread). CPU time is the thread's own (/proc/self/task/<tid>/schedstat,
// nanoseconds on a CPU), so the numbers hold on a loaded machine; every (path, mode) pair runs
// `--rounds` times in alternation and the median is printed, with the event loop's ratio.
// `--path thread` or `--path event-loop` runs one path alone (its peak RSS is then that path's).
//
//   node bench/llm-sampling-cpu.mjs [--tokens 300] [--rounds 5] [--path both|thread|event-loop]     (after `npm run build`)
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { compileSamplingParams, LlmEngine, OnnxExecutor } from '@switchyard/llm';
import { buildRealVocabDecoder } from '@switchyard/onnx-builder';
import { threadDecoderSession } from '@switchyard/engine/internal';

const VOCAB = 151_936;

const MODES = {
  greedy: { temperature: 0 },
  'temperature 1': { temperature: 1 },
  'temperature 1, top-5 logprobs': { temperature: 1, logprobs: true, top_logprobs: 5 },
};

/** Nanoseconds thread `tid` of this process has spent on a CPU. */
function threadCpuNs(tid) {
  return Number(readFileSync(`/proc/self/task/${tid}/schedstat`, 'utf8').split(' ')[0]);
}

function allThreadsCpuNs() {
  let sum = 0;
  for (const tid of readdirSync('/proc/self/task')) {
    try {
      sum += threadCpuNs(tid);
    } catch {
      // the thread ended
    }
  }
  return sum;
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

async function measure(engine, sampling, tokens, tag) {
  if (engine === undefined) return undefined;
  const main = process.pid;
  const m0 = threadCpuNs(main);
  const a0 = allThreadsCpuNs();
  let n = 0;
  for await (const o of engine.generate({ requestId: tag, promptTokenIds: [151644, 77091, 198], sampling: compileSamplingParams({ ...sampling, seed: 7, max_tokens: tokens, ignore_eos: true }) })) n += o.tokenIds.length;
  const mainNs = threadCpuNs(main) - m0;
  const allNs = allThreadsCpuNs() - a0;
  return { tokens: n, mainMs: mainNs / 1e6 / n, allMs: allNs / 1e6 / n };
}

const PATHS = ['thread', 'event loop'];

/** An engine over its own decoder thread; `here`: the session returns the logits (sampled on the event loop). */
async function engineOn(model, here) {
  const thread = await threadDecoderSession(model);
  const session = here ? { ...thread, run: (feeds) => thread.run(feeds) } : thread;
  const executor = OnnxExecutor.create(session, { numBlocks: 256, blockSize: 16, vocabSize: VOCAB, seed: 1 });
  const engine = new LlmEngine({ blockSize: 16, numBlocks: 256, maxModelLen: 2048, executor, eosTokenIds: [151645], vocabSize: VOCAB, scheduler: { maxNumSeqs: 4, maxNumBatchedTokens: 64 } });
  return { engine, release: async () => (await engine.shutdown(), await thread.release()) };
}

export async function measureSamplingCpu({ tokens = 300, rounds = 5, paths = PATHS } = {}) {
  const dir = mkdtempSync(join(tmpdir(), 'switchyard-bench-sampling-'));
  const model = join(dir, 'model.onnx');
  writeFileSync(model, buildRealVocabDecoder('qwen3_json'));
  const engines = {};
  const results = Object.fromEntries(PATHS.map((p) => [p, Object.fromEntries(Object.keys(MODES).map((m) => [m, []]))]));
  try {
    for (const p of paths) engines[p] = await engineOn(model, p === 'event loop');
    let r = 0;
    for (const p of paths) for (const [mode, sampling] of Object.entries(MODES)) await measure(engines[p].engine, sampling, 20, `warm-${r++}`);
    for (let round = 0; round < rounds; round++) {
      for (const [mode, sampling] of Object.entries(MODES)) {
        for (const p of paths) results[p][mode].push(await measure(engines[p].engine, sampling, tokens, `r${r++}`));
      }
    }
  } finally {
    for (const e of Object.values(engines)) await e.release();
    rmSync(dir, { recursive: true, force: true });
  }
  const rssMiB = process.resourceUsage().maxRSS / 1024;
  console.log(`\nLLM sampling CPU per token, ${VOCAB.toLocaleString('en-US')}-token vocabulary (scripted decoder, ${tokens} tokens × ${rounds} rounds, medians; peak RSS ${rssMiB.toFixed(0)} MiB)`);
  console.log('  mode                             sampled on    event loop   all threads   other threads');
  const out = { rssMiB };
  for (const mode of Object.keys(MODES)) {
    out[mode] = {};
    for (const p of paths) {
      const rs = results[p][mode];
      const mainMs = median(rs.map((x) => x.mainMs));
      const allMs = median(rs.map((x) => x.allMs));
      out[mode][p] = { mainMs, allMs };
      console.log(`  ${(p === paths[0] ? mode : '').padEnd(32)} ${p.padEnd(12)} ${mainMs.toFixed(3).padStart(7)} ms ${allMs.toFixed(3).padStart(10)} ms ${(allMs - mainMs).toFixed(3).padStart(12)} ms`);
    }
    if (out[mode]['thread'] !== undefined && out[mode]['event loop'] !== undefined) {
      const x = out[mode]['event loop'].mainMs / out[mode]['thread'].mainMs;
      out[mode].eventLoopRatio = x;
      console.log(`  ${''.padEnd(32)} event-loop CPU per token, sampled on the event loop / on the thread: ${x.toFixed(1)}`);
    }
  }
  return out;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const arg = (name, d) => {
    const i = process.argv.indexOf(name);
    return i < 0 ? d : Number(process.argv[i + 1]);
  };
  const i = process.argv.indexOf('--path');
  const path = i < 0 ? 'both' : process.argv[i + 1];
  const paths = path === 'thread' ? ['thread'] : path === 'event-loop' ? ['event loop'] : PATHS;
  await measureSamplingCpu({ tokens: arg('--tokens', 300), rounds: arg('--rounds', 5), paths });
}
