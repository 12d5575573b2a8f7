import { describe, expect, it } from 'vitest';
import { LoadSlots } from './load-slots.js';

describe('LoadSlots', () => {
  it('runs at most size loads at once, the rest in arrival order', async () => {
    const slots = new LoadSlots(2);
    let running = 0;
    let peak = 0;
    const order: number[] = [];
    const releases: Array<() => void> = [];
    const runs = [0, 1, 2, 3, 4].map((i) =>
      slots.run(async () => {
        running++;
        peak = Math.max(peak, running);
        order.push(i);
        await new Promise<void>((resolve) => releases.push(resolve));
        running--;
        return i;
      }),
    );
    for (let done = 0; done < 5; done++) {
      await new Promise((r) => setImmediate(r));
      expect(running).toBeLessThanOrEqual(2);
      releases.shift()!();
    }
    expect(await Promise.all(runs)).toEqual([0, 1, 2, 3, 4]);
    expect(peak).toBe(2);
    expect(order).toEqual([0, 1, 2, 3, 4]);
  });

  it('frees the slot when a load fails', async () => {
    const slots = new LoadSlots(1);
    await expect(slots.run(() => Promise.reject(new Error('bad model')))).rejects.toThrow('bad model');
    expect(await slots.run(async () => 'next')).toBe('next');
  });

  it('tryTake takes a free slot without waiting, none when all are taken; its release hands the slot on once', async () => {
    const slots = new LoadSlots(2);
    const first = slots.tryTake();
    const second = slots.tryTake();
    expect(first).toBeDefined();
    expect(second).toBeDefined();
    expect(slots.tryTake()).toBeUndefined();
    let ran = false;
    const waiting = slots.run(async () => {
      ran = true;
    });
    await new Promise((r) => setImmediate(r));
    expect(ran).toBe(false);
    first!();
    first!(); // a second call frees nothing more
    await waiting;
    expect(ran).toBe(true);
    // the run's slot is free again, the second borrowed one still taken: one more, then none
    const third = slots.tryTake();
    expect(third).toBeDefined();
    expect(slots.tryTake()).toBeUndefined();
    second!();
    third!();
    expect(slots.tryTake()).toBeDefined();
  });

  it('refuses a size below 1', () => {
    expect(() => new LoadSlots(0)).toThrow(RangeError);
  });
});
