// Disaggregation benchmark (issue 11): 4 prefill + 4 decode simulated workers against 8 aggregated
// ones, in virtual time. A program, not a test: prints tables and ratios, gates nothing.
//
// Workers: mocker engines (EngineCore + LlmScheduler + KvBlockManager + SimulatedExecutor, the mocker's
// defaults: 16,384 blocks of 64 tokens, max_num_seqs 256, max_num_batched_tokens 8,192, chunked prefill,
// the polynomial timing model of shared/reference/dynamo-design.md §6.4), each on its own VirtualClock,
// in one process. A discrete-event loop always runs the earliest thing: the next arrival, the next KV
// hand-off, or the step of the busy worker whose clock is furthest behind. Every engine's KV events go
// through the routing table's `applyEvents`, as the router's indexer does, and every choice is the
// table's `selectAndReserve`.
//
// Aggregated: the router's KV-aware choice over 8 workers; each worker prefills and decodes.
// Disaggregated (conditional): the decode worker is chosen first (KV-aware over the decode pool, so its
// own cached overlap counts); the router's own policy (`decideDisagg`, the function the router runs)
// says remote or local from the uncached prompt tokens on that worker and the prefill pool's queued
// prefill tokens (the table's `loads`); remote → a prefill-only request on the prefill worker chosen
// KV-aware among the unsaturated ones; at its first token the prompt's full blocks are pinned there and
// the decode worker receives the request after the transfer time of the blocks it lacks (blocks × KV
// bytes per block ÷ bandwidth); it imports them (prefix-cache hits, `stored` events), computes the tail
// of the prompt and the first token, and decodes. The first token reaches the client from the prefill
// worker; the second from the decode worker.
//
// Workloads (token ids uniform, no prefix reuse, Poisson arrivals, every request generates exactly its
// output length):
//   prefill-heavy  input 3,000 tokens, output 150 (Dynamo's published disaggregation configuration);
//   short          input 200, output 150 (control: conditional disaggregation keeps these local).
// KV bytes per block: a Llama-3.1-8B-shaped model (32 layers, 8 KV heads, head dim 128, fp16) →
// 128 KiB per token, 8 MiB per 64-token block; bandwidth 25 Gbit/s (the worker's --kv-transfer-gbps
// default) and 400 Gbit/s (an RDMA NIC).
//
// SLO (stated up front, as multiples of the isolated latencies of this timing model, DistServe's way):
// TTFT ≤ 5 × the isolated prefill of the input (3,000 tokens: 66 ms → 330 ms; 200 tokens: 19.7 ms →
// 99 ms) and TPOT (mean inter-token latency of the request after its first token) ≤ 3 × the isolated
// decode step at low KV use (5.74 ms → 17.2 ms). Goodput at a rate = requests meeting both ÷ the
// arrival span; the cluster's goodput (DistServe's definition) = the highest rate swept at which at
// least 90% of requests meet both.
// Goals reported against (issue 11): goodput ≥ 1.5× aggregated on the prefill-heavy workload;
// conditional disaggregation within 5% of aggregated on the short-prompt control.
//
// What it shows (full run, 800 requests per run): on the prefill-heavy workload 8 aggregated workers
// hold the SLO up to 56 req/s and 4P+4D up to 60, so the goodput ratio is 1.07, not 1.5. Between the
// knees disaggregation keeps far more requests within the SLO (60 req/s: 98% against 37%, goodput
// 2.6×; aggregated loses TPOT: every 3,000-token prefill stalls the decodes of its worker's step for
// ~66 ms), but the workload is prefill-bound and 4 prefill workers have half the prefill capacity of 8
// aggregated ones (≈ 60 prefills/s), and each remote request still costs its decode worker one prefill
// step for the prompt's partial last block and the first token (the timing model charges any prefill
// step its 16.5 ms constant). More prefill workers do not help at this size (5P+3D, 6P+2D: the decode
// pool then saturates on those steps). Short control: every prompt stays local (200 < 512 uncached
// tokens), so only the 4 decode workers serve: identical up to 96 req/s (ratio 1.0 at every rate up
// to there), then they reach their knee long before 8 aggregated workers do (max rates 96 / 160).
// On a terminal, a progress line on stderr names the run under way (the table comes at the end).
//   node bench/llm-disagg.mjs [--quick] [--rate R]      (after `npm run build`)
import { fileURLToPath } from 'node:url';
import { ProgressLine } from '@switchyard/cli';
import { EngineCore, KvBlockManager, LlmScheduler, SimulatedExecutor, VirtualClock, hashTokenBlocks, polynomialTimingModel } from '@switchyard/llm';
import { MemoryRoutingTable } from '@switchyard/kv-router';
import { mulberry32 } from '@switchyard/onnx-builder';
import { DEFAULT_DISAGG_MAX_PREFILL_QUEUE_TOKENS, DEFAULT_DISAGG_MIN_REMOTE_TOKENS, decideDisagg } from '@switchyard/cluster';

export const ENGINE = { numBlocks: 16384, blockSize: 64, maxNumSeqs: 256, maxNumBatchedTokens: 8192, watermark: 0.01 };
/** Llama-3.1-8B-shaped KV: layers × 2 × kv heads × head dim × 2 bytes per token. */
export const KV_BYTES_PER_TOKEN = 32 * 2 * 8 * 128 * 2;
export const KV_BYTES_PER_BLOCK = KV_BYTES_PER_TOKEN * ENGINE.blockSize;
export const WORKLOADS = {
  'prefill-heavy': { isl: 3000, osl: 150 },
  short: { isl: 200, osl: 150 },
};
export const SLO = {
  ttftMs: (isl) => 5 * polynomialTimingModel.prefillMs(isl),
  tpotMs: 3 * polynomialTimingModel.decodeMs(0),
};
/**
 * req/s. Prefill-heavy: the aggregated cluster meets the SLO for every request up to ~48 and loses
 * TPOT past it (each 3,000-token prefill stalls the decodes sharing its worker's step for ~66 ms); the
 * prefill pool of 4 saturates near 64 (4 × 1 / 66 ms ≈ 60 prefills/s). Short: far under capacity up
 * to ~100, then the 4 decode workers (which take every short prompt) reach their knee before 8
 * aggregated workers do.
 */
export const RATES = { 'prefill-heavy': [16, 32, 48, 56, 60, 64, 72, 80], short: [32, 64, 96, 128, 160] };
export const QUICK_RATES = { 'prefill-heavy': [48, 64], short: [64] };
export const REQUESTS = 800;
export const QUICK_REQUESTS = 300;
export const GBPS = [25, 400];

export function buildTrace({ isl, osl }, rate, n, seed = 1) {
  const shape = mulberry32(seed);
  const tok = mulberry32(seed + 1);
  let t = 0;
  return Array.from({ length: n }, (_, i) => {
    t += (-Math.log(1 - shape()) / rate) * 1000;
    return { requestId: `r${i}`, promptTokenIds: Array.from({ length: isl }, () => Math.floor(tok() * 32000)), maxTokens: osl, arrivalTime: t };
  });
}

function newWorker(id, table) {
  const pending = [];
  const kv = new KvBlockManager({ numBlocks: ENGINE.numBlocks, blockSize: ENGINE.blockSize, onEvent: (e) => pending.push(e) });
  const scheduler = new LlmScheduler(kv, { maxNumSeqs: ENGINE.maxNumSeqs, maxNumBatchedTokens: ENGINE.maxNumBatchedTokens, watermark: ENGINE.watermark });
  const clock = new VirtualClock();
  const engine = new EngineCore(scheduler, new SimulatedExecutor({ clock, seed: 1 }), clock);
  return {
    id,
    kv,
    engine,
    clock,
    /** Import pins held until the request they were made for has been scheduled once. */
    importPins: new Map(),
    async flushEvents() {
      if (pending.length === 0) return;
      const r = await table.applyEvents(id, pending.splice(0));
      if (r.status !== 'ok') throw new Error(`bench: unexpected KV event gap on ${id}`);
    },
  };
}

function quantile(sorted, p) {
  return sorted.length === 0 ? NaN : sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))];
}

/**
 * One cluster over one trace. `layout`: { prefill: n, decode: m } (disaggregated) or { aggregated: n }.
 * Returns per-request TTFT / TPOT and the summary.
 */
export async function simulate(trace, layout, { gbps = 25, minRemoteTokens = DEFAULT_DISAGG_MIN_REMOTE_TOKENS, maxPrefillQueueTokens = DEFAULT_DISAGG_MAX_PREFILL_QUEUE_TOKENS } = {}) {
  const table = new MemoryRoutingTable();
  const disagg = layout.prefill !== undefined;
  const decodePool = Array.from({ length: disagg ? layout.decode : layout.aggregated }, (_, i) => newWorker(`d${i}`, table));
  const prefillPool = disagg ? Array.from({ length: layout.prefill }, (_, i) => newWorker(`p${i}`, table)) : [];
  const workers = [...decodePool, ...prefillPool];
  const byId = new Map(workers.map((w) => [w.id, w]));
  const rng = mulberry32(7);
  const bytesPerMs = (gbps * 1e9) / 8 / 1000;
  /** requestId → { arrival, first, tokens: [times], decodeWorker, prefillWorker, path } */
  const state = new Map();
  const handoffs = []; // { at, requestId }, kept sorted by `at`
  const paths = { remote: 0, local: 0 };
  let transferredBlocks = 0;
  const t0 = process.hrtime.bigint();
  let next = 0;

  const base = (r, suffix) => {
    const { sequenceHashes } = hashTokenBlocks(r.promptTokenIds, ENGINE.blockSize);
    return { requestId: r.requestId + suffix, blockHashes: sequenceHashes, promptTokens: r.promptTokenIds.length, blockSize: ENGINE.blockSize, overlapWeight: 1, temperature: 0, random: rng(), now: r.arrivalTime };
  };
  const start = (w, at) => {
    if (!w.engine.scheduler.hasUnfinished()) w.clock.advanceTo(at);
  };

  for (;;) {
    let busy = null;
    for (const w of workers) if (w.engine.scheduler.hasUnfinished() && (busy === null || w.clock.now() < busy.clock.now())) busy = w;
    const busyAt = busy === null ? Infinity : busy.clock.now();
    const arrivalAt = next < trace.length ? trace[next].arrivalTime : Infinity;
    const handoffAt = handoffs.length > 0 ? handoffs[0].at : Infinity;
    if (arrivalAt === Infinity && handoffAt === Infinity && busy === null) break;

    if (arrivalAt <= busyAt && arrivalAt <= handoffAt) {
      const r = trace[next++];
      const s = { r, arrival: r.arrivalTime, tokens: [], path: 'local', decodeWorker: null, prefillWorker: null, pins: null };
      state.set(r.requestId, s);
      const d = await table.selectAndReserve({ ...base(r, ''), candidates: decodePool.map((w) => w.id), scoring: 'kv' });
      s.decodeWorker = byId.get(d.worker);
      let remote = false;
      if (disagg) {
        const loads = await table.loads(r.arrivalTime);
        const decision = decideDisagg(
          {
            promptTokens: r.promptTokenIds.length,
            overlapBlocks: d.overlapBlocks,
            blockSize: ENGINE.blockSize,
            maxTokens: r.maxTokens,
            prefillQueues: prefillPool.map((w) => ({ worker: w.id, queuedTokens: loads.get(w.id)?.prefillTokens ?? 0 })),
          },
          { minRemoteTokens, maxPrefillQueueTokens },
        );
        if (decision.path === 'remote') {
          remote = true;
          const p = await table.selectAndReserve({ ...base(r, ':prefill'), candidates: decision.prefillWorkers, scoring: 'kv' });
          s.prefillWorker = byId.get(p.worker);
          start(s.prefillWorker, r.arrivalTime);
          s.prefillWorker.engine.addRequest({ requestId: r.requestId, promptTokenIds: r.promptTokenIds, maxTokens: 1, prefillOnly: true, arrivalTime: r.arrivalTime, eosTokenIds: [] });
        }
      }
      paths[remote ? 'remote' : 'local']++;
      s.path = remote ? 'remote' : 'local';
      if (!remote) {
        start(s.decodeWorker, r.arrivalTime);
        s.decodeWorker.engine.addRequest({ requestId: r.requestId, promptTokenIds: r.promptTokenIds, maxTokens: r.maxTokens, arrivalTime: r.arrivalTime, eosTokenIds: [] });
      }
      continue;
    }

    if (handoffAt <= busyAt) {
      const { requestId, at } = handoffs.shift();
      const s = state.get(requestId);
      const w = s.decodeWorker;
      start(w, at);
      // Import the blocks: every full prompt block becomes resident on the decode worker (missing ones
      // were "pulled", the rest were its own cache hits); the refs stay until its first step.
      const specs = hashTokenBlocks(s.r.promptTokenIds, ENGINE.blockSize);
      const full = specs.sequenceHashes.map((h, i) => ({ sequenceHash: h, localHash: specs.localHashes[i] }));
      const got = w.kv.allocate({ full });
      if (got !== null) w.importPins.set(requestId, got.blocks);
      await w.flushEvents();
      s.prefillWorker.engine.scheduler.freePinned(s.pins);
      await s.prefillWorker.flushEvents();
      // The decode worker continues after the first token (counted as output, as the router sends it).
      w.engine.addRequest({ requestId, promptTokenIds: s.r.promptTokenIds, outputTokenIds: [s.firstToken], maxTokens: s.r.maxTokens, arrivalTime: at, eosTokenIds: [] });
      continue;
    }

    const res = await busy.engine.step();
    const now = busy.clock.now();
    for (const [id, refs] of busy.importPins) {
      // the request has computed past its prompt: its own references hold the blocks now
      if (busy.engine.requestMetrics(id)?.firstTokenTime != null) {
        busy.kv.free(refs);
        busy.importPins.delete(id);
      }
    }
    await busy.flushEvents();
    for (const o of res.outputs) {
      const s = state.get(o.requestId);
      const isPrefillSide = s.path === 'remote' && busy === s.prefillWorker;
      if (isPrefillSide) {
        s.tokens.push(now);
        s.firstToken = o.newTokenIds[0];
        await table.markPrefillDone(o.requestId + ':prefill');
        await table.release(o.requestId + ':prefill');
        // the engine pinned the prompt's full blocks (the lease) until the hand-off
        s.pins = o.pinnedBlocks ?? [];
        const { sequenceHashes } = hashTokenBlocks(s.r.promptTokenIds, ENGINE.blockSize);
        const missing = sequenceHashes.length - s.decodeWorker.kv.findCachedPrefix(sequenceHashes);
        transferredBlocks += missing;
        const at = now + (missing * KV_BYTES_PER_BLOCK) / bytesPerMs;
        const i = handoffs.findIndex((h) => h.at > at);
        handoffs.splice(i < 0 ? handoffs.length : i, 0, { requestId: o.requestId, at });
        continue;
      }
      if (s.tokens.length === 0 || (s.path === 'remote' && s.tokens.length === 1 && !s.decodeStarted)) {
        s.decodeStarted = true;
        await table.markPrefillDone(o.requestId);
      }
      for (let k = 0; k < o.newTokenIds.length; k++) s.tokens.push(now);
      if (o.finishReason !== null) await table.release(o.requestId);
    }
    if (res.numScheduled === 0) {
      // nothing runnable on this worker (waiting for blocks): let time pass to the next event
      const nextAt = Math.min(next < trace.length ? trace[next].arrivalTime : Infinity, handoffs.length > 0 ? handoffs[0].at : Infinity);
      if (nextAt === Infinity) throw new Error(`bench: worker ${busy.id} stalled with unfinished requests`);
      busy.clock.advanceTo(nextAt);
    }
  }
  const wallSec = Number(process.hrtime.bigint() - t0) / 1e9;

  const isl = trace[0].promptTokenIds.length;
  const ttftSlo = SLO.ttftMs(isl);
  const ttft = [];
  const tpot = [];
  let good = 0;
  for (const s of state.values()) {
    const t = s.tokens[0] - s.arrival;
    const per = s.tokens.length > 1 ? (s.tokens[s.tokens.length - 1] - s.tokens[0]) / (s.tokens.length - 1) : 0;
    ttft.push(t);
    tpot.push(per);
    if (t <= ttftSlo && per <= SLO.tpotMs) good++;
  }
  ttft.sort((a, b) => a - b);
  tpot.sort((a, b) => a - b);
  const span = (trace[trace.length - 1].arrivalTime - trace[0].arrivalTime) / 1000;
  return {
    layout: disagg ? `${layout.prefill}P+${layout.decode}D` : `${layout.aggregated} agg`,
    requests: trace.length,
    goodput: +(good / span).toFixed(2),
    attainment: +(good / trace.length).toFixed(3),
    ttftMs: { p50: +quantile(ttft, 0.5).toFixed(1), p99: +quantile(ttft, 0.99).toFixed(1) },
    tpotMs: { p50: +quantile(tpot, 0.5).toFixed(2), p99: +quantile(tpot, 0.99).toFixed(2) },
    paths,
    transferredBlocks,
    wallSec: +wallSec.toFixed(2),
  };
}

export async function measureDisagg({ quick = false, rates } = {}) {
  const n = quick ? QUICK_REQUESTS : REQUESTS;
  console.log(
    `\nDisaggregation: 4 prefill + 4 decode against 8 aggregated simulated workers (mocker timing, ${ENGINE.numBlocks} blocks of ${ENGINE.blockSize} tokens), virtual time, ${n} requests per run`,
  );
  console.log(`  KV ${KV_BYTES_PER_BLOCK / 2 ** 20} MiB per block; SLO: TTFT ≤ 5× isolated prefill, TPOT ≤ ${SLO.tpotMs.toFixed(1)} ms; min remote tokens ${DEFAULT_DISAGG_MIN_REMOTE_TOKENS}, max prefill queue ${DEFAULT_DISAGG_MAX_PREFILL_QUEUE_TOKENS} tokens per prefill worker`);
  const results = { engine: ENGINE, kvBytesPerBlock: KV_BYTES_PER_BLOCK, slo: { tpotMs: SLO.tpotMs }, workloads: {} };
  const rows = [];
  // The table comes once every rate has run (minutes on a full run): on a terminal, a progress line
  // on stderr says which run is under way; nothing off a terminal.
  const progress = new ProgressLine(process.stderr, 0);
  const ratesOf = (name) => rates ?? (quick ? QUICK_RATES : RATES)[name];
  const runs = Object.keys(WORKLOADS).reduce((n, name) => n + ratesOf(name).length * (1 + GBPS.length), 0);
  let run = 0;
  const shown = (what, fn) => (progress.update(`disagg: ${what} (run ${++run} of ${runs})`), fn());
  for (const [name, shape] of Object.entries(WORKLOADS)) {
    results.workloads[name] = { shape, ttftSloMs: +SLO.ttftMs(shape.isl).toFixed(1), byRate: {} };
    for (const rate of ratesOf(name)) {
      const trace = buildTrace(shape, rate, n);
      const agg = await shown(`${name} at ${rate} req/s, 8 aggregated`, () => simulate(trace, { aggregated: 8 }));
      const byGbps = {};
      for (const gbps of GBPS) byGbps[gbps] = await shown(`${name} at ${rate} req/s, 4P+4D at ${gbps} Gb/s`, () => simulate(trace, { prefill: 4, decode: 4 }, { gbps }));
      results.workloads[name].byRate[rate] = { aggregated: agg, disaggregated: byGbps };
      for (const [label, r] of [['8 agg', agg], ...GBPS.map((g) => [`4P+4D ${g} Gb/s`, byGbps[g]])]) {
        rows.push({
          workload: name,
          'req/s': rate,
          cluster: label,
          'goodput req/s': r.goodput,
          'SLO met': r.attainment,
          'TTFT p50': r.ttftMs.p50,
          'TTFT p99': r.ttftMs.p99,
          'TPOT p50': r.tpotMs.p50,
          'TPOT p99': r.tpotMs.p99,
          remote: r.paths.remote,
          'x agg goodput': agg.goodput > 0 ? +(r.goodput / agg.goodput).toFixed(2) : r.goodput > 0 ? 'inf' : '',
          'wall s': r.wallSec,
        });
      }
    }
  }
  progress.done();
  console.table(rows);
  results.table = rows;
  // DistServe's goodput: the highest rate swept at which at least 90% of requests met the SLO.
  const maxRate = (name, pick) => Math.max(0, ...Object.entries(results.workloads[name].byRate).filter(([, r]) => pick(r).attainment >= 0.9).map(([rate]) => Number(rate)));
  const ratio = (a, b) => (b > 0 ? +(a / b).toFixed(2) : a > 0 ? Infinity : NaN);
  const heavyAgg = maxRate('prefill-heavy', (r) => r.aggregated);
  const heavyDis = maxRate('prefill-heavy', (r) => r.disaggregated[25]);
  const shortAgg = maxRate('short', (r) => r.aggregated);
  const shortDis = maxRate('short', (r) => r.disaggregated[25]);
  results.goals = {
    [`prefill-heavy: max rate with >= 90% in SLO, 4P+4D (25 Gb/s) / 8 agg = ${heavyDis} / ${heavyAgg} (goal >= 1.5)`]: ratio(heavyDis, heavyAgg),
    [`short control: max rate with >= 90% in SLO, 4P+4D / 8 agg = ${shortDis} / ${shortAgg} (goal 0.95-1.05)`]: ratio(shortDis, shortAgg),
  };
  for (const [k, v] of Object.entries(results.goals)) console.log(`  ${k}: ${v}`);
  return results;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const i = process.argv.indexOf('--rate');
  await measureDisagg({ quick: process.argv.includes('--quick'), rates: i > 0 ? [Number(process.argv[i + 1])] : undefined });
}
