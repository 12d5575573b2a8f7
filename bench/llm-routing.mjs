// Routing benchmark (issue 5): KV-aware vs round-robin vs random vs least-loaded routing over 8
// simulated workers, in virtual time, plus the router's decision latency with 64 workers and one
// million indexed blocks. A program, not a test: prints tables and ratios, gates nothing.
//
// Workers: 8 mocker engines (EngineCore + LlmScheduler + KvBlockManager + SimulatedExecutor, the
// polynomial timing model of shared/reference/dynamo-design.md §6.4), each on its own VirtualClock, in
// one process. A discrete-event loop always advances the earliest thing: the next arrival, or the
// step of the busy worker whose clock is furthest behind. Every engine's KV events go through the same
// `RoutingTable.applyEvents` path the router's indexer uses, and every decision is the table's
// `selectAndReserve` (reservation released at the last token, prefill marked done at the first), so
// the policies differ only in how they choose:
//   kv            selectAndReserve over all workers (overlap weight 1, temperature 0)
//   least-loaded  selectAndReserve with scoring 'load'
//   round-robin   the next worker in turn, then selectAndReserve with that single candidate
//   random        a uniformly random worker, likewise
//
// Workload: SGLang's generated-shared-prefix at its defaults (performance-anchors.md §4.1): 64 groups ×
// 16 prompts, a group system prompt of 2,048 tokens + a unique 128-token question, 256 output tokens
// (ignore_eos), token ids drawn uniformly (seed 1), groups interleaved at random, Poisson arrivals at
// RATES (--quick: a smaller shape at one rate). Per-worker KV capacity is chosen so one worker cannot hold every group's system
// prompt (as on real GPUs under load): routing decides whether a prefix is computed once or on every
// worker. Control: the same shapes with fresh tokens everywhere (no reuse), where KV-aware routing
// must do no harm (goal: within 5% of round-robin).
//
// Goals reported against (issue 5): hit rate >= 90% of the ideal (infinite cache, perfect affinity);
// TTFT p50 >= 3x better than round-robin (Dynamo's published 3x); no-reuse control within 5% of
// round-robin; decision latency p99 < 1 ms including the Redis round trip (64 workers, 1M blocks).
// Simulated times depend on the timing model: they show the mechanism, not GPU seconds.
//
//   node bench/llm-routing.mjs [--quick] [--rate R]      (after `npm run build`)
import { fileURLToPath } from 'node:url';
import { EngineCore, KvBlockManager, LlmScheduler, SimulatedExecutor, VirtualClock, hashTokenBlocks } from '@switchyard/llm';
import { MemoryRoutingTable } from '@switchyard/kv-router';
import { mulberry32 } from '@switchyard/onnx-builder';

export const WORKERS = 8;
/** Mocker engine per worker; numBlocks is scaled down so the cache is under pressure (see header). */
export const ENGINE = { numBlocks: 1024, blockSize: 64, maxNumSeqs: 64, maxNumBatchedTokens: 4096, watermark: 0.01 };
/** gsp defaults (64 × 16, S 2048, Q 128, O 256); the arrival rate is this benchmark's choice. */
export const GSP = { groups: 64, perGroup: 16, systemLen: 2048, questionLen: 128, outputLen: 256, vocab: 32000, seed: 1 };
/**
 * Poisson arrival rates (req/s, simulated) the full run sweeps: 16 keeps every policy and the
 * control under capacity (ratios free of queueing blow-up, performance-anchors.md §9); 24 is the knee
 * where round-robin's redundant prefill starts to queue while KV-aware routing does not; 28 and 32
 * are past it for round-robin (and for the no-reuse control), still under it for KV-aware routing.
 * The TTFT ratio depends on where the load sits: without queues it is bounded by the timing model
 * (prefill of an uncached 2,176-token prompt ≈ 51 ms against ≈ 18 ms for its 128 uncached tokens:
 * the fixed 16.5 ms per prefill caps the gain near 2.8x); Dynamo's 3x (D4) was measured under
 * production load, where round-robin's redundant prefill queues.
 */
export const RATES = [16, 24, 28, 32];
export const QUICK_GSP = { ...GSP, groups: 32, perGroup: 8, systemLen: 1024, outputLen: 128 };
export const QUICK_RATES = [12];
export const POLICIES = ['kv', 'round-robin', 'random', 'least-loaded'];

/** The trace: requests with arrival times (simulated ms); `shared` false is the no-reuse control. */
export function buildGspTrace(gsp, { shared = true } = {}) {
  const shape = mulberry32(gsp.seed);
  const tok = mulberry32(gsp.seed + (shared ? 1 : 2));
  const randomTokens = (n) => Array.from({ length: n }, () => Math.floor(tok() * gsp.vocab));
  const systems = Array.from({ length: gsp.groups }, () => randomTokens(gsp.systemLen));
  const order = [];
  for (let g = 0; g < gsp.groups; g++) for (let i = 0; i < gsp.perGroup; i++) order.push(g);
  for (let i = order.length - 1; i > 0; i--) {
    const j = Math.floor(shape() * (i + 1));
    [order[i], order[j]] = [order[j], order[i]];
  }
  let t = 0;
  let promptTokens = 0;
  let idealCached = 0;
  const seen = new Set();
  const requests = order.map((g, i) => {
    t += (-Math.log(1 - shape()) / gsp.rate) * 1000;
    const prompt = shared ? systems[g].concat(randomTokens(gsp.questionLen)) : randomTokens(gsp.systemLen + gsp.questionLen);
    if (shared && seen.has(g)) idealCached += Math.floor(gsp.systemLen / ENGINE.blockSize) * ENGINE.blockSize;
    seen.add(g);
    promptTokens += prompt.length;
    return { requestId: `r${i}`, promptTokenIds: prompt, maxTokens: gsp.outputLen, arrivalTime: t };
  });
  return { requests, promptTokens, idealCachedTokens: idealCached };
}

/** LlmScheduler that sums the prompt tokens its admissions took from the prefix cache (the real hit). */
class CountingScheduler extends LlmScheduler {
  cachedTokens = 0;
  schedule() {
    const out = super.schedule();
    for (const e of out.scheduled) this.cachedTokens += e.numCachedTokens;
    return out;
  }
}

function newWorker(id, table) {
  const pending = [];
  const kv = new KvBlockManager({ numBlocks: ENGINE.numBlocks, blockSize: ENGINE.blockSize, onEvent: (e) => pending.push(e) });
  const scheduler = new CountingScheduler(kv, { maxNumSeqs: ENGINE.maxNumSeqs, maxNumBatchedTokens: ENGINE.maxNumBatchedTokens, watermark: ENGINE.watermark });
  const clock = new VirtualClock();
  const engine = new EngineCore(scheduler, new SimulatedExecutor({ clock, seed: 1 }), clock);
  return {
    id,
    engine,
    clock,
    async flushEvents() {
      if (pending.length === 0) return;
      const batch = pending.splice(0);
      const r = await table.applyEvents(id, batch);
      if (r.status !== 'ok') throw new Error(`bench: unexpected KV event gap on ${id}`);
    },
  };
}

function quantile(sorted, p) {
  return sorted.length === 0 ? NaN : sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))];
}

/** One policy over one trace; returns its summary. */
export async function simulate(trace, policy) {
  const table = new MemoryRoutingTable();
  const workers = Array.from({ length: WORKERS }, (_, i) => newWorker(`w${i}`, table));
  const ids = workers.map((w) => w.id);
  const byId = new Map(workers.map((w) => [w.id, w]));
  const rng = mulberry32(7);
  const owner = new Map();
  const started = new Set();
  let rr = 0;
  let cachedTokens = 0;
  let decisions = 0;
  let overlapBlocksRouted = 0;
  const t0 = process.hrtime.bigint();
  const queue = trace.requests;
  let next = 0;
  for (;;) {
    let busy = null;
    for (const w of workers) if (w.engine.scheduler.hasUnfinished() && (busy === null || w.clock.now() < busy.clock.now())) busy = w;
    if (next < queue.length && (busy === null || queue[next].arrivalTime <= busy.clock.now())) {
      const r = queue[next++];
      const { sequenceHashes } = hashTokenBlocks(r.promptTokenIds, ENGINE.blockSize);
      const base = { requestId: r.requestId, blockHashes: sequenceHashes, promptTokens: r.promptTokenIds.length, blockSize: ENGINE.blockSize, overlapWeight: 1, temperature: 0, random: rng(), now: r.arrivalTime };
      let candidates = ids;
      if (policy === 'round-robin') candidates = [ids[rr++ % ids.length]];
      else if (policy === 'random') candidates = [ids[Math.floor(rng() * ids.length)]];
      const d = await table.selectAndReserve({ ...base, candidates, scoring: policy === 'least-loaded' ? 'load' : 'kv' });
      decisions++;
      overlapBlocksRouted += d.overlapBlocks;
      const w = byId.get(d.worker);
      if (!w.engine.scheduler.hasUnfinished()) w.clock.advanceTo(r.arrivalTime);
      w.engine.addRequest({ requestId: r.requestId, promptTokenIds: r.promptTokenIds, maxTokens: r.maxTokens, arrivalTime: r.arrivalTime, eosTokenIds: [] });
      owner.set(r.requestId, w);
      continue;
    }
    if (busy === null) break;
    const res = await busy.engine.step();
    await busy.flushEvents();
    for (const o of res.outputs) {
      if (!started.has(o.requestId)) {
        started.add(o.requestId);
        await table.markPrefillDone(o.requestId);
      }
      if (o.finishReason !== null) await table.release(o.requestId);
    }
    if (res.numScheduled === 0 && next < queue.length) busy.clock.advanceTo(queue[next].arrivalTime);
  }
  const wallSec = Number(process.hrtime.bigint() - t0) / 1e9;

  const ttft = [];
  const itl = [];
  let outputTokens = 0;
  let makespan = 0;
  const perWorker = new Map(ids.map((id) => [id, 0]));
  for (const r of queue) {
    const w = owner.get(r.requestId);
    const m = w.engine.requestMetrics(r.requestId);
    ttft.push(m.firstTokenTime - m.arrivalTime);
    for (const x of m.interTokenMs) itl.push(x);
    outputTokens += m.numOutputTokens;
    makespan = Math.max(makespan, m.finishTime);
    perWorker.set(w.id, perWorker.get(w.id) + 1);
  }
  for (const w of workers) cachedTokens += w.engine.scheduler.cachedTokens;
  ttft.sort((a, b) => a - b);
  itl.sort((a, b) => a - b);
  return {
    policy,
    requests: queue.length,
    wallSec: +wallSec.toFixed(2),
    ttftMs: { p50: +quantile(ttft, 0.5).toFixed(1), p99: +quantile(ttft, 0.99).toFixed(1), mean: +(ttft.reduce((a, b) => a + b, 0) / ttft.length).toFixed(1) },
    itlMs: { p50: +quantile(itl, 0.5).toFixed(2), p99: +quantile(itl, 0.99).toFixed(2) },
    outputTokPerSimSec: Math.round(outputTokens / (makespan / 1000)),
    routedOverlapTokens: overlapBlocksRouted * ENGINE.blockSize,
    decisions,
    perWorker: [...perWorker.values()],
    cachedTokens,
  };
}

/** One workload shape at one rate: every policy on the shared trace and on the control. */
async function measureAtRate(gsp) {
  console.log(
    `\nworkload: generated-shared-prefix ${gsp.groups} groups x ${gsp.perGroup}, system ${gsp.systemLen} + question ${gsp.questionLen} tokens, ` +
      `output ${gsp.outputLen}, Poisson ${gsp.rate} req/s, seed ${gsp.seed}; control: same shapes, no shared tokens`,
  );
  const results = { gsp };
  for (const [key, shared] of [['shared', true], ['control', false]]) {
    const trace = buildGspTrace(gsp, { shared });
    results[key] = { idealHitRate: +(trace.idealCachedTokens / trace.promptTokens).toFixed(4), promptTokens: trace.promptTokens, policies: {} };
    for (const policy of POLICIES) {
      const r = await simulate(trace, policy);
      r.hitRate = +(r.cachedTokens / trace.promptTokens).toFixed(4);
      r.predictedHitRate = +(r.routedOverlapTokens / trace.promptTokens).toFixed(4);
      results[key].policies[policy] = r;
    }
  }
  const rows = [];
  for (const key of ['shared', 'control']) {
    const rrRun = results[key].policies['round-robin'];
    for (const policy of POLICIES) {
      const r = results[key].policies[policy];
      rows.push({
        workload: key,
        policy,
        'hit rate': r.hitRate,
        'hit/ideal': results[key].idealHitRate === 0 ? '' : +(r.hitRate / results[key].idealHitRate).toFixed(3),
        'TTFT p50 ms': r.ttftMs.p50,
        'TTFT p99 ms': r.ttftMs.p99,
        'ITL p50 ms': r.itlMs.p50,
        'out tok/sim s': r.outputTokPerSimSec,
        'RR/this TTFT p50': +(rrRun.ttftMs.p50 / r.ttftMs.p50).toFixed(2),
        'this/RR tok/s': +(r.outputTokPerSimSec / rrRun.outputTokPerSimSec).toFixed(3),
        'wall s': r.wallSec,
      });
    }
  }
  console.table(rows);
  results.table = rows;
  const kv = results.shared.policies.kv;
  const rr = results.shared.policies['round-robin'];
  const ckv = results.control.policies.kv;
  const crr = results.control.policies['round-robin'];
  results.goals = {
    'KV hit rate / ideal (goal >= 0.9)': +(kv.hitRate / results.shared.idealHitRate).toFixed(3),
    'RR TTFT p50 / KV TTFT p50 (goal >= 3)': +(rr.ttftMs.p50 / kv.ttftMs.p50).toFixed(2),
    'control: KV TTFT p50 / RR (goal within 5%)': +(ckv.ttftMs.p50 / crr.ttftMs.p50).toFixed(3),
    'control: KV tok/s / RR (goal within 5%)': +(ckv.outputTokPerSimSec / crr.outputTokPerSimSec).toFixed(3),
  };
  for (const [k, v] of Object.entries(results.goals)) console.log(`  ${k}: ${v}`);
  return results;
}

export async function measureRouting({ quick = false, rates } = {}) {
  const gsp = quick ? QUICK_GSP : GSP;
  console.log(`\nRouting: ${WORKERS} simulated workers (mocker timing, ${ENGINE.numBlocks} blocks of ${ENGINE.blockSize} tokens each), virtual time`);
  const results = { workers: WORKERS, engine: ENGINE, byRate: {} };
  for (const rate of rates ?? (quick ? QUICK_RATES : RATES)) results.byRate[rate] = await measureAtRate({ ...gsp, rate });
  console.log('\nRouting goals by arrival rate (KV-aware against round-robin; see RATES for why the TTFT ratio grows with load)');
  console.table(
    Object.entries(results.byRate).map(([rate, r]) => {
      const [hit, ttft, ctrlTtft, ctrlTok] = Object.values(r.goals);
      return {
        'req/s': Number(rate),
        'hit/ideal (>= 0.9)': hit,
        'RR/KV TTFT p50 (>= 3)': ttft,
        'control KV/RR TTFT p50 (0.95-1.05)': ctrlTtft,
        'control KV/RR tok/s (0.95-1.05)': ctrlTok,
        'control over capacity': r.control.policies['round-robin'].ttftMs.p50 > 10 * r.control.policies['round-robin'].itlMs.p50 ? 'yes' : 'no',
      };
    }),
  );
  return results;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const i = process.argv.indexOf('--rate');
  await measureRouting({ quick: process.argv.includes('--quick'), rates: i > 0 ? [Number(process.argv[i + 1])] : undefined });
}
