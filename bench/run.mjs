// `npm run bench`: side-by-side measurements in one run, printed as tables with ratios and
// written to bench/results/<timestamp>.json, then drawn (bench/report.mjs) as a Markdown report,
// bench/results/<timestamp>.md, with SVG charts beside it (<timestamp>-<section>-<chart>.svg): the
// headline ratios and curves of the sections that ran, each goal an issue states drawn as a line.
// `node bench/report.mjs <results.json>` redraws any results file. A program, not a test: nothing
// here gates CI.
//
// Worker (issue 2), on the MLP (FP32 [1,256] -> 3 x (256x256 MatMul + Add + Relu)):
//   raw      in-process onnxruntime-node session.run at batch 1 (same session options as the worker)
//   served   the worker over HTTP JSON, HTTP binary and gRPC at concurrency 1, 16, 64, sending 64 different inputs in turn;
//            and over gRPC streams (ModelStreamInfer, one request in flight per stream: grpc-stream rows, no bare twin)
//   bare     a node:http and a grpc-js server answering the same payload sizes with no inference
//   minimal  the same two servers running the model on the event loop, with nothing else (lib/minimal-servers.mjs):
//            served / minimal is what our own code costs, minimal / bare what Node.js and onnxruntime-node do
//   each served, bare and minimal row also reads its server process's CPU per request from /proc
// Goals reported against: served / bare throughput at c=16 >= 0.6 over HTTP JSON and HTTP binary;
// served gRPC at c=16 >= 0.5x raw rate; served p50 at c=1 within 1.5x of (bare p50 + raw run p50).
// The goal lines and the floor's throughput and latency lines are medians of --rounds rounds (default 3,
// --quick 1): after the rows, the c=1 and c=16 cells are measured again on the three servers in turn.
// JSON codec (bench/json-codec.mjs, in the worker section): our HTTP JSON tensor decoder and encoder beside
// JSON.parse / JSON.stringify of the same text, per datatype ([1, 1024]), in process.
// Batching (issue 3, bench/batching.mjs): the MLP with dynamic batching on and off.
// LLM replay (issue 4, bench/llm-replay.mjs): the simulated executor replaying a 20,000-request
// shared-prefix trace in virtual time, beside a no-reuse control and Dynamo's simulator speed.
// Routing (issue 5, bench/llm-routing.mjs, bench/routing-decision.mjs): KV-aware vs round-robin vs
// random vs least-loaded over 8 simulated workers on a shared-prefix workload and a no-reuse control;
// decision latency with 64 workers and 1M indexed blocks, in memory and on Redis.
// Disaggregation (issue 11, bench/llm-disagg.mjs): 4 prefill + 4 decode against 8 aggregated simulated
// workers in virtual time, on a prefill-heavy workload (3,000 in / 150 out) and a short-prompt control:
// goodput under a stated TTFT / TPOT SLO, TTFT and TPOT p50/p99.
// Planner (issue 12, bench/planner.mjs): the cluster simulator on a sinusoidal day, the planner in load
// and sla mode against static peak and static mean provisioning: SLO attainment and worker-seconds.
// Embeddings (bench/embeddings.mjs): OpenAI /v1/embeddings on the tiny encoder with dynamic batching
// off and on, one-sentence and 32-sentence requests, embeddings/s and the on/off ratio; then 32- and
// 256-sentence requests straight to a cluster worker and through a router, router/direct ratio and the
// infer requests the worker received per call.
// LLM sampling CPU (bench/llm-sampling-cpu.mjs): event-loop and all-thread CPU per generated token at a
// 151,936-token vocabulary, greedy, temperature 1 and top-5 logprobs (sampling runs on the decoder thread).
// Detokenisation (bench/detokenize.mjs, in the llm section): CPU per streamed token of the incremental
// detokenizer with our Tokenizer.decode and with the tokenizer library's own decode, same token stream,
// on the tiny tokenizer and the four family tokenizers.
// Tokenisation (bench/tokenize.mjs, in the llm section): CPU per prompt token of Tokenizer.encode beside
// the tokenizer library's own encode, same text, on the tiny tokenizer and the four family tokenizers.
// Mocker pace (bench/mocker-pace.mjs, in the llm section): the simulated engine in real time, time to
// first token and per token against the timing model, on its clock and on setTimeout side by side.
// Guided decoding (bench/guided-decoding.mjs): sample() and the engine on a 151,936-token vocabulary,
// with and without a JSON-schema / json_object constraint: added time per generated token.
// gRPC door cost (bench/grpc-door-cpu.mjs, run on its own): main-thread and other-thread CPU per ModelInfer
// call and p50 against the bare grpc-js server; alternates between built copies given with --root.
// Cluster hop (bench/cluster-hop.mjs): one worker and one router over private etcd, NATS and
// Redis; `simple` over HTTP and gRPC at c=1 and 16 and streaming chat on `mock_llm` at c=1 and 8, each
// straight to the worker and through the router, with router/direct ratios (what the hop costs).
//
//   node bench/run.mjs [--quick] [--rounds N] [--only worker,batching,embeddings,llm,guided,routing,disagg,planner,cluster,kv-transfer]     (default: every section)
//   node scripts/with-node.mjs 26 -- npm run bench -- --quick                     (on another Node.js line)
// On a terminal, each section's start and its time taken go to stderr, and the planner and disagg
// sections (minutes of simulation on a full run) redraw a progress line there; nothing off a terminal.
// Every process it starts (workers, routers, bare servers) runs on the Node.js running this script;
// the report and the results file name say which one.
import { spawn } from 'node:child_process';
import http from 'node:http';
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { fileURLToPath } from 'node:url';
import { startWorkerProcess } from '@switchyard/testing';
import { reusePortSupported } from '@switchyard/server';
import { procCpuUs, procMemory } from './lib/proc-memory.mjs';
import { readOrtRuns } from './lib/ort-runs.mjs';
import { runLoad, warmUntilSteady } from './lib/load.mjs';
import { measureSessionRun } from './lib/raw-ort.mjs';
import { httpPost, inferBodies } from './lib/clients.mjs';
import { encodeInferFrame, h2GrpcClient, h2GrpcStreams } from './lib/grpc-h2.mjs';
import { measureBatching } from './batching.mjs';
import { measureEmbeddings } from './embeddings.mjs';
import { measureReplay } from './llm-replay.mjs';
import { measureOnnxLlm } from './llm-onnx.mjs';
import { measureGuidedDecoding } from './guided-decoding.mjs';
import { measureSamplingCpu } from './llm-sampling-cpu.mjs';
import { measureDetokenize } from './detokenize.mjs';
import { measureMockerPace } from './mocker-pace.mjs';
import { measureTokenize } from './tokenize.mjs';
import { measureJsonCodec } from './json-codec.mjs';
import { measureRouting } from './llm-routing.mjs';
import { measureDecisions } from './routing-decision.mjs';
import { measureDisagg } from './llm-disagg.mjs';
import { measureClusterHop } from './cluster-hop.mjs';
import { measureKvTransfer, measureOnnxDisagg } from './kv-transfer.mjs';
import { measurePlanner } from './planner.mjs';
import { writeReport } from './report.mjs';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const QUICK = process.argv.includes('--quick');
const SECTIONS = ['worker', 'batching', 'embeddings', 'llm', 'guided', 'routing', 'disagg', 'planner', 'cluster', 'kv-transfer'];
const ONLY = onlySections(process.argv.slice(2));
const DURATION_MS = QUICK ? 800 : 2500;
// Each door's unrecorded warm-up before its rows (served and bare alike).
const WARMUP_MS = QUICK ? 500 : 1500;
// ... or, where the server's process is known, until its CPU per request stops falling (lib/load.mjs
// warmUntilSteady: 6-15 s; --quick: 0.5-2 s).
const CONCURRENCY = [1, 16, 64];
// The worker section's goal and floor lines are medians over this many rounds (`--rounds N`): the
// first is the rows below; each further round measures the goal cells again (c=1 and c=16 of each
// door on the bare, minimal and served servers, in a rotating order). On the 2-core VM one round's
// served / bare read 0.58 and 0.45 (HTTP binary) in two runs an hour apart, the bare server's own
// throughput 7.5k and 8.8k requests/s: the machine's load drifts between rows.
const ROUNDS = roundsArg(process.argv.slice(2)) ?? (QUICK ? 1 : 3);
const MODEL = 'mlp';
const MODEL_FILE = `${ROOT}examples/model_repository/${MODEL}/1/model.onnx`;
const WIDTH = 256;

const input = new Float32Array(WIDTH).map((_, i) => ((i * 37) % 101) / 101 - 0.5);
const bodies = inferBodies('INPUT0', [1, WIDTH], input, 'OUTPUT0');
// The served and bare rows send VARIANTS different inputs in turn, so the outputs differ from request
// to request as a real client's do: with one input the worker formatted the same 256 output numbers
// every time, which V8's number-to-string cache answers: encoding the JSON response took ~12-20 µs
// in process with one output repeated, ~40-47 µs with outputs that differ (JSON door).
const VARIANTS = 64;
const inputs = Array.from({ length: VARIANTS }, (_, k) => new Float32Array(WIDTH).map((_, i) => ((i * 37 + k * 11) % 101) / 101 - 0.5 + k / 1024));
const variantBodies = inputs.map((values) => inferBodies('INPUT0', [1, WIDTH], values, 'OUTPUT0'));
const NODE_MAJOR = process.versions.node.split('.')[0];
console.log(`switchyard bench on Node.js ${process.version} (${process.platform}-${process.arch}, ${cpus().length} cpus)${QUICK ? ', quick' : ''}`);
const results = { date: new Date().toISOString(), machine: { cpus: cpus().length, model: cpus()[0]?.model, node: process.version }, sections: [...ONLY], durationMs: DURATION_MS, raw: {}, bare: {}, minimal: {}, served: {}, warmup: {} };

/** `--only a,b` (or `--only=a,b`, repeatable): the sections to run; every section when absent. */
function onlySections(argv) {
  const picked = [];
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--only') picked.push(...(argv[++i] ?? '').split(','));
    else if (argv[i].startsWith('--only=')) picked.push(...argv[i].slice('--only='.length).split(','));
  }
  const names = picked.map((s) => s.trim()).filter((s) => s !== '');
  const unknown = names.filter((s) => !SECTIONS.includes(s));
  if (unknown.length > 0 || (picked.length > 0 && names.length === 0)) {
    console.error(`--only takes a comma-separated list of: ${SECTIONS.join(', ')} (got ${JSON.stringify(picked.join(','))})`);
    process.exit(2);
  }
  return new Set(names.length > 0 ? names : SECTIONS);
}

/** `--rounds N` (or `--rounds=N`): N >= 1, or undefined when absent. */
function roundsArg(argv) {
  const i = argv.findIndex((a) => a === '--rounds' || a.startsWith('--rounds='));
  if (i === -1) return undefined;
  const text = argv[i] === '--rounds' ? argv[i + 1] : argv[i].slice('--rounds='.length);
  const n = Number(text);
  if (!Number.isInteger(n) || n < 1 || n > 20) {
    console.error(`--rounds takes an integer from 1 to 20 (got ${JSON.stringify(text ?? '')})`);
    process.exit(2);
  }
  return n;
}

/** The doors the bare and minimal servers have too (the worker's also serve `grpc-stream`). */
const UNARY_DOORS = ['http-json', 'http-binary', 'grpc'];

function fmt(r) {
  return `${r.throughput.toFixed(0).padStart(8)} req/s   p50 ${r.p50_us.toFixed(0).padStart(6)} us   p99 ${r.p99_us.toFixed(0).padStart(6)} us`;
}

// --- raw onnxruntime ---------------------------------------------------------------------
async function measureRaw() {
  results.raw.batch1 = await measureSessionRun(MODEL_FILE, { batch: 1, width: WIDTH, durationMs: DURATION_MS, warmupRuns: 200 });
  console.log(`raw session.run batch 1                 ${fmt(results.raw.batch1)}`);
}

// --- clients for one server ----------------------------------------------------------------
function callers(ports) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 128 });
  // gRPC over a lean node:http2 client with a pre-encoded frame: grpc-js's client costs more CPU
  // per call than the servers under test and would cap every gRPC row at its own rate.
  const client = h2GrpcClient(ports.grpc);
  // the worker's gRPC streams (bare and minimal servers have none): `modes` leaves them out there
  const streams = h2GrpcStreams(ports.grpc);
  const grpcFrames = inputs.map((values) => encodeInferFrame({ model_name: MODEL, model_version: '', id: '', inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, WIDTH] }], outputs: [{ name: 'OUTPUT0' }], raw_input_contents: [Buffer.from(values.buffer)] }));
  let next = 0;
  const variant = () => next++ % VARIANTS;
  return {
    close: () => {
      agent.destroy();
      client.close();
      streams.close();
    },
    modes: {
      'http-json': () => httpPost(ports.http, `/v2/models/${MODEL}/infer`, variantBodies[variant()].json, { 'content-type': 'application/json' }, agent),
      'http-binary': () => {
        const b = variantBodies[variant()];
        return httpPost(ports.http, `/v2/models/${MODEL}/infer`, b.binary, { 'content-type': 'application/octet-stream', 'inference-header-content-length': String(b.binaryHeaderLength) }, agent);
      },
      grpc: () => client.call('/inference.GRPCInferenceService/ModelInfer', grpcFrames[variant()]),
      // ModelStreamInfer, one request in flight per stream (lib/grpc-h2.mjs h2GrpcStreams)
      'grpc-stream': () => streams.call(grpcFrames[variant()]),
    },
  };
}

/**
 * Each door at each concurrency. `pid` (a worker process): each row also records the CPU that
 * process spent per request, its main thread's (`mainCpuUs`) and all its threads' (`cpuUs`), from /proc.
 */
async function measureServer(label, ports, target, { pid, modes, ortFile } = {}) {
  const c = callers(ports);
  try {
    for (const [mode, call] of Object.entries(c.modes)) {
      if (modes !== undefined && !modes.includes(mode)) continue;
      target[mode] = {};
      // Unrecorded warm-up of this door at c=16: without it the first row measured (c=1) ran on code
      // V8 had not optimised yet and read 2-4x slower than the same row measured after the others.
      // With the process known, it lasts until the CPU per request stops falling (warmUntilSteady):
      // the worker's gRPC door went on compiling for about 8 s of load, where a fixed 1.5 s left its
      // rows measured on code half compiled.
      if (pid === undefined) await runLoad(call, { concurrency: 16, durationMs: WARMUP_MS });
      else {
        const w = await warmUntilSteady(call, () => procCpuUs(pid) ?? 0, QUICK ? { concurrency: 16, windowMs: 500, minMs: WARMUP_MS, maxMs: 2000 } : { concurrency: 16 });
        (results.warmup[label.trim()] ??= {})[mode] = w;
        console.log(`${label} ${mode.padEnd(11)} warm-up ${(w.ms / 1000).toFixed(1)} s at c=16, CPU/req per window (us): ${w.cpuUsPerRequest.join(', ')}`);
      }
      for (const concurrency of CONCURRENCY) {
        let before;
        let after;
        let memory;
        let ortBefore;
        let ortAfter;
        // at the window's end: the CPU it took, and the process's RSS under that load; with `ortFile`,
        // the model's own runs on its main thread (counters written every 20 ms: read a little stale)
        const onWindow =
          pid === undefined
            ? undefined
            : (at) => {
                const ort = ortFile === undefined ? undefined : readOrtRuns(ortFile);
                if (at === 'start') {
                  before = cpuTicks(pid);
                  ortBefore = ort;
                } else {
                  after = cpuTicks(pid);
                  memory = procMemory(pid);
                  ortAfter = ort;
                }
              };
        const r = await runLoad(call, { concurrency, durationMs: DURATION_MS, onWindow });
        if (before !== undefined && after !== undefined) {
          r.mainCpuUs = +(((after.main - before.main) * TICK_US) / r.requests).toFixed(1);
          r.cpuUs = +(((after.all - before.all) * TICK_US) / r.requests).toFixed(1);
          r.otherThreadsCpuUs = otherThreadsCpuUs(before, after, r.requests);
        }
        if (memory !== undefined) r.rssMiB = memory.rssMiB;
        if (ortBefore !== undefined && ortAfter !== undefined && ortAfter.runs > ortBefore.runs) {
          r.ortRuns = ortAfter.runs - ortBefore.runs;
          r.ortRunUs = +((ortAfter.us - ortBefore.us) / r.ortRuns).toFixed(1);
        }
        target[mode][concurrency] = r;
        const cpu = r.mainCpuUs === undefined ? '' : `   CPU/req main ${r.mainCpuUs.toFixed(0).padStart(4)} us, all ${r.cpuUs.toFixed(0).padStart(4)} us`;
        // the other threads that took 10 µs per request or more (a session thread at c=1: runs that did not go inline)
        const busy = Object.entries(r.otherThreadsCpuUs ?? {}).filter(([, us]) => us >= 10);
        const others = busy.length === 0 ? '' : ` (${busy.map(([name, us]) => `${name} ${us.toFixed(0)}`).join(', ')})`;
        const rss = r.rssMiB === undefined ? '' : `   RSS ${r.rssMiB.toFixed(0).padStart(4)} MiB`;
        // the model's own run: the same native code in every server, so it shows this machine's speed in that window
        const model = r.ortRunUs === undefined ? '' : `   ORT run ${r.ortRunUs.toFixed(0)} us${r.ortRuns < r.requests * 0.9 ? ` (${Math.round((100 * r.ortRuns) / r.requests)} % of runs on the main thread)` : ''}`;
        console.log(`${label} ${mode.padEnd(11)} c=${String(concurrency).padEnd(3)}         ${fmt(r)}${cpu}${others}${rss}${model}`);
      }
    }
  } finally {
    c.close();
  }
}

/** The median of `values` (the mean of the middle two for an even count). */
function median(values) {
  const s = [...values].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 === 1 ? s[m] : +((s[m - 1] + s[m]) / 2).toFixed(3);
}

/** a / b of two rows' CPU per request (all threads); null when either row has none. */
function cpuRatio(a, b) {
  return a.cpuUs === undefined || b.cpuUs === undefined || b.cpuUs === 0 ? null : +(a.cpuUs / b.cpuUs).toFixed(3);
}

/** Microseconds per clock tick of /proc's CPU times (USER_HZ, 100 on Linux). */
const TICK_US = 10_000;

/**
 * The environment of a server whose main thread's ONNX Runtime runs are timed (lib/ort-runs.mjs,
 * preloaded): the minimal servers and the worker. `ortFile` is where it writes its counters, `remove()`
 * deletes them once the server has stopped.
 */
function ortTimed(name) {
  const ortFile = `${tmpdir()}/switchyard-bench-ort-${process.pid}-${name}`;
  const remove = () => rmSync(ortFile, { force: true });
  remove();
  const env = { ...process.env, NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ''} --import=${ROOT}bench/lib/ort-runs.mjs`, BENCH_ORT_RUN_FILE: ortFile };
  return { env, ortFile, remove };
}

/** CPU ticks (user + system) of a process's main thread and of all its threads, from /proc. */
function cpuTicks(pid) {
  const ticks = (stat) => {
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return Number(fields[11]) + Number(fields[12]);
  };
  // the other threads by name (V8's GC and compiler threads, worker threads: a session thread, a front
  // thread, libuv's pool), summed per name: a path that hops to a thread shows there
  const others = {};
  for (const task of readdirSync(`/proc/${pid}/task`)) {
    if (task === String(pid)) continue;
    let stat;
    try {
      stat = readFileSync(`/proc/${pid}/task/${task}/stat`, 'utf8');
    } catch {
      continue; // the thread ended meanwhile
    }
    const name = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
    others[name] = (others[name] ?? 0) + ticks(stat);
  }
  return { main: ticks(readFileSync(`/proc/${pid}/task/${pid}/stat`, 'utf8')), all: ticks(readFileSync(`/proc/${pid}/stat`, 'utf8')), others };
}

/**
 * CPU µs per request of each group of other threads (by name) between two `cpuTicks` readings; a
 * thread that ended meanwhile is counted in neither. Only groups of at least 1 µs.
 */
function otherThreadsCpuUs(before, after, requests) {
  const out = {};
  for (const [name, t] of Object.entries(after.others)) {
    const us = ((t - (before.others[name] ?? 0)) * TICK_US) / requests;
    if (us >= 1) out[name] = +us.toFixed(1);
  }
  return out;
}

// --- bare servers ----------------------------------------------------------------------------
async function measureBare(worker) {
  // Same payloads the worker answers with: take them from one real request to the worker.
  const json = await httpPost(worker.ports.http, `/v2/models/${MODEL}/infer`, bodies.json, { 'content-type': 'application/json' });
  const binary = await new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port: worker.ports.http, path: `/v2/models/${MODEL}/infer`, method: 'POST', headers: { 'inference-header-content-length': String(bodies.binaryHeaderLength) } }, (res) => {
      const chunks = [];
      res.on('data', (d) => chunks.push(d));
      res.on('end', () => resolve({ body: Buffer.concat(chunks), headerLength: Number(res.headers['inference-header-content-length']) }));
    });
    req.on('error', reject);
    req.end(bodies.binary);
  });
  const raw = Buffer.alloc(WIDTH * 4);
  const child = spawn(process.execPath, [`${ROOT}bench/lib/bare-servers.mjs`, JSON.stringify([json.toString('base64'), binary.body.toString('base64'), binary.headerLength, raw.toString('base64')])], { stdio: ['ignore', 'pipe', 'inherit'] });
  const ports = await new Promise((resolve) => child.stdout.once('data', (d) => resolve(JSON.parse(d.toString()))));
  try {
    await measureServer('bare  ', ports, results.bare, { modes: UNARY_DOORS, pid: child.pid });
  } catch (e) {
    child.kill('SIGTERM');
    throw e;
  }
  // kept for the goal rounds; the section stops it
  return { ports, stop: () => child.kill('SIGTERM') };
}

// --- minimal servers: the model on the event loop and nothing else ---------------------------------
/**
 * The same request to the worker and to the minimal servers must get the same response bytes, or
 * served / minimal would compare unlike work: checked over HTTP JSON and binary before measuring.
 */
async function checkSameBytes(workerPort, minimalPort) {
  const post = (port, kind) =>
    kind === 'json'
      ? httpPost(port, `/v2/models/${MODEL}/infer`, bodies.json, { 'content-type': 'application/json' })
      : httpPost(port, `/v2/models/${MODEL}/infer`, bodies.binary, { 'content-type': 'application/octet-stream', 'inference-header-content-length': String(bodies.binaryHeaderLength) });
  for (const kind of ['json', 'binary']) {
    const [served, minimal] = await Promise.all([post(workerPort, kind), post(minimalPort, kind)]);
    if (!served.equals(minimal)) throw new Error(`bench/lib/minimal-servers.mjs answers HTTP ${kind} differently from the worker (${minimal.length} vs ${served.length} bytes): update it to the worker's response`);
  }
}

async function measureMinimal(worker) {
  const { env, ortFile, remove } = ortTimed('minimal');
  const child = spawn(process.execPath, [`${ROOT}bench/lib/minimal-servers.mjs`, MODEL_FILE, MODEL, 'INPUT0', 'OUTPUT0'], { stdio: ['ignore', 'pipe', 'inherit'], env });
  const ports = await new Promise((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`minimal-servers exited with code ${code}`)));
    child.stdout.once('data', (d) => resolve(JSON.parse(d.toString())));
  });
  try {
    await checkSameBytes(worker.ports.http, ports.http);
    await measureServer('minimal', ports, results.minimal, { modes: UNARY_DOORS, pid: child.pid, ortFile });
  } catch (e) {
    child.kill('SIGTERM');
    remove();
    throw e;
  }
  return {
    ports,
    stop: () => {
      child.kill('SIGTERM');
      remove();
    },
  };
}

/**
 * ROUNDS - 1 more rounds of the goal cells (c=1 and c=16 of each unary door) on the bare, minimal
 * and served servers, all warmed by their rows already: each round takes the doors in turn and, per
 * door and concurrency, the three servers in an order that rotates from round to round, so a drift in
 * the machine's load meets each of them alike. `results.rounds[r][mode][c][server]`: throughput, p50.
 */
async function measureGoalRounds(servers) {
  const clients = Object.fromEntries(Object.entries(servers).map(([name, ports]) => [name, callers(ports)]));
  const names = Object.keys(servers);
  results.rounds = [];
  try {
    for (let round = 1; round < ROUNDS; round++) {
      const cells = {};
      let turn = round;
      for (const mode of UNARY_DOORS) {
        cells[mode] = {};
        for (const concurrency of [1, 16]) {
          cells[mode][concurrency] = {};
          const order = names.map((_, k) => names[(k + turn) % names.length]);
          turn++;
          for (const name of order) {
            const r = await runLoad(clients[name].modes[mode], { concurrency, durationMs: DURATION_MS });
            cells[mode][concurrency][name] = { throughput: r.throughput, p50_us: r.p50_us };
          }
        }
      }
      results.rounds.push(cells);
      console.log(`goal round ${round + 1} of ${ROUNDS}: served / bare c=16 ${UNARY_DOORS.map((m) => (cells[m][16].served.throughput / cells[m][16].bare.throughput).toFixed(3)).join(', ')} (JSON, binary, gRPC)`);
    }
  } finally {
    for (const c of Object.values(clients)) c.close();
  }
}

function ratios() {
  const raw = results.raw.batch1;
  console.log(`\nratios (Node.js ${process.version})`);
  const rows = [];
  for (const mode of ['http-json', 'http-binary', 'grpc']) {
    for (const c of CONCURRENCY) {
      const s = results.served[mode][c];
      const b = results.bare[mode][c];
      const m = results.minimal[mode][c];
      rows.push({
        mode,
        concurrency: c,
        'served/raw throughput': +(s.throughput / raw.throughput).toFixed(3),
        'served/bare throughput': +(s.throughput / b.throughput).toFixed(3),
        'served p50 / (bare p50 + raw p50)': +(s.p50_us / (b.p50_us + raw.p50_us)).toFixed(3),
        'served/minimal throughput': +(s.throughput / m.throughput).toFixed(3),
        'served p50 / minimal p50': +(s.p50_us / m.p50_us).toFixed(3),
      });
    }
  }
  console.table(rows);
  results.ratios = rows;
  // The goal and floor lines: each value per round (round 1: the rows above; further rounds: the goal
  // cells measured again, measureGoalRounds), and its median.
  const roundCount = 1 + (results.rounds?.length ?? 0);
  const cell = (k, server, mode, c) => (k === 0 ? results[server][mode][c] : results.rounds[k - 1][mode][c][server]);
  const overRounds = (f) => Array.from({ length: roundCount }, (_, k) => +f(k).toFixed(3));
  const doors = ['http-json', 'http-binary', 'grpc'];
  const perRound = {
    // Issue 15's table: served / bare-server throughput on the MLP at c=16, each door.
    'served / bare throughput, HTTP JSON, c=16 (goal >= 0.6)': overRounds((k) => cell(k, 'served', 'http-json', 16).throughput / cell(k, 'bare', 'http-json', 16).throughput),
    'served / bare throughput, HTTP binary, c=16 (goal >= 0.6)': overRounds((k) => cell(k, 'served', 'http-binary', 16).throughput / cell(k, 'bare', 'http-binary', 16).throughput),
    'served gRPC c=16 / raw batch-1 rate (goal >= 0.5)': overRounds((k) => cell(k, 'served', 'grpc', 16).throughput / raw.throughput),
    'worst served p50 c=1 / (bare p50 + raw p50) (goal <= 1.5)': overRounds((k) => Math.max(...doors.map((m) => cell(k, 'served', m, 1).p50_us / (cell(k, 'bare', m, 1).p50_us + raw.p50_us)))),
    'served / bare throughput, gRPC c=16 (goal >= 0.6)': overRounds((k) => cell(k, 'served', 'grpc', 16).throughput / cell(k, 'bare', 'grpc', 16).throughput),
  };
  results.goals = Object.fromEntries(Object.entries(perRound).map(([key, values]) => [key, median(values)]));
  if (roundCount > 1) results.goalRounds = perRound;
  const ofRounds = (values) => (values.length > 1 ? ` (median of ${values.length} rounds: ${values.join(', ')})` : '');
  console.log('\ngoals');
  for (const [k, v] of Object.entries(results.goals)) console.log(`  ${k}: ${v}${ofRounds(perRound[k])}`);
  // Not goals: where the floor is. The minimal server decodes, runs the model and encodes with nothing
  // else, so what it loses against the bare server is Node.js's and onnxruntime-node's, not ours.
  // Throughput and latency: medians over the rounds; CPU per request: the rows (round 1).
  const at = (set, mode, c) => results[set][mode][c];
  const perDoor = (f) => doors.map((m) => median(overRounds((k) => f(k, m))));
  results.floor = {
    'minimal / bare throughput, c=16 (JSON, binary, gRPC)': perDoor((k, m) => cell(k, 'minimal', m, 16).throughput / cell(k, 'bare', m, 16).throughput),
    'served / minimal throughput, c=16 (JSON, binary, gRPC)': perDoor((k, m) => cell(k, 'served', m, 16).throughput / cell(k, 'minimal', m, 16).throughput),
    'minimal p50 c=1 / (bare p50 + raw p50) (JSON, binary, gRPC)': perDoor((k, m) => cell(k, 'minimal', m, 1).p50_us / (cell(k, 'bare', m, 1).p50_us + raw.p50_us)),
    'served p50 / minimal p50, c=1 (JSON, binary, gRPC)': perDoor((k, m) => cell(k, 'served', m, 1).p50_us / cell(k, 'minimal', m, 1).p50_us),
    // CPU per request (each server process, all its threads, from /proc): unlike throughput, it does not
    // depend on how fast the load generator is against the server, which differs from machine to machine
    'CPU per request, c=16, minimal / bare (JSON, binary, gRPC)': doors.map((m) => cpuRatio(at('minimal', m, 16), at('bare', m, 16))),
    'CPU per request, c=16, served / minimal (JSON, binary, gRPC)': doors.map((m) => cpuRatio(at('served', m, 16), at('minimal', m, 16))),
  };
  console.log(`\nfloor: a minimal Node.js server running the same model (lib/minimal-servers.mjs)${roundCount > 1 ? `; throughput and latency: medians of ${roundCount} rounds` : ''}`);
  for (const [k, v] of Object.entries(results.floor)) console.log(`  ${k}: ${v.join(', ')}`);
  // Issue 15's rule: the worker's RSS under the c=64 load, reported so that a change can show it did not grow.
  if (at('served', 'http-json', 64).rssMiB !== undefined) {
    results.memory = {
      'worker RSS at the end of the c=64 window, MiB (JSON, binary, gRPC)': doors.map((m) => at('served', m, 64).rssMiB),
      'worker peak RSS (VmHWM) after the served rows, MiB': results.servedPeakMiB,
    };
    console.log('\nmemory (must not grow from one build to the next: bench/compare.mjs)');
    for (const [k, v] of Object.entries(results.memory)) console.log(`  ${k}: ${Array.isArray(v) ? v.join(', ') : v}`);
  }
}

/**
 * Runs one section when `--only` picked it. On a terminal (stderr), a line when it starts and one with
 * the time it took when it ends, so a long run shows where it is; nothing off a terminal.
 */
let sectionIndex = 0;
async function section(name, body) {
  if (!ONLY.has(name)) return;
  const n = ++sectionIndex;
  const tag = `[bench ${n}/${ONLY.size}] ${name}`;
  const tty = process.stderr.isTTY === true;
  if (tty) process.stderr.write(`${tag}: started\n`);
  const started = performance.now();
  await body();
  if (tty) process.stderr.write(`${tag}: done in ${((performance.now() - started) / 1000).toFixed(1)} s\n`);
}

// --- HTTP front threads (--http-thread-count) ----------------------------------------------------
/** Front threads per door the `threads` rows run with. */
const HTTP_THREADS = 2;

/**
 * The worker again with `--http-thread-count` and `--grpc-infer-thread-count`, where this Node.js
 * shares a port between threads (22.12 on). What it shows on any machine is the main thread's CPU per
 * request against `served`'s: the engine's thread freed of the transport. Throughput gains need cores
 * to spare: on 2 cores the load generator takes the other one.
 */
async function measureThreads() {
  if (!reusePortSupported()) {
    console.log(`threads: skipped (Node.js ${process.version} cannot share a port between threads; 22.12 or later)`);
    return;
  }
  const worker = await startWorkerProcess({ modelRepositories: ['examples/model_repository'], args: ['--model-control-mode=explicit', `--load-model=${MODEL}`, '--log-verbose=0', `--http-thread-count=${HTTP_THREADS}`, `--grpc-infer-thread-count=${HTTP_THREADS}`] });
  try {
    results.threads = {};
    await measureServer(`threads(${HTTP_THREADS})`, worker.ports, results.threads, { pid: worker.pid });
  } finally {
    await worker.stop();
  }
}

function threadRatios() {
  if (results.threads === undefined) return;
  const rows = [];
  for (const mode of [...UNARY_DOORS, 'grpc-stream']) {
    for (const c of CONCURRENCY) {
      const s = results.served[mode][c];
      const t = results.threads[mode][c];
      rows.push({
        mode,
        concurrency: c,
        'threads/served throughput': +(t.throughput / s.throughput).toFixed(3),
        'threads p50 / served p50': +(t.p50_us / s.p50_us).toFixed(3),
        'main-thread CPU/req, served (us)': s.mainCpuUs,
        'main-thread CPU/req, threads (us)': t.mainCpuUs,
        'all-threads CPU/req, served / threads (us)': `${s.cpuUs} / ${t.cpuUs}`,
      });
    }
  }
  console.log(`\nfront threads (--http-thread-count=${HTTP_THREADS} --grpc-infer-thread-count=${HTTP_THREADS}) against the worker without them`);
  console.table(rows);
  results.threadRatios = rows;
}

await section('worker', async () => {
  // What our HTTP JSON tensor codec costs beside JSON.parse / JSON.stringify, per datatype (bench/json-codec.mjs):
  // first, in process, before this process has driven any load (its garbage doubled some rows' times).
  results.jsonCodec = measureJsonCodec({ quick: QUICK });
  await measureRaw();
  const served = ortTimed('served');
  const worker = await startWorkerProcess({ modelRepositories: ['examples/model_repository'], args: ['--model-control-mode=explicit', `--load-model=${MODEL}`, '--log-verbose=0'], env: served.env });
  const children = [];
  try {
    const bare = await measureBare(worker);
    children.push(bare);
    const minimal = await measureMinimal(worker);
    children.push(minimal);
    await measureServer('served', worker.ports, results.served, { pid: worker.pid, ortFile: served.ortFile });
    results.servedPeakMiB = procMemory(worker.pid)?.peakMiB;
    if (ROUNDS > 1) await measureGoalRounds({ bare: bare.ports, minimal: minimal.ports, served: worker.ports });
  } finally {
    for (const c of children) c.stop();
    await worker.stop();
    served.remove();
  }
  await measureThreads();
  ratios();
  threadRatios();
});
// Issue 3: dynamic batching on/off and raw session.run at the batch sizes formed (bench/batching.mjs).
await section('batching', async () => (results.batching = await measureBatching({ quick: QUICK, bare: results.bare['http-binary'] })));
// OpenAI /v1/embeddings with dynamic batching on and off (bench/embeddings.mjs).
await section('embeddings', async () => (results.embeddings = await measureEmbeddings({ quick: QUICK })));
await section('llm', async () => {
  // Issue 4: the simulated executor's replay in virtual time (bench/llm-replay.mjs).
  results.llmReplay = await measureReplay({ quick: QUICK });
  // Issue 4: the ONNX executor on the tiny decoder: continuous batching gain and prefix-cache TTFT (bench/llm-onnx.mjs).
  results.llmOnnx = await measureOnnxLlm({ quick: QUICK });
  // Event-loop CPU per token at a real vocabulary width, sampling on the decoder thread (bench/llm-sampling-cpu.mjs).
  results.llmSamplingCpu = await measureSamplingCpu(QUICK ? { tokens: 100, rounds: 3 } : {});
  // Event-loop CPU per streamed token of detokenisation: our Tokenizer.decode beside the library's (bench/detokenize.mjs).
  results.llmDetokenize = measureDetokenize({ quick: QUICK });
  // Prompt tokenisation per token: Tokenizer.encode beside the library's encode (bench/tokenize.mjs).
  results.llmTokenize = measureTokenize({ quick: QUICK });
  // The mocker in real time: its steps against the timing model's, on its clock and on setTimeout (bench/mocker-pace.mjs).
  results.mockerPace = await measureMockerPace({ quick: QUICK });
});
// Guided decoding (response_format) on a 150k vocabulary: time per token with and without (bench/guided-decoding.mjs).
await section('guided', async () => (results.guidedDecoding = await measureGuidedDecoding({ quick: QUICK })));
// Issue 5: routing policies over 8 simulated workers, and the router's decision latency.
await section('routing', async () => {
  results.routing = await measureRouting({ quick: QUICK });
  results.routingDecision = await measureDecisions({ quick: QUICK });
});
// Issue 11: disaggregated prefill/decode against aggregated serving, in virtual time.
await section('disagg', async () => (results.disagg = await measureDisagg({ quick: QUICK })));
// Issue 12: the planner in the cluster simulator, against static provisioning (bench/planner.mjs).
await section('planner', async () => (results.planner = await measurePlanner({ quick: QUICK })));
// The router hop, direct to one worker vs through the router (bench/cluster-hop.mjs).
await section('cluster', async () => (results.clusterHop = await measureClusterHop({ quick: QUICK })));
await section('kv-transfer', async () => {
  // Issue 11: the KV transfer plane's pull throughput over loopback TCP (bench/kv-transfer.mjs).
  results.kvTransfer = await measureKvTransfer({ quick: QUICK });
  // ... and on the tiny ONNX LLM: aggregated vs prefill → pull → import → decode (same file).
  results.kvTransferOnnx = await measureOnnxDisagg({ quick: QUICK });
});
mkdirSync(`${ROOT}bench/results`, { recursive: true });
const file = `${ROOT}bench/results/${results.date.replace(/[:.]/g, '-')}-node${NODE_MAJOR}.json`;
writeFileSync(file, JSON.stringify(results, null, 2) + '\n');
console.log(`\nNode.js ${process.version}: written to ${file.slice(ROOT.length)}`);
// The same results as charts (bench/report.mjs; `node bench/report.mjs <file>` redraws any results file).
const written = writeReport(file);
console.log(`report: ${written[0].slice(ROOT.length)} and ${written.length - 1} chart${written.length === 2 ? '' : 's'} beside it`);
