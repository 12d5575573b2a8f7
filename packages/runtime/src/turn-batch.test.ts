import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { TurnBatch } from './turn-batch.js';

const nextTurn = (): Promise<void> => new Promise((r) => setImmediate(r));

function recording(): { batch: TurnBatch<number>; sends: number[][] } {
  const sends: number[][] = [];
  return { batch: new TurnBatch<number>((items) => sends.push([...items])), sends };
}

describe('TurnBatch', () => {
  it('an idle sender sends at once; the rest of a busy turn goes together at its end', async () => {
    const { batch, sends } = recording();
    batch.add(1);
    expect(sends).toEqual([[1]]); // at once, before the turn ends
    batch.add(2);
    batch.addAll([3, 4]);
    expect(sends).toEqual([[1]]);
    await nextTurn();
    expect(sends).toEqual([[1], [2, 3, 4]]);
    // still busy in the next turn (it sent in the last one): batched again
    batch.add(5);
    expect(sends).toEqual([[1], [2, 3, 4]]);
    await nextTurn();
    expect(sends).toEqual([[1], [2, 3, 4], [5]]);
  });

  it('two turns without a send make it idle again', async () => {
    const { batch, sends } = recording();
    batch.add(1);
    batch.add(2);
    await new Promise((r) => setTimeout(r, 5));
    expect(sends).toEqual([[1], [2]]);
    batch.addAll([3, 4]);
    expect(sends).toEqual([[1], [2], [3, 4]]);
  });

  it('flush sends what is queued now; an empty queue sends nothing', async () => {
    const { batch, sends } = recording();
    batch.flush();
    batch.add(1);
    batch.add(2);
    batch.flush();
    expect(sends).toEqual([[1], [2]]);
    await nextTurn();
    expect(sends).toEqual([[1], [2]]);
    batch.addAll([]);
    expect(sends).toEqual([[1], [2]]);
  });

  it('items leave in the order they were added, never in an empty send, whatever the pauses between them (property)', async () => {
    // 0: add, 1: addAll of 0..3 items, 2: a microtask, 3: the next turn, 4: a timer
    const step = fc.oneof(fc.constant([0] as const), fc.tuple(fc.constant(1 as const), fc.integer({ min: 0, max: 3 })), fc.constantFrom([2] as const, [3] as const, [4] as const));
    await fc.assert(
      fc.asyncProperty(fc.array(step, { maxLength: 60 }), async (steps) => {
        const { batch, sends } = recording();
        let next = 0;
        for (const s of steps) {
          if (s[0] === 0) batch.add(next++);
          else if (s[0] === 1) batch.addAll(Array.from({ length: s[1] }, () => next++));
          else if (s[0] === 2) await Promise.resolve();
          else if (s[0] === 3) await nextTurn();
          else await new Promise((r) => setTimeout(r, 1));
        }
        await nextTurn();
        expect(sends.every((b) => b.length > 0)).toBe(true);
        expect(sends.flat()).toEqual(Array.from({ length: next }, (_, i) => i));
      }),
      { numRuns: 200 },
    );
  });
});
