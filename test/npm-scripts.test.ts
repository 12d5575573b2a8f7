/**
 * `npm start` as a user runs it, ending the way users end it: a signal sent to npm itself (a process
 * manager, `kill <npm pid>`), Ctrl-C at a terminal (SIGINT to npm's whole process group) and the
 * terminal going away (SIGHUP to the group). Each way the worker drains once and exits, npm exits,
 * and the port is free. The build step is skipped
 * (SWITCHYARD_SKIP_BUILD=1: the repository is built before tests run); the rest is the real script.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { createConnection } from 'node:net';
import { describe, expect, it } from 'vitest';
import { freePorts, repoRoot } from '@switchyard/testing';
import { waitFor } from './lib/wait-for.js';

interface Started {
  npm: ChildProcess;
  workerPid: number;
  port: number;
  lines: () => Array<Record<string, unknown>>;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

async function startNpm(): Promise<Started> {
  const [http, grpc, metrics] = await freePorts(3);
  // Its own process group, like a shell job: Ctrl-C is a SIGINT to the group.
  const npm = spawn('npm', ['start', '--', `--http-port=${http}`, `--grpc-port=${grpc}`, `--metrics-port=${metrics}`, '--http-address=127.0.0.1', '--grpc-address=127.0.0.1', '--metrics-address=127.0.0.1'], {
    cwd: repoRoot(),
    env: { ...process.env, SWITCHYARD_SKIP_BUILD: '1' },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  let out = '';
  npm.stdout!.on('data', (c: Buffer) => (out += c.toString()));
  npm.stderr!.resume();
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => npm.on('exit', (code, signal) => resolve({ code, signal })));
  const lines = (): Array<Record<string, unknown>> =>
    out
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as Record<string, unknown>);
  try {
    await waitFor(async () => lines().some((l) => l['msg'] === 'worker started'), { timeoutMs: 30_000, message: `worker did not start:\n${out}` });
  } catch (e) {
    // Nothing is left running when the start fails: npm, the launcher and the worker (in a process
    // group of its own, so found by parentage) are killed.
    for (const pid of [...descendants(npm.pid!), npm.pid!]) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
    throw e;
  }
  const workerPid = lines().find((l) => l['msg'] === 'worker started')!['pid'] as number;
  return { npm, workerPid, port: http!, lines, exited };
}

/** Every live descendant of `root` (Linux: read from /proc), children before their parents' siblings. */
function descendants(root: number): number[] {
  const parents = new Map<number, number>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      parents.set(Number(entry), Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]));
    } catch {
      // exited meanwhile
    }
  }
  const found: number[] = [];
  const walk = (pid: number): void => {
    for (const [child, parent] of parents) {
      if (parent !== pid) continue;
      found.push(child);
      walk(child);
    }
  };
  walk(root);
  return found;
}

const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

const accepts = (port: number): Promise<boolean> =>
  new Promise((resolve) => {
    const socket = createConnection({ port, host: '127.0.0.1' });
    socket.once('connect', () => (socket.destroy(), resolve(true)));
    socket.once('error', () => resolve(false));
  });

async function expectGone(s: Started, npmExit: { code: number | null; signal: NodeJS.Signals | null } = { code: 0, signal: null }): Promise<void> {
  expect(await s.exited).toEqual(npmExit);
  await waitFor(async () => !alive(s.workerPid), { timeoutMs: 5_000, message: 'the worker outlived npm' });
  expect(await accepts(s.port)).toBe(false);
  // one graceful drain, not the "second signal" exit
  expect(s.lines().filter((l) => l['msg'] === 'shutting down')).toHaveLength(1);
  expect(s.lines().some((l) => l['msg'] === 'worker stopped')).toBe(true);
}

describe('npm start', () => {
  it('a SIGTERM sent to npm stops the worker and frees its port', async () => {
    const s = await startNpm();
    try {
      expect(await accepts(s.port)).toBe(true);
      s.npm.kill('SIGTERM');
      await expectGone(s);
    } finally {
      if (alive(s.workerPid)) process.kill(s.workerPid, 'SIGKILL');
    }
  }, 60_000);

  it('Ctrl-C (SIGINT to the process group) drains the worker once', async () => {
    const s = await startNpm();
    try {
      process.kill(-s.npm.pid!, 'SIGINT');
      await expectGone(s);
    } finally {
      if (alive(s.workerPid)) process.kill(s.workerPid, 'SIGKILL');
    }
  }, 60_000);

  it('a terminal hanging up (SIGHUP to the group) drains the worker as SIGTERM would', async () => {
    const s = await startNpm();
    try {
      process.kill(-s.npm.pid!, 'SIGHUP');
      // npm itself dies of SIGHUP (it passes on only SIGINT and SIGTERM); the launcher stays to end the worker
      await expectGone(s, { code: null, signal: 'SIGHUP' });
      expect(s.lines().find((l) => l['msg'] === 'shutting down')?.['signal']).toBe('SIGTERM');
    } finally {
      if (alive(s.workerPid)) process.kill(s.workerPid, 'SIGKILL');
    }
  }, 60_000);
});
