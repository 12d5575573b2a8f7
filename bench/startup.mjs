#!/usr/bin/env node
// Worker start-up cost: wall time from spawn to the "worker started" line (every start-up model
// loaded, doors listening), CPU the process spent by then (all threads, from /proc/<pid>/stat), RSS
// then and its peak, and the CPU of the threads alive then by name (/proc/<pid>/task/*/stat).
//
//   node bench/startup.mjs [--runs N] [--repo NAME=PATH[,flag...]]... [--node-arg ARG]... [TREE...]
//
// TREEs are checkouts to compare (default: this one); runs alternate between them, one start of each
// tree per round, so a noisy machine hits them alike. Medians per tree and repository are printed.
// --node-arg passes a flag to each worker's Node.js (e.g. --cpu-prof).
// Repositories default to the example repository, the e2e fixtures (every model, --exit-on-error=false,
// as test/model-control.test.ts starts it) and the real-vocabulary LLM fixtures. Linux only (/proc).
import { spawn } from 'node:child_process';
import { readFileSync, readdirSync } from 'node:fs';
import { resolve, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { procMemory } from './lib/proc-memory.mjs';

const HERE = resolve(fileURLToPath(import.meta.url), '../..');
const TICK_S = 0.01; // USER_HZ 100
const PORTS = ['--http-port=0', '--grpc-port=0', '--metrics-port=0', '--http-address=127.0.0.1', '--grpc-address=127.0.0.1', '--metrics-address=127.0.0.1'];

function parseArgs(argv) {
  const out = { runs: 5, repos: [], trees: [], nodeArgs: [] };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--runs') out.runs = Number(argv[++i]);
    else if (a === '--repo') {
      const spec = argv[++i];
      const name = spec.slice(0, spec.indexOf('='));
      const rest = spec.slice(spec.indexOf('=') + 1);
      const [path, ...flags] = rest.split(',');
      out.repos.push({ name, path, flags });
    } else if (a === '--node-arg') out.nodeArgs.push(argv[++i]);
    else out.trees.push(resolve(a));
  }
  if (out.trees.length === 0) out.trees.push(HERE);
  if (out.repos.length === 0) {
    out.repos.push(
      { name: 'examples', path: 'examples/model_repository', flags: [] },
      { name: 'fixtures', path: 'test/fixtures/model_repository', flags: ['--exit-on-error=false'] },
      { name: 'real_vocab', path: 'test/fixtures/real_vocab_repository', flags: [] },
    );
  }
  return out;
}

/** utime + stime of a /proc stat line, in seconds (fields after the parenthesised comm). */
function statCpu(text) {
  const f = text.slice(text.lastIndexOf(')') + 2).split(' ');
  return (Number(f[11]) + Number(f[12])) * TICK_S;
}

function snapshot(pid) {
  const cpu = statCpu(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  const threads = new Map();
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      const comm = readFileSync(`/proc/${pid}/task/${tid}/comm`, 'utf8').trim();
      const c = statCpu(readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8'));
      const key = tid === String(pid) ? 'main' : comm;
      const t = threads.get(key) ?? { n: 0, cpu: 0 };
      t.n++;
      t.cpu += c;
      threads.set(key, t);
    } catch {
      // the thread ended meanwhile
    }
  }
  const memory = procMemory(pid);
  return { cpu, rssMb: memory?.rssMiB ?? NaN, hwmMb: memory?.peakMiB ?? NaN, threads };
}

function startOnce(tree, repo, nodeArgs) {
  return new Promise((done, fail) => {
    const t0 = process.hrtime.bigint();
    const child = spawn(process.execPath, [...nodeArgs, join(tree, 'bin/switchyard.mjs'), 'worker', `--model-repository=${join(tree, repo.path)}`, ...PORTS, ...repo.flags], {
      stdio: ['ignore', 'pipe', 'pipe'],
      cwd: tree,
    });
    let out = '';
    let result;
    const onData = (chunk) => {
      out += chunk;
      if (result === undefined && out.includes('worker started')) {
        const wall = Number(process.hrtime.bigint() - t0) / 1e9;
        result = { wall, ...snapshot(child.pid) };
        child.kill('SIGTERM');
      }
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
    child.on('exit', (code) => (result ? done(result) : fail(new Error(`worker exited (${code}) before it started:\n${out}`))));
  });
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};

const opts = parseArgs(process.argv.slice(2));
for (const repo of opts.repos) {
  const samples = opts.trees.map(() => []);
  for (let r = 0; r < opts.runs; r++) {
    for (let t = 0; t < opts.trees.length; t++) samples[t].push(await startOnce(opts.trees[t], repo, opts.nodeArgs));
  }
  console.log(`\n${repo.name} (${repo.path} ${repo.flags.join(' ')}), median of ${opts.runs}:`);
  console.log('tree'.padEnd(28) + 'wall s'.padStart(8) + 'cpu s'.padStart(8) + 'rss MB'.padStart(8) + 'peak MB'.padStart(9) + '  threads alive at ready (n × cpu s)');
  for (let t = 0; t < opts.trees.length; t++) {
    const s = samples[t];
    const names = new Set(s.flatMap((x) => [...x.threads.keys()]));
    const threads = [...names]
      .map((n) => ({ n, cpu: median(s.map((x) => x.threads.get(n)?.cpu ?? 0)), count: median(s.map((x) => x.threads.get(n)?.n ?? 0)) }))
      .filter((x) => x.cpu >= 0.02)
      .sort((a, b) => b.cpu - a.cpu)
      .map((x) => `${x.n} ${x.count}×${x.cpu.toFixed(2)}`)
      .join(', ');
    const name = opts.trees[t].length > 27 ? '…' + opts.trees[t].slice(-26) : opts.trees[t];
    console.log(
      name.padEnd(28) +
        median(s.map((x) => x.wall)).toFixed(2).padStart(8) +
        median(s.map((x) => x.cpu)).toFixed(2).padStart(8) +
        median(s.map((x) => x.rssMb)).toFixed(0).padStart(8) +
        median(s.map((x) => x.hwmMb)).toFixed(0).padStart(9) +
        '  ' +
        threads,
    );
  }
}
