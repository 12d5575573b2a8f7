import { describe, expect, it } from 'vitest';
import { ManualClock, realClock } from './queue-clock.js';

describe('realClock timers', () => {
  it('never fire early, including sub-millisecond and already-passed times, and never synchronously', async () => {
    const fired: { want: number; at: number; sync: boolean }[] = [];
    const start = realClock.now();
    const wants = [start - 5, start + 0.3, start + 2.7, start + 12];
    let returned = 0;
    await Promise.all(
      wants.map(
        (want) =>
          new Promise<void>((resolve) => {
            const before = returned;
            realClock.setTimer(want, () => {
              fired.push({ want, at: realClock.now(), sync: returned === before });
              resolve();
            });
            returned++;
          }),
      ),
    );
    expect(fired.filter((f) => f.sync)).toEqual([]);
    expect(fired).toHaveLength(4);
    for (const f of fired) expect(f.at).toBeGreaterThanOrEqual(f.want);
  });

  it('can be cancelled', async () => {
    let fired = false;
    const cancel = realClock.setTimer(realClock.now() + 1, () => (fired = true));
    cancel();
    cancel();
    await new Promise((r) => setTimeout(r, 10));
    expect(fired).toBe(false);
  });
});

describe('ManualClock', () => {
  it('fires due timers in time order inside advance, and only then', () => {
    const clock = new ManualClock(0);
    const log: string[] = [];
    clock.setTimer(20, () => log.push(`b@${clock.now()}`));
    clock.setTimer(10, () => {
      log.push(`a@${clock.now()}`);
      clock.setTimer(15, () => log.push(`c@${clock.now()}`));
    });
    const cancel = clock.setTimer(12, () => log.push('never'));
    cancel();
    expect(log).toEqual([]);
    clock.advance(30);
    expect(log).toEqual(['a@10', 'c@15', 'b@20']);
    expect(clock.now()).toBe(30);
    expect(clock.pendingTimers).toBe(0);
  });
});
