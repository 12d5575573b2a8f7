// The gRPC door's cost per ModelInfer call on the MLP, beside a bare grpc-js server answering the same
// payload (bench/lib/bare-servers.mjs): CPU per request of the server's main thread and of its other
// threads (ns from /proc/<pid>/task/<tid>/schedstat over a steady window, divided by the requests
// answered in it), throughput and p50 / p99, at each concurrency, driven by the lean node:http2 client
// (bench/lib/grpc-h2.mjs). CPU per request is steadier than throughput on a shared machine. Each
// server is first warmed at c=16 until its CPU per request stops falling (lib/load.mjs
// warmUntilSteady; the served door takes about 8 s of load to be compiled).
//
// With `--echo`, each root's door also runs alone over an engine that answers at once
// (bench/lib/grpc-echo-door.mjs): the door's own cost, without the model's run and thread hand-off.
// With several repository roots (each a built copy), the rounds alternate between them, so an old and a
// new build are measured back to back in the same conditions; medians over rounds are printed last.
//
//   node bench/grpc-door-cpu.mjs [--root DIR]... [--rounds 3] [--window-ms 3000] [--concurrency 1,16] [--no-bare] [--echo]
//
// A program, not a test.
import { spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { encodeInferFrame, h2GrpcClient } from './lib/grpc-h2.mjs';
import { STEADY_MIN_MS, sleep, warmUntilSteady } from './lib/load.mjs';

const HERE = fileURLToPath(new URL('..', import.meta.url));
const MODEL = 'mlp';
const WIDTH = 256;

function args(argv) {
  const out = { roots: [], rounds: 3, windowMs: 3000, warmupMs: 1500, concurrency: [1, 16], bare: true, echo: false };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const value = () => argv[++i];
    if (a === '--root') out.roots.push(value());
    else if (a === '--rounds') out.rounds = Number(value());
    else if (a === '--window-ms') out.windowMs = Number(value());
    else if (a === '--warmup-ms') out.warmupMs = Number(value());
    else if (a === '--concurrency') out.concurrency = value().split(',').map(Number);
    else if (a === '--no-bare') out.bare = false;
    else if (a === '--echo') out.echo = true;
    else {
      console.error(`unknown argument ${a}`);
      process.exit(2);
    }
  }
  if (out.roots.length === 0) out.roots.push(HERE);
  return out;
}

/** CPU ns of each thread of `pid`: the main thread's, and the others' summed. */
function threadCpu(pid) {
  let main = 0;
  let others = 0;
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    let ns;
    try {
      ns = Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').split(' ')[0]);
    } catch {
      continue; // a thread that ended between the listing and the read
    }
    if (Number(tid) === pid) main = ns;
    else others += ns;
  }
  return { main, others };
}

/** Spawns `node <file> ...argv` and resolves with the child once `ready(line)` returns ports. */
function startProcess(file, argv, cwd, ready) {
  const child = spawn(process.execPath, [file, ...argv], { cwd, stdio: ['ignore', 'pipe', 'inherit'] });
  return new Promise((resolve, reject) => {
    let partial = '';
    child.once('exit', (code) => reject(new Error(`${file} exited with ${code}`)));
    child.stdout.on('data', (chunk) => {
      partial += chunk.toString();
      let nl;
      while ((nl = partial.indexOf('\n')) !== -1) {
        const line = partial.slice(0, nl);
        partial = partial.slice(nl + 1);
        const port = ready(line);
        if (port !== undefined) resolve({ child, port });
      }
    });
  });
}

function startWorker(root) {
  const argv = ['worker', `--model-repository=${root}/examples/model_repository`, '--model-control-mode=explicit', `--load-model=${MODEL}`, '--log-verbose=0', '--http-port=0', '--grpc-port=0', '--metrics-port=0'];
  return startProcess(`${root}/bin/switchyard.mjs`, argv, root, (line) => {
    try {
      const l = JSON.parse(line);
      return l.msg === 'worker started' ? l.ports.grpc : undefined;
    } catch {
      return undefined;
    }
  });
}

function startBare() {
  const raw = Buffer.alloc(WIDTH * 4).toString('base64');
  const payload = JSON.stringify(['', '', 0, raw]);
  return startProcess(`${HERE}bench/lib/bare-servers.mjs`, [payload], HERE, (line) => {
    try {
      return JSON.parse(line).grpc;
    } catch {
      return undefined;
    }
  });
}

function startEchoDoor(root) {
  return startProcess(`${HERE}bench/lib/grpc-echo-door.mjs`, [root], HERE, (line) => {
    try {
      return JSON.parse(line).grpc;
    } catch {
      return undefined;
    }
  });
}

const frame = encodeInferFrame({
  model_name: MODEL,
  model_version: '',
  id: '',
  inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, WIDTH] }],
  outputs: [{ name: 'OUTPUT0' }],
  raw_input_contents: [Buffer.from(new Float32Array(WIDTH).map((_, i) => ((i * 37) % 101) / 101 - 0.5).buffer)],
});

/** Closed-loop load on `port` at `concurrency`; CPU of `pid` and latencies over the window after the warm-up. */
async function measure(pid, port, concurrency, { windowMs, warmupMs }) {
  const client = h2GrpcClient(port);
  let measuring = false;
  let stop = false;
  let count = 0;
  const latencies = [];
  const loop = async () => {
    while (!stop) {
      const t0 = process.hrtime.bigint();
      await client.call('/inference.GRPCInferenceService/ModelInfer', frame);
      if (measuring) {
        latencies.push(Number(process.hrtime.bigint() - t0));
        count++;
      }
    }
  };
  const loops = Array.from({ length: concurrency }, loop);
  await sleep(warmupMs);
  const cpu0 = threadCpu(pid);
  const t0 = process.hrtime.bigint();
  measuring = true;
  await sleep(windowMs);
  measuring = false;
  const cpu1 = threadCpu(pid);
  const elapsed = Number(process.hrtime.bigint() - t0);
  stop = true;
  await Promise.all(loops);
  client.close();
  latencies.sort((a, b) => a - b);
  const q = (p) => latencies[Math.min(latencies.length - 1, Math.floor(p * latencies.length))] / 1000;
  return {
    mainUs: (cpu1.main - cpu0.main) / count / 1000,
    othersUs: (cpu1.others - cpu0.others) / count / 1000,
    rps: count / (elapsed / 1e9),
    p50: q(0.5),
    p99: q(0.99),
  };
}

async function runTarget(label, start, opts, rows) {
  const { child, port } = await start();
  try {
    // warm-up at c=16 until the CPU per request stops falling, so V8 has optimised the paths before the first row
    const client = h2GrpcClient(port);
    const cpuUs = () => {
      const t = threadCpu(child.pid);
      return (t.main + t.others) / 1000;
    };
    try {
      const w = await warmUntilSteady(() => client.call('/inference.GRPCInferenceService/ModelInfer', frame), cpuUs, { concurrency: 16, minMs: Math.max(opts.warmupMs, STEADY_MIN_MS) });
      console.log(`${label.padEnd(28)} warm-up ${(w.ms / 1000).toFixed(1)} s at c=16, CPU/req per window (us): ${w.cpuUsPerRequest.join(', ')}`);
    } finally {
      client.close();
    }
    for (const c of opts.concurrency) {
      const r = await measure(child.pid, port, c, opts);
      rows.push({ label, c, ...r });
      console.log(`${label.padEnd(28)} c=${String(c).padEnd(3)} main ${r.mainUs.toFixed(1).padStart(6)} us/req  others ${r.othersUs.toFixed(1).padStart(6)} us/req  ${r.rps.toFixed(0).padStart(6)} req/s  p50 ${r.p50.toFixed(0).padStart(5)} us  p99 ${r.p99.toFixed(0).padStart(6)} us`);
    }
  } finally {
    child.removeAllListeners('exit');
    child.kill('SIGTERM');
    await new Promise((r) => (child.exitCode !== null || child.signalCode !== null ? r() : child.once('exit', r)));
  }
}

const opts = args(process.argv.slice(2));
const rows = [];
for (let round = 0; round < opts.rounds; round++) {
  for (const root of opts.roots) {
    await runTarget(`served ${root}`, () => startWorker(root), opts, rows);
    if (opts.echo) await runTarget(`echo door ${root}`, () => startEchoDoor(root), opts, rows);
  }
  if (opts.bare) await runTarget('bare grpc-js', startBare, opts, rows);
}
const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 === 1 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
console.log(`\nmedians over ${opts.rounds} rounds`);
const table = [];
for (const label of [...new Set(rows.map((r) => r.label))]) {
  for (const c of opts.concurrency) {
    const mine = rows.filter((r) => r.label === label && r.c === c);
    table.push({ target: label, c, 'main us/req': +median(mine.map((r) => r.mainUs)).toFixed(1), 'others us/req': +median(mine.map((r) => r.othersUs)).toFixed(1), 'req/s': Math.round(median(mine.map((r) => r.rps))), 'p50 us': Math.round(median(mine.map((r) => r.p50))), 'p99 us': Math.round(median(mine.map((r) => r.p99))) });
  }
}
console.table(table);
