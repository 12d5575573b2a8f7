// PagedKvCache: the memory behind the KvBlockManager's slots — per layer, one key and one value array
// laid out [slot, kv_head, position in block, head_dim], fp32 (Float32Array) or fp16 (Uint16Array bit
// patterns, as onnxruntime-node passes float16). The block manager decides which slot holds what; this
// class only copies: `gather` builds a model's past tensor from a sequence's blocks, `scatter` writes the
// new positions of a model's present tensor back into them, `readBlock` / `writeBlock` move one slot's
// KV as bytes (KV transfer between engines). Pure and synchronous.
//
// Block bytes (`readBlock` / `writeBlock`, `bytesPerBlock` long): the slot's keys of layer 0, 1, …,
// numLayers-1, then its values of layer 0, 1, …; each part [kv_head, position in block, head_dim]
// row-major; elements fp32 or fp16 (IEEE 754 bits) in little-endian byte order (the order of every
// platform Node.js runs on; a big-endian host is refused at construction).

import { internal, invalidArgument, unsupported } from '@switchyard/common';
import type { DecoderTensor } from './decoder-session.js';
import type { BlockRef } from './kv-block-manager.js';

export type KvDtype = 'fp32' | 'fp16';

export interface PagedKvCacheOptions {
  readonly numLayers: number;
  readonly numKvHeads: number;
  readonly headDim: number;
  readonly numBlocks: number;
  readonly blockSize: number;
  readonly dtype: KvDtype;
}

/** One row of a gather: the sequence's blocks and how many of its tokens are in the past. */
export interface GatherRow {
  readonly blocks: readonly BlockRef[];
  readonly length: number;
}

/** One row of a scatter: positions [from, from + count) of the sequence (those in full blocks are skipped). */
export interface ScatterRow {
  readonly blocks: readonly BlockRef[];
  readonly from: number;
  readonly count: number;
}

type Store = Float32Array | Uint16Array;

export class PagedKvCache {
  readonly numLayers: number;
  readonly numKvHeads: number;
  readonly headDim: number;
  readonly numBlocks: number;
  readonly blockSize: number;
  readonly dtype: KvDtype;
  private readonly keys: Store[] = [];
  private readonly values: Store[] = [];

  constructor(options: PagedKvCacheOptions) {
    for (const k of ['numLayers', 'numKvHeads', 'headDim', 'numBlocks', 'blockSize'] as const) {
      if (!Number.isSafeInteger(options[k]) || options[k] <= 0) throw invalidArgument(`${k} must be a positive integer, got ${options[k]}`);
    }
    this.numLayers = options.numLayers;
    this.numKvHeads = options.numKvHeads;
    this.headDim = options.headDim;
    this.numBlocks = options.numBlocks;
    this.blockSize = options.blockSize;
    if (options.dtype !== 'fp32' && options.dtype !== 'fp16') throw invalidArgument(`dtype must be 'fp32' or 'fp16', got ${String(options.dtype)}`);
    this.dtype = options.dtype;
    if (new Uint8Array(new Uint16Array([1]).buffer)[0] !== 1) throw unsupported('KV caches need a little-endian host');
    const size = options.numBlocks * options.numKvHeads * options.blockSize * options.headDim;
    for (let l = 0; l < options.numLayers; l++) {
      this.keys.push(this.alloc(size));
      this.values.push(this.alloc(size));
    }
  }

  /** Bytes of one block's KV over every layer (see the file header for their order). */
  get bytesPerBlock(): number {
    return this.numLayers * 2 * this.numKvHeads * this.blockSize * this.headDim * (this.dtype === 'fp16' ? 2 : 4);
  }

  /** A copy of `slot`'s KV as bytes (file header order). */
  readBlock(slot: number): Uint8Array {
    this.checkSlot(slot);
    const n = this.numKvHeads * this.blockSize * this.headDim;
    const esz = this.dtype === 'fp16' ? 2 : 4;
    const out = new Uint8Array(this.bytesPerBlock);
    let at = 0;
    for (const stores of [this.keys, this.values]) {
      for (const store of stores) {
        out.set(new Uint8Array(store.buffer, store.byteOffset + slot * n * esz, n * esz), at);
        at += n * esz;
      }
    }
    return out;
  }

  /**
   * Overwrite `slot`'s KV with `bytes` (file header order). Throws invalid_argument, writing nothing,
   * when the size is not `bytesPerBlock` or an element is not finite (no model computes NaN or ±Inf KV,
   * and such a value would poison every later step that reads the block).
   */
  writeBlock(slot: number, bytes: Uint8Array): void {
    this.checkSlot(slot);
    const why = this.checkBlockBytes(bytes);
    if (why !== undefined) throw invalidArgument(why);
    const n = this.numKvHeads * this.blockSize * this.headDim;
    const src = this.view(bytes);
    let at = 0;
    for (const stores of [this.keys, this.values]) {
      for (const store of stores) {
        store.set(src.subarray(at, at + n), slot * n);
        at += n;
      }
    }
  }

  /** Why `bytes` cannot be a block of this cache (wrong size, a non-finite element), else undefined. */
  checkBlockBytes(bytes: Uint8Array): string | undefined {
    if (!(bytes instanceof Uint8Array)) return 'a KV block must be bytes';
    if (bytes.byteLength !== this.bytesPerBlock) return `a KV block is ${this.bytesPerBlock} bytes here, got ${bytes.byteLength}`;
    const src = this.view(bytes);
    if (src instanceof Uint16Array) {
      for (let i = 0; i < src.length; i++) if ((src[i]! & 0x7c00) === 0x7c00) return `KV element ${i} is not finite`;
    } else {
      for (let i = 0; i < src.length; i++) if (!Number.isFinite(src[i]!)) return `KV element ${i} is not finite`;
    }
    return undefined;
  }

  /**
   * `bytes` as elements (copied when not aligned to the element size). The copy is
   * `Uint8Array.prototype.slice`: a Node Buffer's own `slice` is a view with the same offset (blocks
   * arrive as Buffer views from the TCP transfer plane).
   */
  private view(bytes: Uint8Array): Store {
    const esz = this.dtype === 'fp16' ? 2 : 4;
    const b = bytes.byteOffset % esz === 0 ? bytes : Uint8Array.prototype.slice.call(bytes);
    return this.dtype === 'fp16' ? new Uint16Array(b.buffer, b.byteOffset, b.byteLength / 2) : new Float32Array(b.buffer, b.byteOffset, b.byteLength / 4);
  }

  private checkSlot(slot: number): void {
    if (!Number.isSafeInteger(slot) || slot < 0 || slot >= this.numBlocks) throw internal(`KV slot ${slot} out of range 0..${this.numBlocks - 1}`);
  }

  /** Bytes held by the cache. */
  get byteSize(): number {
    return this.numLayers * 2 * this.keys[0]!.byteLength;
  }

  /**
   * A past tensor [rows, kv_heads, padTo, head_dim] for `layer`: row b's first `length` tokens, read from
   * its blocks, sit at the right end (left padding, zeros, for the caller's attention_mask to hide).
   * `padTo` must be at least every row's length.
   */
  gather(layer: number, kind: 'key' | 'value', rows: readonly GatherRow[], padTo: number): DecoderTensor {
    const { numKvHeads: H, headDim: D, blockSize: bs } = this;
    const src = (kind === 'key' ? this.keys : this.values)[layer]!;
    const out = this.alloc(rows.length * H * padTo * D);
    rows.forEach((row, b) => {
      if (row.length > padTo || row.length > row.blocks.length * bs) {
        throw internal(`gather: row ${b} has ${row.length} tokens, ${row.blocks.length} blocks, pad ${padTo}`);
      }
      const offset = padTo - row.length;
      // Positions of one block are contiguous per head on both sides: one copy per (block, head).
      for (let start = 0; start < row.length; start += bs) {
        const count = Math.min(bs, row.length - start);
        const slot = row.blocks[start / bs]!.slot;
        for (let h = 0; h < H; h++) {
          const from = (slot * H + h) * bs * D;
          out.set(src.subarray(from, from + count * D), ((b * H + h) * padTo + offset + start) * D);
        }
      }
    });
    return { type: this.tensorType(), dims: [rows.length, H, padTo, D], data: out };
  }

  /**
   * Write new positions from `present` [rows, kv_heads, past + n, head_dim] (n >= every row's count)
   * for `layer`: row b's position `from + i` comes from index `past + i`. Positions falling in full
   * blocks are skipped — full blocks are immutable and may be shared; only private partial blocks take
   * writes.
   */
  scatter(layer: number, kind: 'key' | 'value', present: DecoderTensor, past: number, rows: readonly ScatterRow[]): void {
    const { numKvHeads: H, headDim: D, blockSize: bs } = this;
    const dst = (kind === 'key' ? this.keys : this.values)[layer]!;
    const ok = this.dtype === 'fp16' ? present.data instanceof Uint16Array : present.data instanceof Float32Array;
    const [rowsIn, heads, total, dim] = present.dims;
    if (!ok || rowsIn !== rows.length || heads !== H || dim !== D || total === undefined) {
      throw internal(`scatter: a ${present.type} present of shape [${present.dims.join(',')}] does not fit ${rows.length} rows of a ${this.dtype} cache with ${H} kv heads of ${D}`);
    }
    const data = present.data as Store;
    rows.forEach((row, b) => {
      if (past + row.count > total || row.from + row.count > row.blocks.length * bs) {
        throw internal(`scatter: row ${b} writes ${row.count} tokens at ${row.from}, present has ${total - past}, ${row.blocks.length} blocks`);
      }
      let i = 0;
      while (i < row.count) {
        const p = row.from + i;
        const off = p % bs;
        const count = Math.min(bs - off, row.count - i);
        const block = row.blocks[(p - off) / bs]!;
        if (!block.full) {
          for (let h = 0; h < H; h++) {
            const from = ((b * H + h) * total + past + i) * D;
            dst.set(data.subarray(from, from + count * D), ((block.slot * H + h) * bs + off) * D);
          }
        }
        i += count;
      }
    });
  }

  private alloc(n: number): Store {
    return this.dtype === 'fp16' ? new Uint16Array(n) : new Float32Array(n);
  }

  private tensorType(): 'float16' | 'float32' {
    return this.dtype === 'fp16' ? 'float16' : 'float32';
  }
}
