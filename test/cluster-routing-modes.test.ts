/**
 * Routing modes a user picks or falls into, end to end (test/support/cluster.ts: private etcd, NATS,
 * Redis; worker and router processes; the official `openai` SDK):
 *
 * - workers started with `--kv-events=false` publish no KV events: a `kv` router routes their model in
 *   approximate mode — loudly (a warning in its log, `switchyard_router_approximate_mode{model} 1`) —
 *   and still sends a repeated prompt to the worker it chose before, which serves it from its cache;
 * - a second router replica with `--router-mode=round-robin` alternates the same prompt between
 *   the workers, whatever they cache.
 */
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startCluster, type Cluster } from './support/cluster.js';
import { metricsText } from './lib/metrics.js';
import { get } from './lib/tensors.js';
import { waitFor } from './lib/wait-for.js';

let cluster: Cluster;
const PROMPT = 'Approximate routing remembers where it sent a prompt and sends its repeats there. '.repeat(4);
const NO_EVENTS = ['--model-control-mode=explicit', '--load-model=mock_llm', '--kv-events=false'];

/** Every sample of `name` whose labels contain each of `labels`, as label text → value. */
function samples(text: string, name: string, ...labels: string[]): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of text.split('\n')) {
    const m = /^([a-zA-Z_:]+)(\{[^}]*\})? (\S+)$/.exec(line);
    if (m?.[1] === name && labels.every((l) => (m[2] ?? '').includes(l))) out.set(m[2] ?? '', Number(m[3]));
  }
  return out;
}
const client = (httpUrl: string) => new OpenAI({ baseURL: `${httpUrl}/v1`, apiKey: 'unused', maxRetries: 0 });
const ask = (c: OpenAI) => c.chat.completions.create({ model: 'mock_llm', messages: [{ role: 'user', content: PROMPT }], max_tokens: 4, temperature: 0 });
/** Routing decisions of `mode` per worker instance. */
async function decisions(metricsUrl: string, mode: string): Promise<number[]> {
  return [...samples(await metricsText(metricsUrl), 'switchyard_router_routing_decisions_total', `mode="${mode}"`, 'model="mock_llm"').values()];
}

beforeAll(async () => {
  cluster = await startCluster({ workers: [NO_EVENTS, NO_EVENTS], waitForModels: ['mock_llm'] });
  await waitFor(async () => samples(await metricsText(cluster.router.metricsUrl), 'switchyard_router_workers', 'model="mock_llm"').get('{model="mock_llm"}') === 2, {
    timeoutMs: 20_000,
    message: 'router did not see both workers',
  });
}, 90_000);

afterAll(async () => {
  await cluster?.stop();
});

describe('routing modes', () => {
  it('workers without KV events: approximate mode, announced, and repeats still land on the cached worker', async () => {
    const openai = client(cluster.router.httpUrl);
    const first = await ask(openai);
    expect(first.usage?.prompt_tokens_details?.cached_tokens ?? 0).toBe(0);
    const again = [await ask(openai), await ask(openai), await ask(openai)];
    for (const r of again) expect(r.usage?.prompt_tokens_details?.cached_tokens).toBeGreaterThan(0);
    const text = await metricsText(cluster.router.metricsUrl);
    expect(samples(text, 'switchyard_router_approximate_mode', 'model="mock_llm"').get('{model="mock_llm"}')).toBe(1);
    // all four went to one worker
    expect((await decisions(cluster.router.metricsUrl, 'kv')).sort()).toEqual([4]);
    expect(samples(text, 'switchyard_router_kv_events_applied_total').get('')).toBe(0);
    expect(cluster.router.logs().some((l) => l.level === 40 && String(l.msg).includes('APPROXIMATE'))).toBe(true);
  });

  it('a round-robin replica alternates a prompt between the workers', async () => {
    const rr = await cluster.addRouter(['--router-mode=round-robin']);
    await cluster.waitForModels(['mock_llm'], rr);
    await waitFor(async () => samples(await metricsText(rr.metricsUrl), 'switchyard_router_workers', 'model="mock_llm"').get('{model="mock_llm"}') === 2, {
      timeoutMs: 20_000,
      message: 'the round-robin router did not see both workers',
    });
    const openai = client(rr.httpUrl);
    for (let i = 0; i < 4; i++) await ask(openai);
    expect(await decisions(rr.metricsUrl, 'round-robin')).toEqual([2, 2]);
  });
});
