import { describe, expect, it } from 'vitest';
import { MAX_QUEUED_INTERVALS, MemoryObservationSource } from './memory-observation-source.js';

describe('MemoryObservationSource', () => {
  it('returns the pushed figures in order with the measured interval, then empty intervals', () => {
    let now = 1_000;
    const s = new MemoryObservationSource(() => now);
    s.push({ pools: { decode: { replicas: 0, load: [] } }, requests: { requests: 5 } });
    s.push({ pools: {}, requests: { requests: 7 } });
    now += 2_500;
    expect(s.collect()).toEqual({ pools: { decode: { replicas: 0, load: [] } }, requests: { requests: 5 }, intervalSec: 2.5 });
    now += 1_000;
    expect(s.collect()).toMatchObject({ requests: { requests: 7 }, intervalSec: 1 });
    now += 500;
    expect(s.collect()).toEqual({ pools: {}, requests: { requests: 0 }, intervalSec: 0.5 });
  });

  it('stays bounded when nobody collects, dropping the oldest', () => {
    const s = new MemoryObservationSource(() => 0);
    for (let i = 0; i < MAX_QUEUED_INTERVALS + 3; i++) s.push({ pools: {}, requests: { requests: i } });
    expect(s.dropped).toBe(3);
    expect(s.collect().requests.requests).toBe(3);
  });

  it('never reports a negative interval when the clock goes back', () => {
    let now = 10_000;
    const s = new MemoryObservationSource(() => now);
    now = 5_000;
    expect(s.collect().intervalSec).toBe(0);
  });
});
