// PagedKvCache: the memory behind the KvBlockManager's slots — per layer, one key and one value array
// laid out [slot, kv_head, position in block, head_dim], fp32 (Float32Array) or fp16 (Uint16Array bit
// patterns, as onnxruntime-node passes float16). The block manager decides which slot holds what; this
// class only copies: `gather` builds a model's past tensor from a sequence's blocks, `scatter` writes the
// new positions of a model's present tensor back into them. Pure and synchronous.

import { internal, invalidArgument } from '@switchyard/common';
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
    const size = options.numBlocks * options.numKvHeads * options.blockSize * options.headDim;
    for (let l = 0; l < options.numLayers; l++) {
      this.keys.push(this.alloc(size));
      this.values.push(this.alloc(size));
    }
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
