/**
 * What only the TCP plane has: bytes in transit (a proxy that corrupts or cuts them), socket flow
 * control, addresses, and hostile peers on either side of the connection. The shared behaviour is in
 * kv-transfer-contract.test.ts.
 */
import * as net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { TestProvider, bytesOf } from '../test-support/kv-block-provider.js';
import type { KvPullRequest, KvTransferBlock, KvTransferServer } from './kv-transfer-plane.js';
import { FrameType, KV_WIRE_MAGIC, WireReader, decodeMessage, encodeEnd, encodeHello, encodePull } from './kv-transfer-wire.js';
import { formatTransferAddress, parseTransferAddress } from './kv-transfer-limits.js';
import { TcpKvTransferPlane, defaultAdvertiseHost } from './tcp-kv-transfer-plane.js';

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const pullOf = (hashes: readonly string[]): KvPullRequest => ({ model: 'm', leaseId: 'lease-1', hashes, layoutDigest: 'L' });
const cleanup: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c();
});

async function serveLease(sizes: readonly number[], options: ConstructorParameters<typeof TcpKvTransferPlane>[0] = {}) {
  const provider = new TestProvider();
  const hashes = provider.lease('lease-1', sizes);
  const plane = new TcpKvTransferPlane(options);
  const server = await plane.serve(provider, { host: '127.0.0.1' });
  cleanup.push(() => server.close(), () => plane.close());
  return { provider, hashes, plane, server };
}

function puller(): TcpKvTransferPlane {
  const p = new TcpKvTransferPlane();
  cleanup.push(() => p.close());
  return p;
}

async function pullAll(plane: TcpKvTransferPlane, address: string, hashes: readonly string[]): Promise<{ blocks: KvTransferBlock[]; error?: { code: string; message: string } }> {
  const blocks: KvTransferBlock[] = [];
  try {
    for await (const chunk of plane.pull(address, pullOf(hashes), { timeoutMs: 5_000 })) blocks.push(...chunk);
    return { blocks };
  } catch (e) {
    return { blocks, error: e as { code: string; message: string } };
  }
}

/** A TCP proxy to `target`; the server's bytes pass through `tamper` (stream offset of the piece given). */
async function startProxy(target: string, tamper: { flipAt?: number; cutAt?: number }): Promise<string> {
  const { host, port } = parseTransferAddress(target);
  const server = net.createServer((client) => {
    const upstream = net.connect({ host, port });
    let offset = 0;
    client.on('error', () => upstream.destroy());
    upstream.on('error', () => client.destroy());
    client.on('data', (b) => upstream.write(b));
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.end());
    upstream.on('data', (b: Buffer) => {
      const piece = Buffer.from(b);
      if (tamper.flipAt !== undefined && tamper.flipAt >= offset && tamper.flipAt < offset + piece.length) piece[tamper.flipAt - offset] = piece[tamper.flipAt - offset]! ^ 0x01;
      if (tamper.cutAt !== undefined && offset + piece.length > tamper.cutAt) {
        client.write(piece.subarray(0, tamper.cutAt - offset), () => {
          client.destroy();
          upstream.destroy();
        });
        offset = Number.POSITIVE_INFINITY;
        return;
      }
      if (offset !== Number.POSITIVE_INFINITY) client.write(piece);
      offset += piece.length;
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  cleanup.push(() => new Promise<void>((r) => server.close(() => r())));
  return `127.0.0.1:${(server.address() as net.AddressInfo).port}`;
}

// 8 blocks of 256 KiB: the server reads one block first, then three at a time (what fits 1 MiB), so
// the chunks hold 1, 3, 3 and 1 blocks. Frame = prefix 4 + type/crc/first/n 13 + 12 per block + data.
const BLOCK = 256 * 1024;
const frameOf = (blocks: number): number => 4 + 13 + 12 * blocks + blocks * BLOCK;
const CHUNK2_DATA = 8 + frameOf(1) + 4 + 13 + 3 * 12;

describe('TcpKvTransferPlane: bytes in transit', () => {
  it('refuses a chunk corrupted in transit (internal) and yields none of its blocks', async () => {
    const { hashes, server } = await serveLease(Array(8).fill(BLOCK));
    const plane = puller();
    const inData = await pullAll(plane, await startProxy(server.address, { flipAt: CHUNK2_DATA + 1000 }), hashes);
    expect(inData.error).toMatchObject({ code: 'internal' });
    expect(inData.error!.message).toMatch(/checksum/);
    expect(inData.blocks.map((b) => b.hash)).toEqual(hashes.slice(0, 1));
    expect(inData.blocks.every((b, i) => Buffer.from(b.data).equals(Buffer.from(bytesOf(i, BLOCK))))).toBe(true);
    // a byte of the first chunk's table (a block's hash): nothing at all is yielded
    const inTable = await pullAll(plane, await startProxy(server.address, { flipAt: 8 + 17 + 2 }), hashes);
    expect(inTable.error).toMatchObject({ code: 'internal' });
    expect(inTable.blocks).toEqual([]);
    expect(plane.counters().bytesIn).toBe(BLOCK);
    // untouched, the same transfer passes through the proxy whole
    const clean = await pullAll(plane, await startProxy(server.address, {}), hashes);
    expect(clean.error).toBeUndefined();
    expect(clean.blocks).toHaveLength(8);
  });

  it('fails unavailable on a transfer cut mid-chunk, keeping only the chunks that arrived whole', async () => {
    const { hashes, server } = await serveLease(Array(8).fill(BLOCK));
    const plane = puller();
    const cut = await pullAll(plane, await startProxy(server.address, { cutAt: CHUNK2_DATA + 5000 }), hashes);
    expect(cut.error).toMatchObject({ code: 'unavailable' });
    expect(cut.error!.message).toMatch(/closed before the end/);
    expect(cut.blocks).toHaveLength(1);
    // cut right after the hello, and right before END
    expect((await pullAll(plane, await startProxy(server.address, { cutAt: 8 }), hashes)).error).toMatchObject({ code: 'unavailable' });
    const beforeEnd = 8 + frameOf(1) + 2 * frameOf(3) + frameOf(1);
    const noEnd = await pullAll(plane, await startProxy(server.address, { cutAt: beforeEnd }), hashes);
    expect(noEnd.error).toMatchObject({ code: 'unavailable' });
    expect(noEnd.blocks).toHaveLength(8);
  });

  it('keeps memory bounded for a slow consumer: the server waits on the socket, not the whole pull in flight', async () => {
    const MiB = 1024 * 1024;
    const { hashes, server, plane: serving } = await serveLease(Array(64).fill(MiB));
    const plane = puller();
    const it = plane.pull(server.address, pullOf(hashes), { timeoutMs: 20_000 })[Symbol.asyncIterator]();
    const first = await it.next();
    expect(first.value).toHaveLength(1);
    await sleep(500);
    const sentWhileStalled = serving.counters().bytesOut;
    // kernel socket buffers on both ends plus a chunk or two: far from the 64 MiB asked
    console.info(`slow consumer: ${(sentWhileStalled / MiB).toFixed(1)} MiB sent while the consumer held its first chunk`);
    expect(sentWhileStalled).toBeLessThan(16 * MiB);
    expect(plane.counters().bytesIn).toBe(MiB);
    let got = 1;
    for (let r = await it.next(); !r.done; r = await it.next()) got += r.value.length;
    expect(got).toBe(64);
    expect(serving.counters().bytesOut).toBe(64 * MiB);
    expect(plane.counters().bytesIn).toBe(64 * MiB);
  });
});

describe('TcpKvTransferPlane: addresses', () => {
  it('advertises the listening host, or advertiseHost, with the port it got', async () => {
    const provider = new TestProvider();
    const plane = new TcpKvTransferPlane();
    const a = await plane.serve(provider, { host: '127.0.0.1' });
    const b = await plane.serve(provider, { host: '127.0.0.1', advertiseHost: 'worker-3.internal' });
    cleanup.push(() => a.close(), () => b.close(), () => plane.close());
    expect(a.address).toMatch(/^127\.0\.0\.1:\d+$/);
    expect(b.address).toMatch(/^worker-3\.internal:\d+$/);
    expect(parseTransferAddress(a.address).port).toBeGreaterThan(0);
    await expect(plane.serve(provider, { host: '127.0.0.1', port: parseTransferAddress(a.address).port })).rejects.toMatchObject({ code: 'unavailable' });
    expect(defaultAdvertiseHost('10.1.2.3')).toBe('10.1.2.3');
    expect(defaultAdvertiseHost(undefined)).toMatch(/^\d+\.\d+\.\d+\.\d+$/);
  });

  it('parses host:port and [v6]:port, and refuses anything else', () => {
    expect(parseTransferAddress('10.0.0.7:7001')).toEqual({ host: '10.0.0.7', port: 7001 });
    expect(parseTransferAddress('[::1]:80')).toEqual({ host: '::1', port: 80 });
    expect(formatTransferAddress('::1', 80)).toBe('[::1]:80');
    for (const bad of ['', 'host', 'host:', ':80', 'host:0', 'host:65536', 'a b:1', '::1:80', 'h:8x']) {
      expect(() => parseTransferAddress(bad), bad).toThrow(expect.objectContaining({ code: 'invalid_argument' }));
    }
  });
});

/** A raw client: sends `bytes` (in `pieces` writes `gapMs` apart), collects what comes back until the server closes. */
async function rawClient(server: KvTransferServer, bytes: Uint8Array, opts: { pieces?: number; gapMs?: number; waitMs?: number } = {}) {
  const { host, port } = parseTransferAddress(server.address);
  const socket = net.connect({ host, port });
  const received: Buffer[] = [];
  const t0 = Date.now();
  socket.on('data', (b) => received.push(b));
  socket.on('error', () => {});
  const closed = new Promise<number>((r) => socket.on('close', () => r(Date.now() - t0)));
  const pieces = opts.pieces ?? 1;
  const size = Math.ceil(bytes.length / pieces);
  for (let i = 0; i < pieces && !socket.destroyed; i++) {
    socket.write(bytes.subarray(i * size, (i + 1) * size));
    if (opts.gapMs) await sleep(opts.gapMs);
  }
  const ms = await Promise.race([closed, sleep(opts.waitMs ?? 5_000).then(() => -1)]);
  socket.destroy();
  const all = Buffer.concat(received);
  const reader = new WireReader(1 << 20);
  reader.push(all);
  const messages = [];
  try {
    for (let item = reader.next(); item !== null; item = reader.next()) if (item.kind === 'frame') messages.push(decodeMessage(item.type, item.body, { maxHashesPerPull: 1 }));
  } catch {
    // whatever else came back is not a frame
  }
  return { closedAfterMs: ms, messages };
}

function frameBytes(length: number, type: number, body: Uint8Array = new Uint8Array(0)): Buffer {
  const b = Buffer.alloc(5 + body.length);
  b.writeUInt32BE(length, 0);
  b[4] = type;
  b.set(body, 5);
  return b;
}

describe('TcpKvTransferPlane: hostile clients', () => {
  it('answers garbage, a huge length prefix, another version and a wrong frame with an ERROR frame and closes', async () => {
    const { server, hashes } = await serveLease([64, 64]);
    const garbage = await rawClient(server, Buffer.from('GET / HTTP/1.1\r\nHost: x\r\n\r\n'));
    expect(garbage.closedAfterMs).toBeGreaterThanOrEqual(0);
    expect(garbage.messages).toEqual([{ type: 'error', error: expect.objectContaining({ code: 'invalid_argument' }) }]);
    const huge = await rawClient(server, Buffer.concat([encodeHello(), frameBytes(0xffff_fff0, FrameType.PULL)]));
    expect(huge.closedAfterMs).toBeGreaterThanOrEqual(0);
    expect(huge.messages[0]).toMatchObject({ type: 'error', error: { code: 'invalid_argument', message: expect.stringMatching(/above the limit/) } });
    const version = await rawClient(server, Buffer.concat([encodeHello(2), encodePull(pullOf(hashes))]));
    expect(version.messages[0]).toMatchObject({ type: 'error', error: { code: 'unsupported' } });
    const wrongFrame = await rawClient(server, Buffer.concat([encodeHello(), encodeEnd(3)]));
    expect(wrongFrame.messages[0]).toMatchObject({ type: 'error', error: { code: 'invalid_argument' } });
    const truncatedPull = encodePull(pullOf(hashes));
    truncatedPull.writeUInt32BE(truncatedPull.length - 4 - 8, 0);
    const short = await rawClient(server, Buffer.concat([encodeHello(), truncatedPull.subarray(0, truncatedPull.length - 8)]));
    expect(short.messages[0]).toMatchObject({ type: 'error', error: { code: 'invalid_argument' } });
    // and still serves
    expect((await pullAll(puller(), server.address, hashes)).blocks).toHaveLength(2);
  });

  it('closes connections that stay silent or drip past the handshake timeout, and turns away those over the connection limit', async () => {
    const { server, hashes } = await serveLease([64], { maxConnections: 4, handshakeTimeoutMs: 300 });
    const { host, port } = parseTransferAddress(server.address);
    const t0 = Date.now();
    const idle = Array.from({ length: 12 }, () => {
      const s = net.connect({ host, port });
      s.on('error', () => {});
      s.resume(); // reads (the server's hello), so that the server's close is seen
      return new Promise<number>((r) => s.on('close', () => r(Date.now() - t0)));
    });
    const closedAt = (await Promise.all(idle)).sort((a, b) => a - b);
    expect(closedAt.slice(0, 8).every((ms) => ms < 250)).toBe(true); // over the limit: closed on arrival
    expect(closedAt.slice(8).every((ms) => ms >= 250 && ms < 3_000)).toBe(true); // held until the handshake timeout
    // a finished connection frees its slot at once: many pulls in a row through 4 slots
    const p = puller();
    for (let i = 0; i < 12; i++) expect((await pullAll(p, server.address, hashes)).blocks).toHaveLength(1);
    const drip = await rawClient(server, encodeHello(), { pieces: 8, gapMs: 100 });
    expect(drip.closedAfterMs).toBeGreaterThanOrEqual(250);
    expect(drip.closedAfterMs).toBeLessThan(1_500);
    expect((await pullAll(puller(), server.address, hashes)).blocks).toHaveLength(1);
  });

  it('drops a client that asks for a large pull and never reads, after the idle timeout', async () => {
    const MiB = 1024 * 1024;
    const { server, hashes } = await serveLease(Array(32).fill(MiB), { idleTimeoutMs: 300 });
    const { host, port } = parseTransferAddress(server.address);
    const s = net.connect({ host, port });
    s.on('error', () => {});
    s.pause();
    s.write(Buffer.concat([encodeHello(), encodePull(pullOf(hashes))]));
    // the server gives up on it: it closes its side, which this paused client sees once it reads again
    await sleep(1_500);
    let received = 0;
    s.on('data', (b: Buffer) => (received += b.length));
    s.resume();
    const closed = await Promise.race([new Promise<boolean>((r) => s.on('close', () => r(true))), sleep(10_000).then(() => false)]);
    expect(closed).toBe(true);
    expect(received).toBeLessThan(16 * MiB); // cut short: not the 32 MiB it asked for
    s.destroy();
    expect((await pullAll(puller(), server.address, hashes.slice(0, 2))).blocks).toHaveLength(2);
  });
});

/** A server that answers every connection with `bytes` (then keeps it open). */
async function rawServer(bytes: Uint8Array): Promise<string> {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((s) => {
    sockets.add(s);
    s.on('error', () => {});
    s.write(bytes);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  cleanup.push(
    () =>
      new Promise<void>((r) => {
        server.close(() => r());
        for (const s of sockets) s.destroy();
      }),
  );
  return `127.0.0.1:${(server.address() as net.AddressInfo).port}`;
}

describe('TcpKvTransferPlane: hostile servers', () => {
  const hashes = ['0000000000000001', '0000000000000002'];
  const pull = async (bytes: Uint8Array, timeoutMs = 2_000) => {
    const plane = puller();
    try {
      for await (const _ of plane.pull(await rawServer(bytes), pullOf(hashes), { timeoutMs }));
    } catch (e) {
      return e as { code: string; message: string };
    }
    throw new Error('expected the pull to fail');
  };

  it('classifies what a bad server sends', async () => {
    expect(await pull(Buffer.from('SSH-2.0-OpenSSH_9.6\r\n'))).toMatchObject({ code: 'unavailable', message: expect.stringMatching(/not a KV transfer server/) });
    expect(await pull(encodeHello(7))).toMatchObject({ code: 'unsupported' });
    expect(await pull(Buffer.concat([encodeHello(), frameBytes(0xffff_ffff, FrameType.CHUNK)]))).toMatchObject({ code: 'internal' });
    expect(await pull(Buffer.concat([encodeHello(), encodeEnd(2)]))).toMatchObject({ code: 'internal' });
    expect(await pull(Buffer.concat([encodeHello(), frameBytes(2, 0x55, new Uint8Array([1]))]))).toMatchObject({ code: 'internal' });
    expect(await pull(encodeHello(), 200)).toMatchObject({ code: 'deadline_exceeded' });
    const magic = Buffer.alloc(4);
    magic.writeUInt32BE(KV_WIRE_MAGIC, 0);
    expect(magic.toString('ascii')).toBe('SYKV');
  });
});
