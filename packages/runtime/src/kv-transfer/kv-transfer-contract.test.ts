/**
 * The KvTransferPlane contract, run against both implementations: the TCP plane over real loopback
 * sockets and the memory twin. Whatever one does (blocks, order, chunks, counters, error codes,
 * deadlines, cancellation, limits) the other must do too.
 */
import * as net from 'node:net';
import { SwitchyardError, capacityExhausted, notFound } from '@switchyard/common';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { KvTransferOptions } from './kv-transfer-limits.js';
import { TestProvider, bytesOf, hashOf } from '../test-support/kv-block-provider.js';
import type { KvBlockProvider, KvPullRequest, KvTransferBlock, KvTransferPlane, KvTransferServeOptions, KvTransferServer } from './kv-transfer-plane.js';
import { MemoryKvTransferNetwork, MemoryKvTransferPlane } from './memory-kv-transfer-plane.js';
import { TcpKvTransferPlane } from './tcp-kv-transfer-plane.js';

interface Harness {
  readonly name: string;
  /** One process's plane; planes of one test reach each other. */
  plane(options?: KvTransferOptions): KvTransferPlane;
  readonly serveOptions: KvTransferServeOptions;
  /** An address nothing serves. */
  deadAddress(): Promise<string>;
}

const harnesses: Array<() => Harness> = [
  () => ({
    name: 'tcp',
    plane: (options) => new TcpKvTransferPlane(options),
    serveOptions: { host: '127.0.0.1' },
    deadAddress: async () => {
      const s = net.createServer();
      await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
      const port = (s.address() as net.AddressInfo).port;
      await new Promise<void>((r) => s.close(() => r()));
      return `127.0.0.1:${port}`;
    },
  }),
  () => {
    const network = new MemoryKvTransferNetwork();
    return { name: 'memory', plane: (options) => new MemoryKvTransferPlane(network, options), serveOptions: {}, deadAddress: async () => 'memory:1' };
  },
];

async function collect(it: AsyncIterable<readonly KvTransferBlock[]>): Promise<KvTransferBlock[][]> {
  const chunks: KvTransferBlock[][] = [];
  for await (const c of it) chunks.push([...c]);
  return chunks;
}

async function failure(it: AsyncIterable<readonly KvTransferBlock[]>): Promise<{ error: SwitchyardError; blocks: KvTransferBlock[] }> {
  const blocks: KvTransferBlock[] = [];
  try {
    for await (const c of it) blocks.push(...c);
  } catch (error) {
    expect(error).toBeInstanceOf(SwitchyardError);
    return { error: error as SwitchyardError, blocks };
  }
  throw new Error('expected the pull to fail');
}

const pullOf = (hashes: readonly string[], leaseId = 'lease-1'): KvPullRequest => ({ model: 'm', leaseId, hashes, layoutDigest: 'L' });
const never = <T>(): Promise<T> => new Promise<T>(() => {});
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

describe.each(harnesses.map((make) => [make().name, make] as const))('KvTransferPlane contract: %s', (_name, make) => {
  let h: Harness;
  const planes: KvTransferPlane[] = [];
  const servers: KvTransferServer[] = [];
  const plane = (options?: KvTransferOptions): KvTransferPlane => {
    const p = h.plane(options);
    planes.push(p);
    return p;
  };
  const serve = async (provider: KvBlockProvider, options?: KvTransferOptions): Promise<{ server: KvTransferServer; plane: KvTransferPlane }> => {
    const p = plane(options);
    const server = await p.serve(provider, h.serveOptions);
    servers.push(server);
    return { server, plane: p };
  };

  beforeEach(() => {
    h = make();
  });
  afterEach(async () => {
    await Promise.all(servers.splice(0).map((s) => s.close()));
    await Promise.all(planes.splice(0).map((p) => p.close()));
  });

  it('moves many blocks of various sizes, in the order asked, in bounded chunks, counting the bytes', async () => {
    const provider = new TestProvider();
    const sizes = Array.from({ length: 300 }, (_, i) => [0, 1, 100, 4096, 16_384, 65_536, 300_000][i % 7]!);
    sizes[150] = 3 * 1024 * 1024; // bigger than a chunk: travels alone
    const hashes = provider.lease('lease-1', sizes);
    const { server, plane: serving } = await serve(provider);
    const puller = plane({ chunkBytes: 256 * 1024 });
    const order = [...hashes].reverse();
    const chunks = await collect(puller.pull(server.address, pullOf(order)));
    const blocks = chunks.flat();
    expect(blocks.map((b) => b.hash)).toEqual(order);
    for (const b of blocks) {
      const i = hashes.indexOf(b.hash);
      expect(Buffer.from(b.data).equals(Buffer.from(bytesOf(i, sizes[i]!)))).toBe(true);
    }
    // the server's chunk size (1 MiB by default) governs, not the puller's
    for (const c of chunks) {
      const bytes = c.reduce((n, b) => n + 12 + b.data.byteLength, 0);
      expect(c.length === 1 || bytes <= 1024 * 1024).toBe(true);
    }
    expect(chunks.length).toBeGreaterThan(5);
    expect(chunks.some((c) => c.length === 1 && c[0]!.data.byteLength === 3 * 1024 * 1024)).toBe(true);
    const total = sizes.reduce((a, b) => a + b, 0);
    expect(puller.counters()).toEqual({ bytesIn: total, bytesOut: 0 });
    expect(serving.counters()).toEqual({ bytesIn: 0, bytesOut: total });
    // the puller owns its bytes: writing them leaves the provider's intact
    blocks[0]!.data.fill(0xaa);
    expect(provider.leases.get('lease-1')!.get(order[0]!)![0]).toBe(bytesOf(hashes.indexOf(order[0]!), 1)[0]);
  });

  it('is lazy, and an empty pull yields nothing without asking the provider', async () => {
    const provider = new TestProvider();
    const hashes = provider.lease('lease-1', [10, 10]);
    const { server } = await serve(provider);
    const puller = plane();
    const it = puller.pull(server.address, pullOf(hashes));
    await sleep(20);
    expect(provider.reads).toEqual([]);
    expect(await collect(puller.pull(server.address, pullOf([])))).toEqual([]);
    expect(provider.reads).toEqual([]);
    expect((await collect(it)).flat()).toHaveLength(2);
    expect(provider.reads.flatMap((r) => r.hashes)).toEqual(hashes);
    expect(provider.reads[0]).toEqual(pullOf(hashes.slice(0, 1)));
  });

  it('reads the provider a chunk at a time, and fails with its code when the lease goes mid-pull', async () => {
    const provider = new TestProvider();
    const hashes = provider.lease('lease-1', Array.from({ length: 600 }, () => 8192));
    const { server } = await serve(provider);
    const puller = plane();
    expect((await collect(puller.pull(server.address, pullOf(hashes)))).flat().map((b) => b.hash)).toEqual(hashes);
    // one block first, then as many as fit 1 MiB at 8 KiB each: never the whole pull at once
    expect(provider.reads.map((r) => r.hashes.length)).toEqual([1, 127, 127, 127, 127, 91]);
    provider.reads.length = 0;
    const big = provider.lease('lease-2', Array.from({ length: 6 }, () => 1024 * 1024));
    expect((await collect(puller.pull(server.address, pullOf(big, 'lease-2')))).flat()).toHaveLength(6);
    expect(provider.reads.map((r) => r.hashes.length)).toEqual([1, 1, 1, 1, 1, 1]);
    // the lease expires after the first read
    provider.reads.length = 0;
    provider.override = (r) => {
      if (provider.reads.length === 2) provider.leases.delete('lease-1');
      return provider.answer(r);
    };
    const gone = await failure(puller.pull(server.address, pullOf(hashes)));
    expect(gone.error).toMatchObject({ code: 'not_found' });
    expect(gone.blocks.map((b) => b.hash)).toEqual(hashes.slice(0, 1));
  });

  it("passes the provider's refusals with their code and message", async () => {
    const provider = new TestProvider();
    const hashes = provider.lease('lease-1', [8, 8, 8]);
    const { server } = await serve(provider);
    const puller = plane();
    expect((await failure(puller.pull(server.address, pullOf(hashes, 'nope')))).error).toMatchObject({ code: 'not_found', message: 'lease nope is unknown or expired' });
    expect((await failure(puller.pull(server.address, { ...pullOf(hashes), model: 'other' }))).error).toMatchObject({ code: 'not_found' });
    expect((await failure(puller.pull(server.address, { ...pullOf(hashes), layoutDigest: 'X' }))).error).toMatchObject({ code: 'invalid_argument', message: 'layout digest X differs' });
    expect((await failure(puller.pull(server.address, pullOf([hashOf(99)])))).error).toMatchObject({ code: 'invalid_argument' });
    provider.override = async () => {
      throw capacityExhausted('busy');
    };
    expect((await failure(puller.pull(server.address, pullOf(hashes)))).error).toMatchObject({ code: 'capacity_exhausted', message: 'busy' });
    provider.override = () => {
      throw new TypeError('provider bug');
    };
    expect((await failure(puller.pull(server.address, pullOf(hashes)))).error).toMatchObject({ code: 'internal', message: 'provider bug' });
    // a provider that answers with other blocks than asked is refused on the serving side
    provider.override = (r) => r.hashes.map((hash, i) => ({ hash: i === 0 ? hashOf(50) : hash, data: new Uint8Array(4) }));
    const wrong = await failure(puller.pull(server.address, pullOf(hashes)));
    expect(wrong.error.code).toBe('internal');
    expect(wrong.blocks).toEqual([]);
    provider.override = (r) => r.hashes.slice(1).map((hash) => ({ hash, data: new Uint8Array(4) }));
    expect((await failure(puller.pull(server.address, pullOf(hashes)))).error.code).toBe('internal');
    // the server still serves
    provider.override = null;
    expect((await collect(puller.pull(server.address, pullOf(hashes)))).flat()).toHaveLength(3);
  });

  it('releases a lease once: true, then false; errors keep their code', async () => {
    const provider = new TestProvider();
    provider.lease('lease-1', [4]);
    const { server } = await serve(provider);
    const puller = plane();
    expect(await puller.release(server.address, { model: 'm', leaseId: 'lease-1' })).toBe(true);
    expect(await puller.release(server.address, { model: 'm', leaseId: 'lease-1' })).toBe(false);
    provider.release = () => {
      throw notFound('no model m2');
    };
    await expect(puller.release(server.address, { model: 'm2', leaseId: 'x' })).rejects.toMatchObject({ code: 'not_found', message: 'no model m2' });
    await expect(puller.release(await h.deadAddress(), { model: 'm', leaseId: 'x' })).rejects.toMatchObject({ code: 'unavailable' });
    await expect(puller.release(server.address, { model: '', leaseId: 'x' })).rejects.toMatchObject({ code: 'invalid_argument' });
  });

  it('refuses malformed requests before any IO, and over-limit ones on either side', async () => {
    const provider = new TestProvider();
    const hashes = provider.lease('lease-1', [4, 4, 4, 4, 4, 4]);
    const dead = await h.deadAddress();
    const puller = plane({ maxHashesPerPull: 4 });
    for (const bad of [
      pullOf(['ABCDEF0123456789']),
      pullOf(['123']),
      pullOf(hashes.slice(0, 5)),
      { ...pullOf(hashes.slice(0, 1)), model: '' },
      { ...pullOf(hashes.slice(0, 1)), leaseId: 'x'.repeat(129) },
      { ...pullOf(hashes.slice(0, 1)), layoutDigest: '\ud800' },
    ]) {
      expect((await failure(puller.pull(dead, bad))).error.code).toBe('invalid_argument');
    }
    expect((await failure(puller.pull(dead, pullOf(hashes.slice(0, 1)), { timeoutMs: 0 }))).error.code).toBe('invalid_argument');
    for (const address of ['nowhere', 'host:0', '']) {
      expect((await failure(puller.pull(address, pullOf(hashes.slice(0, 1))))).error.code).toBe('invalid_argument');
      await expect(puller.release(address, { model: 'm', leaseId: 'x' })).rejects.toMatchObject({ code: 'invalid_argument' });
    }
    // the server's own limit applies whatever the puller's
    const { server } = await serve(provider, { maxHashesPerPull: 2 });
    const refused = await failure(plane().pull(server.address, pullOf(hashes.slice(0, 3))));
    expect(refused.error).toMatchObject({ code: 'invalid_argument' });
    expect(provider.reads).toEqual([]);
  });

  it('serves on the port asked (refusing one in use or out of range) or a free one', async () => {
    const provider = new TestProvider();
    const { server } = await serve(provider);
    const port = Number(server.address.slice(server.address.lastIndexOf(':') + 1));
    expect(port).toBeGreaterThan(0);
    const p = plane();
    await expect(p.serve(provider, { ...h.serveOptions, port })).rejects.toMatchObject({ code: 'unavailable' });
    await expect(p.serve(provider, { ...h.serveOptions, port: 70_000 })).rejects.toMatchObject({ code: 'invalid_argument' });
    const { server: other } = await serve(provider);
    expect(other.address).not.toBe(server.address);
  });

  it('fails unavailable when nobody serves the address, or the server closed', async () => {
    const provider = new TestProvider();
    const hashes = provider.lease('lease-1', [4]);
    const puller = plane();
    expect((await failure(puller.pull(await h.deadAddress(), pullOf(hashes)))).error.code).toBe('unavailable');
    const { server } = await serve(provider);
    expect((await collect(puller.pull(server.address, pullOf(hashes)))).flat()).toHaveLength(1);
    await server.close();
    expect((await failure(puller.pull(server.address, pullOf(hashes)))).error.code).toBe('unavailable');
  });

  it('fails unavailable when the server closes in the middle of a pull', async () => {
    const provider = new TestProvider();
    const hashes = provider.lease('lease-1', Array.from({ length: 64 }, () => 1024 * 1024));
    const { server } = await serve(provider);
    const it = plane().pull(server.address, pullOf(hashes))[Symbol.asyncIterator]();
    const first = await it.next();
    expect(first.done).toBe(false);
    await server.close();
    const rest = await failure({ [Symbol.asyncIterator]: () => it });
    expect(rest.error.code).toBe('unavailable');
    expect(rest.blocks.length).toBeLessThan(63);
  });

  it('fails deadline_exceeded after timeoutMs, also while the consumer holds a chunk', async () => {
    const provider = new TestProvider();
    const hashes = provider.lease('lease-1', [4, 4]);
    const { server } = await serve(provider);
    const puller = plane();
    provider.override = () => never();
    const t0 = Date.now();
    expect((await failure(puller.pull(server.address, pullOf(hashes), { timeoutMs: 150 }))).error.code).toBe('deadline_exceeded');
    expect(Date.now() - t0).toBeGreaterThanOrEqual(140);
    await expect(puller.release(server.address, { model: 'm', leaseId: 'lease-1' }, { timeoutMs: 1_000 })).resolves.toBe(true);
    provider.override = null;
    const it = puller.pull(server.address, pullOf(provider.lease('lease-2', Array.from({ length: 8 }, () => 512 * 1024)), 'lease-2'), { timeoutMs: 200 })[Symbol.asyncIterator]();
    expect((await it.next()).done).toBe(false);
    await sleep(300);
    await expect(it.next()).rejects.toMatchObject({ code: 'deadline_exceeded' });
  });

  it('fails cancelled when the signal aborts: before, while waiting, while the consumer holds a chunk', async () => {
    const provider = new TestProvider();
    const hashes = provider.lease('lease-1', Array.from({ length: 8 }, () => 512 * 1024));
    const { server } = await serve(provider);
    const puller = plane();
    expect((await failure(puller.pull(server.address, pullOf(hashes), { signal: AbortSignal.abort() }))).error.code).toBe('cancelled');
    await expect(puller.release(server.address, { model: 'm', leaseId: 'x' }, { signal: AbortSignal.abort() })).rejects.toMatchObject({ code: 'cancelled' });
    provider.override = () => never();
    const ac = new AbortController();
    setTimeout(() => ac.abort(), 50);
    expect((await failure(puller.pull(server.address, pullOf(hashes), { signal: ac.signal }))).error.code).toBe('cancelled');
    provider.override = null;
    const ac2 = new AbortController();
    const it = puller.pull(server.address, pullOf(hashes), { signal: ac2.signal })[Symbol.asyncIterator]();
    expect((await it.next()).done).toBe(false);
    ac2.abort();
    await expect(it.next()).rejects.toMatchObject({ code: 'cancelled' });
    // the server is unharmed
    expect((await collect(puller.pull(server.address, pullOf(hashes)))).flat()).toHaveLength(8);
    // the whole answer has arrived (small chunks), the consumer holds the first: still cancelled
    const small = new TestProvider();
    const smallHashes = small.lease('lease-1', [40, 40, 40, 40]);
    const { server: smallServer } = await serve(small, { chunkBytes: 64 });
    const ac3 = new AbortController();
    const held = puller.pull(smallServer.address, pullOf(smallHashes), { signal: ac3.signal })[Symbol.asyncIterator]();
    expect((await held.next()).value).toHaveLength(1);
    await sleep(100);
    ac3.abort();
    await expect(held.next()).rejects.toMatchObject({ code: 'cancelled' });
  });

  it('a consumer that stops early ends the pull; closing the plane fails its open pulls unavailable', async () => {
    const provider = new TestProvider();
    const hashes = provider.lease('lease-1', Array.from({ length: 16 }, () => 512 * 1024));
    const { server } = await serve(provider);
    const puller = plane();
    for await (const chunk of puller.pull(server.address, pullOf(hashes))) {
      expect(chunk.length).toBeGreaterThan(0);
      break;
    }
    const it = puller.pull(server.address, pullOf(hashes))[Symbol.asyncIterator]();
    expect((await it.next()).done).toBe(false);
    await puller.close();
    await expect(it.next()).rejects.toMatchObject({ code: 'unavailable' });
    expect((await failure(puller.pull(server.address, pullOf(hashes)))).error.code).toBe('unavailable');
    expect((await collect(plane().pull(server.address, pullOf(hashes)))).flat()).toHaveLength(16);
  });
});
