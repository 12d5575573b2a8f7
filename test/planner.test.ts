/**
 * The planner end to end (issue: "pools that grow and shrink with load, without failing a request"):
 * real etcd, NATS JetStream and Redis (test/support/cluster.ts), one router process, and two
 * `switchyard planner` processes in load mode with the local connector on one state directory,
 * starting real `switchyard worker` processes serving a slowed-down mock_llm from their template.
 *
 * 1. The leader starts the pool's first worker itself (0 → --min-replicas=1).
 * 2. Steady load through the router (openai SDK) fills it: the leader adds a second worker
 *    (kv_usage_high or queue_high), which the router then routes requests to.
 * 3. The load falls to a few long streams (one through the router, one on each worker's own door):
 *    the leader drains one worker; the streams running on it finish (full length, no migration, no
 *    abort), it exits 0 by itself, and no request fails.
 * 4. SIGKILL on the leader: the workers keep serving; the waiting planner takes over, adopts the
 *    survivor (no new worker) and keeps deciding.
 */
import { mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import { startAppProcess, type AppProcess } from '@switchyard/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startCluster, type Cluster } from './support/cluster.js';
import { metricsText, total } from './lib/metrics.js';
import { SLOW_MOCK_CONFIG } from './lib/mock-llm.js';
import { waitFor } from './lib/wait-for.js';

/** mock_llm at its simulated speed (speedup_ratio 1): ~20 ms a token, so a few streams load a worker visibly. */
const MOCK_CONFIG = SLOW_MOCK_CONFIG.replace('{ key: "speedup_ratio" value: { string_value: "2" } }', '{ key: "speedup_ratio" value: { string_value: "1" } }');
const INTERVAL_SECS = 2;
const TOKENS = 120;

let cluster: Cluster;
let openai: OpenAI;
let stateDir: string;
const planners: AppProcess[] = [];

type Log = Record<string, unknown>;
const logsOf = (p: AppProcess, msg: string): Log[] => p.logs().filter((l) => l.msg === msg);
const decisions = (p: AppProcess): Log[] => p.logs().filter((l) => l.event === 'planner_decision');
const routerMetrics = (): Promise<string> => metricsText(cluster.router.metricsUrl);

/** Router's routing decisions per worker instance (every model and mode). */
function routedByWorker(text: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of text.split('\n')) {
    const m = /^switchyard_router_routing_decisions_total\{[^}]*worker="([^"]+)"[^}]*\} (\S+)$/.exec(line);
    if (m !== null) out.set(m[1]!, (out.get(m[1]!) ?? 0) + Number(m[2]));
  }
  return out;
}

/** The instance id a replica's worker logged when it joined (its log file is under the state directory). */
function instanceIdOfReplica(replicaId: string): string | undefined {
  let text = '';
  try {
    text = readFileSync(join(stateDir, 'logs', `${replicaId}.log`), 'utf8');
  } catch {
    return undefined;
  }
  for (const line of text.split('\n')) {
    if (!line.startsWith('{')) continue;
    const l = JSON.parse(line) as Log;
    if (l.msg === 'worker joined the cluster' && typeof l.instanceId === 'string') return l.instanceId;
  }
  return undefined;
}

/** Every pid a planner started or recorded (for the final clean-up). */
function replicaPids(): Set<number> {
  const pids = new Set<number>();
  for (const p of planners) for (const l of logsOf(p, 'local connector: replica started')) pids.add(l.pid as number);
  try {
    for (const f of readdirSync(join(stateDir, 'replicas'))) {
      const pid = (JSON.parse(readFileSync(join(stateDir, 'replicas', f), 'utf8')) as { pid?: unknown }).pid;
      if (typeof pid === 'number') pids.add(pid);
    }
  } catch {
    /* no records */
  }
  return pids;
}

const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

async function startPlanner(): Promise<AppProcess> {
  const { etcd, nats, redis, repo, namespace } = cluster;
  const workerArgs = [
    `--model-repository='${repo.path}'`,
    `--redis=${redis.url}`,
    '--model-control-mode=explicit --load-model=mock_llm',
    '--http-address=127.0.0.1 --grpc-address=127.0.0.1 --metrics-address=127.0.0.1 --kv-transfer-address=127.0.0.1',
    '--http-port={http_port} --grpc-port={grpc_port} --metrics-port={metrics_port} --kv-transfer-port={kv_transfer_port}',
  ].join(' ');
  const p = await startAppProcess('planner', [
    `--etcd=${etcd.url}`,
    `--nats=${nats.url}`,
    `--namespace=${namespace}`,
    '--model=mock_llm',
    '--mode=load',
    `--adjustment-interval-secs=${INTERVAL_SECS}`,
    '--min-replicas=1',
    '--max-replicas=2',
    `--worker-args=${workerArgs}`,
    `--state-dir=${stateDir}`,
    '--drain-timeout-secs=60',
    '--leader-lease-ttl-secs=5', // a killed leader is replaced within 5 s; a shorter lease may not see its first keep-alive in time on a loaded machine
    '--metrics-port=0',
    '--metrics-address=127.0.0.1',
    '--log-verbose=1', // the drain choice's loads are debug lines
  ]);
  planners.push(p);
  return p;
}

/** One streamed completion; resolves with its completion tokens (throws on any failure). */
async function stream(content: string, maxTokens: number, onFirst?: () => void, client: OpenAI = openai): Promise<number> {
  const s = await client.chat.completions.create({ model: 'mock_llm', messages: [{ role: 'user', content }], max_tokens: maxTokens, temperature: 0, stream: true, stream_options: { include_usage: true } });
  let tokens = -1;
  let first = true;
  for await (const chunk of s) {
    if (first && (chunk.choices[0]?.delta.content ?? '') !== '') {
      first = false;
      onFirst?.();
    }
    if (chunk.usage) tokens = chunk.usage.completion_tokens;
  }
  return tokens;
}

/** Requests sent and failed (an error, or fewer tokens than asked: a cut stream) over the whole test. */
const outcome = { sent: 0, failed: 0, errors: [] as string[] };
async function counted(content: string, maxTokens: number, onFirst?: () => void): Promise<number> {
  outcome.sent++;
  try {
    const tokens = await stream(content, maxTokens, onFirst);
    if (tokens !== maxTokens) {
      outcome.failed++;
      outcome.errors.push(`${tokens} of ${maxTokens} tokens`);
    }
    return tokens;
  } catch (err) {
    outcome.failed++;
    outcome.errors.push(String(err));
    return -1;
  }
}

/** `n` loops of streamed requests until `stop()`; resolves when every loop has finished its last request. */
function load(n: number, tag: string): { stop: () => Promise<void> } {
  let stopped = false;
  const loops = Array.from({ length: n }, async (_, i) => {
    for (let round = 0; !stopped; round++) await counted(`${tag} ${i}.${round}: the planner sizes the pool from what the workers report.`, TOKENS);
  });
  return {
    stop: async () => {
      stopped = true;
      await Promise.all(loops);
    },
  };
}

beforeAll(async () => {
  cluster = await startCluster({ workers: [], files: { 'mock_llm/config.pbtxt': MOCK_CONFIG } });
  openai = new OpenAI({ baseURL: `${cluster.router.httpUrl}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 60_000 });
  stateDir = mkdtempSync(join(tmpdir(), 'switchyard-planner-e2e-'));
}, 120_000);

afterAll(async () => {
  await Promise.all(planners.map((p) => p.stop('SIGKILL')));
  for (const pid of replicaPids()) {
    try {
      process.kill(-pid, 'SIGKILL');
    } catch {
      /* gone */
    }
  }
  await cluster?.stop();
  if (stateDir !== undefined) rmSync(stateDir, { recursive: true, force: true });
});

describe('planner with the local connector on a real cluster', () => {
  it('adds a worker under load that the router uses, drains one when the load falls without failing a request, and survives its own death', async () => {
    // two planners on one namespace and state directory: a leads, b waits
    const a = await startPlanner();
    expect(logsOf(a, 'planner started')[0]).toMatchObject({ leading: true, connector: 'local', mode: 'load' });
    const b = await startPlanner();
    expect(logsOf(b, 'planner started')[0]).toMatchObject({ leading: false });

    // 1. the leader starts the first worker (below --min-replicas); the router serves through it
    await waitFor(async () => logsOf(a, 'local connector: replica started').length === 1, { timeoutMs: 20_000, message: 'the leader did not start a first worker' });
    expect(decisions(a).find((d) => d.direction === 'up')).toMatchObject({ pool: 'aggregated', from: 0, to: 1, reason: 'below_min' });
    await cluster.waitForModels(['mock_llm']);
    const firstReplica = logsOf(a, 'local connector: replica started')[0]!;
    const firstInstance = instanceIdOfReplica(firstReplica.id as string);
    expect(firstInstance).toMatch(/^[0-9a-f]{16}$/);

    // 2. steady load: 12 streams at once on a worker of 8 sequences and 64 KV blocks
    const heavy = load(12, 'heavy');
    await waitFor(async () => logsOf(a, 'local connector: replica started').length === 2, { timeoutMs: 45_000, message: 'the leader did not add a worker under load' });
    const up = decisions(a).find((d) => d.direction === 'up' && d.from === 1)!;
    expect(up).toMatchObject({ pool: 'aggregated', to: 2 });
    expect(['kv_usage_high', 'queue_high']).toContain(up.reason);
    const secondReplica = logsOf(a, 'local connector: replica started')[1]!;
    await waitFor(async () => instanceIdOfReplica(secondReplica.id as string) !== undefined, { timeoutMs: 45_000, message: 'the second worker did not join' });
    const secondInstance = instanceIdOfReplica(secondReplica.id as string)!;
    const routedAtJoin = routedByWorker(await routerMetrics()).get(secondInstance) ?? 0;
    await waitFor(async () => (routedByWorker(await routerMetrics()).get(secondInstance) ?? 0) >= routedAtJoin + 5, {
      timeoutMs: 30_000,
      message: 'the router did not route to the second worker',
    });

    // 3. the load falls to 3 long streams (at most 3 × 16 of the pool's 128 KV blocks): one through the
    // router, and one on each worker's own OpenAI door (its {http_port}), so that whichever worker the
    // leader drains has a stream of ours in flight whose worker we know. They start as soon as the
    // heavy loops stop starting requests (whenever the drain comes, long streams are running) and no
    // stream starts once the drain has (3 streams on the survivor could fill its 64 blocks and make
    // the leader add a worker again).
    const m0 = await routerMetrics();
    const heavyDone = heavy.stop();
    const draining = (): boolean => logsOf(a, 'local connector: draining replica (SIGTERM)').length > 0;
    const direct: { replica: string; started: number; ended: number; tokens: number; error?: string }[] = [];
    const light = [
      (async () => {
        for (let round = 0; !draining(); round++) await counted(`light ${round}: a few long streams leave the pool half idle.`, 2 * TOKENS);
      })(),
      ...[firstReplica, secondReplica].map(async (replica) => {
        const door = new OpenAI({ baseURL: `http://127.0.0.1:${(replica.ports as Record<string, number>).http_port}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 60_000 });
        for (let round = 0; !draining(); round++) {
          const started = Date.now();
          try {
            const tokens = await stream(`direct ${round}: the drained worker finishes what it holds.`, 2 * TOKENS, undefined, door);
            direct.push({ replica: replica.id as string, started, ended: Date.now(), tokens });
          } catch (err) {
            direct.push({ replica: replica.id as string, started, ended: Date.now(), tokens: -1, error: String(err) });
          }
        }
      }),
    ];
    await heavyDone;
    expect(outcome.failed, outcome.errors.join('\n')).toBe(0);
    await waitFor(async () => logsOf(a, 'local connector: replica drained and exited').length === 1, { timeoutMs: 45_000, message: 'the leader did not drain a worker' });
    const down = decisions(a).find((d) => d.direction === 'down')!;
    expect(down).toMatchObject({ pool: 'aggregated', from: 2, to: 1 });
    expect(['kv_usage_low', 'no_traffic']).toContain(down.reason);
    const drainLog = logsOf(a, 'local connector: draining replica (SIGTERM)')[0]!;
    // the drain choice knew each replica's load (its latest load sample, found by its KV transfer port)
    const choice = logsOf(a, 'planner: replica load for the drain choice');
    expect(new Set(choice.map((l) => l.replica))).toEqual(new Set([firstReplica.id, secondReplica.id]));
    for (const l of choice) expect(typeof l.load, JSON.stringify(choice)).toBe('number');
    const loadOf = (id: unknown): number => choice.find((l) => l.replica === id)!.load as number;
    const other = [firstReplica, secondReplica].find((r) => r.id !== drainLog.id)!;
    expect(loadOf(drainLog.id), JSON.stringify(choice)).toBeLessThanOrEqual(loadOf(other.id)); // the least loaded goes
    const exitLog = logsOf(a, 'local connector: replica drained and exited')[0]!;
    expect(exitLog).toMatchObject({ id: drainLog.id, code: 0, signal: null });
    await Promise.all(light);
    expect(outcome.failed, outcome.errors.join('\n')).toBe(0);
    // a stream was running on the drained worker when its drain began; every stream that started
    // before the drain finished in full (one that reached the drained worker's own door after the
    // drain began may be refused: the door is closing, as a draining worker's should)
    const drainedAt = drainLog.time as number;
    const report = JSON.stringify({ drainedAt, direct });
    expect(direct.filter((d) => d.replica === drainLog.id && d.started < drainedAt && d.ended > drainedAt).length, report).toBeGreaterThan(0);
    for (const d of direct.filter((x) => x.started < drainedAt || x.replica !== drainLog.id)) expect(d.tokens, report).toBe(2 * TOKENS);
    const m1 = await routerMetrics();
    expect(total(m1, 'switchyard_router_migrations_total')).toBe(total(m0, 'switchyard_router_migrations_total'));
    expect(total(m1, 'switchyard_router_instance_removal_aborts_total')).toBe(total(m0, 'switchyard_router_instance_removal_aborts_total'));
    const survivor = [firstReplica, secondReplica].find((r) => r.id !== drainLog.id)!;
    await waitFor(async () => total(await routerMetrics(), 'switchyard_router_workers', 'model="mock_llm"') === 1, { timeoutMs: 15_000, message: 'the router still lists the drained worker' });

    // 4. SIGKILL on the leader: the survivor keeps serving, b takes over, adopts it and decides
    const decidedByB = decisions(b).length;
    expect(decidedByB).toBe(0);
    await a.stop('SIGKILL');
    expect(alive(survivor.pid as number)).toBe(true);
    for (let i = 0; i < 3; i++) await counted(`after the planner died ${i}`, 8);
    expect(outcome.failed, outcome.errors.join('\n')).toBe(0);
    await waitFor(async () => logsOf(b, 'planner leading').length > 0, { timeoutMs: 20_000, message: 'b did not take over' });
    await waitFor(async () => decisions(b).length >= 2, { timeoutMs: 20_000, message: 'b did not decide' });
    expect(logsOf(b, 'local connector: replica adopted')).toEqual([expect.objectContaining({ id: survivor.id, pid: survivor.pid })]);
    expect(decisions(b)[0]).toMatchObject({ pool: 'aggregated', from: 1 });
    expect(logsOf(b, 'local connector: replica started')).toEqual([]);
    for (let i = 0; i < 3; i++) await counted(`after the take-over ${i}`, 8);
    expect(outcome.failed, outcome.errors.join('\n')).toBe(0);
    expect(alive(survivor.pid as number)).toBe(true);
  }, 240_000);
});
