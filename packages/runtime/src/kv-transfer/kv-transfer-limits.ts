/**
 * What both KvTransferPlane implementations share, with no IO: the options (user type with documented
 * defaults → `KvTransferLimits`, validated in `parseKvTransferOptions`), the checks of a pull or release
 * request (the puller makes them before anything is sent, the server again on what arrives), the check
 * of what a provider returned, how a pull's blocks are read from the provider and cut into chunks
 * (`readChunks`), and transfer addresses. The memory twin goes through the same functions, so it
 * refuses, reads and chunks exactly as the TCP plane does.
 */
import { enforceLimits, internal, invalidArgument, toSwitchyardError } from '@switchyard/common';
import { MAX_MODEL_NAME_LENGTH } from '../addressing.js';
import type { KvBlockProvider, KvPullOptions, KvPullRequest, KvReleaseRequest, KvTransferBlock } from './kv-transfer-plane.js';

/** Target payload of one chunk (block data plus 12 table bytes per block). A bigger block travels alone. */
export const DEFAULT_KV_CHUNK_BYTES = 1024 * 1024;
/** Largest single block either side accepts (a 70B-class model's fp16 block of 16 tokens is 5 MiB). */
export const DEFAULT_KV_MAX_BLOCK_BYTES = 64 * 1024 * 1024;
/** Most hashes in one pull: 1M tokens of context at block size 16. */
export const DEFAULT_KV_MAX_HASHES_PER_PULL = 65_536;
/** A connection must say hello and send its request within this many ms of connecting (server side). */
export const DEFAULT_KV_HANDSHAKE_TIMEOUT_MS = 5_000;
/** A connection on which nothing was read or written for this long is closed (server side). */
export const DEFAULT_KV_IDLE_TIMEOUT_MS = 30_000;
/** Connections one server holds at a time; more are closed as they arrive. */
export const DEFAULT_KV_MAX_CONNECTIONS = 64;
/** Longest lease id (characters). Engines use UUIDs. */
export const MAX_KV_LEASE_ID_LENGTH = 128;
/** Longest layout digest (characters). A hex SHA-256 is 64. */
export const MAX_KV_LAYOUT_DIGEST_LENGTH = 128;

/** A block's sequence hash on the plane: exactly 16 lower-case hex digits (block-hash.ts). */
export const KV_BLOCK_HASH_PATTERN = /^[0-9a-f]{16}$/;

/** Options of a KvTransferPlane; every field optional, defaults above. */
export interface KvTransferOptions {
  /** Target bytes per chunk (`DEFAULT_KV_CHUNK_BYTES`); at least one block per chunk whatever its size. */
  readonly chunkBytes?: number;
  /** Largest block accepted, served or pulled (`DEFAULT_KV_MAX_BLOCK_BYTES`). */
  readonly maxBlockBytes?: number;
  /** Most hashes in one pull (`DEFAULT_KV_MAX_HASHES_PER_PULL`). */
  readonly maxHashesPerPull?: number;
  /** Server: hello and request must arrive within this (`DEFAULT_KV_HANDSHAKE_TIMEOUT_MS`). */
  readonly handshakeTimeoutMs?: number;
  /** Server: a connection with no read or write progress for this long is closed (`DEFAULT_KV_IDLE_TIMEOUT_MS`). */
  readonly idleTimeoutMs?: number;
  /** Server: connections held at once (`DEFAULT_KV_MAX_CONNECTIONS`). */
  readonly maxConnections?: number;
}

export interface KvTransferLimits {
  readonly chunkBytes: number;
  readonly maxBlockBytes: number;
  readonly maxHashesPerPull: number;
  readonly handshakeTimeoutMs: number;
  readonly idleTimeoutMs: number;
  readonly maxConnections: number;
}

/** Defaults applied and every field checked (a positive safe integer), once. */
export function parseKvTransferOptions(options: KvTransferOptions = {}): KvTransferLimits {
  const limits: KvTransferLimits = {
    chunkBytes: options.chunkBytes ?? DEFAULT_KV_CHUNK_BYTES,
    maxBlockBytes: options.maxBlockBytes ?? DEFAULT_KV_MAX_BLOCK_BYTES,
    maxHashesPerPull: options.maxHashesPerPull ?? DEFAULT_KV_MAX_HASHES_PER_PULL,
    handshakeTimeoutMs: options.handshakeTimeoutMs ?? DEFAULT_KV_HANDSHAKE_TIMEOUT_MS,
    idleTimeoutMs: options.idleTimeoutMs ?? DEFAULT_KV_IDLE_TIMEOUT_MS,
    maxConnections: options.maxConnections ?? DEFAULT_KV_MAX_CONNECTIONS,
  };
  for (const [k, v] of Object.entries(limits)) {
    if (!Number.isSafeInteger(v) || (v as number) < 1) throw invalidArgument(`KV transfer option ${k} must be a positive integer, got ${String(v)}`);
  }
  // Frames are at most one chunk or one block (plus headers): both must fit a 32-bit length prefix.
  enforceLimits('KV transfer options', [
    { what: 'chunkBytes', value: limits.chunkBytes, max: 1024 * 1024 * 1024, unit: 'bytes', why: 'a chunk is one frame with a 32-bit length' },
    { what: 'maxBlockBytes', value: limits.maxBlockBytes, max: 1024 * 1024 * 1024, unit: 'bytes', why: 'a block is at most one frame with a 32-bit length' },
    { what: 'maxHashesPerPull', value: limits.maxHashesPerPull, max: 1 << 24, unit: 'hashes', why: 'a pull request is one frame the server buffers' },
  ]);
  return limits;
}

/** `host:port` or `[v6]:port` → its parts; invalid_argument otherwise. */
export function parseTransferAddress(address: string): { host: string; port: number } {
  const m = typeof address === 'string' ? /^(?:\[([0-9a-fA-F:.]+)\]|([^\s:[\]]+)):(\d{1,5})$/.exec(address) : null;
  const port = m === null ? NaN : Number(m[3]);
  if (m === null || !(port >= 1 && port <= 65_535)) throw invalidArgument(`KV transfer: address ${JSON.stringify(String(address)).slice(0, 80)} is not host:port`);
  return { host: m[1] ?? m[2]!, port };
}

export function formatTransferAddress(host: string, port: number): string {
  return host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
}

/** True for a string that survives UTF-8 encoding unchanged (no lone surrogates). */
function wellFormed(s: string): boolean {
  return Buffer.from(s, 'utf8').toString('utf8') === s;
}

function checkName(what: string, value: unknown, max: number): void {
  if (typeof value !== 'string' || value.length === 0 || value.length > max || !wellFormed(value)) {
    const shown = typeof value === 'string' ? `${value.length} characters` : typeof value;
    throw invalidArgument(`KV transfer: ${what} must be 1 to ${max} characters of well-formed text (got ${shown})`);
  }
}

export function checkReleaseRequest(request: KvReleaseRequest): void {
  checkName('model', request.model, MAX_MODEL_NAME_LENGTH);
  checkName('leaseId', request.leaseId, MAX_KV_LEASE_ID_LENGTH);
}

/** invalid_argument unless the request is well formed and within `limits`. */
export function checkPullRequest(request: KvPullRequest, limits: KvTransferLimits): void {
  checkReleaseRequest(request);
  checkName('layoutDigest', request.layoutDigest, MAX_KV_LAYOUT_DIGEST_LENGTH);
  if (!Array.isArray(request.hashes)) throw invalidArgument('KV transfer: hashes must be an array');
  enforceLimits('KV transfer pull', [
    { what: 'hash count', value: request.hashes.length, max: limits.maxHashesPerPull, unit: 'hashes', why: 'one pull is one bounded request' },
  ]);
  for (const h of request.hashes) {
    if (typeof h !== 'string' || !KV_BLOCK_HASH_PATTERN.test(h)) {
      throw invalidArgument(`KV transfer: block hash ${JSON.stringify(String(h)).slice(0, 40)} is not 16 lower-case hex digits`);
    }
  }
}

/**
 * What a provider returned must be exactly the blocks asked, in order, each within the block limit:
 * anything else is a bug on the serving side (internal), never passed on to the puller.
 */
export function checkProvided(request: KvPullRequest, blocks: readonly KvTransferBlock[], limits: KvTransferLimits): void {
  if (!Array.isArray(blocks) || blocks.length !== request.hashes.length) {
    throw internal(`KV transfer: the provider returned ${Array.isArray(blocks) ? blocks.length : 'no'} blocks for ${request.hashes.length} hashes`);
  }
  for (let i = 0; i < blocks.length; i++) {
    const b = blocks[i];
    if (b === undefined || b.hash !== request.hashes[i]) throw internal(`KV transfer: the provider's block ${i} is not ${request.hashes[i]}`);
    if (!(b.data instanceof Uint8Array)) throw internal(`KV transfer: the provider's block ${b.hash} has no bytes`);
    if (b.data.byteLength > limits.maxBlockBytes) {
      throw internal(`KV transfer: block ${b.hash} is ${b.data.byteLength} bytes, above the limit of ${limits.maxBlockBytes} bytes`);
    }
  }
}

/** Bytes a block takes in a chunk: its data and its table entry (8-byte hash, 4-byte size). */
export const CHUNK_ENTRY_BYTES = 12;

/**
 * Cut blocks of `sizes` bytes into consecutive chunks of at most `chunkBytes` (table included), each
 * with at least one block. Returns the end index (exclusive) of each chunk.
 */
export function planChunks(sizes: readonly number[], chunkBytes: number): number[] {
  const ends: number[] = [];
  let used = 0;
  for (let i = 0; i < sizes.length; i++) {
    const cost = CHUNK_ENTRY_BYTES + sizes[i]!;
    if (used > 0 && used + cost > chunkBytes) {
      ends.push(i);
      used = 0;
    }
    used += cost;
  }
  if (used > 0) ends.push(sizes.length);
  return ends;
}

/** Longest timeout a timer can hold (setTimeout fires at once above it). */
const MAX_TIMEOUT_MS = 2_147_483_647;

/** invalid_argument unless `timeoutMs` (when given) is a positive number of ms a timer can hold. */
export function checkPullOptions(options: KvPullOptions): void {
  const t = options.timeoutMs;
  if (t !== undefined && !(typeof t === 'number' && t > 0 && t <= MAX_TIMEOUT_MS)) {
    throw invalidArgument(`KV transfer: timeoutMs must be a positive number of ms up to ${MAX_TIMEOUT_MS}, got ${String(t)}`);
  }
}

/** One chunk of a pull as the serving side produces it: its blocks and the pull index of the first. */
export interface ServedChunk {
  readonly first: number;
  readonly blocks: readonly KvTransferBlock[];
}

/**
 * The serving side of a pull, for both planes: reads the provider about a chunk's worth of blocks at a
 * time (the first call asks for one block, each later call for as many as fit a chunk at the sizes
 * seen so far), checks each answer (`checkProvided`) and yields the pull's chunks in order. So a pull
 * of any length holds about one chunk of the provider's bytes at a time (an engine copies blocks out
 * of its cache to answer), and a lease that expires mid-pull fails the rest with the provider's code.
 * Errors are SwitchyardErrors (anything else a provider throws becomes internal).
 */
export async function* readChunks(provider: KvBlockProvider, request: KvPullRequest, limits: KvTransferLimits): AsyncGenerator<ServedChunk> {
  let start = 0;
  let batch = 1;
  let seenBytes = 0;
  let seenBlocks = 0;
  while (start < request.hashes.length) {
    const asked: KvPullRequest = { ...request, hashes: request.hashes.slice(start, start + batch) };
    let blocks: readonly KvTransferBlock[];
    try {
      blocks = await provider.read(asked);
      checkProvided(asked, blocks, limits);
    } catch (e) {
      throw toSwitchyardError(e);
    }
    let from = 0;
    for (const end of planChunks(blocks.map((b) => b.data.byteLength), limits.chunkBytes)) {
      yield { first: start + from, blocks: blocks.slice(from, end) };
      from = end;
    }
    for (const b of blocks) seenBytes += b.data.byteLength;
    seenBlocks += blocks.length;
    start += blocks.length;
    batch = Math.max(1, Math.floor(limits.chunkBytes / (CHUNK_ENTRY_BYTES + seenBytes / seenBlocks)));
  }
}
