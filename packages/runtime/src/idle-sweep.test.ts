import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { IdleSweep } from './idle-sweep.js';

interface E {
  lastActive: number;
  readonly name: string;
}

describe('IdleSweep', () => {
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('calls onIdle when an entry has been silent for idleMs, as a timer of its own would', () => {
    const fired: Array<[string, number]> = [];
    const sweep = new IdleSweep<E>(100, (e) => {
      fired.push([e.name, Date.now()]);
      sweep.delete(e);
    });
    const t0 = Date.now();
    const a: E = { lastActive: 0, name: 'a' };
    const b: E = { lastActive: 0, name: 'b' };
    sweep.add(a);
    vi.advanceTimersByTime(30);
    sweep.add(b);
    vi.advanceTimersByTime(50);
    sweep.touch(a); // a's silence starts again at t0 + 80
    vi.advanceTimersByTime(49);
    expect(fired).toEqual([]);
    vi.advanceTimersByTime(1); // t0 + 130: b's deadline
    expect(fired).toEqual([['b', t0 + 130]]);
    vi.advanceTimersByTime(50); // t0 + 180: a's
    expect(fired).toEqual([
      ['b', t0 + 130],
      ['a', t0 + 180],
    ]);
    expect(sweep.size).toBe(0);
  });

  it('never calls a deleted entry, and stops its timer once no entry is left', () => {
    const onIdle = vi.fn();
    const sweep = new IdleSweep<E>(100, onIdle);
    const a: E = { lastActive: 0, name: 'a' };
    sweep.add(a);
    sweep.delete(a);
    vi.advanceTimersByTime(1000);
    expect(onIdle).not.toHaveBeenCalled();
    expect(vi.getTimerCount()).toBe(0);
  });

  it('an entry onIdle keeps (lastActive set to now) is called again every idleMs', () => {
    const times: number[] = [];
    const sweep = new IdleSweep<E>(100, (e) => {
      times.push(Date.now());
      e.lastActive = Date.now();
    });
    const t0 = Date.now();
    sweep.add({ lastActive: 0, name: 'beat' });
    vi.advanceTimersByTime(350);
    expect(times).toEqual([t0 + 100, t0 + 200, t0 + 300]);
    sweep.clear();
    vi.advanceTimersByTime(1000);
    expect(times).toHaveLength(3);
  });

  it('an entry added back from onIdle (a probe that found it alive) starts a new silence', () => {
    const times: number[] = [];
    const sweep = new IdleSweep<E>(100, (e) => {
      times.push(Date.now());
      sweep.delete(e);
      setTimeout(() => sweep.add(e), 20); // the probe's answer
    });
    const t0 = Date.now();
    sweep.add({ lastActive: 0, name: 'probed' });
    vi.advanceTimersByTime(250);
    expect(times).toEqual([t0 + 100, t0 + 220]);
  });
});
