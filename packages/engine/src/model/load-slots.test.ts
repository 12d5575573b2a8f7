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

  it('refuses a size below 1', () => {
    expect(() => new LoadSlots(0)).toThrow(RangeError);
  });
});
