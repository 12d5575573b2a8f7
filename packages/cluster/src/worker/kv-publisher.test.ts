import { describe, expect, it } from 'vitest';
import { silentLogger } from '@switchyard/common';
import type { KvCacheEvent, KvEventSink, LlmKvSource } from '@switchyard/llm';
import { instanceId, type EventPlane } from '@switchyard/runtime';
import type { WireKvEvents } from '../protocols.js';
import { KvEventPublisher } from './kv-publisher.js';

function source(): LlmKvSource & { emit(n: number): void } {
  const sinks = new Set<KvEventSink>();
  let next = 0;
  return {
    onEvent: (l) => (sinks.add(l), () => sinks.delete(l)),
    snapshot: () => ({ last_event_id: next - 1, blocks: [], partial_blocks: 0 }),
    emit(n) {
      for (let i = 0; i < n; i++) {
        const e: KvCacheEvent = { event_id: next++, data: { type: 'cleared' } };
        for (const s of sinks) s(e);
      }
    },
  };
}

/** An event plane whose publishes resolve when the test says so (or fail). */
function manualPlane() {
  const calls: Array<{ payload: WireKvEvents; resolve: () => void; reject: (e: Error) => void }> = [];
  const plane: EventPlane = {
    publish: (_subject, payload) =>
      new Promise<number>((resolve, reject) => calls.push({ payload: payload as WireKvEvents, resolve: () => resolve(calls.length), reject })),
    subscribe: () => {
      throw new Error('unused');
    },
    close: async () => {},
  };
  return { plane, calls };
}

const tick = () => new Promise((r) => setImmediate(r));
const ids = (b: WireKvEvents) => b.events.map((e) => e.event_id);

describe('KvEventPublisher', () => {
  it('batches per macrotask, keeps one publish in flight, and never blocks the producer', async () => {
    const { plane, calls } = manualPlane();
    const p = new KvEventPublisher(plane, 's', instanceId('00000000000000aa'), silentLogger, 0);
    const kv = source();
    p.attach('m', kv);
    kv.emit(3);
    expect(calls).toHaveLength(0); // nothing synchronous inside the engine's step
    await tick();
    expect(calls.map((c) => ids(c.payload))).toEqual([[0, 1, 2]]);
    kv.emit(2);
    await tick();
    kv.emit(1);
    await tick();
    expect(calls).toHaveLength(1); // still in flight: the next events wait and merge
    calls[0]!.resolve();
    await tick();
    await tick();
    expect(calls.map((c) => ids(c.payload))).toEqual([[0, 1, 2], [3, 4, 5]]);
    expect(calls[1]!.payload).toMatchObject({ v: 1, instanceId: '00000000000000aa', model: 'm' });
  });

  it('a failed publish is logged and dropped: the next batch jumps ids (routers resync)', async () => {
    const { plane, calls } = manualPlane();
    const errors: unknown[] = [];
    const logger = { ...silentLogger, error: (...a: unknown[]) => void errors.push(a) };
    const p = new KvEventPublisher(plane, 's', instanceId('00000000000000aa'), logger, 0);
    const kv = source();
    const detach = p.attach('m', kv);
    kv.emit(2);
    await tick();
    calls[0]!.reject(new Error('jetstream down'));
    kv.emit(1);
    await tick();
    await tick();
    expect(errors).toHaveLength(1);
    expect((errors[0] as [Record<string, unknown>])[0]).toMatchObject({ firstEventId: 0, lastEventId: 1 });
    expect(ids(calls[1]!.payload)).toEqual([2]);
    calls[1]!.resolve();
    await p.flush();
    detach();
    kv.emit(1);
    await tick();
    expect(calls).toHaveLength(2);
  });

  it('a reloaded engine continues the wire ids after a cleared event; snapshots translate', async () => {
    const { plane, calls } = manualPlane();
    const p = new KvEventPublisher(plane, 's', instanceId('00000000000000aa'), silentLogger, 0);
    const first = source();
    const detachFirst = p.attach('m', first);
    first.emit(3);
    await tick();
    calls[0]!.resolve();
    await p.flush();
    detachFirst();
    const second = source(); // a reload: a new engine whose ids start at 0
    p.attach('m', second);
    expect(p.wireEventId('m', second.snapshot().last_event_id)).toBe(3); // reflects the cleared event
    second.emit(2);
    await tick();
    expect(calls[1]!.payload.events.map((e) => [e.event_id, e.data.type])).toEqual([
      [3, 'cleared'],
      [4, 'cleared'],
      [5, 'cleared'],
    ]);
    expect(p.wireEventId('m', second.snapshot().last_event_id)).toBe(5);
    expect(p.wireEventId('other', 7)).toBe(7);
  });

  it('publishes a model at most once per interval, at once when idle, and flush does not wait it out', async () => {
    const { plane, calls } = manualPlane();
    const p = new KvEventPublisher(plane, 's', instanceId('00000000000000aa'), silentLogger, 40);
    const kv = source();
    p.attach('m', kv);
    const other = source();
    p.attach('o', other);
    const t0 = performance.now();
    kv.emit(1);
    await tick();
    expect(calls.map((c) => ids(c.payload))).toEqual([[0]]); // the first batch does not wait
    calls[0]!.resolve();
    for (let i = 0; i < 3; i++) {
      kv.emit(1);
      await tick();
    }
    other.emit(1);
    await tick();
    // the model's next batch waits out the interval, merging what comes meanwhile; another model does not wait
    expect(calls.map((c) => [c.payload.model, ids(c.payload)])).toEqual([['m', [0]], ['o', [0]]]);
    await new Promise<void>((resolve) => {
      const poll = (): void => void (calls.length >= 3 ? resolve() : setTimeout(poll, 2));
      poll();
    });
    expect(performance.now() - t0).toBeGreaterThanOrEqual(38);
    expect(ids(calls[2]!.payload)).toEqual([1, 2, 3]);
    calls[1]!.resolve();
    calls[2]!.resolve();
    kv.emit(2);
    const flushed = p.flush();
    const t1 = performance.now();
    for (let i = 0; i < 5 && calls.length < 4; i++) await tick();
    expect(ids(calls[3]!.payload)).toEqual([4, 5]); // flush publishes now, not after the interval
    expect(performance.now() - t1).toBeLessThan(30);
    calls[3]!.resolve();
    await flushed;
    expect(() => new KvEventPublisher(plane, 's', instanceId('00000000000000aa'), silentLogger, -1)).toThrow(RangeError);
  });
});
