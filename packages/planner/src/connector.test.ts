import { describe, expect, it } from 'vitest';
import { isSwitchyardError } from '@switchyard/common';
import { MemoryConnector } from './connector.js';

describe('MemoryConnector', () => {
  it('counts replicas per managed pool and applies scale at once', async () => {
    const c = new MemoryConnector({ decode: 1, prefill: 2 });
    await c.scale('decode', 3);
    await c.scale('prefill', 0);
    expect(await c.replicas()).toEqual({ decode: 3, prefill: 0 });
    expect(c.calls).toEqual([{ pool: 'decode', target: 3 }, { pool: 'prefill', target: 0 }]);
  });

  it('refuses unmanaged pools, bad targets and use after close', async () => {
    const c = new MemoryConnector({ aggregated: 1 });
    for (const [pool, target] of [['decode', 1], ['aggregated', -1], ['aggregated', 1.5], ['aggregated', Number.NaN]] as const) {
      const err: unknown = await c.scale(pool, target).catch((e: unknown) => e);
      expect(isSwitchyardError(err) && err.code).toBe('invalid_argument');
    }
    await c.close();
    const err: unknown = await c.scale('aggregated', 2).catch((e: unknown) => e);
    expect(isSwitchyardError(err) && err.code).toBe('unavailable');
    expect(await c.replicas()).toEqual({ aggregated: 1 });
  });
});
