// The mocker's pace in real time: does a simulated engine take the time its timing model says? One
// LlmEngine + SimulatedExecutor (Dynamo's polynomial model) on a real clock streams one request at a
// time (a 64-token prompt, 32 output tokens) at speedup_ratio 10 (examples/model_repository/mock_llm)
// and 50 (the test fixtures' mock_llm); the model's time to first token (one prefill step) and time
// per output token (one decode step) beside the measured medians, on the clock the mocker sleeps on
// (`systemClock`: the PreciseTimer) and on setTimeout (what it slept on before: Node's timers count
// whole milliseconds), in alternating rounds. In process, no servers. A program, not a test.
//
//   node bench/mocker-pace.mjs [--quick]     (after `npm run build`)
import { fileURLToPath } from 'node:url';
import { LlmEngine, SimulatedExecutor, compileSamplingParams, polynomialTimingModel, stepMs, systemClock } from '@switchyard/llm';

const PROMPT = 64;
const OUTPUT = 32;
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const setTimeoutClock = { now: () => performance.now(), sleep: (ms) => new Promise((resolve) => setTimeout(resolve, ms)) };

/** Time to first token and per later token (ms) of `requests` streams, one at a time. */
async function stream(clock, speedupRatio, requests) {
  const executor = new SimulatedExecutor({ clock, speedupRatio, vocabSize: 1000 });
  const engine = new LlmEngine({ blockSize: 16, numBlocks: 4096, maxModelLen: 4096, executor, clock });
  const ttft = [];
  const tpot = [];
  for (let r = 0; r < requests; r++) {
    // a different prompt each time: no prefix-cache hit, every request prefills all of it
    const promptTokenIds = Array.from({ length: PROMPT }, (_, i) => 1 + ((r * PROMPT + i) % 900));
    const t0 = performance.now();
    let first;
    let last;
    let tokens = 0;
    for await (const out of engine.generate({ requestId: `r${r}`, promptTokenIds, sampling: compileSamplingParams({ max_tokens: OUTPUT, ignore_eos: true }) })) {
      if (out.tokenIds.length === 0) continue;
      const t = performance.now();
      first ??= t;
      last = t;
      tokens += out.tokenIds.length;
    }
    ttft.push(first - t0);
    tpot.push((last - first) / (tokens - 1));
  }
  await engine.shutdown?.();
  return { ttft: median(ttft), tpot: median(tpot) };
}

export async function measureMockerPace({ quick = false } = {}) {
  const rounds = quick ? 2 : 5;
  const requests = quick ? 4 : 10;
  const rows = [];
  for (const speedup of [10, 50]) {
    const model = { ttft: stepMs(polynomialTimingModel, PROMPT, 0, 0) / speedup, tpot: stepMs(polynomialTimingModel, 0, 1, 0) / speedup };
    const got = { precise: [], setTimeout: [] };
    for (let r = 0; r < rounds; r++) {
      got.precise.push(await stream(systemClock, speedup, requests));
      got.setTimeout.push(await stream(setTimeoutClock, speedup, requests));
    }
    for (const [clock, runs] of Object.entries(got)) {
      const ttft = median(runs.map((x) => x.ttft));
      const tpot = median(runs.map((x) => x.tpot));
      rows.push({
        speedup_ratio: speedup,
        clock: clock === 'precise' ? 'systemClock (PreciseTimer)' : 'setTimeout (before)',
        'model TTFT ms': +model.ttft.toFixed(3),
        'TTFT ms': +ttft.toFixed(3),
        'TTFT / model': +(ttft / model.ttft).toFixed(2),
        'model ms/token': +model.tpot.toFixed(3),
        'ms/token': +tpot.toFixed(3),
        'ms/token / model': +(tpot / model.tpot).toFixed(2),
      });
    }
  }
  console.log(`\nmocker pace in real time: one stream at a time (${PROMPT}-token prompt, ${OUTPUT} tokens), the timing model's time beside the measured medians`);
  console.table(rows);
  return { rows };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) await measureMockerPace({ quick: process.argv.includes('--quick') });
