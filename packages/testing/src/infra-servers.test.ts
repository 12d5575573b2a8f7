import { existsSync } from 'node:fs';
import { createConnection } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { isSwitchyardError } from '@switchyard/common';
import { startEtcd as etcdStart, startNats as natsStart, startRedis as redisStart, type InfraServer } from './infra-servers.js';

// Every server a test starts is stopped afterwards, even when the test fails.
const started: InfraServer[] = [];
afterEach(async () => {
  await Promise.all(started.splice(0).map((s) => s.stop()));
});
function track<T extends InfraServer>(p: Promise<T>): Promise<T> {
  return p.then((s) => (started.push(s), s));
}
const startRedis = (...a: Parameters<typeof redisStart>) => track(redisStart(...a));
const startNats = (...a: Parameters<typeof natsStart>) => track(natsStart(...a));
const startEtcd = (...a: Parameters<typeof etcdStart>) => track(etcdStart(...a));

const STANDARD_PORTS = [2379, 2380, 4222, 6379, 8222];

/** Send raw bytes, collect the reply until `done(text)` holds. */
function exchange(port: number, request: string, done: (text: string) => boolean): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = createConnection({ host: '127.0.0.1', port });
    let text = '';
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`no complete reply, got ${JSON.stringify(text)}`));
    }, 3_000);
    socket.once('connect', () => {
      if (request !== '') socket.write(request);
    });
    socket.on('data', (chunk: Buffer) => {
      text += chunk.toString('utf8');
      if (done(text)) {
        clearTimeout(timer);
        socket.destroy();
        resolve(text);
      }
    });
    socket.once('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
  });
}

const resp = (...parts: string[]): string =>
  `*${parts.length}\r\n` + parts.map((p) => `$${Buffer.byteLength(p)}\r\n${p}\r\n`).join('');

const redisCommand = (port: number, ...parts: string[]): Promise<string> =>
  exchange(port, resp(...parts), (t) => /^([+\-:].*|\$-1|\$\d+\r\n.*)\r\n$/s.test(t));

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

async function expectStopped(server: InfraServer): Promise<void> {
  const pid = server.pid;
  expect(alive(pid)).toBe(true);
  expect(existsSync(server.dataDir)).toBe(true);
  await server.stop();
  expect(alive(pid)).toBe(false);
  expect(existsSync(server.dataDir)).toBe(false);
  expect(server.state).toBe('stopped');
  await server.stop(); // idempotent
}

const b64 = (s: string): string => Buffer.from(s).toString('base64');

describe('infra servers', () => {
  it('redis: answers SET/GET on a private port, keeps data across restart(), stop() cleans up', async () => {
    const redis = await startRedis({ persistence: true });
    expect(redis.url).toBe(`redis://127.0.0.1:${redis.port}`);
    expect(STANDARD_PORTS).not.toContain(redis.port);
    expect(await redisCommand(redis.port, 'SET', 'k', 'v1')).toBe('+OK\r\n');
    expect(await redisCommand(redis.port, 'GET', 'k')).toBe('$2\r\nv1\r\n');

    const firstPid = redis.pid;
    await redis.restart();
    expect(redis.pid).not.toBe(firstPid);
    expect(alive(firstPid)).toBe(false);
    expect(redis.state).toBe('running');
    expect(await redisCommand(redis.port, 'GET', 'k')).toBe('$2\r\nv1\r\n');

    await expectStopped(redis);
    await expect(redis.restart()).rejects.toThrow(/restart\(\) while stopped/);
  });

  it('redis: parallel starts get distinct ports', async () => {
    const servers = await Promise.all([startRedis(), startRedis(), startRedis()]);
    expect(new Set(servers.map((s) => s.port)).size).toBe(3);
    for (const s of servers) expect(await redisCommand(s.port, 'PING')).toBe('+PONG\r\n');
  });

  it('nats: JetStream enabled, INFO on connect and /jsz on the monitoring port', async () => {
    const nats = await startNats({ jetstream: true });
    expect(nats.url).toBe(`nats://127.0.0.1:${nats.port}`);
    expect(STANDARD_PORTS).not.toContain(nats.port);
    const info = await exchange(nats.port, '', (t) => t.includes('\r\n'));
    expect(info.startsWith('INFO ')).toBe(true);
    expect(JSON.parse(info.slice(5).trim())).toMatchObject({ jetstream: true });
    const jsz = (await (await fetch(`${nats.monitorUrl}/jsz`)).json()) as Record<string, unknown>;
    expect(jsz['config']).toMatchObject({ store_dir: expect.stringContaining(nats.dataDir) });
    // A client round trip: PING → PONG.
    expect(await exchange(nats.port, 'CONNECT {"verbose":false}\r\nPING\r\n', (t) => t.includes('PONG\r\n'))).toContain('PONG');
    await expectStopped(nats);
  });

  it('etcd: put and range through the JSON gateway', async () => {
    const etcd = await startEtcd();
    expect(etcd.url).toBe(`http://127.0.0.1:${etcd.port}`);
    expect(STANDARD_PORTS).not.toContain(etcd.port);
    const post = async (path: string, body: unknown): Promise<Record<string, unknown>> => {
      const res = await fetch(`${etcd.url}${path}`, { method: 'POST', body: JSON.stringify(body) });
      expect(res.status).toBe(200);
      return (await res.json()) as Record<string, unknown>;
    };
    await post('/v3/kv/put', { key: b64('switchyard/test'), value: b64('hello') });
    const range = await post('/v3/kv/range', { key: b64('switchyard/test') });
    const kvs = range['kvs'] as Array<{ key: string; value: string }>;
    expect(kvs).toHaveLength(1);
    expect(Buffer.from(kvs[0]!.value, 'base64').toString()).toBe('hello');
    await expectStopped(etcd);
  });

  it('a server that cannot start fails with its last output lines', async () => {
    const err: unknown = await startRedis({ args: ['--no-such-option', 'x'] }).catch((e: unknown) => e);
    expect(isSwitchyardError(err)).toBe(true);
    expect(String((err as Error).message)).toMatch(/redis-server exited .*before it became ready[\s\S]*last output[\s\S]*no-such-option/i);
  });
});
