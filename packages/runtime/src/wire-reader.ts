/**
 * The framing two of our TCP protocols share (the KV transfer plane's and call-home response streams'),
 * with no IO: each side opens with an 8-byte hello (a u32 BE magic naming the protocol, a u16 BE
 * version, two bytes of zero), then sends frames: a u32 BE length of what follows, a u8 type, the body.
 * `FramedWireReader` turns bytes (any split) back into the hello and frames, never past its frame
 * limit.
 */
import { invalidArgument } from '@switchyard/common';

export const HELLO_BYTES = 8;
/** Bytes before a frame's type: the big-endian u32 length of type + body. */
export const FRAME_PREFIX_BYTES = 4;

export function encodeHello(magic: number, version: number): Buffer {
  const b = Buffer.alloc(HELLO_BYTES);
  b.writeUInt32BE(magic, 0);
  b.writeUInt16BE(version, 4);
  return b;
}

/** A whole frame: length prefix, type, body parts (copied into one buffer). */
export function encodeFrame(type: number, parts: readonly Uint8Array[]): Buffer {
  return Buffer.concat([frameHead(type, parts.reduce((n, p) => n + p.byteLength, 0)), ...parts]);
}

/** A frame's length prefix and type, for a body of `bodyBytes` sent after it as it is (no copy). */
export function frameHead(type: number, bodyBytes: number): Buffer {
  const head = Buffer.alloc(FRAME_PREFIX_BYTES + 1);
  head.writeUInt32BE(1 + bodyBytes, 0);
  head[4] = type;
  return head;
}

/** Pieces at most this small are coalesced once this many are buffered. */
const COALESCE_BELOW_BYTES = 1024;
const COALESCE_AFTER_PIECES = 8;
const STAGING_BYTES = 4096;

/**
 * A frame's body arrives as `parts`: views of the pieces pushed, in order, never copied (a 1 MiB chunk
 * spans a few dozen socket reads). The pieces are the reader's own (a socket hands each read out once,
 * the staging buffer is never written twice at one offset), so the views stay valid for as long as
 * anyone holds them.
 */
export type WireItem = { readonly kind: 'hello'; readonly version: number } | { readonly kind: 'frame'; readonly type: number; readonly parts: readonly Uint8Array[] };

/**
 * Bytes in (any split), the peer's hello and then its frames out. Holds at most what was pushed; the
 * IO side stops reading once `ready()` (so at most one item plus one read is buffered). A length
 * prefix of 0 or above `maxFrameBytes`, or a hello without the magic, is refused (invalid_argument)
 * as soon as its bytes are here, before the frame's body is awaited.
 */
export class FramedWireReader {
  /** Unread bytes, in order: pieces pushed, or views of a coalescing buffer (below). */
  private readonly chunks: Uint8Array[] = [];
  private total = 0;
  private helloSeen = false;
  /** Small pieces (a peer dripping bytes) are copied into this buffer, so a piece costs no object each. */
  private staging: Uint8Array | null = null;
  private stagingUsed = 0;

  /**
   * `magic`: the first four bytes of the peer's hello; `label` starts every refusal's message (the
   * protocol's name); `maxFrameBytes`: the largest length prefix accepted.
   */
  constructor(
    private readonly magic: number,
    private readonly label: string,
    private readonly maxFrameBytes: number,
  ) {}

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
      if (hello.readUInt32BE(0) !== this.magic) throw invalidArgument(`${this.label}: the peer did not open with the protocol magic`);
      this.helloSeen = true;
      return { kind: 'hello', version: hello.readUInt16BE(4) };
    }
    if (this.total < FRAME_PREFIX_BYTES) return null;
    const length = this.peekU32();
    if (length === 0) throw invalidArgument(`${this.label}: a frame of length 0`);
    if (length > this.maxFrameBytes) throw invalidArgument(`${this.label}: a frame of ${length} bytes, above the limit of ${this.maxFrameBytes} bytes`);
    if (this.total < FRAME_PREFIX_BYTES + length) return null;
    this.take(FRAME_PREFIX_BYTES);
    const type = this.take(1)[0]!;
    return { kind: 'frame', type, parts: this.takeParts(length - 1) };
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

  /** The next `n` buffered bytes as views of the pieces they lie in, in order (no copy). */
  private takeParts(n: number): Uint8Array[] {
    this.total -= n;
    const parts: Uint8Array[] = [];
    let left = n;
    while (left > 0) {
      const c = this.chunks[0]!;
      if (c.byteLength <= left) {
        parts.push(c);
        this.chunks.shift();
        left -= c.byteLength;
      } else {
        parts.push(c.subarray(0, left));
        this.chunks[0] = c.subarray(left);
        left = 0;
      }
    }
    return parts;
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
