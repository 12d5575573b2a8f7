import { execFile } from 'node:child_process';
import { EventEmitter } from 'node:events';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { PreciseTimer, type TimerThread } from './precise-timer.js';

/** A thread the test drives: `fire()` is the real thread's message; ref state and arming are recorded. */
class FakeThread extends EventEmitter implements TimerThread {
  referenced = false;
  terminated = false;
  constructor(readonly shared: SharedArrayBuffer) {
    super();
  }
  ref(): void {
    this.referenced = true;
  }
  unref(): void {
    this.referenced = false;
  }
  terminate(): Promise<number> {
    this.terminated = true;
    return Promise.resolve(0);
  }
  /** How many times the timer armed it (the control word). */
  get armings(): number {
    return Atomics.load(new Int32Array(this.shared, 0, 1), 0);
  }
  /** The deadline armed, on the monotonic clock (Infinity: none). */
  get deadline(): number {
    return new Float64Array(this.shared, 8, 1)[0]!;
  }
  fire(): void {
    this.emit('message', 0);
  }
}

function fakeTimer(): { timer: PreciseTimer; thread: () => FakeThread } {
  let made: FakeThread | undefined;
  const timer = new PreciseTimer((shared) => (made = new FakeThread(shared)));
  return { timer, thread: () => made! };
}

const settle = () => new Promise<void>((r) => setImmediate(r));

describe('PreciseTimer', () => {
  it('never resolves a sleep before its deadline, however many overlap (real thread)', async () => {
    const timer = new PreciseTimer();
    try {
      let early = 0;
      for (let round = 0; round < 40; round++) {
        const sleeps = Array.from({ length: 5 }, (_, i) => {
          const ms = ((round * 7 + i * 13) % 31) / 10; // 0 .. 3 ms
          const deadline = performance.now() + ms;
          return timer.sleep(ms).then(() => {
            if (performance.now() < deadline) early++;
          });
        });
        await Promise.all(sleeps);
      }
      expect(early).toBe(0);
      expect(timer.pending).toBe(0);
      expect(timer.threaded).toBe(true);
    } finally {
      await timer.close();
    }
  });

  it('resolves overlapping sleeps in deadline order (real thread)', async () => {
    const timer = new PreciseTimer();
    try {
      const order: number[] = [];
      const ms = [2.4, 0.3, 1.1, 0.7, 3.0, 1.9, 0.05];
      await timer.sleep(0.1); // the thread started (that takes milliseconds; more on a loaded machine)
      // one base for every deadline, far enough ahead that none has passed when its sleep is made (one
      // made past its deadline resolves at once, in call order)
      const base = performance.now() + 20;
      await Promise.all(ms.map((m) => timer.sleepUntil(base + m).then(() => order.push(m))));
      expect(order).toEqual([...ms].sort((a, b) => a - b));
    } finally {
      await timer.close();
    }
  });

  it('arms the thread with the earliest deadline, resolves only what is due, and holds the process open only while a sleep is pending', async () => {
    const { timer, thread } = fakeTimer();
    let done = 0;
    const later = timer.sleep(60_000).then(() => done++);
    const t = thread();
    expect(t.referenced).toBe(true);
    const armedLater = t.deadline;
    expect(Number.isFinite(armedLater)).toBe(true);
    void timer.sleep(1).then(() => done++);
    // the earlier sleep re-armed the thread with its own deadline
    expect(t.deadline).toBeLessThan(armedLater);
    await new Promise((r) => setTimeout(r, 3));
    const before = t.armings;
    t.fire();
    await settle();
    expect(done).toBe(1); // the 1 ms sleep; the minute-long one is not due
    expect(t.armings).toBe(before + 1);
    expect(t.deadline).toBeCloseTo(armedLater, 0);
    expect(t.referenced).toBe(true);
    // a wake-up with nothing due (the thread's clock a hair ahead) resolves nothing and arms again
    t.fire();
    await settle();
    expect(done).toBe(1);
    expect(timer.pending).toBe(1);
    void later;
    await timer.close();
    expect(t.terminated).toBe(true);
  });

  it('lets go of the process once the last sleep is resolved', async () => {
    const { timer, thread } = fakeTimer();
    const slept = timer.sleep(1);
    const t = thread();
    expect(t.referenced).toBe(true);
    await new Promise((r) => setTimeout(r, 3));
    t.fire();
    await slept;
    expect(t.referenced).toBe(false);
    expect(t.deadline).toBe(Infinity);
    await timer.close();
  });

  it('a sleep whose deadline has passed resolves at once, without the thread', async () => {
    const { timer, thread } = fakeTimer();
    await timer.sleep(0);
    await timer.sleep(-1);
    await timer.sleepUntil(performance.now() - 5);
    expect(thread()).toBeUndefined();
    expect(timer.pending).toBe(0);
  });

  it('falls back to setTimeout when the thread cannot start, still never early', async () => {
    const timer = new PreciseTimer(() => {
      throw new Error('no threads here');
    });
    const deadline = performance.now() + 1.5;
    await timer.sleep(1.5);
    expect(performance.now()).toBeGreaterThanOrEqual(deadline);
    expect(timer.pending).toBe(0);
    expect(timer.threaded).toBe(false);
  });

  it('moves pending sleeps to setTimeout when the thread dies', async () => {
    const { timer, thread } = fakeTimer();
    const deadline = performance.now() + 2;
    const slept = timer.sleep(2);
    thread().emit('exit', 1);
    expect(timer.pending).toBe(0);
    await slept;
    expect(performance.now()).toBeGreaterThanOrEqual(deadline);
    // and later sleeps too
    await timer.sleep(0.5);
  });

  it('an idle timer never keeps a process alive; a pending sleep does until it ends', async () => {
    const entry = fileURLToPath(new URL('../dist/index.js', import.meta.url));
    const timer = fileURLToPath(new URL('../dist/precise-timer.js', import.meta.url));
    // (run as `node --input-type=module -e`: the thread must not inherit that flag)
    const script = `
      const { systemClock } = await import(${JSON.stringify(entry)});
      const { sharedPreciseTimer } = await import(${JSON.stringify(timer)});
      await systemClock.sleep(0.2);
      systemClock.sleep(30).then(() => console.log('late'));
      console.log('slept', sharedPreciseTimer().threaded ? 'on the thread' : 'on setTimeout');
    `;
    const { stdout } = await promisify(execFile)(process.execPath, ['--input-type=module', '-e', script], { timeout: 20_000 });
    expect(stdout).toBe('slept on the thread\nlate\n');
  }, 30_000);
});
