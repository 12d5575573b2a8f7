/**
 * The request plane's binary message (message format 2): a request envelope or response frame whose
 * payload is a `BinaryPayload` travels as its JSON with the payload's blobs as raw bytes after it, so
 * tensors cross without base64 (a third more bytes, and an encode and a decode pass each way).
 *
 * ```
 * offset      size      field
 * 0           1         0x00: a JSON message (format 1) never starts with NUL, so one byte tells them apart
 * 1           2         'S' 'Y'
 * 3           1         format: 2 (a receiver refuses any other: `unsupported message format`)
 * 4           4         H: header length in bytes, u32 little-endian
 * 8           4         N: blob count, u32 little-endian, at most MAX_MESSAGE_BLOBS
 * 12          4 N       each blob's length in bytes, u32 little-endian
 * 12 + 4N     H         the header: the envelope / frame as UTF-8 JSON, `payload` = the payload's body
 * then, per blob: zero bytes up to the next multiple of 8 from the message start, the blob's bytes.
 * The message ends right after its last blob (or its header when N = 0).
 * ```
 *
 * The receiver copies the blob region once into a buffer of its own (the NATS client's buffer behind
 * a message is not ours to keep), and hands each blob out as a view of it, at an offset that is a
 * multiple of 8, so Float64Array / BigInt64Array views fit. Every length is checked against the bytes
 * present before anything is allocated: a hostile header (lengths past the end, a huge count) is
 * refused `invalid_argument` with no allocation beyond the message itself.
 *
 * Mixed versions: a process of this version reads both formats and answers a request in the format
 * it came in (the endpoint decides: the cluster's `infer` answers a JSON request in JSON). A process
 * from before format 2 cannot read a binary message (it answers `malformed JSON message`), so callers
 * send binary only to instances that announce they take it (the cluster's model cards do).
 */
import { invalidArgument } from '@switchyard/common';

/** JSON, as the request plane carries it (protocols.ts JsonValue). */
type Json = null | boolean | number | string | readonly Json[] | { readonly [k: string]: Json };

/**
 * A request-plane payload with raw bytes beside its JSON: `body` travels as JSON, `blobs` unencoded
 * after it (a binary message). What the blobs mean is the endpoint's contract (the cluster's `infer`:
 * one per tensor, in order). A receiver gets each blob as a view of one buffer of its own, starting
 * at a multiple of 8 bytes (typed-array views of any element size fit).
 */
export class BinaryPayload {
  constructor(
    readonly body: Json,
    readonly blobs: readonly Uint8Array[],
  ) {}
}


export const BINARY_MESSAGE_FORMAT = 2;
/** Most blobs one binary message may carry (the cluster's infer: one per tensor). */
export const MAX_MESSAGE_BLOBS = 65_536;

const MAGIC0 = 0x00;
const MAGIC1 = 0x53; // 'S'
const MAGIC2 = 0x59; // 'Y'
const FIXED = 12;

const decoder = new TextDecoder('utf-8', { fatal: true });

const align8 = (n: number): number => n + ((8 - (n % 8)) % 8);
/** The u32 little-endian at `at` (in bounds: checked by the caller). */
const u32 = (b: Uint8Array, at: number): number => (b[at]! | (b[at + 1]! << 8) | (b[at + 2]! << 16) | (b[at + 3]! << 24)) >>> 0;

/** True when `bytes` is a binary message (any format byte): its first byte is NUL. */
export function isBinaryMessage(bytes: Uint8Array): boolean {
  return bytes.length > 0 && bytes[0] === MAGIC0;
}

/**
 * `message` (an envelope or a frame whose `payload` is `payload`) as a binary message: the message
 * with `payload` replaced by its body as the header, then the blobs.
 */
export function encodeBinaryMessage(message: { readonly [k: string]: unknown }, payload: BinaryPayload): Uint8Array {
  const { blobs } = payload;
  if (blobs.length > MAX_MESSAGE_BLOBS) throw invalidArgument(`a binary payload carries at most ${MAX_MESSAGE_BLOBS} blobs (got ${blobs.length})`);
  const header = JSON.stringify({ ...message, payload: payload.body });
  const headerBytes = Buffer.byteLength(header, 'utf8');
  const headerStart = FIXED + 4 * blobs.length;
  let end = headerStart + headerBytes;
  for (const b of blobs) end = align8(end) + b.byteLength;
  // (small messages come from Buffer's pool; the padding is zeroed below, everything else written)
  const out = Buffer.allocUnsafe(end);
  out[0] = MAGIC0;
  out[1] = MAGIC1;
  out[2] = MAGIC2;
  out[3] = BINARY_MESSAGE_FORMAT;
  out.writeUInt32LE(headerBytes, 4);
  out.writeUInt32LE(blobs.length, 8);
  for (let i = 0; i < blobs.length; i++) out.writeUInt32LE(blobs[i]!.byteLength, FIXED + 4 * i);
  out.write(header, headerStart, headerBytes, 'utf8');
  let at = headerStart + headerBytes;
  for (const b of blobs) {
    const start = align8(at);
    out.fill(0, at, start);
    out.set(b, start);
    at = start + b.byteLength;
  }
  return out;
}

/**
 * A binary message back into the parsed header with `payload` a BinaryPayload (body + blobs); the
 * caller validates it like a parsed JSON message. Throws invalid_argument on anything malformed.
 */
export function decodeBinaryMessage(bytes: Uint8Array): unknown {
  const n = bytes.length;
  if (n < 4 || bytes[0] !== MAGIC0 || bytes[1] !== MAGIC1 || bytes[2] !== MAGIC2) throw invalidArgument('malformed binary message: bad magic');
  const format = bytes[3]!;
  if (format !== BINARY_MESSAGE_FORMAT) {
    throw invalidArgument(`unsupported message format ${format} (this process reads formats 1 and ${BINARY_MESSAGE_FORMAT}): a peer of a newer version sent it`);
  }
  if (n < FIXED) throw invalidArgument(`malformed binary message: ${n} bytes, shorter than its fixed header`);
  const headerBytes = u32(bytes, 4);
  const count = u32(bytes, 8);
  if (count > MAX_MESSAGE_BLOBS) throw invalidArgument(`malformed binary message: ${count} blobs (at most ${MAX_MESSAGE_BLOBS})`);
  const headerStart = FIXED + 4 * count;
  if (headerStart > n || headerBytes > n - headerStart) throw invalidArgument('malformed binary message: header past the end of the message');
  // where each blob starts, checked against the message before anything is kept
  const starts = new Array<number>(count);
  let at = headerStart + headerBytes;
  for (let i = 0; i < count; i++) {
    const length = u32(bytes, FIXED + 4 * i);
    const start = align8(at);
    if (start > n || length > n - start) throw invalidArgument(`malformed binary message: blob ${i} of ${length} bytes past the end of the message`);
    for (let p = at; p < start; p++) if (bytes[p] !== 0) throw invalidArgument(`malformed binary message: non-zero padding before blob ${i}`);
    starts[i] = start;
    at = start + length;
  }
  if (at !== n) throw invalidArgument(`malformed binary message: ${n - at} bytes after its last blob`);
  let header: unknown;
  try {
    header = JSON.parse(decoder.decode(bytes.subarray(headerStart, headerStart + headerBytes)));
  } catch (e) {
    throw invalidArgument('malformed binary message: its header is not JSON', e);
  }
  if (typeof header !== 'object' || header === null || Array.isArray(header) || !Object.prototype.hasOwnProperty.call(header, 'payload')) {
    throw invalidArgument("malformed binary message: its header must be an object with a 'payload'");
  }
  const blobs = new Array<Uint8Array>(count);
  if (count > 0) {
    // one copy of the blob region, starting on a multiple of 8 (the region's first blob is aligned in the message)
    const base = starts[0]!;
    // (not bytes.slice: on a Buffer that is a view, not a copy). Small regions come from Buffer's pool,
    // whose slices start on multiples of 8; should one not, a buffer of its own.
    let region: Uint8Array = Buffer.allocUnsafe(n - base);
    if (region.byteOffset % 8 !== 0) region = new Uint8Array(n - base);
    region.set(bytes.subarray(base, n));
    for (let i = 0; i < count; i++) {
      const length = u32(bytes, FIXED + 4 * i);
      blobs[i] = new Uint8Array(region.buffer, region.byteOffset + starts[i]! - base, length);
    }
  }
  const o = header as { [k: string]: unknown };
  o['payload'] = new BinaryPayload(o['payload'] as Json, blobs);
  return o;
}
