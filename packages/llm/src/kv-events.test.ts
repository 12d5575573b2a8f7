import { describe, expect, it } from 'vitest';
import type { LocalBlockHash, SequenceHash } from './block-hash.js';
import { decodeKvCacheEvent, type KvCacheEvent } from './kv-events.js';

const H1 = '0123456789abcdef' as SequenceHash;
const H2 = 'fedcba9876543210' as SequenceHash;
const L2 = H2 as string as LocalBlockHash;

describe('decodeKvCacheEvent', () => {
  it('round-trips every event type through JSON', () => {
    const events: KvCacheEvent[] = [
      { event_id: 0, data: { type: 'stored', parent_hash: null, blocks: [{ block_hash: H1, tokens_hash: L2 }] } },
      { event_id: 1, data: { type: 'stored', parent_hash: H1, blocks: [] } },
      { event_id: 2, data: { type: 'removed', block_hashes: [H1, H2] } },
      { event_id: 3, data: { type: 'cleared' } },
    ];
    for (const e of events) expect(decodeKvCacheEvent(JSON.parse(JSON.stringify(e)))).toEqual(e);
  });

  it('rejects malformed events with invalid_argument', () => {
    const bad: unknown[] = [
      null,
      { event_id: -1, data: { type: 'cleared' } },
      { event_id: 1.5, data: { type: 'cleared' } },
      { event_id: 0 },
      { event_id: 0, data: { type: 'nope' } },
      { event_id: 0, data: { type: 'removed', block_hashes: [123] } },
      { event_id: 0, data: { type: 'removed', block_hashes: ['0123456789ABCDEF'] } },
      { event_id: 0, data: { type: 'stored', parent_hash: 'x', blocks: [] } },
      { event_id: 0, data: { type: 'stored', parent_hash: null, blocks: [{ block_hash: H1 }] } },
    ];
    for (const b of bad) expect(() => decodeKvCacheEvent(b), JSON.stringify(b)).toThrow(expect.objectContaining({ code: 'invalid_argument' }));
  });
});
