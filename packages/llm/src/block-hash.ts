// The project's ONE hash over token blocks, shared by the engine's block manager and (later) the router.
//
// Definition (Dynamo, lib/kv-router protocols; see shared/reference/dynamo-design.md §2.1):
//   LocalBlockHash(i) = XXH3_64(le_u32 bytes of the tokens of full block i, seed = 1337)
//   SequenceHash(0)   = LocalBlockHash(0)
//   SequenceHash(i)   = XXH3_64(le_u64(SequenceHash(i-1)) ‖ le_u64(LocalBlockHash(i)), seed = 1337)
// Only full blocks are hashed; a partial tail is ignored. Tokens are u32.
//
// Representation: a u64 hash travels as a branded 16-digit lower-case hex string (zero padded, the
// number's big-endian digits — the same text hash-wasm and `xxhsum` print). Why not bigint or number:
// strings are JSON-safe (KV events go over NATS as JSON), usable directly as Map and Redis keys, compare
// by value, and keep all 64 bits (a JSON number would lose them past 2^53). `blockHashToBigInt` /
// `blockHashFromBigInt` convert at the edges that need the integer (e.g. a Dynamo-compatible u64 or a
// vLLM-style signed i64 on the wire).
//
// LoRA / cache namespaces are not folded in yet; when they are, they change the seed (Dynamo's salt.rs),
// never this function's shape.

import { u64Hex, xxh3_64Into } from './xxh3.js';

/** XXH3 of one full block's tokens: content identity, independent of what precedes the block. */
export type LocalBlockHash = string & { readonly __brand: 'LocalBlockHash' };
/** Chained hash: identity of a block together with its whole prefix. The block manager's block id. */
export type SequenceHash = string & { readonly __brand: 'SequenceHash' };

/** The seed Dynamo uses for both the local and the chained hash. */
export const KV_HASH_SEED = 1337n;

const M64 = (1n << 64n) - 1n;
const SEED_HI = Number(KV_HASH_SEED >> 32n);
const SEED_LO = Number(KV_HASH_SEED & 0xffffffffn);

/** Local and sequence hashes of a prompt's full blocks; both arrays have one entry per full block. */
export interface TokenBlockHashes {
  readonly localHashes: LocalBlockHash[];
  readonly sequenceHashes: SequenceHash[];
}

// Scratch buffers reused across calls (hashing is synchronous, so no caller can interleave).
let scratchView = new DataView(new ArrayBuffer(256));
let scratchU32 = new Uint32Array(scratchView.buffer);
/** Typed arrays use the host's byte order: on a little-endian host a Uint32Array writes le_u32 directly. */
const LITTLE_ENDIAN = new Uint8Array(new Uint32Array([1]).buffer)[0] === 1;
const chainView = new DataView(new ArrayBuffer(16));
/** Hash halves: [0, 1] a local hash (hi, lo), [2, 3] a sequence hash. */
const H = new Uint32Array(4);

const toHex = (v: bigint): string => v.toString(16).padStart(16, '0');

/** The u64 value of a hash (for wire formats that carry integers). */
export function blockHashToBigInt(h: LocalBlockHash | SequenceHash): bigint {
  return BigInt('0x' + h);
}

/** A hash from its u64 value; negative values (vLLM's signed i64) are taken modulo 2^64. */
export function blockHashFromBigInt<T extends LocalBlockHash | SequenceHash = SequenceHash>(v: bigint): T {
  return toHex(v & M64) as T;
}

/** A hash from its u32 halves (as `hashTokenBlockInto` / `chainHashInto` leave them). */
export function blockHashFromHalves<T extends LocalBlockHash | SequenceHash = SequenceHash>(hi: number, lo: number): T {
  return u64Hex(hi, lo) as T;
}

/** Copy `tokens[start .. start+blockSize)` into the scratch view as le_u32; returns the byte count. */
function writeBlock(tokens: ArrayLike<number>, start: number, blockSize: number): number {
  if (start < 0 || start + blockSize > tokens.length) {
    throw new RangeError(`block [${start}, ${start + blockSize}) outside ${tokens.length} tokens`);
  }
  const bytes = blockSize * 4;
  if (scratchView.byteLength < bytes) {
    scratchView = new DataView(new ArrayBuffer(bytes));
    scratchU32 = new Uint32Array(scratchView.buffer);
  }
  if (LITTLE_ENDIAN) {
    const u32 = scratchU32;
    for (let i = 0; i < blockSize; i++) {
      const t = tokens[start + i]!;
      if (t >>> 0 !== t) throw new RangeError(`token ${t} at ${start + i} is not a u32`);
      u32[i] = t;
    }
  } else {
    for (let i = 0; i < blockSize; i++) {
      const t = tokens[start + i]!;
      if (t >>> 0 !== t) throw new RangeError(`token ${t} at ${start + i} is not a u32`);
      scratchView.setUint32(4 * i, t, true);
    }
  }
  return bytes;
}

/**
 * LocalBlockHash of `tokens[start .. start+blockSize)`. Throws RangeError if the range runs past the
 * array or a token is not a u32 integer (a bug in the caller, not an expected condition).
 */
export function hashTokenBlock(tokens: ArrayLike<number>, start: number, blockSize: number): LocalBlockHash {
  const bytes = writeBlock(tokens, start, blockSize);
  xxh3_64Into(H, 0, scratchView, 0, bytes, SEED_HI, SEED_LO);
  return u64Hex(H[0]!, H[1]!) as LocalBlockHash;
}

/** The view over the last Uint32Array's buffer hashed in place (one view per buffer, not per block). */
let inPlaceBuffer: ArrayBufferLike | null = null;
let inPlaceView: DataView<ArrayBufferLike> = scratchView;

/**
 * LocalBlockHash of `tokens[start .. start+blockSize)` as u32 halves: `out[at]` high, `out[at + 1]`
 * low (`blockHashFromHalves` gives the string). A Uint32Array on a little-endian host already holds
 * the le_u32 bytes and is hashed in place; anything else is checked and copied as in `hashTokenBlock`.
 * For callers that keep their tokens in a Uint32Array and format hex once per block (LlmSequence).
 */
export function hashTokenBlockInto(out: Uint32Array, at: number, tokens: ArrayLike<number>, start: number, blockSize: number): void {
  if (LITTLE_ENDIAN && tokens instanceof Uint32Array) {
    if (start < 0 || start + blockSize > tokens.length) {
      throw new RangeError(`block [${start}, ${start + blockSize}) outside ${tokens.length} tokens`);
    }
    if (tokens.buffer !== inPlaceBuffer) {
      inPlaceView = new DataView(tokens.buffer);
      inPlaceBuffer = tokens.buffer;
    }
    xxh3_64Into(out, at, inPlaceView, tokens.byteOffset + 4 * start, 4 * blockSize, SEED_HI, SEED_LO);
    return;
  }
  const bytes = writeBlock(tokens, start, blockSize);
  xxh3_64Into(out, at, scratchView, 0, bytes, SEED_HI, SEED_LO);
}

/** SequenceHash halves of the block with local hash `lh:ll` after the block with sequence hash `ph:pl`, into out[at], out[at + 1]. */
export function chainHashInto(out: Uint32Array, at: number, ph: number, pl: number, lh: number, ll: number): void {
  // le_u64(parent) ‖ le_u64(local)
  chainView.setUint32(0, pl, true);
  chainView.setUint32(4, ph, true);
  chainView.setUint32(8, ll, true);
  chainView.setUint32(12, lh, true);
  xxh3_64Into(out, at, chainView, 0, 16, SEED_HI, SEED_LO);
}

/** SequenceHash of a block whose LocalBlockHash is `local`, after the block `parent` (null: first). */
export function chainSequenceHash(parent: SequenceHash | null, local: LocalBlockHash): SequenceHash {
  if (parent === null) return local as string as SequenceHash;
  chainHashInto(H, 2, hex32(parent, 0), hex32(parent, 8), hex32(local, 0), hex32(local, 8));
  return u64Hex(H[2]!, H[3]!) as SequenceHash;
}

/**
 * The 8 hex digits of `h` from `start` as a u32, as `parseInt(h.slice(start, start + 8), 16)` reads
 * them for a hash (our hashes are 16 lower-case hex digits), without building the substring. Any other
 * character falls back to parseInt, so the result is the same for every input.
 */
function hex32(h: string, start: number): number {
  let v = 0;
  for (let i = start; i < start + 8; i++) {
    const c = h.charCodeAt(i);
    let d: number;
    if (c >= 48 && c <= 57) d = c - 48;
    else if (c >= 97 && c <= 102) d = c - 87;
    else return parseInt(h.slice(start, start + 8), 16) >>> 0;
    v = v * 16 + d;
  }
  return v;
}

/**
 * Hashes of every full block of `tokens` (a trailing partial block is ignored). `blockSize` must be a
 * positive integer. With `parent`, the chain continues from an earlier block: use it to hash blocks
 * appended during decode without rehashing the prompt (`tokens` then holds only the new tokens,
 * starting at a block boundary).
 */
export function hashTokenBlocks(
  tokens: ArrayLike<number>,
  blockSize: number,
  parent: SequenceHash | null = null,
): TokenBlockHashes {
  if (!Number.isInteger(blockSize) || blockSize <= 0) {
    throw new RangeError(`blockSize must be a positive integer, got ${blockSize}`);
  }
  const n = Math.floor(tokens.length / blockSize);
  const localHashes: LocalBlockHash[] = new Array(n);
  const sequenceHashes: SequenceHash[] = new Array(n);
  let chained = parent !== null;
  let ph = chained ? hex32(parent!, 0) : 0;
  let pl = chained ? hex32(parent!, 8) : 0;
  for (let i = 0; i < n; i++) {
    const bytes = writeBlock(tokens, i * blockSize, blockSize);
    xxh3_64Into(H, 0, scratchView, 0, bytes, SEED_HI, SEED_LO);
    const lh = H[0]!;
    const ll = H[1]!;
    const local = u64Hex(lh, ll) as LocalBlockHash;
    localHashes[i] = local;
    if (chained) {
      chainHashInto(H, 2, ph, pl, lh, ll);
      ph = H[2]!;
      pl = H[3]!;
      sequenceHashes[i] = u64Hex(ph, pl) as SequenceHash;
    } else {
      ph = lh;
      pl = ll;
      sequenceHashes[i] = local as string as SequenceHash;
      chained = true;
    }
  }
  return { localHashes, sequenceHashes };
}
