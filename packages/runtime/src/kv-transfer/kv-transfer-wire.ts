/**
 * The KV transfer protocol's bytes, with no IO (the protocol is described at the top of
 * tcp-kv-transfer-plane.ts): the hello, the frame encoders, `WireReader` (bytes in, hello and frames
 * out, never past its frame limit) and `decodeMessage` (a frame's body → a typed message). Whatever a
 * peer sends decodes or is refused with invalid_argument; `verifyChunk` then refuses (internal) a chunk
 * whose checksum, position or hashes are not what the puller asked for.
 */
import { crc32 } from 'node:zlib';
import { ERROR_CODES, type ErrorCode, SwitchyardError, internal, invalidArgument } from '@switchyard/common';
import { MAX_MODEL_NAME_LENGTH } from '../addressing.js';
import { CHUNK_ENTRY_BYTES, type KvTransferLimits, MAX_KV_LAYOUT_DIGEST_LENGTH, MAX_KV_LEASE_ID_LENGTH } from './kv-transfer-limits.js';
import type { KvPullRequest, KvReleaseRequest, KvTransferBlock } from './kv-transfer-plane.js';

/** "SYKV": the first four bytes each side sends. */
export const KV_WIRE_MAGIC = 0x53594b56;
export const KV_WIRE_VERSION = 1;
export const HELLO_BYTES = 8;
/** Bytes before a frame's type: the big-endian u32 length of type + body. */
export const FRAME_PREFIX_BYTES = 4;

export const FrameType = {
  PULL: 0x01,
  RELEASE: 0x02,
  CHUNK: 0x81,
  END: 0x82,
  RELEASED: 0x83,
  ERROR: 0xee,
} as const;

/** type + crc + first index + block count. */
const CHUNK_FIXED_BYTES = 1 + 4 + 4 + 4;
/** UTF-8 byte bounds of the request strings (4 bytes per character at most). */
const MAX_MODEL_BYTES = 4 * MAX_MODEL_NAME_LENGTH;
const MAX_LEASE_BYTES = 4 * MAX_KV_LEASE_ID_LENGTH;
const MAX_DIGEST_BYTES = 4 * MAX_KV_LAYOUT_DIGEST_LENGTH;
/** Error messages are cut to this many characters before they are sent. */
const MAX_ERROR_MESSAGE_CHARS = 1_000;

/** Largest frame a puller accepts: one full chunk, or one block of the largest size alone. */
export function maxChunkFrameBytes(limits: KvTransferLimits): number {
  return CHUNK_FIXED_BYTES + Math.max(limits.chunkBytes, CHUNK_ENTRY_BYTES + limits.maxBlockBytes);
}

/** Largest frame a server accepts: a pull with every string and hash at its limit. */
export function maxRequestFrameBytes(limits: KvTransferLimits): number {
  return 1 + 3 * 2 + MAX_MODEL_BYTES + MAX_LEASE_BYTES + MAX_DIGEST_BYTES + 4 + 8 * limits.maxHashesPerPull;
}

// ---- encoding ------------------------------------------------------------------------------------

export function encodeHello(version: number = KV_WIRE_VERSION): Uint8Array {
  const b = Buffer.alloc(HELLO_BYTES);
  b.writeUInt32BE(KV_WIRE_MAGIC, 0);
  b.writeUInt16BE(version, 4);
  return b;
}

/** A whole frame: length prefix, type, body parts. */
function frame(type: number, parts: readonly Uint8Array[]): Buffer {
  const bodyBytes = parts.reduce((n, p) => n + p.byteLength, 0);
  const head = Buffer.alloc(FRAME_PREFIX_BYTES + 1);
  head.writeUInt32BE(1 + bodyBytes, 0);
  head[4] = type;
  return Buffer.concat([head, ...parts]);
}

function str16(s: string): Buffer {
  const text = Buffer.from(s, 'utf8');
  if (text.length > 0xffff) throw invalidArgument(`KV transfer: a ${text.length}-byte string does not fit a frame field`);
  const len = Buffer.alloc(2);
  len.writeUInt16BE(text.length, 0);
  return Buffer.concat([len, text]);
}

function u32(n: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(n, 0);
  return b;
}

/** A checked hash (KV_BLOCK_HASH_PATTERN) as its 8 bytes. */
function hashBytes(hash: string, into: Buffer, at: number): void {
  into.write(hash, at, 8, 'hex');
}

/** 8 bytes at `at` of `from` as 16 lower-case hex digits. */
function hashText(from: Buffer, at: number): string {
  return from.toString('hex', at, at + 8);
}

const asBuffer = (b: Uint8Array): Buffer => Buffer.from(b.buffer, b.byteOffset, b.byteLength);

/** PULL: str16 model, str16 leaseId, str16 layoutDigest, u32 n, n × 8-byte hash. The request was checked. */
export function encodePull(request: KvPullRequest): Buffer {
  const hashes = Buffer.alloc(8 * request.hashes.length);
  request.hashes.forEach((h, i) => hashBytes(h, hashes, 8 * i));
  return frame(FrameType.PULL, [str16(request.model), str16(request.leaseId), str16(request.layoutDigest), u32(request.hashes.length), hashes]);
}

/** RELEASE: str16 model, str16 leaseId. */
export function encodeRelease(request: KvReleaseRequest): Buffer {
  return frame(FrameType.RELEASE, [str16(request.model), str16(request.leaseId)]);
}

/**
 * CHUNK: u32 crc32 of everything after it in the body, u32 index of the first block in the pull,
 * u32 n ≥ 1, n × (8-byte hash, u32 size), then the n blocks' bytes. Returns the frame's head (up to
 * the end of the table) and the blocks' own bytes, to be written in that order without copying them
 * (measured: copying a chunk of small blocks into one buffer first cost the server four times the CPU).
 */
export function encodeChunk(first: number, blocks: readonly KvTransferBlock[]): Uint8Array[] {
  const n = blocks.length;
  const head = Buffer.alloc(FRAME_PREFIX_BYTES + CHUNK_FIXED_BYTES + CHUNK_ENTRY_BYTES * n);
  let data = 0;
  let at = FRAME_PREFIX_BYTES + CHUNK_FIXED_BYTES;
  for (const b of blocks) {
    hashBytes(b.hash, head, at);
    head.writeUInt32BE(b.data.byteLength, at + 8);
    at += CHUNK_ENTRY_BYTES;
    data += b.data.byteLength;
  }
  head.writeUInt32BE(head.length - FRAME_PREFIX_BYTES + data, 0);
  head[4] = FrameType.CHUNK;
  head.writeUInt32BE(first, 9);
  head.writeUInt32BE(n, 13);
  let crc = crc32(head.subarray(9));
  for (const b of blocks) crc = crc32(b.data, crc);
  head.writeUInt32BE(crc, 5);
  return [head, ...blocks.map((b) => b.data)];
}

/** END: u32 blocks sent in all (= the pull's hash count). */
export function encodeEnd(blocks: number): Buffer {
  return frame(FrameType.END, [u32(blocks)]);
}

/** RELEASED: u8 1 when the provider knew the lease, 0 otherwise. */
export function encodeReleased(released: boolean): Buffer {
  return frame(FrameType.RELEASED, [Buffer.from([released ? 1 : 0])]);
}

/** ERROR: u8-length code (an ErrorCode), str16 message. */
export function encodeError(error: SwitchyardError): Buffer {
  const code = Buffer.from(error.code, 'ascii');
  return frame(FrameType.ERROR, [Buffer.from([code.length]), code, str16(error.message.slice(0, MAX_ERROR_MESSAGE_CHARS))]);
}

// ---- reading -------------------------------------------------------------------------------------

/** Pieces at most this small are coalesced once this many are buffered. */
const COALESCE_BELOW_BYTES = 1024;
const COALESCE_AFTER_PIECES = 8;
const STAGING_BYTES = 4096;

export type WireItem = { readonly kind: 'hello'; readonly version: number } | { readonly kind: 'frame'; readonly type: number; readonly body: Uint8Array };

/**
 * Bytes in (any split), the peer's hello and then its frames out. Holds at most what was pushed; the
 * IO side stops reading once `ready()` (so at most one item plus one read is buffered). A length
 * prefix of 0 or above `maxFrameBytes`, or a hello without the magic, is refused (invalid_argument)
 * as soon as its bytes are here, before the frame's body is awaited.
 */
export class WireReader {
  /** Unread bytes, in order: pieces pushed, or views of a coalescing buffer (below). */
  private readonly chunks: Uint8Array[] = [];
  private total = 0;
  private helloSeen = false;
  /** Small pieces (a peer dripping bytes) are copied into this buffer, so a piece costs no object each. */
  private staging: Uint8Array | null = null;
  private stagingUsed = 0;

  constructor(private readonly maxFrameBytes: number) {}

  get buffered(): number {
    return this.total;
  }

  push(bytes: Uint8Array): void {
    const n = bytes.byteLength;
    if (n === 0) return;
    this.total += n;
    if (n > COALESCE_BELOW_BYTES || this.chunks.length < COALESCE_AFTER_PIECES) {
      this.chunks.push(bytes);
      return;
    }
    const last = this.chunks[this.chunks.length - 1]!;
    const s = this.staging;
    if (s !== null && last.buffer === s.buffer && last.byteOffset + last.byteLength === s.byteOffset + this.stagingUsed && this.stagingUsed + n <= s.byteLength) {
      s.set(bytes, this.stagingUsed);
      this.stagingUsed += n;
      this.chunks[this.chunks.length - 1] = new Uint8Array(last.buffer, last.byteOffset, last.byteLength + n);
      return;
    }
    this.staging = new Uint8Array(STAGING_BYTES);
    this.staging.set(bytes, 0);
    this.stagingUsed = n;
    this.chunks.push(this.staging.subarray(0, n));
  }

  /** True when `next()` would return an item or throw without more bytes. */
  ready(): boolean {
    if (!this.helloSeen) return this.total >= HELLO_BYTES;
    if (this.total < FRAME_PREFIX_BYTES) return false;
    const length = this.peekU32();
    return length === 0 || length > this.maxFrameBytes || this.total >= FRAME_PREFIX_BYTES + length;
  }

  next(): WireItem | null {
    if (!this.helloSeen) {
      if (this.total < HELLO_BYTES) return null;
      const hello = Buffer.from(this.take(HELLO_BYTES));
      if (hello.readUInt32BE(0) !== KV_WIRE_MAGIC) throw invalidArgument('KV transfer: the peer did not open with the protocol magic');
      this.helloSeen = true;
      return { kind: 'hello', version: hello.readUInt16BE(4) };
    }
    if (this.total < FRAME_PREFIX_BYTES) return null;
    const length = this.peekU32();
    if (length === 0) throw invalidArgument('KV transfer: a frame of length 0');
    if (length > this.maxFrameBytes) throw invalidArgument(`KV transfer: a frame of ${length} bytes, above the limit of ${this.maxFrameBytes} bytes`);
    if (this.total < FRAME_PREFIX_BYTES + length) return null;
    this.take(FRAME_PREFIX_BYTES);
    const bytes = this.take(length);
    return { kind: 'frame', type: bytes[0]!, body: bytes.subarray(1) };
  }

  private peekU32(): number {
    let v = 0;
    let got = 0;
    for (const c of this.chunks) {
      for (let i = 0; i < c.byteLength && got < 4; i++, got++) v = v * 256 + c[i]!;
      if (got === 4) break;
    }
    return v;
  }

  /** The next `n` buffered bytes (a view when they lie in one pushed piece, else a copy). */
  private take(n: number): Uint8Array {
    this.total -= n;
    const first = this.chunks[0]!;
    if (first.byteLength >= n) {
      if (first.byteLength === n) this.chunks.shift();
      else this.chunks[0] = first.subarray(n);
      return first.subarray(0, n);
    }
    const out = Buffer.allocUnsafe(n);
    let filled = 0;
    while (filled < n) {
      const c = this.chunks[0]!;
      const k = Math.min(c.byteLength, n - filled);
      out.set(c.subarray(0, k), filled);
      filled += k;
      if (k === c.byteLength) this.chunks.shift();
      else this.chunks[0] = c.subarray(k);
    }
    return out;
  }
}

// ---- decoding ------------------------------------------------------------------------------------

export type KvWireMessage =
  | { readonly type: 'pull'; readonly request: KvPullRequest }
  | { readonly type: 'release'; readonly request: KvReleaseRequest }
  | {
      readonly type: 'chunk';
      readonly crc: number;
      readonly first: number;
      readonly hashes: readonly string[];
      readonly sizes: readonly number[];
      /** The bytes the checksum covers (everything after it). */
      readonly covered: Uint8Array;
      /** The blocks' bytes, back to back. */
      readonly data: Uint8Array;
    }
  | { readonly type: 'end'; readonly blocks: number }
  | { readonly type: 'released'; readonly released: boolean }
  | { readonly type: 'error'; readonly error: SwitchyardError };

const utf8 = new TextDecoder('utf-8', { fatal: true });

/** Bounds-checked reads over one frame body; any overrun is invalid_argument. */
class Cursor {
  private at = 0;
  private readonly view: DataView;

  constructor(
    private readonly body: Uint8Array,
    private readonly what: string,
  ) {
    this.view = new DataView(body.buffer, body.byteOffset, body.byteLength);
  }

  get remaining(): number {
    return this.body.byteLength - this.at;
  }

  private need(n: number): void {
    if (this.remaining < n) throw invalidArgument(`KV transfer: ${this.what} frame is truncated`);
  }

  u8(): number {
    this.need(1);
    return this.view.getUint8(this.at++);
  }

  u16(): number {
    this.need(2);
    const v = this.view.getUint16(this.at);
    this.at += 2;
    return v;
  }

  u32(): number {
    this.need(4);
    const v = this.view.getUint32(this.at);
    this.at += 4;
    return v;
  }

  bytes(n: number): Uint8Array {
    this.need(n);
    const b = this.body.subarray(this.at, this.at + n);
    this.at += n;
    return b;
  }

  text(length: number, max: number, field: string): string {
    if (length > max) throw invalidArgument(`KV transfer: ${field} of ${length} bytes, above the limit of ${max} bytes`);
    try {
      return utf8.decode(this.bytes(length));
    } catch (e) {
      if (e instanceof SwitchyardError) throw e;
      throw invalidArgument(`KV transfer: ${field} is not valid UTF-8`);
    }
  }

  rest(): Uint8Array {
    return this.bytes(this.remaining);
  }

  done(): void {
    if (this.remaining !== 0) throw invalidArgument(`KV transfer: ${this.remaining} stray bytes after a ${this.what} frame`);
  }
}

/**
 * A frame's body as a message, or invalid_argument. A pull's strings and hash count are bounded here
 * (`maxHashesPerPull`), before anything is allocated for them; `checkPullRequest` checks the rest.
 */
export function decodeMessage(type: number, body: Uint8Array, limits: Pick<KvTransferLimits, 'maxHashesPerPull'>): KvWireMessage {
  switch (type) {
    case FrameType.PULL: {
      const c = new Cursor(body, 'pull');
      const model = c.text(c.u16(), MAX_MODEL_BYTES, 'model');
      const leaseId = c.text(c.u16(), MAX_LEASE_BYTES, 'leaseId');
      const layoutDigest = c.text(c.u16(), MAX_DIGEST_BYTES, 'layoutDigest');
      const n = c.u32();
      if (n > limits.maxHashesPerPull) throw invalidArgument(`KV transfer: a pull of ${n} hashes, above the limit of ${limits.maxHashesPerPull}`);
      const raw = c.bytes(8 * n);
      c.done();
      const rawHex = asBuffer(raw);
      const hashes = Array.from({ length: n }, (_, i) => hashText(rawHex, 8 * i));
      return { type: 'pull', request: { model, leaseId, layoutDigest, hashes } };
    }
    case FrameType.RELEASE: {
      const c = new Cursor(body, 'release');
      const model = c.text(c.u16(), MAX_MODEL_BYTES, 'model');
      const leaseId = c.text(c.u16(), MAX_LEASE_BYTES, 'leaseId');
      c.done();
      return { type: 'release', request: { model, leaseId } };
    }
    case FrameType.CHUNK: {
      const c = new Cursor(body, 'chunk');
      const crc = c.u32();
      const covered = body.subarray(4);
      const first = c.u32();
      const n = c.u32();
      if (n === 0) throw invalidArgument('KV transfer: a chunk without blocks');
      if (n > c.remaining / CHUNK_ENTRY_BYTES) throw invalidArgument(`KV transfer: a chunk of ${n} blocks has no room for their table`);
      const table = c.bytes(CHUNK_ENTRY_BYTES * n);
      const hashes: string[] = [];
      const sizes: number[] = [];
      let total = 0;
      const t = asBuffer(table);
      for (let i = 0; i < n; i++) {
        hashes.push(hashText(t, CHUNK_ENTRY_BYTES * i));
        const size = t.readUInt32BE(CHUNK_ENTRY_BYTES * i + 8);
        sizes.push(size);
        total += size;
      }
      const data = c.rest();
      if (total !== data.byteLength) throw invalidArgument(`KV transfer: a chunk's blocks add up to ${total} bytes but it carries ${data.byteLength}`);
      return { type: 'chunk', crc, first, hashes, sizes, covered, data };
    }
    case FrameType.END: {
      const c = new Cursor(body, 'end');
      const blocks = c.u32();
      c.done();
      return { type: 'end', blocks };
    }
    case FrameType.RELEASED: {
      const c = new Cursor(body, 'released');
      const v = c.u8();
      c.done();
      if (v > 1) throw invalidArgument(`KV transfer: a release answer of ${v}`);
      return { type: 'released', released: v === 1 };
    }
    case FrameType.ERROR: {
      const c = new Cursor(body, 'error');
      const codeText = c.text(c.u8(), 64, 'error code');
      const message = c.text(c.u16(), 0xffff, 'error message');
      c.done();
      const code: ErrorCode = (ERROR_CODES as readonly string[]).includes(codeText) ? (codeText as ErrorCode) : 'unknown';
      return { type: 'error', error: new SwitchyardError(code, message) };
    }
    default:
      throw invalidArgument(`KV transfer: unknown frame type 0x${type.toString(16).padStart(2, '0')}`);
  }
}

/**
 * The puller's check of one decoded chunk, before any of its blocks is used: the checksum over its
 * bytes, its position (`next`, the index of the next block expected) and each hash against the pull's
 * `expected` hashes. Returns the blocks (views into the frame), or throws internal.
 */
export function verifyChunk(chunk: Extract<KvWireMessage, { type: 'chunk' }>, expected: readonly string[], next: number): KvTransferBlock[] {
  if (crc32(chunk.covered) !== chunk.crc) throw internal(`KV transfer: chunk at block ${next} failed its checksum (corrupt in transit)`);
  if (chunk.first !== next) throw internal(`KV transfer: chunk starts at block ${chunk.first}, expected ${next}`);
  if (chunk.hashes.length > expected.length - next) throw internal(`KV transfer: chunk carries blocks past the ${expected.length} asked`);
  const blocks: KvTransferBlock[] = [];
  let at = 0;
  for (let i = 0; i < chunk.hashes.length; i++) {
    const hash = expected[next + i]!;
    if (chunk.hashes[i] !== hash) throw internal(`KV transfer: block ${next + i} is ${chunk.hashes[i]}, expected ${hash}`);
    const size = chunk.sizes[i]!;
    blocks.push({ hash, data: chunk.data.subarray(at, at + size) });
    at += size;
  }
  return blocks;
}
