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
// Each LLM cell also reports the KV event batches the worker published per request (the stream's
// message count, read from JetStream) and the CPU NATS and Redis spent per request: every batch is
// stored by JetStream and applied to Redis by each router, whichever door the request came in by.
//
// Transport floors: a bare NATS request/reply (lib/nats-echo.mjs as the replier, its own process) through
// the same NATS server at c=1 and 16, and the same over one TCP connection (below). The hop crosses the
// same process boundaries, so the hop's p50 minus the floor of the transport it used (TCP with
// call-home, NATS without) is what our code adds (issue 15: "the router hop little more than a NATS
// round trip"). Each floor also reports the replier's own CPU per request: what a process that only
// answers messages costs on this machine, next to the router's CPU per request (on small VMs a process
// pays a fixed CPU cost per wake-up, however little it then does).
//
// Router floor (HTTP JSON): a minimal router (lib/minimal-router.mjs) in the router's place, carrying the
// same request to the same worker with nothing of ours but the request-plane message format: minimal /
// direct is what any Node.js router process costs on this machine, router / minimal what our router adds.
// The LLM cells have one too (lib/minimal-llm-router.mjs): the prompt preprocessed as the worker does it,
// a Redis round trip, the generate request, an event per token; its time to first token less direct is
// the hop's floor. Both talk to the worker as the router does: over the call-home connection the worker
// dials back (the router's default: responses, and requests once the worker announced its instance), or
// over NATS with --router-arg=--call-home=false (A/B the two that way: the NATS floor below is then the
// path too).
//
// Beside it, the same request/reply over one TCP connection to a replier process (lib/tcp-echo.mjs),
// no broker in between: the floor of the call-home path, where requests and responses cross one TCP
// connection between the router and the worker.
//
// The routing decision's round trip: the router's selectAndReserve on the bench's Redis beside a
// `return 1` script, call by call with the processes idle in between as at c=1: what the decision adds
// to the round trip any Redis call pays (a request whose router has one worker to choose from does not
// wait for it: the request goes out first and the table matches and reserves behind it).
//
// Request-plane codec (in process, no servers, so no noise from the machine's other jobs): one
// tensor request and its response through both payload forms a router and a worker exchange —
// base64 in JSON (workers from before binary payloads) and raw bytes in a binary message — for one
// FP32 input and one output of 64 B .. 4 MiB: encode + decode CPU per request/response pair and the
// bytes on the wire.
//
// Everything (load generator, router, worker, etcd, NATS, Redis) shares the machine's cores: on a
// 2-core machine the router's own CPU competes with the worker's at c=16, which is part of what the
// throughput ratio shows. So each tensor cell also reports the CPU time the router and the worker
// processes spent per request (all their threads, from /proc, over the cell's warm-up and measured
// window): a measure that other jobs on the machine do not move, unlike the wall-clock figures.
//
//   node bench/cluster-hop.mjs [--quick] [--cpu-prof=DIR] [--router-arg=--flag=value ...]
//   (after `npm run build`; models from `npm run models`; --router-arg passes a flag to the router,
//   e.g. --router-arg=--preprocess-threads=0 to compare prompt preprocessing on the event loop)
// --cpu-prof=DIR: the router's main thread is profiled (lib/cpu-profile.mjs, the format of `node
// --cpu-prof`), its .cpuprofile written to DIR when it exits.
import { spawn } from 'node:child_process';
import http from 'node:http';
import net from 'node:net';
import { fileURLToPath } from 'node:url';
import { startEtcd, startNats, startRedis, startRouterProcess, startWorkerProcess } from '@switchyard/testing';
import * as cluster from '@switchyard/cluster';
import * as runtime from '@switchyard/runtime';
import { STEADY_MIN_MS, runLoad, sleep, summarize, warmUntilSteady } from './lib/load.mjs';
import { httpPost } from './lib/clients.mjs';
import { procCpuUs } from './lib/proc-memory.mjs';
import { encodeInferFrame, h2GrpcClient } from './lib/grpc-h2.mjs';
import { connect as connectNats } from '@nats-io/transport-node';
import { Redis } from 'ioredis';
import { hashTokenBlocks } from '@switchyard/llm';

const PROFILER = fileURLToPath(new URL('./lib/cpu-profile.mjs', import.meta.url));
const NATS_ECHO = fileURLToPath(new URL('./lib/nats-echo.mjs', import.meta.url));
const TCP_ECHO = fileURLToPath(new URL('./lib/tcp-echo.mjs', import.meta.url));
const MINIMAL_ROUTER = fileURLToPath(new URL('./lib/minimal-router.mjs', import.meta.url));
const MINIMAL_LLM_ROUTER = fileURLToPath(new URL('./lib/minimal-llm-router.mjs', import.meta.url));
const LLM_FOLDER = fileURLToPath(new URL('../examples/model_repository/mock_llm/1', import.meta.url));
/** About the bytes a router's binary request for `simple` puts on the request plane (envelope + two INT32 [1,16]). */
const FLOOR_PAYLOAD_BYTES = 768;
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

/** One request + response through the request plane's codecs (both ends, no transport), per form. */
export function measureWireCodec() {
  const { decodeWireInferRequest, decodeWireInferResponse, inferRequestFromWire, inferRequestToBinary, inferRequestToWire, inferResponseFromWire, inferResponseToBinary, inferResponseToWire } = cluster;
  const { decodeMessage, decodeRequestEnvelope, decodeResponseFrame, encodeMessage } = runtime;
  if (inferRequestToBinary === undefined) {
    console.log('\nrequest-plane codec: this build has no binary payloads (skipped)');
    return undefined;
  }
  const rows = [];
  for (const bytes of [64, 64 * 1024, 1024 * 1024, 4 * 1024 * 1024]) {
    const data = new Uint8Array(new Float32Array(bytes / 4).map((_, i) => i * 0.5).buffer);
    const tensor = { name: 'T', datatype: 'FP32', shape: [1, bytes / 4], data, parameters: {} };
    const request = { id: '1', modelName: 'm', modelVersion: undefined, parameters: {}, inputs: [tensor], outputs: [{ name: 'O', parameters: {} }] };
    const response = { id: '1', modelName: 'm', modelVersion: '1', parameters: {}, outputs: [{ ...tensor, name: 'O' }] };
    const forms = {
      json: { req: () => inferRequestToWire(request), res: () => inferResponseToWire(response, true) },
      binary: { req: () => inferRequestToBinary(request), res: () => inferResponseToBinary(response, true) },
    };
    const row = { 'tensor bytes': bytes };
    for (const [form, f] of Object.entries(forms)) {
      let wire = 0;
      const once = () => {
        const q = encodeMessage({ v: 1, requestId: 'r', attempt: 'a', payload: f.req(), deadline: null });
        const got = inferRequestFromWire(decodeWireInferRequest(decodeRequestEnvelope(decodeMessage(q)).payload));
        const r = encodeMessage({ v: 1, type: 'data', seq: 0, payload: f.res() });
        const frame = decodeResponseFrame(decodeMessage(r));
        const back = inferResponseFromWire(decodeWireInferResponse(frame.payload));
        wire = q.length + r.length;
        if (got.inputs[0].data.length !== bytes || back.outputs[0].data.length !== bytes) throw new Error('codec lost bytes');
      };
      const budgetNs = 300e6;
      for (let i = 0; i < 3; i++) once(); // warm
      const c0 = process.cpuUsage();
      const t0 = process.hrtime.bigint();
      let n = 0;
      while (Number(process.hrtime.bigint() - t0) < budgetNs || n < 5) {
        once();
        n++;
      }
      const cpu = process.cpuUsage(c0);
      row[`${form} us/pair`] = +((cpu.user + cpu.system) / n).toFixed(1);
      row[`${form} wire bytes`] = wire;
    }
    row['binary/json CPU'] = r3(row['binary us/pair'] / row['json us/pair']);
    rows.push(row);
  }
  console.log('\nrequest-plane codec: one tensor request + response, encoded and decoded at both ends (CPU per pair, in process)');
  console.table(rows);
  return rows;
}


/** Runs `runLoad` over `call`, with the CPU µs per request each of `pids` spent meanwhile. */
async function loadWithCpu(call, timing, pids) {
  let calls = 0;
  const counted = () => {
    calls++;
    return call();
  };
  const before = Object.fromEntries(Object.entries(pids).map(([k, pid]) => [k, procCpuUs(pid)]));
  const run = await runLoad(counted, timing);
  run.calls = calls;
  const cpu = {};
  for (const [k, pid] of Object.entries(pids)) {
    const after = procCpuUs(pid);
    cpu[k] = after === undefined || before[k] === undefined ? undefined : (after - before[k]) / calls;
  }
  return { ...run, cpuUsPerRequest: cpu };
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
async function runStreams(port, { concurrency, durationMs, warmupMs }, pids, kvBatches) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: concurrency });
  try {
    const batches0 = await kvBatches();
    const run = await loadWithCpu(() => streamChat(port, agent), { concurrency, durationMs, warmupMs, keepValues: true }, pids);
    const batches1 = await kvBatches();
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
      cpuUsPerRequest: run.cpuUsPerRequest,
      kvBatchesPerRequest: batches0 === undefined || batches1 === undefined ? undefined : (batches1 - batches0) / run.calls,
    };
  } finally {
    agent.destroy();
  }
}

/**
 * The number of KV event batches the workers have published so far (the namespace's KV event stream's
 * last sequence, from JetStream's API over plain NATS), or undefined if JetStream does not answer.
 */
async function kvBatchCounter(natsUrl, namespace) {
  const nc = await connectNats({ servers: natsUrl });
  const { name } = runtime.kvEventsStream(namespace);
  return {
    count: async () => {
      try {
        const info = JSON.parse(new TextDecoder().decode((await nc.request(`$JS.API.STREAM.INFO.${name}`, new Uint8Array(0), { timeout: 2_000 })).data));
        return info.state?.last_seq;
      } catch {
        return undefined;
      }
    },
    close: () => nc.close(),
  };
}

/**
 * Four callers in a closed loop for `ms` and until 50 requests have answered (a loaded machine can take
 * longer than `ms` for a cold process's first ones), at most 60 s; the first failure throws.
 */
async function warm(call, ms) {
  const end = Date.now() + ms;
  const limit = Date.now() + 60_000;
  let done = 0;
  const caller = async () => {
    while ((Date.now() < end || done < 50) && Date.now() < limit) {
      await call();
      done++;
    }
  };
  await Promise.all([caller(), caller(), caller(), caller()]);
}

async function measureTensor(targets, { durationMs, warmupMs, jitWarmupMs = warmupMs, steadyWarmup = false }, pids, minimal) {
  const callers = Object.fromEntries(Object.entries(targets).map(([k, ports]) => [k, tensorCallers(ports)]));
  // the minimal router (lib/minimal-router.mjs) serves HTTP JSON only: its row sits beside that mode's
  const minimalAgent = new http.Agent({ keepAlive: true, maxSockets: 64 });
  const minimalCall = () => httpPost(minimal.port, `/v2/models/${TENSOR_MODEL}/infer`, tensorJson, { 'content-type': 'application/json' }, minimalAgent);
  const out = {};
  try {
    // Warm every path (JIT, connections, the router's first route) before any cell is timed, so the
    // first router cell does not pay for a cold process the direct cell before it did not. V8 keeps
    // optimising a fresh process's hot code for seconds: a router's compiler and GC threads spent 30-65
    // µs of CPU each per request over a c=1 cell after 1 s of traffic, 10-25 µs after 10 s. So each
    // path gets at least `jitWarmupMs` at c=16 and, with `steadyWarmup`, goes on until the CPU per
    // request of the processes it crosses stops falling (lib/load.mjs warmUntilSteady; the router's
    // HTTP path read about 160 µs per request in its first seconds at c=16 and 115-130 after 6 s).
    const warmPath = async (name, call, processes) => {
      if (!steadyWarmup) return warm(call, jitWarmupMs);
      const cpu = () => processes.reduce((sum, pid) => sum + (procCpuUs(pid) ?? 0), 0);
      const w = await warmUntilSteady(call, cpu, { concurrency: 16, minMs: Math.max(jitWarmupMs, STEADY_MIN_MS) });
      console.log(`  warm-up ${name}: ${(w.ms / 1000).toFixed(1)} s at c=16, CPU per request per window (us, ${processes.length === 1 ? 'its process' : 'its processes together'}): ${w.cpuUsPerRequest.join(', ')}`);
    };
    for (const target of ['direct', 'router']) {
      for (const [mode, call] of Object.entries(callers[target].modes)) await warmPath(`${target} ${mode}`, call, target === 'direct' ? [pids.worker] : [pids.router, pids.worker]);
    }
    await warmPath('minimal router http-json', minimalCall, [minimal.pid, pids.worker]);
    for (const mode of ['http-json', 'grpc']) {
      out[mode] = {};
      for (const c of TENSOR_CONCURRENCY) {
        out[mode][c] = {};
        // Direct and router back to back for each cell, so drift on the machine hits both alike.
        for (const target of ['direct', 'router']) out[mode][c][target] = await loadWithCpu(callers[target].modes[mode], { concurrency: c, durationMs, warmupMs }, pids);
        if (mode === 'http-json') out[mode][c].minimal = await loadWithCpu(minimalCall, { concurrency: c, durationMs, warmupMs }, { ...pids, minimal: minimal.pid });
      }
    }
  } finally {
    for (const c of Object.values(callers)) c.close();
    minimalAgent.destroy();
  }
  return out;
}

/**
 * A helper process of the bench (`script` with `args`) that prints the port it listens on: its port,
 * pid, and `stop` (SIGTERM, resolves once it exited).
 */
async function startPortChild(script, args = []) {
  const child = spawn(process.execPath, [script, ...args], { stdio: ['ignore', 'pipe', 'inherit'] });
  const stop = () =>
    new Promise((resolve) => {
      if (child.exitCode !== null || child.signalCode !== null) return resolve();
      child.once('exit', resolve);
      child.kill('SIGTERM');
    });
  try {
    const port = await new Promise((resolve, reject) => {
      child.once('exit', (code) => reject(new Error(`${script} exited with code ${code}`)));
      child.stdout.once('data', (d) => resolve(Number(String(d).trim())));
    });
    return { port, pid: child.pid, stop };
  } catch (e) {
    await stop();
    throw e;
  }
}

/**
 * The router's floor for HTTP JSON (lib/minimal-router.mjs): forwards the tensor request's body as the
 * request-plane message a router sends and answers with the router's own response bytes, fetched here
 * first; checked to answer the same bytes before it is measured.
 */
async function startMinimalRouter(natsUrl, namespace, routerPort, callHome) {
  const path = `/v2/models/${TENSOR_MODEL}/infer`;
  const answer = await httpPost(routerPort, path, tensorJson, { 'content-type': 'application/json' });
  const minimal = await startPortChild(MINIMAL_ROUTER, [JSON.stringify([natsUrl, namespace, TENSOR_MODEL, tensorJson.toString('base64'), Buffer.from(answer).toString('base64'), callHome])]);
  const got = await httpPost(minimal.port, path, tensorJson, { 'content-type': 'application/json' });
  if (!Buffer.from(got).equals(Buffer.from(answer))) {
    await minimal.stop();
    throw new Error(`bench/lib/minimal-router.mjs answered differently from the router (${got.length} vs ${answer.length} bytes)`);
  }
  return minimal;
}

/**
 * The transport floor: a bare NATS request/reply between this process and a replier process
 * (lib/nats-echo.mjs) through the same NATS server, closed loop at c=1 and 16, no code of ours on
 * either end. The router's hop crosses the same boundaries (router → NATS → worker → NATS → router)
 * plus its own work, so "hop − floor" is what the router and the worker's request-plane side add.
 */
/**
 * A bare TCP request/reply (lib/tcp-echo.mjs as the replier, its own process) beside the NATS floor:
 * the same payload over one connection, length-prefixed, no broker between the two processes. What a
 * request plane that talks to workers directly (as Dynamo's TCP request plane does) would start from.
 */
async function measureTcpFloor({ durationMs, warmupMs, jitWarmupMs = warmupMs }) {
  const echo = await startPortChild(TCP_ECHO);
  let socket;
  try {
    socket = net.connect(echo.port, '127.0.0.1');
    socket.setNoDelay(true);
    await new Promise((resolve, reject) => socket.once('connect', resolve).once('error', reject));
    // replies come back in order: each completes the oldest call waiting
    const waiting = [];
    let pending = Buffer.alloc(0);
    socket.on('data', (data) => {
      let buf = pending.length === 0 ? data : Buffer.concat([pending, data]);
      let at = 0;
      while (buf.length - at >= 4) {
        const next = at + 4 + buf.readUInt32LE(at);
        if (next > buf.length) break;
        at = next;
        waiting.shift()?.();
      }
      pending = buf.subarray(at);
    });
    const frame = Buffer.alloc(4 + FLOOR_PAYLOAD_BYTES, 7);
    frame.writeUInt32LE(FLOOR_PAYLOAD_BYTES, 0);
    const call = () => new Promise((resolve) => {
      waiting.push(resolve);
      socket.write(frame);
    });
    await warm(call, jitWarmupMs);
    const out = {};
    for (const c of TENSOR_CONCURRENCY) out[c] = await loadWithCpu(call, { concurrency: c, durationMs, warmupMs }, { replier: echo.pid });
    return out;
  } finally {
    socket?.destroy();
    await echo.stop();
  }
}

async function measureNatsFloor(natsUrl, { durationMs, warmupMs, jitWarmupMs = warmupMs }) {
  const subject = `bench.floor.${process.pid}`;
  const echo = spawn(process.execPath, [NATS_ECHO, natsUrl, subject], { stdio: ['ignore', 'pipe', 'inherit'] });
  const nc = await connectNats({ servers: natsUrl });
  try {
    await new Promise((resolve, reject) => {
      echo.once('exit', (code) => reject(new Error(`nats-echo exited with code ${code}`)));
      echo.stdout.once('data', resolve);
    });
    const payload = new Uint8Array(FLOOR_PAYLOAD_BYTES).fill(7);
    const call = () => nc.request(subject, payload, { timeout: 5_000 });
    await warm(call, jitWarmupMs);
    const out = {};
    // the replier's CPU per request: what one nats.js process doing nothing but answer costs here
    for (const c of TENSOR_CONCURRENCY) out[c] = await loadWithCpu(call, { concurrency: c, durationMs, warmupMs }, { replier: echo.pid });
    return out;
  } finally {
    await nc.close();
    echo.kill('SIGTERM');
  }
}

/**
 * The routing decision's Redis round trip beside a trivial script's, at c=1 with the processes idle
 * between calls as they are between a c=1 stream's requests (DECISION_GAP_MS): `selectAndReserve` of a
 * 4-block prompt all cached on one worker (its release sent behind it, as the router's are), against
 * `return 1` (the minimal LLM router's round trip), alternating call by call on their own connections
 * to the bench's Redis, under a namespace of their own. The difference is what the decision's script
 * and its arguments cost a request that waits for the decision (a pool of more than one worker); the
 * rest of the round trip is the one any Redis call pays.
 */
async function measureDecisionRoundTrip(redisUrl, calls) {
  const worker = 'decision-bench/mock_llm';
  const blockSize = 16;
  const hashes = hashTokenBlocks(Array.from({ length: 4 * blockSize }, (_, i) => i + 1), blockSize);
  const table = await runtime.RedisRoutingTable.connect({ url: redisUrl, namespace: `decision-${process.pid}` });
  const redis = new Redis(redisUrl);
  redis.defineCommand('floor', { numberOfKeys: 0, lua: 'return 1' });
  try {
    const blocks = hashes.sequenceHashes.map((h, i) => ({ block_hash: h, tokens_hash: hashes.localHashes[i] }));
    await table.applyEvents(worker, [{ event_id: 0, data: { type: 'stored', parent_hash: null, blocks } }]);
    const times = { decision: [], floor: [] };
    for (let i = 0; i < calls + 20; i++) {
      await sleep(DECISION_GAP_MS);
      let t = process.hrtime.bigint();
      await redis.floor();
      const floorNs = Number(process.hrtime.bigint() - t);
      await sleep(DECISION_GAP_MS);
      const requestId = `decision-${i}`;
      t = process.hrtime.bigint();
      const d = await table.selectAndReserve({ requestId, blockHashes: hashes.sequenceHashes, promptTokens: 4 * blockSize + 3, blockSize, candidates: [worker], overlapWeight: 1, temperature: 0, random: 0.5, now: Date.now() });
      const decisionNs = Number(process.hrtime.bigint() - t);
      if (d.overlapBlocks !== 4) throw new Error(`the decision matched ${d.overlapBlocks} of 4 cached blocks`);
      void table.release(requestId);
      if (i >= 20) {
        times.floor.push(floorNs);
        times.decision.push(decisionNs);
      }
    }
    const p50 = (xs) => summarize(xs, 1, 0).p50_us;
    return { calls, gapMs: DECISION_GAP_MS, decision_p50_us: p50(times.decision), floor_p50_us: p50(times.floor) };
  } finally {
    redis.disconnect();
    await table.close();
  }
}
const DECISION_GAP_MS = 10;

async function measureLlm(targets, { durationMs, warmupMs, steadyWarmup = false }, pids, kvBatches, minimal) {
  const out = {};
  // Each path streams at c=16 until the CPU per completion of the processes it crosses stops falling
  // (lib/load.mjs warmUntilSteady) before its first cell: the router and worker compile their LLM
  // paths (OpenAI door, routing, detokenizing, SSE) for 7-10 s of such load. Measured cold, as the
  // c=1 cells were behind a 500 ms warm-up, the router spent 6.6-8.9 ms of CPU per completion at c=1
  // in three runs against 3.6-4.5 ms in two warmed ones.
  if (steadyWarmup) {
    for (const [name, port, processes] of [
      ['direct', targets.direct.http, [pids.worker]],
      ['router', targets.router.http, [pids.router, pids.worker]],
      ['minimal LLM router', minimal.port, [minimal.pid, pids.worker]],
    ]) {
      const agent = new http.Agent({ keepAlive: true, maxSockets: 16 });
      try {
        const cpu = () => processes.reduce((sum, pid) => sum + (procCpuUs(pid) ?? 0), 0);
        const w = await warmUntilSteady(() => streamChat(port, agent), cpu, { concurrency: 16 });
        console.log(`  warm-up ${name} streams: ${(w.ms / 1000).toFixed(1)} s at c=16, CPU per completion per window (us, ${processes.length === 1 ? 'its process' : 'its processes together'}): ${w.cpuUsPerRequest.join(', ')}`);
      } finally {
        agent.destroy();
      }
    }
  }
  for (const c of LLM_CONCURRENCY) {
    out[c] = {};
    for (const target of ['direct', 'router']) out[c][target] = await runStreams(targets[target].http, { concurrency: c, durationMs, warmupMs }, pids, kvBatches);
    out[c].minimal = await runStreams(minimal.port, { concurrency: c, durationMs, warmupMs }, { ...pids, minimal: minimal.pid }, kvBatches);
  }
  return out;
}

/**
 * The router's floor for streamed chats (lib/minimal-llm-router.mjs): the prompt preprocessed as any
 * door does, one Redis round trip, the generate request a router sends, an event per token; checked
 * to stream the completion's tokens before it is measured.
 */
async function startMinimalLlmRouter(natsUrl, redisUrl, namespace, callHome) {
  const minimal = await startPortChild(MINIMAL_LLM_ROUTER, [JSON.stringify([natsUrl, redisUrl, namespace, LLM_MODEL, LLM_FOLDER, MAX_TOKENS, callHome])]);
  const agent = new http.Agent({ keepAlive: true });
  try {
    const { chunks } = await streamChat(minimal.port, agent);
    if (chunks !== MAX_TOKENS) throw new Error(`bench/lib/minimal-llm-router.mjs streamed ${chunks} token events, not ${MAX_TOKENS}`);
  } catch (e) {
    await minimal.stop();
    throw e;
  } finally {
    agent.destroy();
  }
  return minimal;
}

export async function measureClusterHop({ quick = false, cpuProfDir, routerArgs = [] } = {}) {
  const tensorTiming = quick ? { durationMs: 700, warmupMs: 200 } : { durationMs: 2500, warmupMs: 400, jitWarmupMs: 3000, steadyWarmup: true };
  const llmTiming = quick ? { durationMs: 1000, warmupMs: 250 } : { durationMs: 4000, warmupMs: 500, steadyWarmup: true };
  const codec = measureWireCodec();
  console.log(`\nCluster hop: 1 worker + 1 router over private etcd, NATS (JetStream), Redis; direct to the worker vs through the router`);
  const t0 = Date.now();
  const namespace = `bench-${process.pid}`;
  const started = {};
  const results = { codec, tensorTiming, llmTiming, model: { tensor: TENSOR_MODEL, llm: LLM_MODEL, maxTokens: MAX_TOKENS } };
  try {
    [started.etcd, started.nats, started.redis] = await Promise.all([startEtcd(), startNats({ jetstream: true }), startRedis()]);
    const { etcd, nats, redis } = started;
    [started.worker, started.router] = await Promise.all([
      startWorkerProcess({
        modelRepositories: ['examples/model_repository'],
        args: [`--etcd=${etcd.url}`, `--nats=${nats.url}`, `--redis=${redis.url}`, `--namespace=${namespace}`, '--model-control-mode=explicit', `--load-model=${TENSOR_MODEL}`, `--load-model=${LLM_MODEL}`, '--log-verbose=0'],
      }),
      startRouterProcess({
        etcd: etcd.url,
        nats: nats.url,
        redis: redis.url,
        namespace,
        args: ['--log-verbose=0', ...routerArgs],
        ...(cpuProfDir === undefined ? {} : { env: { NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ''} --import=${PROFILER}`, BENCH_CPU_PROF_DIR: cpuProfDir } }),
      }),
    ]);
    const { worker, router } = started;
    await waitFor(async () => (await fetch(`${router.httpUrl}/v2/models/${TENSOR_MODEL}/ready`)).status === 200, `the router did not report ${TENSOR_MODEL} ready`);
    await waitFor(async () => (await getJson(`${router.httpUrl}/v1/models`))?.data?.some((m) => m.id === LLM_MODEL), `the router did not list ${LLM_MODEL}`);
    results.startupSec = +((Date.now() - t0) / 1000).toFixed(1);
    const targets = { direct: worker.ports, router: router.ports };
    results.natsFloor = await measureNatsFloor(nats.url, tensorTiming);
    results.tcpFloor = await measureTcpFloor(tensorTiming);
    // the minimal routers take responses as the router does: over call-home unless it was switched off
    const callHome = !routerArgs.some((a) => /^--call-home=(false|0)$/.test(a));
    results.callHome = callHome;
    console.log(`  requests and responses go ${callHome ? 'over call-home connections (the router default; the minimal routers alike)' : 'over NATS (--call-home=false; the minimal routers alike)'}`);
    started.minimal = await startMinimalRouter(nats.url, namespace, router.ports.http, callHome);
    results.tensor = await measureTensor(targets, tensorTiming, { router: router.pid, worker: worker.pid }, started.minimal);
    results.decision = await measureDecisionRoundTrip(redis.url, quick ? 50 : 200);
    const kvBatches = await kvBatchCounter(nats.url, namespace);
    try {
      started.minimalLlm = await startMinimalLlmRouter(nats.url, redis.url, namespace, callHome);
      results.llm = await measureLlm(targets, llmTiming, { router: router.pid, worker: worker.pid, nats: nats.pid, redis: redis.pid }, kvBatches.count, started.minimalLlm);
    } finally {
      await kvBatches.close();
    }
  } finally {
    await Promise.allSettled([started.router?.stop(), started.minimal?.stop(), started.minimalLlm?.stop()]);
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
  for (const [mode, byC] of Object.entries(results.tensor)) {
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
        // through the router: what each process spent per request
        'router CPU us/req': r.cpuUsPerRequest.router === undefined ? '-' : r0(r.cpuUsPerRequest.router),
        'worker CPU us/req (direct, via router)': r.cpuUsPerRequest.worker === undefined ? '-' : `${r0(d.cpuUsPerRequest.worker)}, ${r0(r.cpuUsPerRequest.worker)}`,
      });
    }
  }
  console.log(`\ntensor: KServe infer on ${TENSOR_MODEL} (INT32 [1,16] x 2), closed loop`);
  console.table(tensorRows);
  // the floor of the HTTP hop: a minimal router (lib/minimal-router.mjs) in the router's place
  const floorRows = [];
  for (const [c, { direct: d, router: r, minimal: m }] of Object.entries(results.tensor['http-json'])) {
    floorRows.push({
      c: +c,
      'minimal req/s': r0(m.throughput),
      'minimal p50 us': r0(m.p50_us),
      'minimal/direct req/s': r3(m.throughput / d.throughput),
      'router/minimal req/s': r3(r.throughput / m.throughput),
      'hop p50 us (router, minimal)': `${r0(r.p50_us - d.p50_us)}, ${r0(m.p50_us - d.p50_us)}`,
      'CPU us/req (router, minimal)': m.cpuUsPerRequest.minimal === undefined ? '-' : `${r0(r.cpuUsPerRequest.router)}, ${r0(m.cpuUsPerRequest.minimal)}`,
      'worker CPU us/req (router, minimal)': m.cpuUsPerRequest.worker === undefined ? '-' : `${r0(r.cpuUsPerRequest.worker)}, ${r0(m.cpuUsPerRequest.worker)}`,
    });
  }
  console.log(`\nfloor: a minimal router (bench/lib/minimal-router.mjs: node:http in, the same request-plane message to the worker and back as the router sends it, the router's response bytes out, nothing else), HTTP JSON`);
  console.table(floorRows);
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
      'router CPU us/req': r.cpuUsPerRequest.router === undefined ? '-' : r0(r.cpuUsPerRequest.router),
      'KV batches/req (router)': r.kvBatchesPerRequest === undefined ? '-' : +r.kvBatchesPerRequest.toFixed(2),
      'NATS + Redis CPU us/req (direct, router)': r.cpuUsPerRequest.nats === undefined ? '-' : `${r0(d.cpuUsPerRequest.nats + d.cpuUsPerRequest.redis)}, ${r0(r.cpuUsPerRequest.nats + r.cpuUsPerRequest.redis)}`,
    });
  }
  console.log(`\nLLM: streaming /v1/chat/completions on ${LLM_MODEL}, max_tokens ${MAX_TOKENS}, fixed prompt, closed loop`);
  console.table(llmRows);
  const llmFloorRows = [];
  for (const [c, { direct: d, router: r, minimal: m }] of Object.entries(results.llm)) {
    llmFloorRows.push({
      c: +c,
      'minimal req/s': +m.throughput.toFixed(1),
      'minimal TTFT p50 us': r0(m.ttft_p50_us),
      'TTFT hop p50 us (router, minimal)': `${r0(r.ttft_p50_us - d.ttft_p50_us)}, ${r0(m.ttft_p50_us - d.ttft_p50_us)}`,
      'total hop p50 us (router, minimal)': `${r0(r.total_p50_us - d.total_p50_us)}, ${r0(m.total_p50_us - d.total_p50_us)}`,
      'CPU us/req (router, minimal)': m.cpuUsPerRequest.minimal === undefined ? '-' : `${r0(r.cpuUsPerRequest.router)}, ${r0(m.cpuUsPerRequest.minimal)}`,
    });
  }
  console.log(`\nfloor: a minimal LLM router (bench/lib/minimal-llm-router.mjs: node:http in, the prompt preprocessed (chatPrompt, as the worker does it when called directly), one Redis round trip, the generate request, an event per token out, nothing else)`);
  console.table(llmFloorRows);
  results.ratios = { tensor: tensorRows, floor: floorRows, llm: llmRows, llmFloor: llmFloorRows };
  const t = results.tensor;
  const l = results.llm;
  // goals: issue 15's table (router / direct throughput at c=16 >= 0.8; hop p50 at c=1 <= 300 us for a
  // tensor request, <= 500 us to the first token)
  const routerCpu = (mode, c) => t[mode][c].router.cpuUsPerRequest.router;
  const floor = results.natsFloor;
  const replierCpu = (f, c) => (f[c].cpuUsPerRequest?.replier === undefined ? '' : `, the replier's CPU ${r0(f[c].cpuUsPerRequest.replier)} us/req`);
  console.log(`\ntransport floor: bare NATS request/reply (${FLOOR_PAYLOAD_BYTES} B) between this process and a replier process: c=1 ${r0(floor[1].throughput)} req/s p50 ${r0(floor[1].p50_us)} us${replierCpu(floor, 1)}; c=16 ${r0(floor[16].throughput)} req/s p50 ${r0(floor[16].p50_us)} us${replierCpu(floor, 16)}`);
  const tcp = results.tcpFloor;
  console.log(`  the same over one TCP connection, no broker between (lib/tcp-echo.mjs): c=1 ${r0(tcp[1].throughput)} req/s p50 ${r0(tcp[1].p50_us)} us${replierCpu(tcp, 1)}; c=16 ${r0(tcp[16].throughput)} req/s p50 ${r0(tcp[16].p50_us)} us${replierCpu(tcp, 16)}`);
  const hop = (mode) => t[mode][1].router.p50_us - t[mode][1].direct.p50_us;
  // the transport the hop's requests and responses crossed: one TCP connection with call-home, NATS without
  const path = results.callHome === false ? { name: 'NATS', floor } : { name: 'TCP (call-home)', floor: tcp };
  const headlines = [
    `router hop adds ${r0(hop('http-json'))} us at p50 for a tensor request over HTTP (c=1) (goal <= 300 us); a bare request/reply over the path's transport, ${path.name}, takes ${r0(path.floor[1].p50_us)} us, so the router and the worker's request-plane side add ${r0(hop('http-json') - path.floor[1].p50_us)} us beyond the transport`,
    `router hop adds ${r0(hop('grpc'))} us at p50 for a tensor request over gRPC (c=1) (goal <= 300 us); ${r0(hop('grpc') - path.floor[1].p50_us)} us beyond the bare ${path.name} round trip`,
    `through the router, tensor throughput at c=16 is ${r3(t['http-json'][16].router.throughput / t['http-json'][16].direct.throughput)}x direct over HTTP, ${r3(t.grpc[16].router.throughput / t.grpc[16].direct.throughput)}x over gRPC (goal >= 0.8 each)`,
    ...(routerCpu('http-json', 16) === undefined
      ? []
      : [`the router spends ${r0(routerCpu('http-json', 1))} / ${r0(routerCpu('http-json', 16))} us of CPU per tensor request over HTTP (c=1 / c=16), ${r0(routerCpu('grpc', 1))} / ${r0(routerCpu('grpc', 16))} us over gRPC`]),
    `floor: a minimal router reaches ${r3(t['http-json'][16].minimal.throughput / t['http-json'][16].direct.throughput)}x direct at c=16 over HTTP and adds ${r0(t['http-json'][1].minimal.p50_us - t['http-json'][1].direct.p50_us)} us at p50 (c=1); the router reaches ${r3(t['http-json'][16].router.throughput / t['http-json'][16].minimal.throughput)}x the minimal router's throughput and adds ${r0(t['http-json'][1].router.p50_us - t['http-json'][1].minimal.p50_us)} us to its p50`,
    `router hop adds ${r0(l[1].router.ttft_p50_us - l[1].direct.ttft_p50_us)} us to time to first token at p50 (c=1) (goal <= 500 us), ${r0(l[8].router.ttft_p50_us - l[8].direct.ttft_p50_us)} us at c=8`,
    `floor: a minimal LLM router (preprocessing and one Redis round trip, no validation, routing decision or detokenizing) adds ${r0(l[1].minimal.ttft_p50_us - l[1].direct.ttft_p50_us)} us to time to first token at p50 (c=1), ${r0(l[8].minimal.ttft_p50_us - l[8].direct.ttft_p50_us)} us at c=8; the router adds ${r0(l[1].router.ttft_p50_us - l[1].minimal.ttft_p50_us)} us more at c=1`,
    `router hop adds ${r0(l[1].router.total_p50_us - l[1].direct.total_p50_us)} us to a ${MAX_TOKENS}-token streamed completion at p50 (c=1)`,
    ...(results.decision === undefined
      ? []
      : [
          `the routing decision's Redis round trip (selectAndReserve, 4 cached blocks, one worker; ${results.decision.gapMs} ms idle between calls) takes ${r0(results.decision.decision_p50_us)} us at p50 against ${r0(results.decision.floor_p50_us)} us for a 'return 1' script: the decision adds ${r0(results.decision.decision_p50_us - results.decision.floor_p50_us)} us to the round trip any Redis call pays`,
        ]),
  ];
  results.headlines = headlines;
  for (const h of headlines) console.log(`  ${h}`);
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const prof = process.argv.find((a) => a.startsWith('--cpu-prof='));
  const routerArgs = process.argv.filter((a) => a.startsWith('--router-arg=')).map((a) => a.slice('--router-arg='.length));
  await measureClusterHop({ quick: process.argv.includes('--quick'), routerArgs, ...(prof === undefined ? {} : { cpuProfDir: prof.slice('--cpu-prof='.length) }) });
}
