// Prompt preprocessing on the event loop vs on the PreprocessPool's threads (issue 15): for chat
// requests of growing size, the event loop's busy time per request (ELU active time, which counts the
// pool's message copying and reply handling too) and the latency of one request alone, side by side
// in one run. The crossing of the loop-time columns is where `DEFAULT_PREPROCESS_INLINE_CHARS` belongs.
//
//   node bench/preprocess-pool.mjs [--model examples/model_repository/mock_llm/1] [--quick]
//
// After `npm run build`. The pool runs with inlineChars 0 (everything on a thread) against a pool
// with 0 threads (everything inline): same tokenizer, same template, same messages.
import { readFile } from 'node:fs/promises';
import { performance } from 'node:perf_hooks';
import { ChatTemplate, PreprocessPool, Tokenizer } from '@switchyard/llm';

const args = process.argv.slice(2);
const flag = (name) => {
  const i = args.indexOf(name);
  return i === -1 ? undefined : args[i + 1];
};
const dir = flag('--model') ?? 'examples/model_repository/mock_llm/1';
const quick = args.includes('--quick');
const tokenizer = await Tokenizer.fromModelFolder(dir);
const config = JSON.parse(await readFile(`${dir}/tokenizer_config.json`, 'utf8'));
const template = ChatTemplate.fromTokenizerConfig(config);
const words = 'the router renders the chat template and tokenizes every prompt before it picks a worker ';

const inline = new PreprocessPool({ threads: 0 });
const pooled = new PreprocessPool({ threads: 1, inlineChars: 0 });

function job(chars) {
  const system = { role: 'system', content: 'You are a helpful assistant.' };
  const user = { role: 'user', content: words.repeat(Math.ceil(chars / words.length)).slice(0, chars) };
  return { messages: [system, user], addSpecialTokens: false, contextLength: 1 << 30 };
}

/** Loop busy µs per request over `n` requests, `concurrency` at a time. */
async function loopCost(pool, j, n, concurrency) {
  const before = performance.eventLoopUtilization();
  const start = performance.now();
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next++ < n) await pool.chatPrompt(tokenizer, template, j);
    }),
  );
  const elu = performance.eventLoopUtilization(before);
  return { busyUs: (elu.active * 1000) / n, wallUs: ((performance.now() - start) * 1000) / n };
}

/** Median latency µs of one request alone. */
async function latency(pool, j, n) {
  const t = [];
  for (let i = 0; i < n; i++) {
    const s = performance.now();
    await pool.chatPrompt(tokenizer, template, j);
    t.push((performance.now() - s) * 1000);
  }
  t.sort((a, b) => a - b);
  return t[t.length >> 1];
}

const sizes = quick ? [64, 1024, 16384] : [64, 256, 512, 1024, 2048, 4096, 16384, 65536];
console.log(`model ${dir}; per request: event-loop busy µs (16 concurrent) and alone latency µs`);
console.log('chars'.padStart(7), 'loop inline'.padStart(12), 'loop pool'.padStart(10), 'lat inline'.padStart(11), 'lat pool'.padStart(9), 'inline/pool'.padStart(12));
for (const chars of sizes) {
  const j = job(chars);
  const a = await inline.chatPrompt(tokenizer, template, j);
  const b = await pooled.chatPrompt(tokenizer, template, j);
  if (a.text !== b.text || a.ids.join() !== b.ids.join()) throw new Error(`pool and inline differ at ${chars} chars`);
  const n = Math.max(20, Math.min(2000, Math.round(4e6 / (chars + 200))));
  await loopCost(inline, j, n >> 2, 16); // warm both
  await loopCost(pooled, j, n >> 2, 16);
  // The least of three trials: other processes on the machine only ever add time.
  const best = async (pool) => {
    let min = { busyUs: Infinity };
    for (let k = 0; k < 3; k++) {
      const c = await loopCost(pool, j, n, 16);
      if (c.busyUs < min.busyUs) min = c;
    }
    return min;
  };
  const ci = await best(inline);
  const cp = await best(pooled);
  const li = await latency(inline, j, Math.min(n, 200));
  const lp = await latency(pooled, j, Math.min(n, 200));
  console.log(String(chars).padStart(7), ci.busyUs.toFixed(1).padStart(12), cp.busyUs.toFixed(1).padStart(10), li.toFixed(1).padStart(11), lp.toFixed(1).padStart(9), (ci.busyUs / cp.busyUs).toFixed(2).padStart(12));
}
// A hostile conversation: 20k short messages (3 MB rendered, refused for its length after rendering).
const heavy = {
  messages: Array.from({ length: 20_000 }, (_, i) => ({ role: i % 2 === 0 ? 'user' : 'assistant', content: 'hello there, how are you today? '.repeat(4) })),
  addSpecialTokens: false,
  contextLength: 512,
};
const heavyCost = async (pool) => {
  const before = performance.eventLoopUtilization();
  const s = performance.now();
  const e = await pool.chatPrompt(tokenizer, template, heavy).then(() => 'accepted', (err) => err.message.slice(0, 40));
  return { busyMs: performance.eventLoopUtilization(before).active, wallMs: performance.now() - s, e };
};
for (let k = 0; k < 3; k++) {
  const a = await heavyCost(inline);
  const b = await heavyCost(pooled);
  console.log(`20k-message chat: loop busy ${a.busyMs.toFixed(0)} ms inline vs ${b.busyMs.toFixed(0)} ms pooled (wall ${a.wallMs.toFixed(0)} vs ${b.wallMs.toFixed(0)} ms; ${a.e === b.e ? 'same outcome' : 'OUTCOMES DIFFER'}: ${a.e}...)`);
}
await pooled.close();
