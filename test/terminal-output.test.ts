/**
 * What a person at a terminal sees from `switchyard worker`: human log lines (time, level,
 * component, message, key=value) and, once models are loaded, tritonserver's model table. The
 * worker runs under a real pseudo-terminal (util-linux `script`), so `process.stdout.isTTY` is
 * true as it is for a user; off a terminal, and with `--log-format json`, the lines stay pino's
 * JSON (what log collectors and the other suites parse).
 */
import { spawn, spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { freePorts, repoRoot } from '@switchyard/testing';
import { waitFor } from './lib/wait-for.js';

const BIN = join(repoRoot(), 'bin', 'switchyard.mjs');
const hasScript = spawnSync('script', ['--version'], { encoding: 'utf8' }).status === 0;

/** Runs the worker (under a pty when `pty`) until `until(output)` holds, then stops it; returns its stdout. */
async function runWorker(args: string[], { pty, env = {}, until }: { pty: boolean; env?: Record<string, string>; until: (out: string) => boolean }): Promise<string> {
  const [http, grpc, metrics] = await freePorts(3);
  const argv = [BIN, 'worker', '--model-repository=test/fixtures/model_repository', '--model-control-mode=explicit', `--http-port=${http}`, `--grpc-port=${grpc}`, `--metrics-port=${metrics}`, '--http-address=127.0.0.1', '--grpc-address=127.0.0.1', '--metrics-address=127.0.0.1', ...args];
  const quote = (s: string): string => `'${s.replace(/'/g, `'\\''`)}'`;
  const child = pty
    ? spawn('script', ['-qfec', [process.execPath, ...argv].map(quote).join(' '), '/dev/null'], { cwd: repoRoot(), env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] })
    : spawn(process.execPath, argv, { cwd: repoRoot(), env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout!.on('data', (c: Buffer) => (out += c.toString()));
  child.stderr!.resume();
  const exited = new Promise<void>((resolve) => child.on('exit', () => resolve()));
  try {
    await waitFor(async () => until(out), { timeoutMs: 30_000, message: `output not seen in time:\n${out}` });
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
