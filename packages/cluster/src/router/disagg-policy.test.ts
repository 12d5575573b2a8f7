import { describe, expect, it } from 'vitest';
import { fc, fuzz } from '@switchyard/testing/fuzz';
import { DEFAULT_DISAGG_MAX_PREFILL_QUEUE_TOKENS, DEFAULT_DISAGG_MIN_REMOTE_TOKENS, type DisaggInput, decideDisagg } from './disagg-policy.js';

const T = { minRemoteTokens: DEFAULT_DISAGG_MIN_REMOTE_TOKENS, maxPrefillQueueTokens: DEFAULT_DISAGG_MAX_PREFILL_QUEUE_TOKENS };
const base: DisaggInput = { promptTokens: 3000, overlapBlocks: 0, blockSize: 16, maxTokens: 150, prefillQueues: [{ worker: 'p1/m', queuedTokens: 0 }, { worker: 'p2/m', queuedTokens: 9000 }] };

describe('decideDisagg', () => {
  it('sends a long uncached prompt to the non-saturated prefill workers', () => {
    expect(decideDisagg(base, T)).toEqual({ path: 'remote', uncachedTokens: 3000, prefillWorkers: ['p1/m'] });
    expect(decideDisagg({ ...base, maxTokens: null }, T).path).toBe('remote');
  });

  it('keeps it local for each reason, the first that applies', () => {
    expect(decideDisagg({ ...base, prefillQueues: [] }, T)).toEqual({ path: 'local', uncachedTokens: 3000, reason: 'no_prefill_workers' });
    expect(decideDisagg({ ...base, maxTokens: 1 }, T)).toMatchObject({ path: 'local', reason: 'single_token' });
    expect(decideDisagg({ ...base, promptTokens: 511 }, T)).toMatchObject({ path: 'local', reason: 'short_prompt', uncachedTokens: 511 });
    // mostly cached on the decode worker: 3000 − 160 × 16 = 440 uncached
    expect(decideDisagg({ ...base, overlapBlocks: 160 }, T)).toMatchObject({ path: 'local', reason: 'short_prompt', uncachedTokens: 440 });
    expect(decideDisagg({ ...base, prefillQueues: [{ worker: 'p1/m', queuedTokens: 8192 }] }, T)).toMatchObject({ path: 'local', reason: 'prefill_saturated' });
  });

  it('puts the thresholds exactly where the flags say: uncached >= min, queued < max', () => {
    expect(decideDisagg({ ...base, promptTokens: 512 }, T).path).toBe('remote');
    expect(decideDisagg({ ...base, prefillQueues: [{ worker: 'p1/m', queuedTokens: 8191 }] }, T).path).toBe('remote');
    expect(decideDisagg({ ...base, promptTokens: 1 }, { ...T, minRemoteTokens: 0 }).path).toBe('remote');
    expect(decideDisagg(base, { ...T, maxPrefillQueueTokens: 0 })).toMatchObject({ path: 'local', reason: 'prefill_saturated' });
  });

  it('property: remote exactly when every condition holds, and the workers are exactly the non-saturated ones', () => {
    const input = fc.record({
      promptTokens: fc.integer({ min: 1, max: 5000 }),
      blockSize: fc.integer({ min: 1, max: 64 }),
      maxTokens: fc.option(fc.integer({ min: 1, max: 4 }), { nil: null }),
      overlapFraction: fc.double({ min: 0, max: 1, noNaN: true }),
      queues: fc.array(fc.nat(20_000), { maxLength: 5 }),
      min: fc.nat(4000),
      max: fc.nat(20_000),
    });
    fuzz(input, (i) => {
      const overlapBlocks = Math.floor((Math.floor(i.promptTokens / i.blockSize) * i.overlapFraction));
      const prefillQueues = i.queues.map((queuedTokens, k) => ({ worker: `p${k}/m`, queuedTokens }));
      const d = decideDisagg({ promptTokens: i.promptTokens, overlapBlocks, blockSize: i.blockSize, maxTokens: i.maxTokens, prefillQueues }, { minRemoteTokens: i.min, maxPrefillQueueTokens: i.max });
      const uncached = i.promptTokens - overlapBlocks * i.blockSize;
      expect(d.uncachedTokens).toBe(uncached);
      const open = prefillQueues.filter((q) => q.queuedTokens < i.max).map((q) => q.worker);
      const remote = prefillQueues.length > 0 && i.maxTokens !== 1 && uncached >= i.min && open.length > 0;
      expect(d.path).toBe(remote ? 'remote' : 'local');
      if (d.path === 'remote') expect(d.prefillWorkers).toEqual(open);
    });
  });
});
