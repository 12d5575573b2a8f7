// Cluster hop: what the router costs a user. One worker process in cluster mode and one
// router process over private etcd, NATS (JetStream) and Redis from the test harness; every request
// is sent both straight to the worker's own front doors and through the router (its HTTP/gRPC front
// door → instance choice, KV-aware on Redis for the LLM → NATS request plane → the worker's infer or
// generate endpoint), back to back in one run, so router/direct is what the hop adds. A program, not a
// test.
//
// Tensor: Triton's `simple` (INT32 [1,16] add/sub, ONNX Runtime) with the same KServe request over
// HTTP JSON and gRPC at concurrency 1 and 16: throughput, p50/p99, router/direct ratios.
// LLM: streaming OpenAI chat completions on `mock_llm` (the simulated engine, speedup_ratio 10) with a
// fixed prompt and max_tokens 16 at concurrency 1 and 8: time to first token p50/p99 and total
// latency p50, router/direct ratios. TTFT is the first SSE event with non-empty delta.content (the
// role-only opening chunk does not count). Tokens are generated on a clock, so the LLM's absolute times
// are the mocker's; the difference router − direct is the hop.
//
// Everything (load generator, router, worker, etcd, NATS, Redis) shares the machine's cores: on a
// 2-core machine the router's own CPU competes with the worker's at c=16, which is part of what the
// throughput ratio shows.
//
//   node bench/cluster-hop.mjs [--quick] [--llm-only] [--router-arg=--flag=value ...]
//   (after `npm run build`; models from `npm run models`; --router-arg passes a flag to the router)
import { readFileSync } from 'node:fs';
import http from 'node:http';
import { fileURLToPath } from 'node:url';
import { startEtcd, startNats, startRedis, startRouterProcess, startWorkerProcess } from '@switchyard/testing';
import { runLoad, sleep, summarize } from './lib/load.mjs';
import { httpPost } from './lib/clients.mjs';
import { encodeInferFrame, h2GrpcClient } from './lib/grpc-h2.mjs';

const TENSOR_MODEL = 'simple';
const LLM_MODEL = 'mock_llm';
const TENSOR_CONCURRENCY = [1, 16];
const LLM_CONCURRENCY = [1, 8, 16];
const MAX_TOKENS = 16;
const PROMPT = 'Explain in one paragraph why a router in front of inference workers should be cheap.';

// The same request for every target: INPUT0 = 0..15, INPUT1 = 1s (OUTPUT0 = i + 1, OUTPUT1 = i - 1).
const in0 = Int32Array.from({ length: 16 }, (_, i) => i);
const in1 = new Int32Array(16).fill(1);
const tensorJson = Buffer.from(
  JSON.stringify({
    inputs: [
      { name: 'INPUT0', shape: [1, 16], datatype: 'INT32', data: Array.from(in0) },
      { name: 'INPUT1', shape: [1, 16], datatype: 'INT32', data: Array.from(in1) },
    ],
    outputs: [{ name: 'OUTPUT0' }, { name: 'OUTPUT1' }],
  }),
);
const tensorFrame = encodeInferFrame({
  model_name: TENSOR_MODEL,
  model_version: '',
  id: '',
  inputs: [
    { name: 'INPUT0', datatype: 'INT32', shape: [1, 16] },
    { name: 'INPUT1', datatype: 'INT32', shape: [1, 16] },
  ],
  outputs: [{ name: 'OUTPUT0' }, { name: 'OUTPUT1' }],
  raw_input_contents: [Buffer.from(in0.buffer), Buffer.from(in1.buffer)],
});
const chatBody = Buffer.from(JSON.stringify({ model: LLM_MODEL, messages: [{ role: 'user', content: PROMPT }], max_tokens: MAX_TOKENS, stream: true }));

const us = (ns) => ns / 1000;
const r0 = (x) => Math.round(x);
const r3 = (x) => +x.toFixed(3);

/** Waits until `check` resolves true (polling), or throws `message` after `timeoutMs`. */
async function waitFor(check, message, timeoutMs = 60_000) {
  const deadline = Date.now() + timeoutMs;
  while (!(await check().catch(() => false))) {
    if (Date.now() > deadline) throw new Error(message);
    await sleep(100);
  }
}

async function getJson(url) {
  const res = await fetch(url);
  return res.status === 200 ? res.json() : undefined;
}

/** Tensor callers for one target (a worker or the router): HTTP JSON and gRPC, kept-alive connections. */
function tensorCallers(ports) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });
  const grpc = h2GrpcClient(ports.grpc);
  return {
    modes: {
      'http-json': () => httpPost(ports.http, `/v2/models/${TENSOR_MODEL}/infer`, tensorJson, { 'content-type': 'application/json' }, agent),
      grpc: () => grpc.call('/inference.GRPCInferenceService/ModelInfer', tensorFrame),
    },
    close: () => {
      agent.destroy();
      grpc.close();
    },
  };
}

/**
 * One streaming chat completion over node:http (no SDK, no fetch: the client's CPU should not be
 * what is measured). Resolves with the time to the first content token and to the end of the stream
 * (ns), and the number of content chunks.
 */
function streamChat(port, agent) {
  return new Promise((resolve, reject) => {
    const t0 = process.hrtime.bigint();
    let ttft;
    let chunks = 0;
    let buf = '';
    let done = false;
    const req = http.request({ host: '127.0.0.1', port, path: '/v1/chat/completions', method: 'POST', agent, headers: { 'content-type': 'application/json', 'content-length': chatBody.length } }, (res) => {
      res.setEncoding('utf8');
      if (res.statusCode !== 200) {
        let text = '';
        res.on('data', (d) => (text += d));
        res.on('end', () => reject(new Error(`HTTP ${res.statusCode}: ${text}`)));
        return;
      }
      res.on('data', (d) => {
        buf += d;
        let end;
        while ((end = buf.indexOf('\n\n')) !== -1) {
          const event = buf.slice(0, end);
          buf = buf.slice(end + 2);
          if (!event.startsWith('data: ')) continue;
          const data = event.slice(6);
          if (data === '[DONE]') {
            done = true;
            continue;
          }
          const content = JSON.parse(data).choices?.[0]?.delta?.content;
          if (typeof content === 'string' && content !== '') {
            chunks++;
            ttft ??= process.hrtime.bigint() - t0;
          }
        }
      });
      res.on('end', () => {
        if (!done || ttft === undefined) reject(new Error(`stream ended without [DONE] or content (${chunks} chunks)`));
        else resolve({ ttftNs: Number(ttft), totalNs: Number(process.hrtime.bigint() - t0), chunks });
      });
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(chatBody);
  });
}

/** Closed loop of `concurrency` streams for `durationMs` after `warmupMs`: TTFT and total per request. */
async function runStreams(port, { concurrency, durationMs, warmupMs }) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: concurrency });
  try {
    const run = await runLoad(() => streamChat(port, agent), { concurrency, durationMs, warmupMs, keepValues: true });
    const t = summarize(run.values.map((v) => v.ttftNs), run.elapsedNs, run.errors);
    const tokens = run.values.reduce((n, v) => n + v.chunks, 0);
    return {
      requests: run.requests,
      errors: run.errors,
      throughput: run.throughput,
      tokensPerSec: tokens / (run.elapsedNs / 1e9),
      ttft_p50_us: t.p50_us,
      ttft_p99_us: t.p99_us,
      total_p50_us: run.p50_us,
      total_p99_us: run.p99_us,
    };
  } finally {
    agent.destroy();
  }
}

async function measureTensor(targets, { durationMs, warmupMs }) {
  const callers = Object.fromEntries(Object.entries(targets).map(([k, ports]) => [k, tensorCallers(ports)]));
  const out = {};
  try {
    // Warm every path (JIT, connections, the router's first route) before any cell is timed, so the
    // first router cell does not pay for a cold process the direct cell before it did not.
    for (const target of ['direct', 'router']) for (const call of Object.values(callers[target].modes)) await runLoad(call, { concurrency: 4, durationMs: warmupMs, warmupMs: 0 });
    for (const mode of ['http-json', 'grpc']) {
      out[mode] = {};
      for (const c of TENSOR_CONCURRENCY) {
        out[mode][c] = {};
        // Direct and router back to back for each cell, so drift on the machine hits both alike.
        for (const target of ['direct', 'router']) out[mode][c][target] = await runLoad(callers[target].modes[mode], { concurrency: c, durationMs, warmupMs });
      }
    }
  } finally {
    for (const c of Object.values(callers)) c.close();
  }
  return out;
}

/** CPU seconds (user + system) of a process, or of its main thread alone, from /proc; undefined off Linux. */
function cpuSeconds(pid, mainThreadOnly) {
  try {
    const stat = readFileSync(mainThreadOnly ? `/proc/${pid}/task/${pid}/stat` : `/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) / 100; // utime, stime in clock ticks (USER_HZ 100)
  } catch {
    return undefined;
  }
}

async function measureLlm(targets, { durationMs, warmupMs }) {
  const out = {};
  for (const c of LLM_CONCURRENCY) {
    out[c] = {};
    for (const target of ['direct', 'router']) {
      // The router's CPU per request, its event loop's thread alone and the whole process (its
      // preprocessing threads too): unlike wall-clock rates, these barely move with machine load.
      const pid = targets[target].pid;
      const before = [cpuSeconds(pid, true), cpuSeconds(pid, false)];
      const run = await runStreams(targets[target].http, { concurrency: c, durationMs, warmupMs });
      const after = [cpuSeconds(pid, true), cpuSeconds(pid, false)];
      const perRequestUs = (i) => (before[i] === undefined ? NaN : ((after[i] - before[i]) * 1e6) / run.requests);
      out[c][target] = { ...run, mainCpuUs: perRequestUs(0), processCpuUs: perRequestUs(1) };
    }
  }
  return out;
}

export async function measureClusterHop({ quick = false, llmOnly = false, routerArgs = [] } = {}) {
  const tensorTiming = quick ? { durationMs: 700, warmupMs: 200 } : { durationMs: 2500, warmupMs: 400 };
  const llmTiming = quick ? { durationMs: 1000, warmupMs: 250 } : { durationMs: 4000, warmupMs: 500 };
  console.log(`\nCluster hop: 1 worker + 1 router over private etcd, NATS (JetStream), Redis; direct to the worker vs through the router`);
  const t0 = Date.now();
  const namespace = `bench-${process.pid}`;
  const started = {};
  const results = { tensorTiming, llmTiming, model: { tensor: TENSOR_MODEL, llm: LLM_MODEL, maxTokens: MAX_TOKENS } };
  try {
    [started.etcd, started.nats, started.redis] = await Promise.all([startEtcd(), startNats({ jetstream: true }), startRedis()]);
    const { etcd, nats, redis } = started;
    [started.worker, started.router] = await Promise.all([
      startWorkerProcess({
        modelRepositories: ['examples/model_repository'],
        args: [`--etcd=${etcd.url}`, `--nats=${nats.url}`, `--redis=${redis.url}`, `--namespace=${namespace}`, '--model-control-mode=explicit', `--load-model=${TENSOR_MODEL}`, `--load-model=${LLM_MODEL}`, '--log-verbose=0'],
      }),
      startRouterProcess({ etcd: etcd.url, nats: nats.url, redis: redis.url, namespace, args: ['--log-verbose=0', ...routerArgs] }),
    ]);
    const { worker, router } = started;
    await waitFor(async () => (await fetch(`${router.httpUrl}/v2/models/${TENSOR_MODEL}/ready`)).status === 200, `the router did not report ${TENSOR_MODEL} ready`);
    await waitFor(async () => (await getJson(`${router.httpUrl}/v1/models`))?.data?.some((m) => m.id === LLM_MODEL), `the router did not list ${LLM_MODEL}`);
    results.startupSec = +((Date.now() - t0) / 1000).toFixed(1);
    const targets = { direct: { ...worker.ports, pid: worker.pid }, router: { ...router.ports, pid: router.pid } };
    if (!llmOnly) results.tensor = await measureTensor(targets, tensorTiming);
    results.llm = await measureLlm(targets, llmTiming);
  } finally {
    await Promise.allSettled([started.router?.stop()]);
    await Promise.allSettled([started.worker?.stop()]);
    await Promise.allSettled([started.etcd?.stop(), started.nats?.stop(), started.redis?.stop()]);
  }
  report(results);
  results.wallSec = +((Date.now() - t0) / 1000).toFixed(1);
  console.log(`  (section wall time ${results.wallSec} s, of which start-up ${results.startupSec} s)`);
  return results;
}

function report(results) {
  const tensorRows = [];
  for (const [mode, byC] of Object.entries(results.tensor ?? {})) {
    for (const [c, { direct: d, router: r }] of Object.entries(byC)) {
      tensorRows.push({
        mode,
        c: +c,
        'direct req/s': r0(d.throughput),
        'router req/s': r0(r.throughput),
        'direct p50 us': r0(d.p50_us),
        'router p50 us': r0(r.p50_us),
        'direct p99 us': r0(d.p99_us),
        'router p99 us': r0(r.p99_us),
        'router/direct req/s': r3(r.throughput / d.throughput),
        'router/direct p50': r3(r.p50_us / d.p50_us),
        'router/direct p99': r3(r.p99_us / d.p99_us),
      });
    }
  }
  console.log(`\ntensor: KServe infer on ${TENSOR_MODEL} (INT32 [1,16] x 2), closed loop`);
  console.table(tensorRows);
  const llmRows = [];
  for (const [c, { direct: d, router: r }] of Object.entries(results.llm)) {
    llmRows.push({
      c: +c,
      'direct req/s': +d.throughput.toFixed(1),
      'router req/s': +r.throughput.toFixed(1),
      'direct TTFT p50 us': r0(d.ttft_p50_us),
      'router TTFT p50 us': r0(r.ttft_p50_us),
      'direct TTFT p99 us': r0(d.ttft_p99_us),
      'router TTFT p99 us': r0(r.ttft_p99_us),
      'direct total p50 us': r0(d.total_p50_us),
      'router total p50 us': r0(r.total_p50_us),
      'router/direct TTFT p50': r3(r.ttft_p50_us / d.ttft_p50_us),
      'router/direct TTFT p99': r3(r.ttft_p99_us / d.ttft_p99_us),
      'router/direct total p50': r3(r.total_p50_us / d.total_p50_us),
      'router loop CPU us/req': r0(r.mainCpuUs),
      'router CPU us/req': r0(r.processCpuUs),
    });
  }
  console.log(`\nLLM: streaming /v1/chat/completions on ${LLM_MODEL}, max_tokens ${MAX_TOKENS}, fixed prompt, closed loop`);
  console.table(llmRows);
  results.ratios = { tensor: tensorRows, llm: llmRows };
  const t = results.tensor;
  const l = results.llm;
  const headlines = [
    ...(t === undefined ? [] : [`router hop adds ${r0(t['http-json'][1].router.p50_us - t['http-json'][1].direct.p50_us)} us at p50 for a tensor request over HTTP (c=1)`,
    `router hop adds ${r0(t.grpc[1].router.p50_us - t.grpc[1].direct.p50_us)} us at p50 for a tensor request over gRPC (c=1)`,
    `through the router, tensor throughput at c=16 is ${r3(t['http-json'][16].router.throughput / t['http-json'][16].direct.throughput)}x direct over HTTP, ${r3(t.grpc[16].router.throughput / t.grpc[16].direct.throughput)}x over gRPC`]),
    `router hop adds ${r0(l[1].router.ttft_p50_us - l[1].direct.ttft_p50_us)} us to time to first token at p50 (c=1), ${r0(l[8].router.ttft_p50_us - l[8].direct.ttft_p50_us)} us at c=8`,
    `router hop adds ${r0(l[1].router.total_p50_us - l[1].direct.total_p50_us)} us to a ${MAX_TOKENS}-token streamed completion at p50 (c=1)`,
  ];
  results.headlines = headlines;
  for (const h of headlines) console.log(`  ${h}`);
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const routerArgs = process.argv.filter((a) => a.startsWith('--router-arg=')).map((a) => a.slice('--router-arg='.length));
  await measureClusterHop({ quick: process.argv.includes('--quick'), llmOnly: process.argv.includes('--llm-only'), routerArgs });
}
