import { Writable } from 'node:stream';
import { createLogger } from '@switchyard/cli';
import { unavailable } from '@switchyard/common';
import { MemoryConnector, MemoryObservationSource, compilePlannerConfig, type Connector, type IntervalFigures, type LoadSample, type Pool } from '@switchyard/planner';
import { MemoryElectionStore, type MemoryLeaderElection } from '@switchyard/runtime';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { PlannerLoop, leaderStartState, runEvery, withReplicas, type PlannerLoopOptions } from './planner-loop.js';
import { renderPlannerMetrics } from './planner-metrics.js';

const config = compilePlannerConfig({ mode: 'load' });

function sample(instanceId: string, kvUsage: number, numWaiting = 0): LoadSample {
  return { instanceId, ts: 0, numRunning: 4, numWaiting, kvActiveBlocks: Math.round(kvUsage * 100), kvTotalBlocks: 100, kvUsage, prefixCacheQueries: 0, prefixCacheHits: 0 };
}
/** One interval in which every aggregated worker reports `kvUsage`. */
const busy = (kvUsage: number, workers = 1): IntervalFigures => ({
  pools: { aggregated: { replicas: workers, load: Array.from({ length: workers }, (_, i) => sample(`w${i}`, kvUsage)) } },
  requests: { requests: 100 },
});

/** The app's JSON logger writing into an array of parsed lines. */
function jsonLogs(): { logger: ReturnType<typeof createLogger>; lines: Record<string, unknown>[] } {
  const lines: Record<string, unknown>[] = [];
  let buffered = '';
  const destination = new Writable({
    write(chunk: Buffer, _enc, cb) {
      buffered += chunk.toString();
      let nl: number;
      while ((nl = buffered.indexOf('\n')) !== -1) {
        lines.push(JSON.parse(buffered.slice(0, nl)) as Record<string, unknown>);
        buffered = buffered.slice(nl + 1);
      }
      cb();
    },
  });
  return { logger: createLogger({ verbose: 0, format: 'default', destination }), lines };
}
const flushLogs = (): Promise<void> => new Promise((r) => setImmediate(r));

interface Rig {
  loop: PlannerLoop;
  source: MemoryObservationSource;
  connector: MemoryConnector;
  election: MemoryLeaderElection;
  lines: Record<string, unknown>[];
}

function rig(
  options: { store?: MemoryElectionStore; connector?: Connector; initial?: Partial<Record<Pool, number>>; dryRun?: boolean; id?: string; onDecision?: PlannerLoopOptions['onDecision'] } = {},
): Rig {
  const store = options.store ?? new MemoryElectionStore();
  const election = store.campaign('ns', 'planner', options.id);
  const source = new MemoryObservationSource(() => Date.now());
  const connector = new MemoryConnector(options.initial ?? { aggregated: 1 });
  const { logger, lines } = jsonLogs();
  const o: PlannerLoopOptions = {
    config,
    source,
    connector: options.connector ?? connector,
    leadership: election,
    dryRun: options.dryRun ?? false,
    connectorTimeoutMs: 1_000,
    logger,
    ...(options.onDecision === undefined ? {} : { onDecision: options.onDecision }),
  };
  return { loop: new PlannerLoop(o), source, connector, election, lines };
}

describe('PlannerLoop', () => {
  beforeEach(() => {
    vi.useFakeTimers({ now: 1_000_000, toFake: ['setTimeout', 'clearTimeout', 'Date'] });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('decides and acts while leading, logging each decision as one JSON line with inputs and reason', async () => {
    const r = rig();
    vi.advanceTimersByTime(30_000);
    r.source.push(busy(0.95));
    expect(await r.loop.tick()).toMatchObject({ kind: 'decided', acted: ['aggregated'] });
    expect(r.connector.calls).toEqual([{ pool: 'aggregated', target: 2 }]);
    await flushLogs();
    const decisions = r.lines.filter((l) => l.event === 'planner_decision');
    expect(decisions).toHaveLength(1);
    expect(decisions[0]).toMatchObject({
      msg: 'planner decision',
      interval: 0,
      mode: 'load',
      dryRun: false,
      pool: 'aggregated',
      from: 1,
      to: 2,
      direction: 'up',
      reason: 'kv_usage_high',
      intervalSec: 30,
      inputs: { replicas: 1, reporting: 1, kvUsage: 0.95, requests: 100 },
    });
    const s = r.loop.stats();
    expect(s.replicas).toEqual({ aggregated: { desired: 2, actual: 1 } });
    expect(s.decisions).toEqual([{ pool: 'aggregated', direction: 'up', reason: 'kv_usage_high', count: 1 }]);
    expect(s.intervals).toEqual({ decided: 1, following: 0, skipped: 0 });
    expect(s.leading).toBe(true);
  });

  it('hands every decision of a leading interval to onDecision (the event plane), before acting; none while following', async () => {
    const store = new MemoryElectionStore();
    const seen: { pool: string; from: number; to: number; direction: string; reason: string; scaledBefore: number }[] = [];
    const leader = rig({ store, onDecision: (d) => seen.push({ ...d, scaledBefore: leader.connector.calls.length }) });
    const follower = rig({ store, onDecision: (d) => seen.push({ ...d, scaledBefore: -1 }) });
    vi.advanceTimersByTime(30_000);
    leader.source.push(busy(0.95));
    follower.source.push(busy(0.95));
    await leader.loop.tick();
    expect(await follower.loop.tick()).toEqual({ kind: 'following' });
    expect(seen.map(({ pool, from, to, direction, reason, scaledBefore }) => ({ pool, from, to, direction, reason, scaledBefore }))).toEqual([
      { pool: 'aggregated', from: 1, to: 2, direction: 'up', reason: 'kv_usage_high', scaledBefore: 0 },
    ]);
  });

  it('keeps its state across intervals: the next scale-up starts from the connector count and counts the interval', async () => {
    const r = rig();
    r.source.push(busy(0.95));
    r.source.push(busy(0.95, 2));
    await r.loop.tick();
    await r.loop.tick();
    expect(r.connector.calls).toEqual([
      { pool: 'aggregated', target: 2 },
      { pool: 'aggregated', target: 3 },
    ]);
    await flushLogs();
    expect(r.lines.filter((l) => l.event === 'planner_decision').map((l) => l.interval)).toEqual([0, 1]);
    expect(r.loop.stats().decisions).toEqual([{ pool: 'aggregated', direction: 'up', reason: 'kv_usage_high', count: 2 }]);
  });

  it('in dry-run decides, logs and exports, but never calls scale', async () => {
    const r = rig({ dryRun: true });
    r.source.push(busy(0.95));
    expect(await r.loop.tick()).toMatchObject({ kind: 'decided', acted: [] });
    expect(r.connector.calls).toEqual([]);
    expect(await r.connector.replicas()).toEqual({ aggregated: 1 });
    await flushLogs();
    expect(r.lines.find((l) => l.event === 'planner_decision')).toMatchObject({ dryRun: true, from: 1, to: 2, reason: 'kv_usage_high' });
    expect(r.loop.stats().replicas).toEqual({ aggregated: { desired: 2, actual: 1 } });
  });

  it('a follower collects every interval but never decides or touches the connector', async () => {
    const store = new MemoryElectionStore();
    const leader = rig({ store, id: 'a' });
    const follower = rig({ store, id: 'b' });
    vi.advanceTimersByTime(5_000);
    follower.source.push(busy(0.95));
    follower.source.push(busy(0.97));
    expect(await follower.loop.tick()).toEqual({ kind: 'following' });
    expect(follower.connector.calls).toEqual([]);
    // the follower's source was drained by that interval: its next one starts now
    vi.advanceTimersByTime(5_000);
    await leader.election.close();
    expect(follower.election.isLeader()).toBe(true);
    expect(await follower.loop.tick()).toMatchObject({ kind: 'decided' });
    await flushLogs();
    expect(follower.lines.find((l) => l.event === 'planner_decision')).toMatchObject({ intervalSec: 5, reason: 'kv_usage_high' });
    expect(follower.loop.stats().intervals).toEqual({ decided: 1, following: 1, skipped: 0 });
    expect(renderPlannerMetrics(leader.loop.stats())).toContain('switchyard_planner_leader 0');
    expect(renderPlannerMetrics(follower.loop.stats())).toContain('switchyard_planner_leader 1');
  });

  it('a planner that gains leadership (again) starts afresh, holding scale-downs for the cooldown', async () => {
    const store = new MemoryElectionStore();
    const a = rig({ store, id: 'a', initial: { aggregated: 3 } });
    const b = rig({ store, id: 'b', initial: { aggregated: 3 } });
    const idle = (): IntervalFigures => ({ pools: { aggregated: { replicas: 3, load: [sample('w0', 0.1), sample('w1', 0.1), sample('w2', 0.1)] } }, requests: { requests: 10 } });
    const cooldown = config.loadRules.decodeScaleDownCooldownIntervals;
    const reasonsOf = async (r: Rig, intervals: number): Promise<unknown[]> => {
      const reasons: unknown[] = [];
      for (let i = 0; i < intervals; i++) {
        r.source.push(idle());
        const out = await r.loop.tick();
        reasons.push(out.kind === 'decided' ? out.decisions[0]!.reason : out.kind);
      }
      return reasons;
    };
    const held = Array<string>(cooldown).fill('scale_up_cooldown');
    // a leads: held for the cooldown, then scales down
    expect(await reasonsOf(a, cooldown + 1)).toEqual([...held, 'kv_usage_low']);
    expect(await reasonsOf(b, 1)).toEqual(['following']);
    // a loses its lease: b takes over and holds likewise
    a.election.expireLease();
    expect(await reasonsOf(b, 1)).toEqual(['scale_up_cooldown']);
    expect(a.loop.stats().replicas).toEqual({ aggregated: { desired: 2, actual: 3 } });
    expect(await reasonsOf(a, 1)).toEqual(['following']);
    expect(a.loop.stats().replicas).toEqual({}); // a follower exports no pool gauges
    // b goes: a leads again and starts afresh instead of going on from its old state
    await b.election.close();
    expect(await reasonsOf(a, cooldown + 1)).toEqual([...held, 'kv_usage_low']);
    expect(a.connector.calls).toEqual([
      { pool: 'aggregated', target: 2 },
      { pool: 'aggregated', target: 1 },
    ]);
    expect(b.connector.calls).toEqual([]);
    expect(leaderStartState().lastScaleUp).toEqual({ decode: -1, aggregated: -1 });
  });

  it('a failing connector call is logged and counted, and the next interval tries again', async () => {
    const connector = new MemoryConnector({ aggregated: 1, decode: 1 });
    let failReplicas = true;
    const failScale = new Set<Pool>(['aggregated']);
    const flaky: Connector = {
      replicas: () => (failReplicas ? Promise.reject(unavailable('backend down')) : connector.replicas()),
      scale: (pool, target) => (failScale.has(pool) ? Promise.reject(unavailable(`cannot scale ${pool}`)) : connector.scale(pool, target)),
      close: () => connector.close(),
    };
    const r = rig({ connector: flaky });
    const both = (): IntervalFigures => ({
      pools: { aggregated: { replicas: 1, load: [sample('a0', 0.95)] }, decode: { replicas: 1, load: [sample('d0', 0.95)] } },
      requests: { requests: 10 },
    });
    r.source.push(both());
    expect(await r.loop.tick()).toEqual({ kind: 'skipped', reason: 'connector_failed' });
    failReplicas = false;
    r.source.push(both());
    // aggregated fails, decode still scales
    expect(await r.loop.tick()).toMatchObject({ kind: 'decided', acted: ['decode'] });
    expect(connector.calls).toEqual([{ pool: 'decode', target: 2 }]);
    expect(r.loop.stats().connectorErrors).toEqual({ replicas: 1, scale: 1 });
    await flushLogs();
    const errors = r.lines.filter((l) => l.level === 50);
    expect(errors.map((l) => [l.msg, l.operation])).toEqual([
      ['planner: connector replicas failed', 'replicas'],
      ['planner: connector scale failed', 'scale'],
    ]);
    expect(errors[1]).toMatchObject({ pool: 'aggregated', target: 2 });
    const metrics = renderPlannerMetrics(r.loop.stats());
    expect(metrics).toContain('switchyard_planner_connector_errors_total{operation="replicas"} 1');
    expect(metrics).toContain('switchyard_planner_connector_errors_total{operation="scale"} 1');
  });

  it('an invalid replica count from the connector skips the interval', async () => {
    const bad: Connector = { replicas: async () => ({ aggregated: -2 }), scale: async () => {}, close: async () => {} };
    const r = rig({ connector: bad });
    expect(await r.loop.tick()).toEqual({ kind: 'skipped', reason: 'connector_failed' });
    expect(r.loop.stats().connectorErrors.replicas).toBe(1);
  });

  it('a hanging connector call times out, and no call is made until it settles', async () => {
    let release!: () => void;
    const calls: string[] = [];
    const slow: Connector = {
      replicas: async () => ({ aggregated: 1 }),
      scale: (pool, target) => {
        calls.push(`${pool}:${target}`);
        // the first call hangs until released; later ones answer at once
        return calls.length === 1 ? new Promise<void>((r) => (release = r)) : Promise.resolve();
      },
      close: async () => {},
    };
    const r = rig({ connector: slow });
    r.source.push(busy(0.95));
    const first = r.loop.tick();
    await vi.advanceTimersByTimeAsync(1_000);
    expect(await first).toMatchObject({ kind: 'decided', acted: [] });
    expect(r.loop.stats().connectorErrors.scale).toBe(1);
    r.source.push(busy(0.95));
    expect(await r.loop.tick()).toEqual({ kind: 'skipped', reason: 'connector_busy' });
    release();
    await vi.advanceTimersByTimeAsync(0);
    r.source.push(busy(0.95));
    expect(await r.loop.tick()).toMatchObject({ kind: 'decided', acted: ['aggregated'] });
    expect(calls).toEqual(['aggregated:2', 'aggregated:2']);
  });

  it('leadership lost after deciding stops before acting', async () => {
    const store = new MemoryElectionStore();
    let election!: MemoryLeaderElection;
    const connector = new MemoryConnector({ aggregated: 1 });
    const losing: Connector = {
      replicas: async () => {
        // another planner waits, then this one's lease is lost between the leadership check and acting
        store.campaign('ns', 'planner', 'other');
        election.expireLease();
        return connector.replicas();
      },
      scale: (p, t) => connector.scale(p, t),
      close: () => connector.close(),
    };
    const r = rig({ store, connector: losing, id: 'a' });
    election = r.election;
    r.source.push(busy(0.95));
    const out = await r.loop.tick();
    expect(r.election.isLeader()).toBe(false);
    expect(out).toEqual({ kind: 'skipped', reason: 'leadership_lost' });
    expect(connector.calls).toEqual([]);
  });

  it('a tick while one runs is refused, and a throwing source skips the interval', async () => {
    let release!: () => void;
    const slow: Connector = { replicas: () => new Promise((r) => (release = () => r({ aggregated: 1 }))), scale: async () => {}, close: async () => {} };
    const r = rig({ connector: slow });
    const first = r.loop.tick();
    expect(await r.loop.tick()).toEqual({ kind: 'skipped', reason: 'busy' });
    release();
    await first;
    const throwing = rig();
    throwing.source.collect = () => {
      throw new Error('event plane gone');
    };
    expect(await throwing.loop.tick()).toEqual({ kind: 'skipped', reason: 'observations_failed' });
    expect(throwing.loop.stats().observationErrors).toBe(1);
  });
});

describe('withReplicas', () => {
  it('decides only the pools the connector manages, adding those nothing reported on', () => {
    const obs = withReplicas(
      { intervalSec: 1, requests: { requests: 0 }, pools: { aggregated: { replicas: 9, load: [sample('w', 0.5)] }, prefill: { replicas: 9, load: [] } } },
      { aggregated: 2, decode: 0 },
    );
    expect(obs.pools).toEqual({ aggregated: { replicas: 2, load: [sample('w', 0.5)] }, decode: { replicas: 0, load: [] } });
  });
});

describe('runEvery', () => {
  beforeEach(() => {
    vi.useFakeTimers({ now: 0, toFake: ['setTimeout', 'clearTimeout', 'Date'] });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('runs one step per interval, never two at once; an overrun step is followed at once', async () => {
    const log: string[] = [];
    let running = 0;
    let maxRunning = 0;
    let durations = [100, 2500, 100, 100];
    const step = async (): Promise<void> => {
      running++;
      maxRunning = Math.max(maxRunning, running);
      log.push(`start ${Date.now()}`);
      await new Promise((r) => setTimeout(r, durations.shift() ?? 100));
      running--;
    };
    const s = runEvery(1000, step, jsonLogs().logger);
    await vi.advanceTimersByTimeAsync(5_000);
    // starts: 1000 (100 ms), 2000 (2500 ms, overruns), at once (a timer's 1 ms) after it, 1000 later
    expect(log).toEqual(['start 1000', 'start 2000', 'start 4501']);
    await vi.advanceTimersByTimeAsync(600);
    expect(log).toEqual(['start 1000', 'start 2000', 'start 4501', 'start 5501']);
    expect(maxRunning).toBe(1);
    durations = [10_000];
    await vi.advanceTimersByTimeAsync(1_000);
    let stopped = false;
    const stopping = s.stop().then(() => (stopped = true));
    await vi.advanceTimersByTimeAsync(100);
    expect(stopped).toBe(false); // waits for the step in progress
    await vi.advanceTimersByTimeAsync(10_000);
    await stopping;
    const before = log.length;
    await vi.advanceTimersByTimeAsync(10_000);
    expect(log.length).toBe(before);
  });

  it('a step that throws is logged and the schedule goes on', async () => {
    let n = 0;
    const s = runEvery(
      1000,
      async () => {
        n++;
        throw new Error('boom');
      },
      jsonLogs().logger,
    );
    await vi.advanceTimersByTimeAsync(3_000);
    expect(n).toBe(3);
    await s.stop();
  });
});
