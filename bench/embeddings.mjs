// OpenAI /v1/embeddings with dynamic batching on and off. A program, not a test: prints tables and
// ratios and returns them for bench/run.mjs to store; nothing here gates CI.
//
//   off   the example `tiny_embedding` (examples/model_repository) without `dynamic_batching`: each
//         input is one execution of the encoder
//   on    the same folder with `dynamic_batching { max_queue_delay_microseconds: 500 }`: concurrent
//         inputs (of one request and of concurrent requests) share one padded forward pass
// Both have one instance (one ONNX session thread) and max_batch_size 32, driven over HTTP with
// closed-loop clients: one-sentence requests at concurrency 1, 16, 64, and 32-sentence requests at
// concurrency 1 and 4. Throughput is counted in embeddings per second; the ratio is on / off. A
// multi-sentence request's inputs travel as requests of up to max_batch_size rows, so each 32-sentence
// request is one execution with or without dynamic batching; the one-sentence rows show the batcher.
//
// Router: one worker in cluster mode and one router over private etcd, NATS and Redis (the test
// harness's), `embed_on` with 32- and 256-sentence requests straight to the worker's own OpenAI door
// and through the router (NATS request plane to the worker), router/direct ratio, and the infer
// requests the worker received per embeddings request (its KServe statistics: a NATS round trip each
// through the router).
//
//   node bench/embeddings.mjs [--quick]     (after `npx tsc -b` and generate-models)
import http from 'node:http';
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startEtcd, startNats, startRedis, startRouterProcess, startWorkerProcess } from '@switchyard/testing';
import { runLoad, sleep } from './lib/load.mjs';
import { httpPost } from './lib/clients.mjs';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const EXAMPLE = join(ROOT, 'examples', 'model_repository', 'tiny_embedding');
const SENTENCES = Array.from({ length: 64 }, (_, i) => `Sentence ${i} about serving embeddings ${'with batching '.repeat(i % 4)}`.trim());
const CASES = [
  { inputs: 1, concurrency: [1, 16, 64] },
  { inputs: 32, concurrency: [1, 4] },
];
const PROBE = 4;
const ROUTER_CASES = [
  { inputs: 32, concurrency: [1, 4] },
  { inputs: 256, concurrency: [1] },
];

/** `embed_off` and `embed_on`: the example folder without and with dynamic batching. */
function makeRepository() {
  const dir = mkdtempSync(join(tmpdir(), 'switchyard-bench-embeddings-'));
  const config = readFileSync(join(EXAMPLE, 'config.pbtxt'), 'utf8').replace(/dynamic_batching\s*\{[^}]*\}\n?/, '');
  for (const [name, extra] of [
    ['embed_off', ''],
    ['embed_on', 'dynamic_batching {\n  max_queue_delay_microseconds: 500\n}\n'],
  ]) {
    cpSync(EXAMPLE, join(dir, name), { recursive: true });
    writeFileSync(join(dir, name, 'config.pbtxt'), `${config.replace(/name:\s*"tiny_embedding"/, `name: "${name}"`)}\n${extra}`);
  }
  return dir;
}

function fmt(r, perRequest) {
  return `${(r.throughput * perRequest).toFixed(0).padStart(7)} emb/s  p50 ${(r.p50_us / 1000).toFixed(2).padStart(7)} ms  p99 ${(r.p99_us / 1000).toFixed(2).padStart(7)} ms`;
}

/** A closed loop of `inputs`-sentence requests to `model` on `port`. */
function embedCall(port, model, inputs, agent) {
  let next = 0;
  return () => {
    const input = Array.from({ length: inputs }, () => SENTENCES[next++ % SENTENCES.length]);
    return httpPost(port, '/v1/embeddings', Buffer.from(JSON.stringify({ model, input: inputs === 1 ? input[0] : input })), { 'content-type': 'application/json' }, agent);
  };
}

/** Successful infer requests the worker counted for `model` (KServe statistics). */
async function workerRequests(port, model) {
  const body = await (await fetch(`http://127.0.0.1:${port}/v2/models/${model}/stats`)).json();
  return body.model_stats[0].inference_stats.success.count;
}

/** Embeddings straight to a cluster worker and through a router: emb/s, router/direct, worker requests per call. */
async function measureRouter(repo, durationMs) {
  const results = {};
  const namespace = `bench-embeddings-${process.pid}`;
  const started = {};
  const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });
  console.log('\nOpenAI /v1/embeddings through a router (embed_on, one worker: direct = the worker\'s own door)');
  try {
    [started.etcd, started.nats, started.redis] = await Promise.all([startEtcd(), startNats({ jetstream: true }), startRedis()]);
    const { etcd, nats, redis } = started;
    [started.worker, started.router] = await Promise.all([
      startWorkerProcess({
        modelRepositories: [repo],
        args: [`--etcd=${etcd.url}`, `--nats=${nats.url}`, `--redis=${redis.url}`, `--namespace=${namespace}`, '--model-control-mode=explicit', '--load-model=embed_on', '--log-verbose=0'],
      }),
      startRouterProcess({ etcd: etcd.url, nats: nats.url, redis: redis.url, namespace, args: ['--log-verbose=0'] }),
    ]);
    const { worker, router } = started;
    const deadline = Date.now() + 60_000;
    while (!(await fetch(`${router.httpUrl}/v1/models`).then((r) => r.json()).then((b) => b.data?.some((m) => m.id === 'embed_on')).catch(() => false))) {
      if (Date.now() > deadline) throw new Error('the router did not list embed_on');
      await sleep(100);
    }
    const targets = { direct: worker.ports.http, router: router.ports.http };
    for (const port of Object.values(targets)) await runLoad(embedCall(port, 'embed_on', 32, agent), { concurrency: 2, durationMs: 300 });
    for (const { inputs, concurrency } of ROUTER_CASES) {
      for (const c of concurrency) {
        const row = { inputs, concurrency: c };
        for (const [target, port] of Object.entries(targets)) {
          const run = await runLoad(embedCall(port, 'embed_on', inputs, agent), { concurrency: c, durationMs });
          // Counted apart from the load (whose warm-up and last calls the window leaves out): PROBE calls one after another.
          const before = await workerRequests(worker.ports.http, 'embed_on');
          const probe = embedCall(port, 'embed_on', inputs, agent);
          for (let i = 0; i < PROBE; i++) await probe();
          const requests = (await workerRequests(worker.ports.http, 'embed_on')) - before;
          row[target] = { ...run, workerRequestsPerCall: +(requests / PROBE).toFixed(2) };
        }
        row.ratio = +(row.router.throughput / row.direct.throughput).toFixed(2);
        results[`inputs=${inputs},c=${c}`] = row;
        for (const target of ['direct', 'router']) {
          const label = target === 'direct' ? `inputs=${String(inputs).padEnd(3)} c=${String(c).padEnd(2)} direct` : `${' '.repeat(14)} router`;
          const tail = target === 'router' ? `   router/direct ${row.ratio.toFixed(2)}x` : '';
          console.log(`${label} ${fmt(row[target], inputs)}  ${String(row[target].workerRequestsPerCall).padStart(5)} worker requests/call${tail}`);
        }
        await sleep(100);
      }
    }
  } finally {
    agent.destroy();
    await Promise.allSettled([started.router?.stop()]);
    await Promise.allSettled([started.worker?.stop()]);
    await Promise.allSettled([started.etcd?.stop(), started.nats?.stop(), started.redis?.stop()]);
  }
  return results;
}

export async function measureEmbeddings({ quick = false } = {}) {
  const durationMs = quick ? 800 : 2500;
  const results = { durationMs, cases: {} };
  console.log('\nOpenAI /v1/embeddings (tiny_embedding, one instance, dynamic batching off / on)');
  const repo = makeRepository();
  const worker = await startWorkerProcess({ modelRepositories: [repo], args: ['--log-verbose=0'] });
  const agent = new http.Agent({ keepAlive: true, maxSockets: 256 });
  try {
    const port = worker.ports.http;
    for (const { inputs, concurrency } of CASES) {
      for (const c of concurrency) {
        const call = (model) => embedCall(port, model, inputs, agent);
        const off = await runLoad(call('embed_off'), { concurrency: c, durationMs });
        const on = await runLoad(call('embed_on'), { concurrency: c, durationMs });
        const ratio = on.throughput / off.throughput;
        results.cases[`inputs=${inputs},c=${c}`] = { inputs, concurrency: c, off, on, ratio: +ratio.toFixed(2) };
        console.log(`inputs=${String(inputs).padEnd(2)} c=${String(c).padEnd(3)} off ${fmt(off, inputs)}`);
        console.log(`${' '.repeat(15)} on  ${fmt(on, inputs)}   on/off ${ratio.toFixed(2)}x`);
        await sleep(100);
      }
    }
  } finally {
    agent.destroy();
    await worker.stop();
  }
  try {
    results.router = await measureRouter(repo, durationMs);
  } finally {
    rmSync(repo, { recursive: true, force: true });
  }
  return results;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) await measureEmbeddings({ quick: process.argv.includes('--quick') });
