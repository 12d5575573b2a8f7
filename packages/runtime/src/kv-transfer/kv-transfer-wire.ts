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
import { FRAME_PREFIX_BYTES, FramedWireReader, HELLO_BYTES, type WireItem, encodeFrame, encodeHello as encodeHelloFor } from '../wire-reader.js';

/** "SYKV": the first four bytes each side sends. */
export const KV_WIRE_MAGIC = 0x53594b56;
export const KV_WIRE_VERSION = 1;
export { FRAME_PREFIX_BYTES, HELLO_BYTES };
export type { WireItem };

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
/** The same without the type: where a chunk body's table starts. */
const CHUNK_TABLE_AT = CHUNK_FIXED_BYTES - 1;
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
  return encodeHelloFor(KV_WIRE_MAGIC, version);
}

const frame = encodeFrame;

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

/** `FramedWireReader` for this protocol: a hello with `KV_WIRE_MAGIC`, frames up to `maxFrameBytes`. */
export class WireReader extends FramedWireReader {
  constructor(maxFrameBytes: number) {
    super(KV_WIRE_MAGIC, 'KV transfer', maxFrameBytes);
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
      /** The body from after the checksum to the end of the table: the checksum covers it, then `data`. */
      readonly head: Uint8Array;
      /** The blocks' bytes, back to back, as the pieces they arrived in (views, uncopied). */
      readonly data: readonly Uint8Array[];
      /** Total bytes of `data` (= the sum of `sizes`). */
      readonly dataBytes: number;
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

const byteLength = (parts: readonly Uint8Array[]): number => parts.reduce((n, p) => n + p.byteLength, 0);

/** Bytes [from, from + n) of `parts` taken back to back: a view when they lie in one part, else a copy. */
function gather(parts: readonly Uint8Array[], from: number, n: number): Uint8Array {
  let at = 0;
  let i = 0;
  while (i < parts.length && at + parts[i]!.byteLength <= from) at += parts[i++]!.byteLength;
  const p = parts[i];
  if (p === undefined || n === 0) return new Uint8Array(0);
  if (from - at + n <= p.byteLength) return p.subarray(from - at, from - at + n);
  const out = Buffer.allocUnsafe(n);
  let filled = 0;
  for (let off = from - at; filled < n; i++, off = 0) {
    const piece = parts[i]!.subarray(off, off + (n - filled));
    out.set(piece, filled);
    filled += piece.byteLength;
  }
  return out;
}

/** Views of bytes [from, end) of `parts`. */
function partsFrom(parts: readonly Uint8Array[], from: number): Uint8Array[] {
  const out: Uint8Array[] = [];
  let at = 0;
  for (const p of parts) {
    if (at + p.byteLength > from) out.push(at >= from ? p : p.subarray(from - at));
    at += p.byteLength;
  }
  return out;
}

/**
 * A CHUNK body, as the pieces it arrived in: the fixed fields and the table are gathered (a copy only
 * when they straddle pieces, and they are small), the blocks' bytes stay where they are.
 */
function decodeChunk(parts: readonly Uint8Array[]): KvWireMessage {
  const total = byteLength(parts);
  const c = new Cursor(gather(parts, 0, Math.min(CHUNK_TABLE_AT, total)), 'chunk');
  const crc = c.u32();
  const first = c.u32();
  const n = c.u32();
  const afterFixed = total - CHUNK_TABLE_AT;
  if (n === 0) throw invalidArgument('KV transfer: a chunk without blocks');
  if (n > afterFixed / CHUNK_ENTRY_BYTES) throw invalidArgument(`KV transfer: a chunk of ${n} blocks has no room for their table`);
  const headEnd = CHUNK_TABLE_AT + CHUNK_ENTRY_BYTES * n;
  const head = gather(parts, 4, headEnd - 4);
  const t = asBuffer(head);
  const hashes: string[] = [];
  const sizes: number[] = [];
  let sum = 0;
  for (let i = 0, at = CHUNK_TABLE_AT - 4; i < n; i++, at += CHUNK_ENTRY_BYTES) {
    hashes.push(hashText(t, at));
    const size = t.readUInt32BE(at + 8);
    sizes.push(size);
    sum += size;
  }
  const dataBytes = total - headEnd;
  if (sum !== dataBytes) throw invalidArgument(`KV transfer: a chunk's blocks add up to ${sum} bytes but it carries ${dataBytes}`);
  return { type: 'chunk', crc, first, hashes, sizes, head, data: partsFrom(parts, headEnd), dataBytes };
}

/**
 * A frame's body (one buffer, or the pieces `WireReader` returns) as a message, or invalid_argument.
 * A chunk's block bytes are not copied; other frames are small and are read from one buffer. A pull's
 * strings and hash count are bounded here (`maxHashesPerPull`), before anything is allocated for
 * them; `checkPullRequest` checks the rest.
 */
export function decodeMessage(type: number, body: Uint8Array | readonly Uint8Array[], limits: Pick<KvTransferLimits, 'maxHashesPerPull'>): KvWireMessage {
  const parts: readonly Uint8Array[] = body instanceof Uint8Array ? [body] : body;
  if (type === FrameType.CHUNK) return decodeChunk(parts);
  return decodeSmall(type, parts.length === 1 ? parts[0]! : gather(parts, 0, byteLength(parts)), limits);
}

function decodeSmall(type: number, body: Uint8Array, limits: Pick<KvTransferLimits, 'maxHashesPerPull'>): KvWireMessage {
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
 * bytes (piece by piece), its position (`next`, the index of the next block expected) and each hash
 * against the pull's `expected` hashes. Returns the blocks, or throws internal. A block that lies in
 * one piece is a view of it; one that straddles pieces is copied into a buffer of its own. Either way
 * nothing writes to those bytes again: they are the caller's for as long as it keeps them.
 */
export function verifyChunk(chunk: Extract<KvWireMessage, { type: 'chunk' }>, expected: readonly string[], next: number): KvTransferBlock[] {
  let crc = crc32(chunk.head);
  for (const p of chunk.data) crc = crc32(p, crc);
  if (crc !== chunk.crc) throw internal(`KV transfer: chunk at block ${next} failed its checksum (corrupt in transit)`);
  if (chunk.first !== next) throw internal(`KV transfer: chunk starts at block ${chunk.first}, expected ${next}`);
  if (chunk.hashes.length > expected.length - next) throw internal(`KV transfer: chunk carries blocks past the ${expected.length} asked`);
  const blocks: KvTransferBlock[] = [];
  const pieces = chunk.data;
  let piece = 0;
  let at = 0; // offset in pieces[piece]
  for (let i = 0; i < chunk.hashes.length; i++) {
    const hash = expected[next + i]!;
    if (chunk.hashes[i] !== hash) throw internal(`KV transfer: block ${next + i} is ${chunk.hashes[i]}, expected ${hash}`);
    const size = chunk.sizes[i]!;
    while (piece < pieces.length && at === pieces[piece]!.byteLength && size > 0) {
      piece++;
      at = 0;
    }
    const p = pieces[piece];
    if (size === 0 || (p !== undefined && at + size <= p.byteLength)) {
      blocks.push({ hash, data: size === 0 ? new Uint8Array(0) : p!.subarray(at, at + size) });
      at += size;
      continue;
    }
    const data = Buffer.allocUnsafe(size);
    let filled = 0;
    while (filled < size) {
      const src = pieces[piece]!;
      const k = Math.min(src.byteLength - at, size - filled);
      data.set(src.subarray(at, at + k), filled);
      filled += k;
      at += k;
      if (at === src.byteLength && filled < size) {
        piece++;
        at = 0;
      }
    }
    blocks.push({ hash, data });
  }
  return blocks;
}
