/**
 * What both KvTransferPlane implementations share, with no IO: the options (user type with documented
 * defaults → `KvTransferLimits`, validated in `parseKvTransferOptions`), the checks of a pull or release
 * request (the puller makes them before anything is sent, the server again on what arrives), the check
 * of what a provider returned, and how a pull's blocks are cut into chunks. The memory twin goes through
 * the same functions, so it refuses and chunks exactly as the TCP plane does.
 */
import { enforceLimits, internal, invalidArgument } from '@switchyard/common';
import { MAX_MODEL_NAME_LENGTH } from '../addressing.js';
import type { KvPullOptions, KvPullRequest, KvReleaseRequest, KvTransferBlock } from './kv-transfer-plane.js';

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
