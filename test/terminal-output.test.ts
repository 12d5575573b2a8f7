/**
 * What a person at a terminal sees from `switchyard worker` and `switchyard router`: human log lines
 * (time, level, component, message, key=value) and, once started, tritonserver's model table (the
 * router: the models discovery shows, with their workers). The
 * worker runs under a real pseudo-terminal (util-linux `script`), so `process.stdout.isTTY` is
 * true as it is for a user; off a terminal, and with `--log-format json`, the lines stay pino's
 * JSON (what log collectors and the other suites parse).
 */
import { spawn, spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { freePorts, repoRoot, startEtcd, startNats, startRedis, startWorkerProcess, type WorkerProcess } from '@switchyard/testing';
import { waitFor } from './lib/wait-for.js';

const BIN = join(repoRoot(), 'bin', 'switchyard.mjs');
const hasScript = spawnSync('script', ['--version'], { encoding: 'utf8' }).status === 0;

interface RunOptions {
  pty: boolean;
  env?: Record<string, string>;
  until: (out: string) => boolean;
}

/** Runs the worker over the fixture repository (explicit model control) until `until(output)`: see `runApp`. */
const runWorker = (args: string[], options: RunOptions): Promise<string> => runApp('worker', ['--model-repository=test/fixtures/model_repository', '--model-control-mode=explicit', ...args], options);

/** Runs an app (under a pty when `pty`) on free loopback ports until `until(output)` holds, then stops it; returns its stdout. */
async function runApp(command: 'worker' | 'router', args: string[], { pty, env = {}, until }: RunOptions): Promise<string> {
  const [http, grpc, metrics] = await freePorts(3);
  const argv = [BIN, command, `--http-port=${http}`, `--grpc-port=${grpc}`, `--metrics-port=${metrics}`, '--http-address=127.0.0.1', '--grpc-address=127.0.0.1', '--metrics-address=127.0.0.1', ...args];
  const quote = (s: string): string => `'${s.replace(/'/g, `'\\''`)}'`;
  const child = pty
    ? spawn('script', ['-qfec', [process.execPath, ...argv].map(quote).join(' '), '/dev/null'], { cwd: repoRoot(), env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] })
    : spawn(process.execPath, argv, { cwd: repoRoot(), env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  let exit: string | undefined;
  child.stdout!.on('data', (c: Buffer) => (out += c.toString()));
  // under `script`, the app's stderr comes through the terminal too: this is `script`'s own
  child.stderr!.on('data', (c: Buffer) => (err += c.toString()));
  const exited = new Promise<void>((resolve) =>
    child.on('exit', (code, signal) => {
      exit = `exited (${signal ?? code})`;
      resolve();
    }),
  );
  try {
    // a child that exits early fails at once, with what it said
    await waitFor(async () => until(out) || exit !== undefined, { timeoutMs: 30_000 }).catch(() => undefined);
    if (!until(out)) throw new Error(`output not seen ${exit ?? 'in time'}:\n${out}\nstderr:\n${err}`);
  } finally {
    // `script` ends its child with it
    child.kill('SIGTERM');
    await exited;
  }
  return out;
}

const TABLE_END = /\| simple +\| 1 +\| READY +\|\r?\n\+-+\+-+\+-+\+/;

describe.skipIf(!hasScript)('worker on a terminal', () => {
  it('prints coloured human lines and the model table, READY or UNAVAILABLE with the reason', async () => {
    const out = await runWorker(['--load-model=simple', '--load-model=corrupt', '--exit-on-error=false'], { pty: true, env: { NO_COLOR: '' }, until: (o) => TABLE_END.test(o) });
    expect(out).not.toMatch(/^\{"level"/m);
    // a model load, start and end, with the time it took
    expect(out).toMatch(/^\d\d:\d\d:\d\d\.\d{3} \x1b\[32mINFO \x1b\[0m \x1b\[2mengine\x1b\[0m loading model version .*model=\x1b\[0msimple/m);
    expect(out).toMatch(/model version loaded .*loadSecs=\x1b\[0m[\d.]+/);
    expect(out).toMatch(/\x1b\[33mWARN \x1b\[0m the model repository API/);
    expect(out).toMatch(/\| Model +\| Version \| Status +\|/);
    expect(out).toMatch(/\| corrupt \| 1 +\| UNAVAILABLE: unable to load model 'corrupt': .*Protobuf parsing failed\. \|/);
  }, 60_000);

  it('NO_COLOR keeps the human lines and drops the colours', async () => {
    const out = await runWorker(['--load-model=simple'], { pty: true, env: { NO_COLOR: '1' }, until: (o) => TABLE_END.test(o) });
    expect(out).toMatch(/^\d\d:\d\d:\d\d\.\d{3} INFO  engine model version loaded model=simple version=1/m);
    expect(out).not.toContain('\x1b');
  }, 60_000);

  it('--log-format json keeps JSON lines (and no table) on a terminal', async () => {
    const out = await runWorker(['--load-model=simple', '--log-format=json'], { pty: true, until: (o) => o.includes('"msg":"worker started"') });
    const lines = out.split(/\r?\n/).filter((l) => l !== '');
    expect(lines.length).toBeGreaterThan(3);
    for (const line of lines) expect(() => JSON.parse(line)).not.toThrow();
    expect(out).not.toContain('| Model');
  }, 60_000);
});

describe('worker off a terminal', () => {
  it('writes JSON lines with epoch-ms times, as before', async () => {
    const out = await runWorker(['--load-model=simple'], { pty: false, until: (o) => o.includes('"msg":"worker started"') });
    const lines = out.split('\n').filter((l) => l !== '').map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(lines.every((l) => typeof l['time'] === 'number' && typeof l['pid'] === 'number')).toBe(true);
    expect(out).not.toContain('| Model');
  }, 60_000);

  it('--log-format human forces human lines and the table, without colours', async () => {
    const out = await runWorker(['--load-model=simple', '--log-format=human'], { pty: false, until: (o) => TABLE_END.test(o) });
    expect(out).toMatch(/^\d\d:\d\d:\d\d\.\d{3} INFO  worker started ports=\{"http":\d+/m);
    expect(out).not.toContain('\x1b');
  }, 60_000);
});

describe('router with human lines', () => {
  it('prints the models discovery shows with their workers, then logs workers joining', async () => {
    const [etcd, nats, redis] = await Promise.all([startEtcd(), startNats({ jetstream: true }), startRedis()]);
    const ns = `terminal-${process.pid}`;
    const workerArgs = ['--etcd', etcd.url, '--nats', nats.url, '--namespace', ns, '--model-control-mode=explicit', '--load-model=simple'];
    const instanceIdOf = (w: WorkerProcess): string => (w.logs().find((l) => l['msg'] === 'worker started')!['cluster'] as { instanceId: string }).instanceId;
    const first = await startWorkerProcess({ modelRepositories: ['test/fixtures/model_repository'], args: workerArgs });
    let second: Promise<WorkerProcess> | undefined;
    try {
      const row = new RegExp(`\\| simple \\| tensor \\| 1: ${instanceIdOf(first)} \\|`);
      const out = await runApp('router', ['--etcd', etcd.url, '--nats', nats.url, '--redis', redis.url, '--namespace', ns, '--log-format=human'], {
        pty: false,
        until: (o) => {
          // the table first (the worker already there), then a second worker comes
          if (row.test(o)) second ??= startWorkerProcess({ modelRepositories: ['test/fixtures/model_repository'], args: workerArgs });
          return /INFO  worker serves model model=simple instanceId=\w+/.test(o);
        },
      });
      expect(out).toMatch(/\| Model +\| Kind +\| Workers +\|/);
      expect(out).toMatch(/^\d\d:\d\d:\d\d\.\d{3} INFO  router started /m);
      expect(out).toContain(`INFO  worker serves model model=simple instanceId=${instanceIdOf(await second!)}`);
    } finally {
      await first.stop();
      await (await second)?.stop();
      await Promise.all([etcd.stop(), nats.stop(), redis.stop()]);
    }
  }, 120_000);
});
