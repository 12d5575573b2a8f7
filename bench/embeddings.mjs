// OpenAI /v1/embeddings with dynamic batching on and off. A program, not a test: prints tables and
// ratios and returns them for bench/run.mjs to store; nothing here gates CI.
//
//   off   the example `tiny_embedding` (examples/model_repository) without `dynamic_batching`: each
//         input is one execution of the encoder
//   on    the same folder with `dynamic_batching { max_queue_delay_microseconds: 500 }`: concurrent
//         inputs (of one request and of concurrent requests) share one padded forward pass
// Both have one instance (one ONNX session thread) and max_batch_size 32, driven over HTTP with
// closed-loop clients: one-sentence requests at concurrency 1, 16, 64, and 32-sentence requests at
// concurrency 1 and 4. Throughput is counted in embeddings per second; the ratio is on / off.
//
//   node bench/embeddings.mjs [--quick]     (after `npx tsc -b` and generate-models)
import http from 'node:http';
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startWorkerProcess } from '@switchyard/testing';
import { runLoad, sleep } from './lib/load.mjs';
import { httpPost } from './lib/clients.mjs';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const EXAMPLE = join(ROOT, 'examples', 'model_repository', 'tiny_embedding');
const SENTENCES = Array.from({ length: 64 }, (_, i) => `Sentence ${i} about serving embeddings ${'with batching '.repeat(i % 4)}`.trim());
const CASES = [
  { inputs: 1, concurrency: [1, 16, 64] },
  { inputs: 32, concurrency: [1, 4] },
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
        let next = 0;
        const call = (model) => () => {
          const input = Array.from({ length: inputs }, () => SENTENCES[next++ % SENTENCES.length]);
          return httpPost(port, '/v1/embeddings', Buffer.from(JSON.stringify({ model, input: inputs === 1 ? input[0] : input })), { 'content-type': 'application/json' }, agent);
        };
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
    rmSync(repo, { recursive: true, force: true });
  }
  return results;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) await measureEmbeddings({ quick: process.argv.includes('--quick') });
