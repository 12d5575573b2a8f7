/**
 * The `switchyard planner` command as a user runs it: --help and bad flags, etcd or NATS unreachable,
 * and two planners (memory connector, dry run) on one namespace against a real etcd and NATS: one
 * leads and decides (no worker reports on the event plane: every pool holds), the other waits; SIGTERM
 * on the leader hands over at once (its lease is revoked), SIGKILL within the lease TTL. The local
 * connector end to end: test/planner.test.ts.
 */
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { repoRoot, startAppProcess, startEtcd, startNats, type AppProcess, type EtcdServer, type NatsServer } from '@switchyard/testing';

const run = (...args: string[]) => spawnSync(process.execPath, [join(repoRoot(), 'bin/switchyard.mjs'), ...args], { encoding: 'utf8', timeout: 30_000 });

async function waitFor(what: string, cond: () => boolean | Promise<boolean>, ms = 15_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for: ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('switchyard planner command line', () => {
  it('is listed by switchyard, prints its flags with --help and exits 2 on bad usage', () => {
    expect(run('--help').stdout).toMatch(/^ {2}planner +sizes a model's worker pools/m);
    const help = run('planner', '--help');
    expect(help.status).toBe(0);
    for (const flag of ['--etcd', '--nats', '--namespace', '--model', '--mode=load|sla', '--connector=local|kubernetes|memory', '--worker-args', '--state-dir', '--drain-timeout-secs', '--kube-deployment', '--adjustment-interval-secs=N', '--metrics-port=N', '--min-replicas=N', '--max-replicas=N', '--prefill-min-replicas=N', '--decode-max-replicas=N', '--ttft-slo-ms=F', '--itl-slo-ms=F', '--slo-percentile=F', '--profile', '--dry-run']) {
      expect(help.stdout).toContain(flag);
    }
    const infra = ['--etcd=http://127.0.0.1:2379', '--nats=nats://127.0.0.1:4222', '--model=m', '--connector=memory'];
    for (const [args, message] of [
      [['--model=m'], /^switchyard planner: --etcd, --nats are required/],
      [[...infra, '--adjustment-interval-secs=0'], /flag '--adjustment-interval-secs' must be an integer >= 1, got '0'/],
      [[...infra, '--min-replicas=3', '--max-replicas=2'], /--min-replicas \(3\) must not exceed --max-replicas \(2\)/],
      [[...infra, '--mode=sla', '--profile=/no/such/profile.json'], /--profile '\/no\/such\/profile.json' cannot be read/],
      [[...infra, '--bogus'], /unknown flag '--bogus'/],
      [infra.slice(0, 3), /--connector=local needs the flags of the workers it starts/],
    ] as const) {
      const r = run('planner', ...args);
      expect(r.status, r.stderr).toBe(2);
      expect(r.stderr).toMatch(message);
      expect(r.stderr).toContain('usage: switchyard planner');
    }
    // (every refusal is covered by apps/planner/src/options.test.ts; these check the exit path)
  }, 60_000);

  it('exits 1 when it cannot reach etcd', () => {
    const r = run('planner', '--etcd=http://127.0.0.1:1', '--nats=nats://127.0.0.1:4222', '--model=m', '--connector=memory', '--metrics-port=0');
    expect(r.status).toBe(1);
    expect(r.stdout).toContain('planner failed to start');
  });
});

describe('two planners on one namespace (real etcd)', () => {
  let etcd: EtcdServer;
  let nats: NatsServer;
  const procs: AppProcess[] = [];

  beforeAll(async () => {
    [etcd, nats] = await Promise.all([startEtcd(), startNats({ jetstream: true })]);
  });
  afterAll(async () => {
    await Promise.all(procs.map((p) => p.stop('SIGKILL')));
    await Promise.all([etcd?.stop(), nats?.stop()]);
  });

  const planner = async (): Promise<AppProcess> => {
    const p = await startAppProcess('planner', [
      `--etcd=${etcd.url}`,
      `--nats=${nats.url}`,
      '--namespace=planner-cli',
      '--model=org/m',
      '--adjustment-interval-secs=1',
      '--metrics-port=0',
      '--metrics-address=127.0.0.1',
      '--leader-lease-ttl-secs=2',
      '--connector=memory',
      '--dry-run',
    ]);
    procs.push(p);
    return p;
  };
  const started = (p: AppProcess) => p.logs().find((l) => l.msg === 'planner started')!;
  const decisions = (p: AppProcess) => p.logs().filter((l) => l.event === 'planner_decision');
  const leading = (p: AppProcess) => p.logs().filter((l) => l.msg === 'planner leading').length > 0;
  const scrape = async (p: AppProcess): Promise<string> => (await fetch(`http://127.0.0.1:${p.ports.metrics}/metrics`)).text();

  it('exits 1 when it cannot reach NATS (the event plane it observes)', () => {
    const r = run('planner', `--etcd=${etcd.url}`, '--nats=nats://127.0.0.1:1', '--namespace=planner-cli-nats', '--model=m', '--connector=memory', '--metrics-port=0');
    expect(r.status).toBe(1);
    expect(r.stdout).toContain('planner failed to start');
    expect(r.stdout).toContain('cannot connect to NATS');
  });

  it('one leads and decides, the other waits; SIGTERM hands over at once, SIGKILL within the lease TTL', async () => {
    const a = await planner();
    expect(started(a)).toMatchObject({ leading: true, namespace: 'planner-cli', model: 'org/m', dryRun: true });
    const b = await planner();
    expect(started(b)).toMatchObject({ leading: false, leader: started(a).candidateId });

    await waitFor('a decides, b follows', async () => decisions(a).length >= 3 && /switchyard_planner_intervals_total\{outcome="following"\} [1-9]/.test(await scrape(b)));
    expect(decisions(a)[0]).toMatchObject({ dryRun: true, mode: 'load', direction: 'hold', reason: 'no_load_samples' });
    expect(await scrape(a)).toContain('switchyard_planner_leader 1');
    expect(await scrape(b)).toContain('switchyard_planner_leader 0');
    expect(decisions(b)).toEqual([]);

    // SIGTERM: a revokes its lease on the way out; b takes over well within the TTL
    const stoppedAt = Date.now();
    expect(await a.stop('SIGTERM')).toEqual({ code: 0, signal: null });
    expect(a.logs().map((l) => l.msg)).toContain('planner stopped');
    await waitFor('b leads', () => leading(b), 1_500);
    expect(Date.now() - stoppedAt).toBeLessThan(2_000);
    await waitFor('b decides', () => decisions(b).length >= 1);
    expect(await scrape(b)).toContain('switchyard_planner_leader 1');

    // SIGKILL: nothing revokes b's lease; c takes over once it expires (TTL 2 s)
    const c = await planner();
    expect(started(c)).toMatchObject({ leading: false, leader: started(b).candidateId });
    const killedAt = Date.now();
    await b.stop('SIGKILL');
    await waitFor('c leads', () => leading(c), 10_000);
    expect(Date.now() - killedAt).toBeLessThan(6_000);
    await waitFor('c decides', () => decisions(c).length >= 1);
  }, 60_000);
});
