// Router decision latency (issue 5): `selectAndReserve` with 64 workers over one million indexed
// blocks (--quick: 200,000), 128-block prompts, ~256 requests in flight, for the in-memory table and
// for the Redis table (a private redis-server from the test harness, round trip included). Each
// request's table calls are the router's (LlmWorkerChooser, RoutedLlmEndpoint): the decision awaited,
// then markPrefillDone (its first token) and, 256 decisions later, release, neither awaited. A
// program, not a test. Goal reported against (issue 15): Redis p99 incl. the round trip <= 500 us at
// 64 workers and 1M blocks (a --quick run measures 200,000 blocks: indicative only). The router's CPU
// per decision (process.cpuUsage around the call) is printed beside the latencies: unlike them, it
// barely moves when other processes load the machine. So are Redis's commands per decision (INFO
// commandstats over the measured decisions): script calls (round trips) and the commands they run.
// Beside the decision the bench times the floor: a bare round trip to the same redis-server (PING, and
// EVALSHA of `return 1`) on a connection of its own, one call at a time, right after each measured
// decision, so both see the same moments of noise; the decision's p99 minus the floor's is ours, the
// rest is the machine's round trip.
//
// Index: each worker holds a 32-block shared system prompt plus its own disjoint range; a prompt is
// the system prompt, a random run of one worker's range, then blocks nobody holds, so every decision
// walks a real overlap and scores every candidate.
//
//   node bench/routing-decision.mjs [--quick]      (after `npm run build`)
//
// Redis's own work per decision, which no other load on the machine moves: `--callgrind` runs a
// private redis-server under valgrind's callgrind (instrumentation off while the index loads and the
// first decisions warm up) and prints redis-server's instructions per decision, markPrefillDone and the release
// that keeps ~256 in flight included (64 workers, 100,000 blocks by default: loading 1M under valgrind
// takes minutes; --blocks N to change). Needs valgrind (callgrind_control) on PATH.
//
//   node bench/routing-decision.mjs --callgrind [--blocks 100000] [--decisions 500]
import { spawn, execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { MemoryRoutingTable } from '@switchyard/kv-router';
import { RedisRoutingTable } from '@switchyard/runtime';
import { startRedis } from '@switchyard/testing';
import { Redis } from 'ioredis';
import { mulberry32 } from '@switchyard/onnx-builder';

const BLOCK_SIZE = 16;
const SHARED = 32;
const h = (i) => i.toString(16).padStart(16, '0');
const pct = (sorted, p) => sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))];

async function measure(table, { workers, blocks, promptBlocks, decisions }, hooks = {}) {
  const ids = Array.from({ length: workers }, (_, w) => `instance${w}/model`);
  const perWorker = Math.floor((blocks - SHARED * workers) / workers);
  const t0 = performance.now();
  for (let w = 0; w < workers; w++) {
    const own = Array.from({ length: SHARED + perWorker }, (_, i) => h(i < SHARED ? i : 1_000_000 + w * perWorker + i));
    await table.replaceWorker(ids[w], { last_event_id: 0, partial_blocks: 0, blocks: own.map((b) => ({ block_hash: b, tokens_hash: b, parent_hash: null })) });
  }
  const loadSec = (performance.now() - t0) / 1000;
  const rng = mulberry32(3);
  const prompt = (n) => {
    const w = n % workers;
    const run = Math.floor(rng() * (promptBlocks - SHARED));
    const start = Math.floor(rng() * (perWorker - run));
    const out = [];
    for (let i = 0; i < promptBlocks; i++) {
      if (i < SHARED) out.push(h(i));
      else if (i < SHARED + run) out.push(h(1_000_000 + w * perWorker + SHARED + start + (i - SHARED)));
      else out.push(h(900_000_000 + n * promptBlocks + i));
    }
    return out;
  };
  const warmup = Math.min(500, decisions);
  const lat = [];
  let cpuUs = 0;
  const live = [];
  const failed = (e) => console.error(`routing table call failed: ${e.message}`);
  for (let n = 0; n < decisions + warmup; n++) {
    if (n === warmup) await hooks.measuring?.();
    const blockHashes = prompt(n);
    const c = process.cpuUsage();
    const t = performance.now();
    await table.selectAndReserve({ requestId: `req${n}`, blockHashes, promptTokens: promptBlocks * BLOCK_SIZE + 5, blockSize: BLOCK_SIZE, candidates: ids, overlapWeight: 1, temperature: 0, random: rng(), now: Date.now() });
    if (n >= warmup) {
      lat.push(performance.now() - t);
      const used = process.cpuUsage(c);
      cpuUs += used.user + used.system;
      // before this decision's settlements are queued: nothing waits to ride on the next decision meanwhile
      await hooks.between?.();
    }
    void table.markPrefillDone(`req${n}`).catch(failed);
    live.push(`req${n}`);
    if (live.length > 256) void table.release(live.shift()).catch(failed);
  }
  // what the last decisions queued is applied before the figures are read
  await new Promise((r) => setTimeout(r, 20));
  const extra = (await hooks.done?.()) ?? {};
  return { workers, blocks: perWorker * workers + SHARED * workers, promptBlocks, decisions, loadSec: +loadSec.toFixed(1), ...latencies(lat), cpu_us: Math.round(cpuUs / decisions), ...extra };
}

/** p50 / p90 / p99 / max (us) of latencies in ms. */
function latencies(ms) {
  const lat = [...ms].sort((a, b) => a - b);
  const us = (x) => Math.round(x * 1000);
  return { p50_us: us(pct(lat, 0.5)), p90_us: us(pct(lat, 0.9)), p99_us: us(pct(lat, 0.99)), max_us: us(lat[lat.length - 1]) };
}

export async function measureDecisions({ quick = false } = {}) {
  const shape = { workers: 64, blocks: quick ? 200_000 : 1_000_000, promptBlocks: 128, decisions: quick ? 1000 : 5000 };
  console.log(`\nRouter decision latency: ${shape.workers} workers, ${shape.blocks} indexed blocks, ${shape.promptBlocks}-block prompts, ~256 in flight`);
  const results = { shape };
  // Redis first: the in-memory table's ~300 MB index would otherwise make every GC pause during the
  // Redis run land on the decisions being timed.
  const server = await startRedis();
  const admin = new Redis(server.url);
  // The floor: bare round trips to the same redis-server on a connection of their own, one at a time,
  // taken between the decisions (after each, untimed for it) so both see the same moments of noise.
  const bare = new Redis(server.url, { enableOfflineQueue: false });
  bare.defineCommand('floorScript', { numberOfKeys: 1, lua: 'return 1' });
  const floor = { ping: [], evalsha: [], pingCpuUs: 0, evalshaCpuUs: 0 };
  try {
    const table = await RedisRoutingTable.connect({ url: server.url, namespace: 'bench' });
    try {
      let before;
      results.redis = await measure(table, shape, {
        measuring: async () => {
          await bare.floorScript('{sy:bench}:floor'); // loaded (EVALSHA from now on)
          before = await commandCounts(admin);
        },
        between: async () => {
          let c = process.cpuUsage();
          let t = performance.now();
          await bare.ping();
          floor.ping.push(performance.now() - t);
          let used = process.cpuUsage(c);
          floor.pingCpuUs += used.user + used.system;
          c = process.cpuUsage();
          t = performance.now();
          await bare.floorScript('{sy:bench}:floor');
          floor.evalsha.push(performance.now() - t);
          used = process.cpuUsage(c);
          floor.evalshaCpuUs += used.user + used.system;
        },
        done: async () => {
          const after = await commandCounts(admin);
          // the floor's calls are not the decisions': one PING and one script call each
          const scripts = after.scripts - before.scripts - floor.evalsha.length;
          const commands = after.commands - before.commands - floor.ping.length;
          return { scripts_per_decision: +(scripts / shape.decisions).toFixed(2), commands_per_decision: +(commands / shape.decisions).toFixed(1) };
        },
      });
    } finally {
      await table.close();
    }
  } finally {
    bare.disconnect();
    admin.disconnect();
    await server.stop();
  }
  const n = floor.ping.length;
  results.floor = { ping: { ...latencies(floor.ping), cpu_us: Math.round(floor.pingCpuUs / n) }, evalsha: { ...latencies(floor.evalsha), cpu_us: Math.round(floor.evalshaCpuUs / n) } };
  results.memory = await measure(new MemoryRoutingTable(), shape);
  const row = (table, r) => ({ table, 'index load s': r.loadSec ?? '', 'p50 us': r.p50_us, 'p90 us': r.p90_us, 'p99 us': r.p99_us, 'max us': r.max_us, 'router cpu us': r.cpu_us ?? '' });
  console.table([row('memory', results.memory), row('redis', results.redis), row('floor: PING', results.floor.ping), row("floor: EVALSHA 'return 1'", results.floor.evalsha)]);
  console.log(`  Redis per decision: ${results.redis.scripts_per_decision} script calls (round trips), running ${results.redis.commands_per_decision} commands`);
  console.log(
    `  Floor (a bare round trip to the same redis-server, one at a time, between the decisions): p99 PING ${results.floor.ping.p99_us} us, EVALSHA ${results.floor.evalsha.p99_us} us; ` +
      `the decision's p99 is ${results.redis.p99_us - results.floor.evalsha.p99_us} us above the EVALSHA floor (p50: ${results.redis.p50_us - results.floor.evalsha.p50_us} us)`,
  );
  const note = shape.blocks === 1_000_000 ? '' : ` (measured at ${shape.blocks} blocks, the goal is at 1M)`;
  results.goal = { [`Redis p99 us incl. round trip, 64 workers, 1M blocks (goal <= 500)${note}`]: results.redis.p99_us };
  console.log(`  Redis p99 incl. round trip, 64 workers, 1M blocks (goal <= 500 us)${note}: ${results.redis.p99_us} us`);
  return results;
}

/** Redis's commands so far (INFO commandstats): script calls, and every other command (those scripts run included). */
async function commandCounts(admin) {
  const text = await admin.info('commandstats');
  let scripts = 0;
  let commands = 0;
  for (const m of text.matchAll(/^cmdstat_([a-z|_-]+):calls=(\d+)/gm)) {
    if (m[1] === 'info') continue;
    if (m[1] === 'evalsha' || m[1] === 'eval') scripts += Number(m[2]);
    else commands += Number(m[2]);
  }
  return { scripts, commands };
}

const freePort = () =>
  new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });

/** redis-server instructions (callgrind Ir) per decision (selectAndReserve + markPrefillDone + release), 64 workers. */
export async function measureRedisInstructions({ blocks = 100_000, decisions = 500 } = {}) {
  const shape = { workers: 64, blocks, promptBlocks: 128, decisions };
  const dir = mkdtempSync(join(tmpdir(), 'routing-callgrind-'));
  const port = await freePort();
  const out = join(dir, 'callgrind.out');
  const child = spawn('valgrind', ['--tool=callgrind', '--instr-atstart=no', `--callgrind-out-file=${out}`, 'redis-server', '--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir, '--logfile', ''], { stdio: 'ignore' });
  const exited = new Promise((resolve) => child.once('exit', resolve));
  try {
    let table;
    for (let i = 0; !table; i++) {
      try {
        table = await RedisRoutingTable.connect({ url: `redis://127.0.0.1:${port}`, namespace: 'bench', connectTimeoutMs: 1000 });
      } catch (e) {
        if (i >= 60 || child.exitCode !== null) throw new Error(`redis-server under valgrind did not start (is valgrind installed?): ${e.message}`);
        await new Promise((r) => setTimeout(r, 500));
      }
    }
    const control = (...flags) => execFileSync('callgrind_control', [...flags, String(child.pid)], { stdio: 'ignore' });
    let result;
    try {
      // the router's CPU under valgrind's slow Redis is not the router's normal figure: not printed
      result = await measure(table, shape, { measuring: () => control('-i', 'on'), done: () => {
        control('-i', 'off');
        control('-d');
      } });
    } finally {
      await table.close();
    }
    child.kill('SIGTERM');
    await exited;
    let ir = 0;
    for (const f of readdirSync(dir).filter((f) => f.startsWith('callgrind.out'))) {
      const m = /^totals: (\d+)/m.exec(readFileSync(join(dir, f), 'utf8'));
      if (m) ir += Number(m[1]);
    }
    const perDecision = Math.round(ir / decisions);
    console.log(`\nRedis instructions per decision (callgrind; selectAndReserve + markPrefillDone + release): ${shape.workers} workers, ${result.blocks} indexed blocks, ${shape.promptBlocks}-block prompts, ${decisions} decisions: ${perDecision}`);
    return { shape, redisInstructionsPerDecision: perDecision };
  } finally {
    if (child.exitCode === null) child.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const arg = (name, dflt) => {
    const i = process.argv.indexOf(name);
    return i < 0 ? dflt : Number(process.argv[i + 1]);
  };
  if (process.argv.includes('--callgrind')) {
    await measureRedisInstructions({ blocks: arg('--blocks', 100_000), decisions: arg('--decisions', 500) });
  } else {
    await measureDecisions({ quick: process.argv.includes('--quick') });
  }
}
