import { silentLogger } from '@switchyard/common';
import { MemoryConnector, MemoryObservationSource, type IntervalFigures } from '@switchyard/planner';
import { MemoryElectionStore } from '@switchyard/runtime';
import { afterEach, describe, expect, it } from 'vitest';
import { parseCommandLineOptions } from './options.js';
import { startPlanner, type RunningPlanner } from './planner.js';

const busy: IntervalFigures = {
  pools: { aggregated: { replicas: 1, load: [{ instanceId: 'w', ts: 0, numRunning: 8, numWaiting: 0, kvActiveBlocks: 95, kvTotalBlocks: 100, kvUsage: 0.95, prefixCacheQueries: 0, prefixCacheHits: 0 }] } },
  requests: { requests: 50 },
};

async function waitFor(what: string, cond: () => boolean, ms = 10_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for: ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe('startPlanner (memory parts)', () => {
  const running: RunningPlanner[] = [];
  afterEach(async () => {
    await Promise.all(running.splice(0).map((p) => p.close()));
  });

  it('the leader acts every interval and serves its metrics; closing it hands over, and nothing acts after close', async () => {
    const options = parseCommandLineOptions(['--etcd=http://127.0.0.1:2379', '--nats=nats://127.0.0.1:4222', '--model=m', '--connector=memory', '--adjustment-interval-secs=1', '--metrics-port=0', '--metrics-address=127.0.0.1']);
    const store = new MemoryElectionStore();
    const start = async (id: string) => {
      const source = new MemoryObservationSource();
      const connector = new MemoryConnector({ aggregated: 1 });
      const p = await startPlanner({ ...options, config: options.config! }, silentLogger, { election: store.campaign('default', 'planner', id), source, connector });
      running.push(p);
      return { p, source, connector };
    };
    const a = await start('a');
    const b = await start('b');
    for (const x of [a, b]) for (let i = 0; i < 10; i++) x.source.push(busy);
    await waitFor('a scales up', () => a.connector.calls.length >= 1);
    expect(a.connector.calls[0]).toEqual({ pool: 'aggregated', target: 2 });
    const scrape = async (p: RunningPlanner): Promise<string> => (await fetch(`http://127.0.0.1:${p.ports.metrics}/metrics`)).text();
    expect(await scrape(a.p)).toContain('switchyard_planner_replicas{kind="desired",pool="aggregated"} 2');
    expect(await scrape(b.p)).toContain('switchyard_planner_leader 0');

    await a.p.close();
    await a.p.close();
    const callsAtClose = a.connector.calls.length;
    await waitFor('b scales up', () => b.connector.calls.length >= 1);
    expect(store.holder('default', 'planner')).toBe('b');
    expect(await scrape(b.p)).toContain('switchyard_planner_leader 1');
    await new Promise((r) => setTimeout(r, 1_200));
    expect(a.connector.calls.length).toBe(callsAtClose);
    await expect(fetch(`http://127.0.0.1:${a.p.ports.metrics}/metrics`)).rejects.toThrow();
  });
});
