#!/usr/bin/env node
// `npm run cluster`: a local Switchyard cluster in one command (run after `npm run build`).
//
//   etcd, NATS (JetStream) and Redis: the ones already listening on 2379 / 4222 / 6379 when they are
//   usable (etcd answers /health, NATS has JetStream, Redis answers PING), else private ones started
//   by the test harness (@switchyard/testing: missing Debian packages installed, free ports);
//   a router on 8080 (HTTP: OpenAI + KServe), 8081 (gRPC), 8082 (metrics);
//   worker 1 (mock_llm + tiny_llm + simple) on 8100-8102 and worker 2 (mock_llm + simple) on 8110-8112, both over
//   examples/model_repository.
//
// Logs (JSON lines) go to one file per process in a temporary folder, printed at start. Ctrl-C (or
// SIGTERM) drains in order: router, then workers, then the servers this script started.
//
//   node scripts/cluster.mjs [--namespace NS] [--router-mode kv|round-robin|random|least-loaded] [--private] [--disagg]
//
// --private: never reuse the servers on the standard ports; always start private ones.
// --disagg: disaggregated prefill/decode instead of the aggregated pair: a prefill worker
//   (--role=prefill) on 8100-8102 and a decode worker (--role=decode) on 8110-8112, both serving
//   mock_llm, tiny_llm and simple; each advertises a KV transfer server on a free loopback port. The
//   router sends a prompt to the prefill worker when the decode worker lacks at least
//   --disagg-min-remote-tokens of it (default 512; pass --disagg-min-remote-tokens N to change it).
import { spawn } from 'node:child_process';
import { createWriteStream, mkdtempSync } from 'node:fs';
import { createConnection } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { connect } from '@nats-io/transport-node';
import { startEtcd, startNats, startRedis } from '@switchyard/testing';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const args = process.argv.slice(2);
const flag = (name, fallback) => {
  const i = args.findIndex((a) => a === `--${name}` || a.startsWith(`--${name}=`));
  if (i === -1) return fallback;
  return args[i].includes('=') ? args[i].slice(args[i].indexOf('=') + 1) : args[i + 1];
};
const namespace = flag('namespace', 'default');
const routerMode = flag('router-mode', 'kv');
const privateInfra = args.includes('--private');
const disagg = args.includes('--disagg');
const minRemoteTokens = flag('disagg-min-remote-tokens', undefined);
const repository = join(root, 'examples/model_repository');
const logDir = mkdtempSync(join(tmpdir(), 'switchyard-cluster-'));

/** Processes and servers this script started, in start order. */
const children = [];
const servers = [];

// ---- infrastructure: reuse a usable local server, else start a private one -------------------------

async function etcdUsable(url) {
  try {
    const res = await fetch(`${url}/health`, { signal: AbortSignal.timeout(1000) });
    return res.ok && (await res.json()).health === 'true';
  } catch {
    return false;
  }
}

async function natsJetStreamUsable(url) {
  let nc;
  try {
    nc = await connect({ servers: url, timeout: 1000, reconnect: false });
    const reply = await nc.request('$JS.API.INFO', '', { timeout: 1000 });
    return reply.json().type === 'io.nats.jetstream.api.v1.account_info_response';
  } catch {
    return false; // not listening, or no JetStream (no responders / an error reply)
  } finally {
    await nc?.close().catch(() => {});
  }
}

function redisUsable(port) {
  return new Promise((resolve) => {
    const socket = createConnection({ host: '127.0.0.1', port });
    const done = (ok) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(1000, () => done(false));
    socket.on('error', () => done(false));
    socket.on('connect', () => socket.write('PING\r\n'));
    socket.on('data', (d) => done(d.toString().startsWith('+PONG')));
  });
}

async function infra(url, usable, start) {
  if (!privateInfra && (await usable())) return { url, reused: true };
  const server = await start();
  servers.push(server);
  return { url: server.url, reused: false };
}

// ---- app processes -------------------------------------------------------------------------------

/** Spawns `switchyard <app> ...` in its own process group; resolves when it logs `<app> started`. */
function startApp(name, app, appArgs) {
  const logFile = join(logDir, `${name}.log`);
  const log = createWriteStream(logFile);
  const child = spawn(process.execPath, [join(root, 'bin/switchyard.mjs'), app, ...appArgs], { cwd: root, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  const entry = { name, child, logFile, exited: new Promise((r) => child.once('exit', (code, signal) => r({ code, signal }))) };
  children.push(entry);
  child.stderr.pipe(log);
  return new Promise((resolve, reject) => {
    let partial = '';
    child.stdout.on('data', (chunk) => {
      log.write(chunk);
      partial += chunk.toString('utf8');
      let nl;
      while ((nl = partial.indexOf('\n')) !== -1) {
        const line = partial.slice(0, nl);
        partial = partial.slice(nl + 1);
        try {
          const msg = JSON.parse(line);
          if (msg.msg === `${app} started`) resolve(entry);
          if (msg.level >= 50) process.stderr.write(`[${name}] ${msg.msg}${msg.err ? `: ${msg.err.message}` : ''}\n`);
        } catch {
          /* not JSON */
        }
      }
    });
    void entry.exited.then(({ code, signal }) => reject(new Error(`${name} exited (${signal ?? `code ${code}`}) before it started; see ${logFile}`)));
  });
}

// ---- shutdown ------------------------------------------------------------------------------------

let stopping;
function stopAll(exitCode = 0) {
  stopping ??= (async () => {
    process.stdout.write('\nstopping: router, then workers, then the servers started here...\n');
    // Router first: it stops accepting and finishes its streams while the workers still serve them.
    for (const group of [children.filter((c) => c.name === 'router'), children.filter((c) => c.name !== 'router')]) {
      await Promise.all(
        group.map(async (c) => {
          if (c.child.exitCode === null && c.child.signalCode === null) c.child.kill('SIGTERM');
          const killer = setTimeout(() => c.child.kill('SIGKILL'), 35_000);
          await c.exited;
          clearTimeout(killer);
        }),
      );
    }
    await Promise.allSettled(servers.map((s) => s.stop()));
    process.stdout.write(`stopped. Logs kept in ${logDir}\n`);
    process.exit(exitCode);
  })();
  return stopping;
}
process.on('SIGINT', () => void stopAll(0));
process.on('SIGTERM', () => void stopAll(0));
process.on('exit', () => {
  for (const c of children) if (c.child.exitCode === null && c.child.signalCode === null) c.child.kill('SIGKILL');
});

// ---- start ---------------------------------------------------------------------------------------

try {
  process.stdout.write('starting etcd, NATS (JetStream) and Redis...\n');
  const [etcd, nats, redis] = await Promise.all([
    infra('http://127.0.0.1:2379', () => etcdUsable('http://127.0.0.1:2379'), () => startEtcd()),
    infra('nats://127.0.0.1:4222', () => natsJetStreamUsable('nats://127.0.0.1:4222'), () => startNats({ jetstream: true })),
    infra('redis://127.0.0.1:6379', () => redisUsable(6379), () => startRedis()),
  ]);
  const cluster = [`--etcd=${etcd.url}`, `--nats=${nats.url}`, `--redis=${redis.url}`, `--namespace=${namespace}`];
  const ports = (base) => [`--http-port=${base}`, `--grpc-port=${base + 1}`, `--metrics-port=${base + 2}`];
  const explicit = (...models) => ['--model-control-mode=explicit', ...models.map((m) => `--load-model=${m}`)];
  const routerArgs = [...cluster, ...ports(8080), `--router-mode=${routerMode}`, ...(minRemoteTokens !== undefined ? [`--disagg-min-remote-tokens=${minRemoteTokens}`] : [])];
  // disaggregated: both workers serve the same LLMs (the decode pool needs them too); KV moves over loopback
  const workers = disagg
    ? [
        { name: 'worker-1', base: 8100, models: ['mock_llm', 'tiny_llm', 'simple'], extra: ['--role=prefill', '--kv-transfer-address=127.0.0.1'], what: 'prefill' },
        { name: 'worker-2', base: 8110, models: ['mock_llm', 'tiny_llm', 'simple'], extra: ['--role=decode', '--kv-transfer-address=127.0.0.1'], what: 'decode' },
      ]
    : [
        { name: 'worker-1', base: 8100, models: ['mock_llm', 'tiny_llm', 'simple'], extra: [], what: 'aggregated' },
        { name: 'worker-2', base: 8110, models: ['mock_llm', 'simple'], extra: [], what: 'aggregated' },
      ];
  process.stdout.write(`starting the router and two workers${disagg ? ' (one prefill, one decode)' : ''}...\n`);
  await Promise.all([
    startApp('router', 'router', routerArgs),
    ...workers.map((w) => startApp(w.name, 'worker', [`--model-repository=${repository}`, ...cluster, ...ports(w.base), ...explicit(...w.models), ...w.extra])),
  ]);
  const where = (s) => `${s.url}${s.reused ? ' (already running, reused)' : ' (started here)'}`;
  const workerLines = workers
    .map((w) => `  ${w.name.padEnd(10)} ${w.what.padEnd(10)} ${w.models.join(', ').padEnd(26)} http :${w.base}  grpc :${w.base + 1}  metrics :${w.base + 2}`)
    .join('\n');
  process.stdout.write(`
Switchyard cluster up (namespace '${namespace}', router mode ${routerMode}${disagg ? ', disaggregated prefill/decode' : ''})

  etcd       ${where(etcd)}
  NATS       ${where(nats)}
  Redis      ${where(redis)}
  router     http://127.0.0.1:8080 (OpenAI /v1 + KServe v2)  grpc 127.0.0.1:8081  metrics http://127.0.0.1:8082/metrics
${workerLines}
  logs       ${logDir}/{router,worker-1,worker-2}.log

Try:
  curl -s localhost:8080/v1/models
  curl -s localhost:8080/v1/chat/completions -H 'content-type: application/json' \\
    -d '{"model":"mock_llm","messages":[{"role":"user","content":"Hello, cluster!"}],"max_tokens":16}'
  curl -s localhost:8082/metrics | grep switchyard_router_${disagg ? '\n  curl -s localhost:8112/metrics | grep switchyard_worker_kv_' : ''}

Ctrl-C stops everything started here.
`);
} catch (err) {
  process.stderr.write(`cluster failed to start: ${err instanceof Error ? err.message : String(err)}\n`);
  await stopAll(1);
}
