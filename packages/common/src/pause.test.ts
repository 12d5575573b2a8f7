import { describe, expect, it } from 'vitest';
import { pauseUnlessAborted } from './pause.js';

describe('pauseUnlessAborted', () => {
  it('waits about the time asked', async () => {
    const start = performance.now();
    await pauseUnlessAborted(30, new AbortController().signal);
    expect(performance.now() - start).toBeGreaterThanOrEqual(25);
  });

  it('resolves as soon as the signal aborts, and at once when it already has', async () => {
    const c = new AbortController();
    const start = performance.now();
    const p = pauseUnlessAborted(60_000, c.signal);
    setTimeout(() => c.abort(), 10);
    await p;
    expect(performance.now() - start).toBeLessThan(10_000);
    await pauseUnlessAborted(60_000, c.signal);
  });
});
