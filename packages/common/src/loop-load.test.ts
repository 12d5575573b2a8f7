import { describe, expect, it } from 'vitest';
import { LoopLoad, type LoopTimes } from './loop-load.js';

/** A loop whose times and clock the test moves: `spend(active, idle)` advances both. */
function fakeLoop() {
  let times: LoopTimes = { idle: 0, active: 0 };
  let clock = 0;
  return {
    options: { times: () => times, now: () => clock },
    spend(active: number, idle: number) {
      times = { idle: times.idle + idle, active: times.active + active };
      clock += active + idle;
    },
  };
}

describe('LoopLoad', () => {
  it('reads idle before a window closed, then the utilisation of the last closed window', () => {
    const loop = fakeLoop();
    const load = new LoopLoad({ ...loop.options, windowMs: 10 });
    expect(load.busy()).toBe(false);
    loop.spend(8, 2);
    expect(load.recentUtilization).toBeCloseTo(0.8);
    expect(load.busy()).toBe(true);
    // Within the next window the answer stays the closed window's.
    loop.spend(0, 5);
    expect(load.busy()).toBe(true);
    loop.spend(0, 5);
    expect(load.recentUtilization).toBe(0);
    expect(load.busy()).toBe(false);
  });

  it('measures a window as long as the gap between calls: after a quiet spell the loop reads idle', () => {
    const loop = fakeLoop();
    const load = new LoopLoad({ ...loop.options, windowMs: 10 });
    loop.spend(30, 0);
    expect(load.busy()).toBe(true);
    loop.spend(30, 970);
    expect(load.recentUtilization).toBeCloseTo(0.03);
    expect(load.busy()).toBe(false);
  });

  it('takes the busy bound it is given', () => {
    const loop = fakeLoop();
    const load = new LoopLoad({ ...loop.options, windowMs: 10, busyAbove: 0.9 });
    loop.spend(8, 2);
    expect(load.busy()).toBe(false);
    loop.spend(10, 0);
    expect(load.busy()).toBe(true);
  });

  it('reads the real loop: idle while it waits for a timer', async () => {
    // A loaded machine can leave this process unscheduled for the whole wait (the timer is then due
    // before the loop ever waits: utilisation 1, as CI saw once); a few tries tell that from a
    // LoopLoad that never reads idle.
    const readings: number[] = [];
    for (let attempt = 0; attempt < 5 && !(readings.at(-1)! < 0.5); attempt++) {
      const load = new LoopLoad({ windowMs: 5 });
      await new Promise((resolve) => setTimeout(resolve, 30));
      readings.push(load.recentUtilization);
    }
    expect(Math.min(...readings)).toBeLessThan(0.5);
  });
});
