// KV events: the wire protocol between an engine's block manager and whoever indexes its cache (the
// worker's local indexer now, the cluster's KV router later). Modelled on Dynamo's KvCacheEvent
// (shared/reference/dynamo-design.md §2.2), with two deliberate differences:
//   - hashes are 16-digit hex strings (`SequenceHash`, `LocalBlockHash`, see block-hash.ts), not u64
//     JSON numbers, so they survive JSON.parse in JavaScript;
//   - the payload is a flat discriminated union on `type` instead of Rust's externally tagged enum.
// Field names keep Dynamo's snake_case so the JSON reads the same as Dynamo's.
//
// Contract for producers (KvBlockManager): event ids start at 0 and increase by exactly 1 per event
// within one producer (one engine); a consumer that sees a gap has lost events and must resync from
// `snapshot()`. `stored` is emitted only for blocks that became newly resident (never for re-hits);
// `removed` when a block stops being resident (eviction, or freeing with prefix caching off);
// `cleared` when the whole cache is dropped.

import { describeValue, invalidArgument } from '@switchyard/common';
import type { LocalBlockHash, SequenceHash } from './block-hash.js';

/** One newly stored full block: its chained id and the hash of its own tokens. */
export interface StoredBlock {
  readonly block_hash: SequenceHash;
  readonly tokens_hash: LocalBlockHash;
}

export type KvCacheEventData =
  /** `blocks` form a chain: blocks[0]'s parent is `parent_hash` (null: start of a sequence), each
   * later block's parent is the block before it. */
  | { readonly type: 'stored'; readonly parent_hash: SequenceHash | null; readonly blocks: readonly StoredBlock[] }
  | { readonly type: 'removed'; readonly block_hashes: readonly SequenceHash[] }
  /** Every block of this producer is gone (cache reset or restart). */
  | { readonly type: 'cleared' };

export interface KvCacheEvent {
  /** Per producer, from 0, +1 per event. */
  readonly event_id: number;
  readonly data: KvCacheEventData;
}

/** Called synchronously, after the manager's state is consistent, once per event, in id order. */
export type KvEventSink = (event: KvCacheEvent) => void;

/** A resident full block as a snapshot reports it. */
export interface SnapshotBlock extends StoredBlock {
  /** The block before it in its sequence; null for a first block. */
  readonly parent_hash: SequenceHash | null;
}

/**
 * Every full block a producer holds (active and inactive), for consumers that lost events.
 * `last_event_id` is the id of the last event already reflected (-1: none yet); a consumer replaces its
 * state with `blocks` and then applies only events with a larger id. Blocks come in creation order, so a
 * parent precedes its children unless the parent was evicted and stored again later. Partial (unfilled)
 * blocks are never announced by events, so they appear only as a count.
 */
export interface KvSnapshot {
  readonly last_event_id: number;
  readonly blocks: readonly SnapshotBlock[];
  readonly partial_blocks: number;
}

/**
 * Apply one event to a consumer-side view (block hash -> block). The reference semantics of the
 * events; the worker's local indexer and the tests use it.
 */
export function applyKvEvent(view: Map<SequenceHash, SnapshotBlock>, event: KvCacheEvent): void {
  const d = event.data;
  switch (d.type) {
    case 'stored': {
      let parent = d.parent_hash;
      for (const b of d.blocks) {
        view.set(b.block_hash, { block_hash: b.block_hash, tokens_hash: b.tokens_hash, parent_hash: parent });
        parent = b.block_hash;
      }
      return;
    }
    case 'removed':
      for (const h of d.block_hashes) view.delete(h);
      return;
    case 'cleared':
      view.clear();
      return;
  }
}

const HASH_RE = /^[0-9a-f]{16}$/;

function hash<T extends string>(v: unknown, what: string): T {
  if (typeof v !== 'string' || !HASH_RE.test(v)) {
    throw invalidArgument(`KV event: ${what} must be a 16-digit lower-case hex hash`);
  }
  return v as T;
}

function array(v: unknown, what: string): unknown[] {
  if (!Array.isArray(v)) throw invalidArgument(`KV event: ${what} must be an array`);
  return v;
}

/** Validate a KV event received from the wire (the decode edge); throws invalid_argument. */
export function decodeKvCacheEvent(json: unknown): KvCacheEvent {
  if (typeof json !== 'object' || json === null) throw invalidArgument('KV event: not an object');
  const { event_id, data } = json as { event_id?: unknown; data?: unknown };
  if (typeof event_id !== 'number' || !Number.isSafeInteger(event_id) || event_id < 0) {
    throw invalidArgument('KV event: event_id must be a non-negative integer');
  }
  if (typeof data !== 'object' || data === null) throw invalidArgument('KV event: data must be an object');
  const d = data as Record<string, unknown>;
  switch (d['type']) {
    case 'stored': {
      const parent = d['parent_hash'] === null ? null : hash<SequenceHash>(d['parent_hash'], 'parent_hash');
      const blocks = array(d['blocks'], 'blocks').map((b, i): StoredBlock => {
        if (typeof b !== 'object' || b === null) throw invalidArgument(`KV event: blocks[${i}] not an object`);
        const r = b as Record<string, unknown>;
        return {
          block_hash: hash<SequenceHash>(r['block_hash'], `blocks[${i}].block_hash`),
          tokens_hash: hash<LocalBlockHash>(r['tokens_hash'], `blocks[${i}].tokens_hash`),
        };
      });
      return { event_id, data: { type: 'stored', parent_hash: parent, blocks } };
    }
    case 'removed': {
      const hs = array(d['block_hashes'], 'block_hashes').map((h, i) =>
        hash<SequenceHash>(h, `block_hashes[${i}]`),
      );
      return { event_id, data: { type: 'removed', block_hashes: hs } };
    }
    case 'cleared':
      return { event_id, data: { type: 'cleared' } };
    default:
      throw invalidArgument(`KV event: unknown type ${describeValue(d['type'])}`);
  }
}
