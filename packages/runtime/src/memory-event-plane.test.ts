import { describe, expect, it } from 'vitest';
import { componentName, kvEventsStream, kvEventsSubject, loadSubject, namespace } from './addressing.js';
import type { EventMessage } from './event-plane.js';
import { MemoryEventPlane, MemoryEventStore } from './memory-event-plane.js';

const ns = namespace('prod');
const kv = kvEventsSubject(ns, componentName('backend'));
const kv2 = kvEventsSubject(ns, componentName('prefill'));
const load = loadSubject(ns, componentName('backend'));

async function take(it: AsyncIterator<EventMessage>, n: number): Promise<EventMessage[]> {
  const out: EventMessage[] = [];
  while (out.length < n) {
    const r = await it.next();
    if (r.done) break;
    out.push(r.value);
  }
  return out;
}

describe('MemoryEventPlane', () => {
  it('numbers published events and delivers matching ones in order, live included', async () => {
    const store = new MemoryEventStore();
    const worker = new MemoryEventPlane(store);
    expect(await worker.publish(kv, { id: 1 })).toBe(1);
    expect(await worker.publish(load, { running: 3 })).toBe(2);
    expect(await worker.publish(kv2, { id: 2 })).toBe(3);
    const indexer = new MemoryEventPlane(store);
    const ac = new AbortController();
    const it = indexer.subscribe({ subject: kvEventsStream(ns).subjects, durable: 'indexer', signal: ac.signal })[Symbol.asyncIterator]();
    const first = await take(it, 2);
    expect(first.map((m) => [m.seq, m.subject, m.payload])).toEqual([
      [1, kv, { id: 1 }],
      [3, kv2, { id: 2 }],
    ]);
    const live = it.next();
    await worker.publish(kv, { id: 3 });
    expect((await live).value).toMatchObject({ seq: 4, payload: { id: 3 }, redeliveries: 0 });
    ac.abort();
    expect((await it.next()).done).toBe(true);
  });

  it('a durable resumes at its first unacked message and counts redeliveries', async () => {
    const store = new MemoryEventStore();
    const pub = new MemoryEventPlane(store);
    for (let i = 1; i <= 4; i++) await pub.publish(kv, i);
    const sub = new MemoryEventPlane(store);
    let ac = new AbortController();
    let it = sub.subscribe({ subject: kv, durable: 'indexer', signal: ac.signal })[Symbol.asyncIterator]();
    const got = await take(it, 3);
    got[0]!.ack();
    got[2]!.ack(); // 2 stays unacked
    ac.abort();
    await it.next();
    ac = new AbortController();
    it = sub.subscribe({ subject: kv, durable: 'indexer', signal: ac.signal })[Symbol.asyncIterator]();
    const again = await take(it, 2);
    expect(again.map((m) => [m.seq, m.redeliveries])).toEqual([
      [2, 1], // delivered before, never acked
      [4, 0], // first delivery
    ]);
    ac.abort();
    await it.next();
  });

  it('startSeq applies when the durable is created; other durables are independent', async () => {
    const store = new MemoryEventStore();
    const pub = new MemoryEventPlane(store);
    for (let i = 1; i <= 5; i++) await pub.publish(kv, i);
    const sub = new MemoryEventPlane(store);
    const it = sub.subscribe({ subject: kv, durable: 'late', startSeq: 4 })[Symbol.asyncIterator]();
    expect((await take(it, 2)).map((m) => m.seq)).toEqual([4, 5]);
    const other = sub.subscribe({ subject: kv, durable: 'planner' })[Symbol.asyncIterator]();
    expect((await take(other, 1)).map((m) => m.seq)).toEqual([1]);
    await sub.close();
    expect((await it.next()).done).toBe(true);
    expect((await other.next()).done).toBe(true);
  });

  it("startAt 'new' skips what is stored when the durable is created; ignored for an existing durable", async () => {
    const store = new MemoryEventStore();
    const pub = new MemoryEventPlane(store);
    for (let i = 1; i <= 3; i++) await pub.publish(kv, i);
    const sub = new MemoryEventPlane(store);
    let ready = 0;
    const ac = new AbortController();
    const it = sub.subscribe({ subject: kv, durable: 'router', startAt: 'new', startSeq: 2, signal: ac.signal, onReady: () => ready++ })[Symbol.asyncIterator]();
    const pending = take(it, 2);
    await new Promise((r) => setImmediate(r));
    expect(ready).toBe(1);
    await pub.publish(kv, 4);
    await pub.publish(kv, 5);
    const got = await pending;
    expect(got.map((m) => m.seq)).toEqual([4, 5]);
    got[0]!.ack();
    ac.abort();
    expect((await it.next()).done).toBe(true);
    await pub.publish(kv, 6);
    // existing durable: resumes at its first unacked message
    const again = sub.subscribe({ subject: kv, durable: 'router', startAt: 'new' })[Symbol.asyncIterator]();
    expect((await take(again, 2)).map((m) => m.seq)).toEqual([5, 6]);
    // 'first' (the default) on a new durable: everything retained
    const all = sub.subscribe({ subject: kv, durable: 'planner', startAt: 'first' })[Symbol.asyncIterator]();
    expect((await take(all, 1)).map((m) => m.seq)).toEqual([1]);
    await expect(sub.subscribe({ subject: kv, durable: 'x', startAt: 'last' as never })[Symbol.asyncIterator]().next()).rejects.toMatchObject({
      code: 'invalid_argument',
    });
    await sub.close();
  });

  it('refuses a second live subscription, a changed filter and bad arguments', async () => {
    const store = new MemoryEventStore();
    const sub = new MemoryEventPlane(store);
    const ac = new AbortController();
    const it = sub.subscribe({ subject: kv, durable: 'indexer', signal: ac.signal })[Symbol.asyncIterator]();
    const pending = it.next();
    await new Promise((r) => setImmediate(r));
    await expect(sub.subscribe({ subject: kv, durable: 'indexer' })[Symbol.asyncIterator]().next()).rejects.toMatchObject({
      code: 'already_exists',
    });
    ac.abort();
    expect((await pending).done).toBe(true);
    await expect(sub.subscribe({ subject: load, durable: 'indexer' })[Symbol.asyncIterator]().next()).rejects.toMatchObject({
      code: 'invalid_argument',
    });
    await expect(sub.subscribe({ subject: kv, durable: 'Bad.Name' })[Symbol.asyncIterator]().next()).rejects.toMatchObject({
      code: 'invalid_argument',
    });
    await expect(sub.publish('a.*', 1)).rejects.toMatchObject({ code: 'invalid_argument' });
    await sub.close();
    await expect(sub.publish(kv, 1)).rejects.toMatchObject({ code: 'unavailable' });
  });

  it('copies payloads through JSON', async () => {
    const store = new MemoryEventStore();
    const pub = new MemoryEventPlane(store);
    const payload = { blocks: [1, 2] };
    await pub.publish(kv, payload);
    payload.blocks.push(3);
    const it = pub.subscribe({ subject: kv, durable: 'x' })[Symbol.asyncIterator]();
    expect((await take(it, 1))[0]!.payload).toEqual({ blocks: [1, 2] });
    await pub.close();
  });
});
