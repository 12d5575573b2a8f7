/**
 * The planner's local connector (@switchyard/runtime) on a real local cluster (test/support/cluster.ts:
 * private etcd, NATS JetStream, Redis and one router process), starting real `switchyard worker`
 * processes serving mock_llm from its aggregated-pool template:
 *
 * 1. 0 → 2 replicas: both join and the router routes to both;
 * 2. 2 → 1 under traffic, with long streams in flight on the replica it drains (the newest), through
 *    the router and on the replica's own front door: the drained worker finishes its streams, exits 0
 *    by itself (no SIGKILL), and no request fails;
 * 3. the connector restarts on its state directory and adopts the survivor (same pid) instead of
 *    starting another; the survivor keeps serving.
 *
 * mock_llm runs slower here (speedup_ratio 2) so that a stream is still in flight when the drain starts.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import { createLocalConnector, type LocalConnector, type LocalConnectorOptions, type LocalReplica, type ReplicaExit } from '@switchyard/runtime';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startCluster, type Cluster } from './support/cluster.js';
import { metricsText, routingDecisions, total } from './lib/metrics.js';
import { SLOW_MOCK_CONFIG } from './lib/mock-llm.js';
import { waitFor } from './lib/wait-for.js';

const PROMPT = 'The planner adds a worker when the load rises and drains one when it falls. '.repeat(3);
const LONG_TOKENS = 100;

let cluster: Cluster;
let openai: OpenAI;
let stateDir: string;
let connector: LocalConnector | undefined;
const exits: Array<{ replica: LocalReplica; exit: ReplicaExit }> = [];
const startedPids = new Set<number>();

const metrics = (): Promise<string> => metricsText(cluster.router.metricsUrl);
const routedWorkers = async (): Promise<number> => total(await metrics(), 'switchyard_router_workers', 'model="mock_llm"');

function connectorOptions(): LocalConnectorOptions {
  const { etcd, nats, redis } = cluster;
  return {
    stateDir,
    pools: {
      aggregated: [
        `--model-repository=${cluster.repo.path}`,
        `--etcd=${etcd.url}`,
        `--nats=${nats.url}`,
        `--redis=${redis.url}`,
        `--namespace=${cluster.namespace}`,
        '--model-control-mode=explicit',
        '--load-model=mock_llm',
        '--http-address=127.0.0.1',
        '--grpc-address=127.0.0.1',
        '--metrics-address=127.0.0.1',
        '--http-port={http_port}',
        '--grpc-port={grpc_port}',
        '--metrics-port={metrics_port}',
        '--kv-transfer-port={kv_transfer_port}',
        '--kv-transfer-address=127.0.0.1',
      ],
    },
    pollIntervalMs: 200,
    drainTimeoutMs: 60_000,
    onExit: (replica, exit) => exits.push({ replica, exit }),
  };
}

/** The cluster instance id a replica logged when it joined (its log file is the worker's JSON log). */
function instanceIdOf(replica: LocalReplica): string | undefined {
  let text = '';
  try {
    text = readFileSync(replica.logFile, 'utf8');
  } catch {
    return undefined;
  }
  for (const line of text.split('\n')) {
    if (!line.startsWith('{')) continue;
    const l = JSON.parse(line) as { msg?: string; cluster?: { instanceId?: string } };
    if (l.msg === 'worker started' && typeof l.cluster?.instanceId === 'string') return l.cluster.instanceId;
  }
  return undefined;
}

async function chat(content: string, maxTokens: number, onChunk?: () => void, client: OpenAI = openai): Promise<number | undefined> {
  const stream = await client.chat.completions.create({ model: 'mock_llm', messages: [{ role: 'user', content }], max_tokens: maxTokens, temperature: 0, stream: true, stream_options: { include_usage: true } });
  let usage: number | undefined;
  for await (const chunk of stream) {
    if ((chunk.choices[0]?.delta.content ?? '') !== '') onChunk?.();
    if (chunk.usage) usage = chunk.usage.completion_tokens;
  }
  return usage;
}

/** `n` concurrent short completions; resolves with how many failed. */
async function burst(n: number, tag: string): Promise<number> {
  const results = await Promise.allSettled(
    Array.from({ length: n }, (_, i) => openai.chat.completions.create({ model: 'mock_llm', messages: [{ role: 'user', content: `${tag} ${i} ${PROMPT}` }], max_tokens: 4, temperature: 0 })),
  );
  return results.filter((r) => r.status === 'rejected' || r.value.usage?.completion_tokens !== 4).length;
}

beforeAll(async () => {
  cluster = await startCluster({ workers: [], files: { 'mock_llm/config.pbtxt': SLOW_MOCK_CONFIG } });
  openai = new OpenAI({ baseURL: `${cluster.router.httpUrl}/v1`, apiKey: 'unused', maxRetries: 0 });
  stateDir = mkdtempSync(join(tmpdir(), 'switchyard-local-connector-e2e-'));
});

afterAll(async () => {
  // drain what is left the ordinary way, then make sure nothing outlives the suite
  if (connector !== undefined) {
    await connector.scale('aggregated', 0).catch(() => {});
    await Promise.race([connector.drained(), new Promise((r) => setTimeout(r, 15_000))]);
    for (const r of connector.list()) startedPids.add(r.pid);
    await connector.close();
  }
  for (const pid of startedPids) {
    try {
      process.kill(-pid, 'SIGKILL');
    } catch {
      /* gone */
    }
  }
  await cluster?.stop();
  if (stateDir !== undefined) rmSync(stateDir, { recursive: true, force: true });
});

describe('local connector with real workers', () => {
  it('scales 0 → 2 → 1 with zero failed requests, the drained worker finishing its streams, then adopts the survivor after a restart', async () => {
    connector = await createLocalConnector(connectorOptions());
    expect(await connector.replicas()).toEqual({ aggregated: 0 });

    // 0 → 2
    await connector.scale('aggregated', 2);
    expect(await connector.replicas()).toEqual({ aggregated: 2 });
    for (const r of connector.list()) startedPids.add(r.pid);
    await waitFor(async () => (await routedWorkers().catch(() => 0)) === 2, { timeoutMs: 30_000, message: 'the router did not see both workers' });
    const [older, newer] = connector.list().sort((a, b) => a.startedAt - b.startedAt);
    const newerId = instanceIdOf(newer!)!;
    expect(newerId).toMatch(/^[0-9a-f]{16}$/);

    // traffic all along the drain
    let stop = false;
    let failed = 0;
    let done = 0;
    const traffic = (async () => {
      for (let round = 0; !stop; round++) {
        failed += await burst(3, `traffic-${round}`);
        done += 3;
      }
    })();

    // long streams in flight, at least one of them on the replica a drain picks (the newest)
    const m0 = await metrics();
    const long: Promise<number | undefined>[] = [];
    for (let i = 0; i < 8 && routingDecisions(await metrics(), newerId) === routingDecisions(m0, newerId); i++) {
      let first!: () => void;
      const started = new Promise<void>((r) => (first = r));
      long.push(chat(`long ${i} ${PROMPT}`, LONG_TOKENS, () => first()));
      await started;
    }
    expect(routingDecisions(await metrics(), newerId)).toBeGreaterThan(routingDecisions(m0, newerId));
    // and one on the replica's own OpenAI front door (its port from the template)
    const direct = new OpenAI({ baseURL: `http://127.0.0.1:${newer!.ports.http_port}/v1`, apiKey: 'unused', maxRetries: 0 });
    let directStarted!: () => void;
    const directFirst = new Promise<void>((r) => (directStarted = r));
    long.push(chat(`direct ${PROMPT}`, LONG_TOKENS, () => directStarted(), direct));
    await directFirst;

    // 2 → 1: a drain of the newest
    await connector.scale('aggregated', 1);
    expect(await connector.replicas()).toEqual({ aggregated: 1 });
    expect(connector.list().find((r) => r.id === newer!.id)?.state).toBe('draining');
    await connector.drained();
    expect(exits).toEqual([{ replica: expect.objectContaining({ id: newer!.id, pid: newer!.pid }), exit: { code: 0, signal: null, drained: true, killed: false } }]);
    for (const tokens of await Promise.all(long)) expect(tokens).toBe(LONG_TOKENS);
    // a drain is not a death: the streams finished on the draining worker, none migrated or was aborted.
    // A new request sent to the replica in the moment between its leaving NATS and the router seeing it
    // leave is answered "no responders" and goes to the other replica before any token (type
    // new_request): that is a retry, not a cut stream, and the traffic counts no failure for it
    const m1 = await metrics();
    const ongoing = 'type="ongoing_request"';
    expect(total(m1, 'switchyard_router_migrations_total', ongoing)).toBe(total(m0, 'switchyard_router_migrations_total', ongoing));
    expect(total(m1, 'switchyard_router_instance_removal_aborts_total')).toBe(total(m0, 'switchyard_router_instance_removal_aborts_total'));
    expect(await connector.replicas()).toEqual({ aggregated: 1 });
    const doneAtExit = done;
    await waitFor(async () => done >= doneAtExit + 6, { timeoutMs: 15_000, message: 'traffic stalled after the drain' });
    stop = true;
    await traffic;
    expect(failed).toBe(0);
    await waitFor(async () => (await routedWorkers()) === 1, { timeoutMs: 15_000, message: 'the router still lists the drained worker' });

    // restart: the survivor is adopted, not replaced
    await connector.close();
    connector = await createLocalConnector(connectorOptions());
    expect(await connector.replicas()).toEqual({ aggregated: 1 });
    expect(connector.list()).toEqual([expect.objectContaining({ id: older!.id, pid: older!.pid, adopted: true, state: 'serving' })]);
    await connector.scale('aggregated', 1); // already there: nothing started
    expect(connector.list().map((r) => r.pid)).toEqual([older!.pid]);
    expect(await burst(3, 'after-restart')).toBe(0);
    expect(await routedWorkers()).toBe(1);
  }, 90_000);
});
