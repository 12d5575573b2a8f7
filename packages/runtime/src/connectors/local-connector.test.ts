/**
 * The local connector's process handling against real child processes: a small stand-in for
 * `switchyard worker` (drains on SIGTERM, or ignores it, or crashes, or floods its log) started from a
 * template, so spawn, drain, kill, adoption and the state directory's checks run in a second or two.
 * The real worker, etcd and NATS are in test/local-connector.test.ts.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { isSwitchyardError } from '@switchyard/common';
import { createLocalConnector, type LocalConnector, type LocalConnectorOptions, type LocalReplica, type ReplicaExit } from './local-connector.js';
import { isSameProcess, startTicksOf } from './process-table.js';

const FAKE_WORKER = `
const net = require('node:net');
const args = Object.fromEntries(process.argv.slice(2).map((a) => a.replace(/^--/, '').split('=')));
const server = net.createServer().listen(Number(args['http-port']), '127.0.0.1', () => console.log('listening', args['http-port'], args.replica));
process.on('SIGTERM', () => {
  console.log('SIGTERM');
  if (args.mode === 'stubborn') return;
  setTimeout(() => server.close(() => process.exit(0)), 100);
});
if (args.mode === 'crash') setTimeout(() => process.exit(3), 100);
if (args.mode === 'chatty') setInterval(() => console.log('x'.repeat(1024)), 10);
setInterval(() => {}, 1 << 30);
`;

const dirs: string[] = [];
const connectors: LocalConnector[] = [];
const pids = new Set<number>();

afterEach(async () => {
  await Promise.all(connectors.splice(0).map((c) => c.close()));
  for (const pid of pids) {
    try {
      process.kill(-pid, 'SIGKILL');
    } catch {
      /* gone */
    }
  }
  pids.clear();
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function setup(mode = 'graceful'): { stateDir: string; options: (extra?: Partial<LocalConnectorOptions>) => LocalConnectorOptions; exits: Array<{ replica: LocalReplica; exit: ReplicaExit }> } {
  const root = mkdtempSync(join(tmpdir(), 'switchyard-local-connector-'));
  dirs.push(root);
  const script = join(root, 'fake-worker.cjs');
  writeFileSync(script, FAKE_WORKER);
  const stateDir = join(root, 'state');
  const exits: Array<{ replica: LocalReplica; exit: ReplicaExit }> = [];
  const options = (extra: Partial<LocalConnectorOptions> = {}): LocalConnectorOptions => ({
    stateDir,
    pools: { aggregated: ['--http-port={http_port}', '--replica={replica}', `--mode=${mode}`], decode: ['--http-port={http_port}', '--replica={replica}', `--mode=${mode}`] },
    command: [process.execPath, script],
    pollIntervalMs: 50,
    onExit: (replica, exit) => exits.push({ replica, exit }),
    ...extra,
  });
  return { stateDir, options, exits };
}

async function open(options: LocalConnectorOptions): Promise<LocalConnector> {
  const c = await createLocalConnector(options);
  connectors.push(c);
  return c;
}

async function until(check: () => boolean | Promise<boolean>, what: string, timeoutMs = 10_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

const logOf = (r: LocalReplica): string => (existsSync(r.logFile) ? readFileSync(r.logFile, 'utf8') : '');
const track = (c: LocalConnector): LocalReplica[] => c.list().map((r) => (pids.add(r.pid), r));

async function rejectsWith(p: Promise<unknown>, code: string, pattern: RegExp): Promise<void> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(isSwitchyardError(err) && err.code, String(err)).toBe(code);
  expect((err as Error).message).toMatch(pattern);
}

describe('local connector', () => {
  it('scales 0 → 2 → 1: spawns with free ports, drains the newest with one SIGTERM, counts only serving replicas', async () => {
    const { stateDir, options, exits } = setup();
    const c = await open(options());
    expect(await c.replicas()).toEqual({ aggregated: 0, decode: 0 });
    await c.scale('aggregated', 2);
    const [first, second] = track(c).sort((a, b) => a.startedAt - b.startedAt);
    expect(await c.replicas()).toEqual({ aggregated: 2, decode: 0 });
    expect(first!.ports.http_port).not.toBe(second!.ports.http_port);
    await until(() => logOf(first!).includes(`listening ${first!.ports.http_port} ${first!.id}`) && logOf(second!).includes('listening'), 'both replicas to listen');
    expect(readdirSync(join(stateDir, 'replicas')).sort()).toEqual([`${first!.id}.json`, `${second!.id}.json`].sort());

    await c.scale('aggregated', 1);
    expect(await c.replicas()).toEqual({ aggregated: 1, decode: 0 });
    expect(c.list().find((r) => r.id === second!.id)?.state).toBe('draining');
    await c.scale('aggregated', 1); // no second drain, no spawn
    await c.drained();
    expect(exits).toEqual([{ replica: expect.objectContaining({ id: second!.id, state: 'draining', adopted: false }), exit: { code: 0, signal: null, drained: true, killed: false } }]);
    expect(logOf(second!).match(/SIGTERM/g)).toHaveLength(1);
    expect(c.list().map((r) => r.id)).toEqual([first!.id]);
    expect(readdirSync(join(stateDir, 'replicas'))).toEqual([`${first!.id}.json`]);
    expect(isSameProcess(first!.pid, startTicksOf(first!.pid)!)).toBe(true);
  });

  it('drains the least loaded replicas first when loadOf answers; a failing loadOf counts as unknown', async () => {
    const { options, exits } = setup();
    const loads = new Map<string, () => number | Promise<number>>();
    const c = await open(options({ loadOf: (r) => loads.get(r.id)?.() }));
    for (let n = 1; n <= 3; n++) await c.scale('aggregated', n); // distinct start times
    const [oldest, middle, newest] = track(c).sort((a, b) => a.startedAt - b.startedAt);
    loads.set(oldest!.id, () => Promise.resolve(0));
    loads.set(middle!.id, () => Promise.reject(new Error('metrics unreachable')));
    loads.set(newest!.id, () => 5);
    await c.scale('aggregated', 1);
    await c.drained();
    expect(exits.map((e) => e.replica.id)).toEqual(expect.arrayContaining([oldest!.id, newest!.id]));
    expect(c.list().map((r) => r.id)).toEqual([middle!.id]);
  });

  it('kills a replica still alive past the drain timeout (its whole process group)', async () => {
    const { options, exits } = setup('stubborn');
    const c = await open(options({ drainTimeoutMs: 300 }));
    await c.scale('decode', 1);
    const [r] = track(c);
    await until(() => logOf(r!).includes('listening'), 'the replica to listen');
    const t0 = Date.now();
    await c.scale('decode', 0);
    await c.drained();
    expect(Date.now() - t0).toBeGreaterThanOrEqual(300);
    expect(exits.map((e) => e.exit)).toEqual([{ code: null, signal: 'SIGKILL', drained: true, killed: true }]);
  });

  it('a drain under way carries over to the next connector: adopted as draining, not counted, killed at the old deadline', async () => {
    const { options, exits } = setup('stubborn');
    const a = await open(options({ drainTimeoutMs: 60_000 }));
    await a.scale('decode', 2);
    const [, newer] = track(a).sort((x, y) => x.startedAt - y.startedAt);
    await until(() => logOf(newer!).includes('listening'), 'the replica to listen');
    await a.scale('decode', 1);
    await a.close();
    const b = await open(options({ drainTimeoutMs: 400 }));
    expect(b.list().find((r) => r.id === newer!.id)).toMatchObject({ state: 'draining', adopted: true });
    expect(await b.replicas()).toEqual({ aggregated: 0, decode: 1 });
    await b.scale('decode', 1); // the draining one is neither counted nor drained again
    await b.drained();
    expect(exits).toEqual([{ replica: expect.objectContaining({ id: newer!.id }), exit: { code: null, signal: null, drained: true, killed: true } }]);
    expect(logOf(newer!).match(/SIGTERM/g)).toHaveLength(1);
    expect(await b.replicas()).toEqual({ aggregated: 0, decode: 1 });
  });

  it('notices a replica that exits on its own; the next scale restores the count', async () => {
    const { options, exits } = setup('crash');
    const c = await open(options());
    await c.scale('aggregated', 1);
    track(c);
    await until(() => exits.length === 1, 'the crash to be noticed');
    expect(exits[0]!.exit).toEqual({ code: 3, signal: null, drained: false, killed: false });
    expect(await c.replicas()).toEqual({ aggregated: 0, decode: 0 });
  });

  it('keeps a replica log bounded', async () => {
    const { options } = setup('chatty');
    const c = await open(options({ maxLogBytes: 64 * 1024 }));
    await c.scale('aggregated', 1);
    const [r] = track(c);
    await until(() => existsSync(`${r!.logFile}.1`), 'the log to be cut', 10_000);
    await new Promise((res) => setTimeout(res, 300));
    // bound: the limit + what one poll interval writes (~5 KiB at 1 KiB / 10 ms) with slack for a poll delayed 2 s on a loaded machine
    expect(statSync(r!.logFile).size).toBeLessThan(64 * 1024 + 256 * 1024);
    expect(statSync(`${r!.logFile}.1`).size).toBeLessThanOrEqual(32 * 1024);
  });

  it('a new connector on the same state directory adopts the live replicas and drains them', async () => {
    const { options, exits } = setup();
    const a = await open(options());
    await a.scale('aggregated', 2);
    await a.scale('decode', 1);
    const before = track(a).map((r) => [r.id, r.pid]).sort();
    await a.close();
    await a.close(); // idempotent
    await rejectsWith(a.scale('aggregated', 3), 'unavailable', /closed/);

    const b = await open(options());
    expect(await b.replicas()).toEqual({ aggregated: 2, decode: 1 });
    expect(b.list().map((r) => [r.id, r.pid]).sort()).toEqual(before);
    expect(b.list().every((r) => r.adopted)).toBe(true);
    await b.scale('aggregated', 0);
    await b.scale('decode', 0);
    await b.drained();
    // not its children: exit status unknown, noticed by polling
    expect(exits.map((e) => e.exit)).toEqual([0, 1, 2].map(() => ({ code: null, signal: null, drained: true, killed: false })));
    expect(await b.replicas()).toEqual({ aggregated: 0, decode: 0 });
  });

  it('replicas outlive the process that started them, even a Ctrl-C to its process group, and are adopted after it', async () => {
    const { stateDir, options } = setup();
    const o = options();
    const program = `
      const { createLocalConnector } = await import(${JSON.stringify(new URL('./local-connector.ts', import.meta.url).href.replace('/src/', '/dist/').replace(/\.ts$/, '.js'))});
      const c = await createLocalConnector(${JSON.stringify({ stateDir, pools: o.pools, command: o.command })});
      await c.scale('aggregated', 1);
      console.log('scaled');
      setInterval(() => {}, 1 << 30); // a planner running in a terminal, no close()
    `;
    // the "planner" leads its own process group, as a shell job would; SIGINT to the group = Ctrl-C
    const planner = spawn(process.execPath, ['--input-type=module', '-e', program], { detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    planner.stdout.on('data', (d: Buffer) => (out += d.toString()));
    planner.stderr.on('data', (d: Buffer) => (out += d.toString()));
    const ended = new Promise<NodeJS.Signals | null>((res) => planner.once('exit', (_code, signal) => res(signal)));
    await until(() => out.includes('scaled') || planner.exitCode !== null, 'the planner to scale');
    expect(out).toContain('scaled');
    process.kill(-planner.pid!, 'SIGINT');
    expect(await ended).toBe('SIGINT');
    const b = await open(options());
    const [r] = track(b);
    expect(r).toMatchObject({ pool: 'aggregated', adopted: true, state: 'serving' });
    await until(() => logOf(r!).includes('listening'), 'the orphaned replica to listen');
    await new Promise((res) => setTimeout(res, 200));
    expect(isSameProcess(r!.pid, startTicksOf(r!.pid)!)).toBe(true);
    expect(await b.replicas()).toEqual({ aggregated: 1, decode: 0 });
  });

  it('does not adopt a recycled pid, sets corrupt records aside and ignores stray files', async () => {
    const { stateDir, options } = setup();
    const records = join(stateDir, 'replicas');
    mkdirSync(records, { recursive: true });
    const ticks = startTicksOf(process.pid)!;
    const base = { v: 1, pool: 'aggregated', startedAt: Date.now(), ports: {}, argv: [] };
    // a live pid (this test process) with another start time: a recycled pid
    writeFileSync(join(records, 'aggregated-a-00000001.json'), JSON.stringify({ ...base, id: 'aggregated-a-00000001', pid: process.pid, startTicks: String(BigInt(ticks) + 1n) }));
    writeFileSync(join(records, 'aggregated-a-00000002.json'), '{"v":1,"id":"aggregated-a-00000002","pid":');
    writeFileSync(join(records, 'aggregated-a-00000003.json'), JSON.stringify({ ...base, id: 'aggregated-a-00000004', pid: process.pid, startTicks: ticks }));
    writeFileSync(join(records, 'aggregated-a-00000005.json'), JSON.stringify({ ...base, id: 'aggregated-a-00000005', pid: -1, startTicks: ticks }));
    writeFileSync(join(stateDir, 'outside.json'), JSON.stringify({ ...base, id: 'aggregated-a-00000006', pid: process.pid, startTicks: ticks }));
    symlinkSync(join(stateDir, 'outside.json'), join(records, 'aggregated-a-00000006.json'));
    writeFileSync(join(records, 'notes.txt'), 'hello');
    const c = await open(options());
    expect(c.list()).toEqual([]);
    expect(await c.replicas()).toEqual({ aggregated: 0, decode: 0 });
    expect(readdirSync(records).sort()).toEqual([
      'aggregated-a-00000002.json.corrupt',
      'aggregated-a-00000003.json.corrupt',
      'aggregated-a-00000005.json.corrupt',
      'aggregated-a-00000006.json.corrupt',
      'notes.txt',
    ]);
    expect(existsSync(join(stateDir, 'outside.json'))).toBe(true);
  });

  it('refuses bad options, targets and a state directory in use', async () => {
    const { options } = setup();
    await rejectsWith(createLocalConnector(options({ pools: { aggregated: ['--port={port}'] } })), 'invalid_argument', /pool aggregated.*unknown placeholder \{port\}/);
    await rejectsWith(createLocalConnector(options({ pools: { gpu: ['x'] } as never })), 'invalid_argument', /unknown pool gpu/);
    await rejectsWith(createLocalConnector(options({ pools: {} })), 'invalid_argument', /no pool/);
    await rejectsWith(createLocalConnector(options({ maxReplicas: 100_000 })), 'invalid_argument', /maxReplicas/);
    await rejectsWith(createLocalConnector(options({ command: [] })), 'invalid_argument', /command/);
    await rejectsWith(createLocalConnector({ ...options(), stateDir: '' }), 'invalid_argument', /stateDir/);
    await rejectsWith(createLocalConnector({ ...options(), env: { 'A=B': 'x' } }), 'invalid_argument', /bad env entry/);
    const aFile = join(dirs.at(-1)!, 'fake-worker.cjs');
    await rejectsWith(createLocalConnector({ ...options(), stateDir: aFile }), 'unavailable', /cannot create the state directory/);

    const c = await open(options({ maxReplicas: 3 }));
    await rejectsWith(c.scale('aggregated', 4), 'invalid_argument', /above the cap of 3/);
    await rejectsWith(c.scale('aggregated', 1e12), 'invalid_argument', /above the cap/);
    await rejectsWith(c.scale('aggregated', -1), 'invalid_argument', /bad target/);
    await rejectsWith(c.scale('aggregated', Number.NaN), 'invalid_argument', /bad target/);
    await rejectsWith(c.scale('aggregated', 1.5), 'invalid_argument', /bad target/);
    await rejectsWith(c.scale('prefill', 1), 'invalid_argument', /pool "prefill" is not managed/);
    expect(c.list()).toEqual([]);
    await rejectsWith(createLocalConnector(options()), 'unavailable', /in use by process/);
    await c.close();
    connectors.push(await createLocalConnector(options()));
  });

  it('a command that cannot start rejects with unavailable and leaves nothing behind', async () => {
    const { stateDir, options } = setup();
    const c = await open(options({ command: [join(stateDir, 'no-such-program')] }));
    await rejectsWith(c.scale('aggregated', 1), 'unavailable', /cannot start/);
    expect(await c.replicas()).toEqual({ aggregated: 0, decode: 0 });
    expect(readdirSync(join(stateDir, 'replicas'))).toEqual([]);
  });
});
