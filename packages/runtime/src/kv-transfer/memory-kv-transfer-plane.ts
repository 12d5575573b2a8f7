/**
 * In-memory KvTransferPlane: `MemoryKvTransferNetwork` plays the network (addresses → serving
 * providers); each `MemoryKvTransferPlane` is one process's plane. Same semantics as the TCP plane,
 * through the same checks (kv-transfer-limits.ts): requests are checked on both sides with each side's
 * limits, a provider's refusal reaches the puller with its code, what a provider returned is checked,
 * blocks arrive in the same chunks, bytes are copied (a puller never shares memory with the provider),
 * counters count the same payload bytes. An unknown address, a closed server or a server closed
 * mid-pull is `unavailable`; `timeoutMs` is `deadline_exceeded`, `signal` is `cancelled`. Addresses are
 * `host:port` as on TCP (`advertiseHost`, default 'memory', and a port counted from 40000). Delivery
 * is asynchronous (a macrotask per chunk), like a network hop.
 */
import { cancelled, deadlineExceeded, invalidArgument, toSwitchyardError, unavailable } from '@switchyard/common';
import {
  type KvTransferLimits,
  type KvTransferOptions,
  checkPullOptions,
  checkPullRequest,
  checkReleaseRequest,
  formatTransferAddress,
  parseKvTransferOptions,
  parseTransferAddress,
  readChunks,
} from './kv-transfer-limits.js';
import {
  DEFAULT_KV_PULL_TIMEOUT_MS,
  type KvBlockProvider,
  type KvPullOptions,
  type KvPullRequest,
  type KvReleaseRequest,
  type KvTransferBlock,
  type KvTransferCounters,
  type KvTransferPlane,
  type KvTransferServeOptions,
  type KvTransferServer,
} from './kv-transfer-plane.js';

interface Served {
  readonly provider: KvBlockProvider;
  readonly plane: MemoryKvTransferPlane;
  readonly limits: KvTransferLimits;
  open: boolean;
}

/** The shared "network" of an in-process cluster: one per test or standalone process. */
export class MemoryKvTransferNetwork {
  private readonly servers = new Map<string, Served>();
  private nextPort = 40_000;

  /** Addresses currently served (for assertions). */
  addresses(): string[] {
    return [...this.servers.keys()].sort();
  }

  /** @internal */
  listen(served: Served, options: KvTransferServeOptions): string {
    const host = options.advertiseHost ?? 'memory';
    let port = options.port ?? 0;
    if (!Number.isSafeInteger(port) || port < 0 || port > 65_535) throw invalidArgument(`KV transfer: port ${String(port)} is not 0 to 65535`);
    if (port === 0) while (this.servers.has(formatTransferAddress(host, (port = this.nextPort++))));
    const address = formatTransferAddress(host, port);
    if (this.servers.has(address)) throw unavailable(`cannot listen on ${address}: address in use`);
    this.servers.set(address, served);
    return address;
  }

  /** @internal */
  unlisten(address: string, served: Served): void {
    if (this.servers.get(address) === served) this.servers.delete(address);
  }

  /** @internal */
  lookup(address: string): Served {
    const served = this.servers.get(address);
    if (served === undefined || !served.open) throw unavailable(`KV transfer to ${address} failed: nobody serves that address`);
    return served;
  }
}

/** Rejects with the first of: the signal's abort (cancelled), the deadline (deadline_exceeded), the plane's close. */
class Guard {
  private failure: Error | null = null;
  private readonly listeners = new Set<(e: Error) => void>();
  private readonly timer: NodeJS.Timeout | undefined;
  private readonly onAbort = (): void => this.fail(cancelled(`${this.what} cancelled`));

  constructor(
    private readonly what: string,
    private readonly options: KvPullOptions,
  ) {
    const timeoutMs = options.timeoutMs ?? DEFAULT_KV_PULL_TIMEOUT_MS;
    if (options.signal?.aborted) this.failure = cancelled(`${what} cancelled`);
    options.signal?.addEventListener('abort', this.onAbort, { once: true });
    this.timer = setTimeout(() => this.fail(deadlineExceeded(`${what} timed out after ${timeoutMs} ms`)), timeoutMs);
  }

  fail(e: Error): void {
    if (this.failure !== null) return;
    this.failure = e;
    for (const l of this.listeners) l(e);
  }

  check(): void {
    if (this.failure !== null) throw this.failure;
  }

  /** `p`, unless the guard fails first. */
  race<T>(p: Promise<T> | T): Promise<T> {
    this.check();
    return new Promise<T>((resolve, reject) => {
      const l = (e: Error): void => reject(e);
      this.listeners.add(l);
      Promise.resolve(p).then(
        (v) => {
          this.listeners.delete(l);
          resolve(v);
        },
        (e: unknown) => {
          this.listeners.delete(l);
          reject(e instanceof Error ? e : new Error(String(e)));
        },
      );
    });
  }

  dispose(): void {
    clearTimeout(this.timer);
    this.options.signal?.removeEventListener('abort', this.onAbort);
  }
}

const hop = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

export class MemoryKvTransferPlane implements KvTransferPlane {
  private readonly limits: KvTransferLimits;
  private bytesIn = 0;
  private bytesOut = 0;
  private closed = false;
  private readonly guards = new Set<Guard>();

  constructor(
    private readonly network: MemoryKvTransferNetwork,
    options: KvTransferOptions = {},
  ) {
    this.limits = parseKvTransferOptions(options);
  }

  async serve(provider: KvBlockProvider, options: KvTransferServeOptions = {}): Promise<KvTransferServer> {
    if (this.closed) throw unavailable('KV transfer plane is closed');
    const served: Served = { provider, plane: this, limits: this.limits, open: true };
    const address = this.network.listen(served, options);
    return {
      address,
      close: async () => {
        served.open = false;
        this.network.unlisten(address, served);
      },
    };
  }

  /** @internal the serving side's count of payload bytes sent. */
  sent(bytes: number): void {
    this.bytesOut += bytes;
  }

  pull(address: string, request: KvPullRequest, options: KvPullOptions = {}): AsyncIterable<readonly KvTransferBlock[]> {
    const plane = this;
    return {
      [Symbol.asyncIterator]: async function* () {
        checkPullRequest(request, plane.limits);
        checkPullOptions(options);
        parseTransferAddress(address);
        if (plane.closed) throw unavailable('KV transfer plane is closed');
        const what = `KV pull of ${request.hashes.length} blocks from ${address}`;
        const guard = plane.guard(what, options);
        try {
          guard.check();
          if (request.hashes.length === 0) return;
          await guard.race(hop());
          const served = plane.network.lookup(address);
          // What the server receives is its own copy of the request, checked with its own limits.
          const asked: KvPullRequest = { model: request.model, leaseId: request.leaseId, layoutDigest: request.layoutDigest, hashes: [...request.hashes] };
          checkPullRequest(asked, served.limits);
          const chunks = readChunks(served.provider, asked, served.limits);
          try {
            for (;;) {
              const next = await guard.race(chunks.next());
              if (next.done) break;
              const chunk = next.value.blocks.map((b, i) => ({ hash: asked.hashes[next.value.first + i]!, data: new Uint8Array(b.data) }));
              const bytes = chunk.reduce((n, b) => n + b.data.byteLength, 0);
              served.plane.sent(bytes);
              await guard.race(hop());
              if (!served.open) throw unavailable(`${what} failed: the connection was lost after ${next.value.first} blocks`);
              plane.bytesIn += bytes;
              yield chunk;
              guard.check();
            }
          } finally {
            void chunks.return(undefined);
          }
        } finally {
          guard.dispose();
          plane.guards.delete(guard);
        }
      },
    };
  }

  async release(address: string, request: KvReleaseRequest, options: KvPullOptions = {}): Promise<boolean> {
    checkReleaseRequest(request);
    checkPullOptions(options);
    parseTransferAddress(address);
    if (this.closed) throw unavailable('KV transfer plane is closed');
    const guard = this.guard(`KV release of lease ${request.leaseId} at ${address}`, options);
    try {
      await guard.race(hop());
      const served = this.network.lookup(address);
      try {
        return served.provider.release({ model: request.model, leaseId: request.leaseId }) === true;
      } catch (e) {
        throw toSwitchyardError(e);
      }
    } finally {
      guard.dispose();
      this.guards.delete(guard);
    }
  }

  counters(): KvTransferCounters {
    return { bytesIn: this.bytesIn, bytesOut: this.bytesOut };
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const g of this.guards) g.fail(unavailable('KV transfer plane is closed'));
  }

  private guard(what: string, options: KvPullOptions): Guard {
    const g = new Guard(what, options);
    this.guards.add(g);
    return g;
  }
}
