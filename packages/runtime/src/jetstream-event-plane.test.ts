import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type NatsServer, startNats } from '@switchyard/testing';
import {
  componentName,
  forwardPassStream,
  forwardPassSubject,
  kvEventsStream,
  kvEventsSubject,
  loadSubject,
  namespace,
  plannerDecisionsStream,
  plannerDecisionsSubject,
  requestFiguresStream,
  requestFiguresSubject,
} from './addressing.js';
import type { EventMessage } from './event-plane.js';
import { FIGURES_STREAM_MAX_AGE_MS, JetStreamEventPlane, type JetStreamEventPlaneOptions, layoutStreamFor } from './jetstream-event-plane.js';
import { nanos } from '@nats-io/nats-core';
import { connect } from '@nats-io/transport-node';
import { JetStreamApiCodes, StorageType, jetstreamManager } from '@nats-io/jetstream';

let nats: NatsServer;
const planes: JetStreamEventPlane[] = [];
let counter = 0;
const freshNs = () => namespace(`ev${++counter}`);

async function plane(ackWaitMs?: number, options: JetStreamEventPlaneOptions = {}): Promise<JetStreamEventPlane> {
  const p = await JetStreamEventPlane.connect({ url: nats.url, ...options, ...(ackWaitMs === undefined ? {} : { ackWaitMs }) });
  planes.push(p);
  return p;
}
/** A live subscription of durable 'd' that got 'a' (acked) and 'b' (delivered, not acked). */
async function ackedAThenB() {
  const ns = freshNs();
  const subject = kvEventsSubject(ns, componentName('c'));
  const pub = await plane();
  const sub = await plane();
  const it = sub.subscribe({ subject, durable: 'd' })[Symbol.asyncIterator]();
  await pub.publish(subject, 'a');
  await pub.publish(subject, 'b');
  const [a, b] = await take(it, 2);
  expect([a!.payload, b!.payload]).toEqual(['a', 'b']);
  a!.ack();
  await sub.nc.flush();
  return { ns, subject, pub, sub, it };
}
/** Publish, retrying while the server is still coming back (restart tests); the stream sequence. */
async function publishOnceUp(pub: JetStreamEventPlane, subject: string, payload: unknown, ms = 10_000): Promise<number> {
  const end = Date.now() + ms;
  for (;;) {
    try {
      return await pub.publish(subject, payload);
    } catch (e) {
      if (Date.now() > end) throw e;
      await new Promise((r) => setTimeout(r, 50));
    }
  }
}
/** Take `n` messages from a subscription iterator (without ending it). */
async function take(it: AsyncIterator<EventMessage>, n: number): Promise<EventMessage[]> {
  const out: EventMessage[] = [];
  while (out.length < n) {
    const r = await it.next();
    if (r.done) throw new Error('subscription ended early');
    out.push(r.value);
  }
  return out;
}

beforeAll(async () => {
  nats = await startNats({ jetstream: true });
});
afterAll(async () => {
  await Promise.all(planes.map((p) => p.close()));
  await nats?.stop();
});

describe('layoutStreamFor', () => {
  it('maps layout subjects and filters to the namespace streams', () => {
    const ns = namespace('prod');
    expect(layoutStreamFor(kvEventsSubject(ns, componentName('backend')))).toEqual(kvEventsStream(ns));
    expect(layoutStreamFor('switchyard.prod.kv_events.*')).toEqual(kvEventsStream(ns));
    expect(layoutStreamFor('switchyard.prod.load.backend')?.name).toBe('switchyard_prod_load');
    expect(layoutStreamFor(forwardPassSubject(ns, componentName('backend')))).toEqual({ ...forwardPassStream(ns), maxAgeMs: FIGURES_STREAM_MAX_AGE_MS });
    expect(layoutStreamFor(requestFiguresSubject(ns, componentName('router')))).toEqual({ ...requestFiguresStream(ns), maxAgeMs: FIGURES_STREAM_MAX_AGE_MS });
    expect(layoutStreamFor('switchyard.prod.request_figures.*')?.name).toBe('switchyard_prod_request_figures');
    expect(layoutStreamFor(plannerDecisionsSubject(ns, componentName('planner')))).toEqual({ ...plannerDecisionsStream(ns), maxAgeMs: FIGURES_STREAM_MAX_AGE_MS });
    expect(plannerDecisionsStream(ns)).toEqual({ name: 'switchyard_prod_planner_decisions', subjects: 'switchyard.prod.planner_decisions.*' });
    expect(layoutStreamFor('other.subject')).toBeNull();
    expect(layoutStreamFor('switchyard.prod.req.backend')).toBeNull();
  });
});

describe('JetStreamEventPlane (real nats-server)', () => {
  it('publishes with stream sequences and delivers in order to a durable; ack', async () => {
    const ns = freshNs();
    const pub = await plane();
    const subject = kvEventsSubject(ns, componentName('backend'));
    const seqs: number[] = [];
    for (let i = 0; i < 5; i++) seqs.push(await pub.publish(subject, { i }));
    expect(seqs).toEqual([1, 2, 3, 4, 5]);
    // another component's events go to the same stream, with the next sequence
    expect(await pub.publish(kvEventsSubject(ns, componentName('other')), { other: true })).toBe(6);

    const sub = await plane();
    const ac = new AbortController();
    const it = sub.subscribe({ subject, durable: 'indexer', signal: ac.signal })[Symbol.asyncIterator]();
    const got = await take(it, 5);
    expect(got.map((m) => m.seq)).toEqual([1, 2, 3, 4, 5]);
    expect(got.map((m) => m.payload)).toEqual([0, 1, 2, 3, 4].map((i) => ({ i })));
    expect(got.every((m) => m.subject === subject && m.redeliveries === 0)).toBe(true);
    for (const m of got) m.ack();
    // live delivery
    const next = take(it, 1);
    expect(await pub.publish(subject, { i: 5 })).toBe(7);
    const [live] = await next;
    expect(live).toMatchObject({ seq: 7, payload: { i: 5 } });
    live!.ack();
    ac.abort();
    expect((await it.next()).done).toBe(true);
  });

  it('a durable resumes at its first unacked message, counting redeliveries', async () => {
    const ns = freshNs();
    const subject = loadSubject(ns, componentName('backend'));
    const p = await plane();
    for (let i = 1; i <= 5; i++) await p.publish(subject, { i });

    const it1 = p.subscribe({ subject, durable: 'planner' })[Symbol.asyncIterator]();
    const first = await take(it1, 3);
    first[0]!.ack();
    first[1]!.ack();
    // first[2] (seq 3) is not acked
    // a second live subscription of the same durable is refused
    await expect(p.subscribe({ subject, durable: 'planner' })[Symbol.asyncIterator]().next()).rejects.toMatchObject({ code: 'already_exists' });
    await it1.return?.(undefined);

    await p.publish(subject, { i: 6 });
    const t0 = Date.now();
    const other = await plane();
    const it2 = other.subscribe({ subject, durable: 'planner' })[Symbol.asyncIterator]();
    const again = await take(it2, 4);
    expect(Date.now() - t0).toBeLessThan(3000); // nak'ed on stop: no ack-wait (30 s) needed
    expect(again.map((m) => m.seq)).toEqual([3, 4, 5, 6]);
    expect(again[0]!.redeliveries).toBeGreaterThanOrEqual(1);
    for (const m of again) m.ack();
    await it2.return?.(undefined);

    // everything acked: a new subscription only sees new messages
    const it3 = other.subscribe({ subject, durable: 'planner' })[Symbol.asyncIterator]();
    const pending = take(it3, 1);
    await p.publish(subject, { i: 7 });
    expect((await pending)[0]).toMatchObject({ seq: 7, redeliveries: 0 });
    await it3.return?.(undefined);
  });

  it('startSeq positions a new durable; an existing durable keeps its filter', async () => {
    const ns = freshNs();
    const subject = kvEventsSubject(ns, componentName('backend'));
    const p = await plane();
    for (let i = 1; i <= 4; i++) await p.publish(subject, { i });
    const it = p.subscribe({ subject, durable: 'late', startSeq: 3 })[Symbol.asyncIterator]();
    expect((await take(it, 2)).map((m) => m.seq)).toEqual([3, 4]);
    await it.return?.(undefined);
    await expect(
      p.subscribe({ subject: kvEventsSubject(ns, componentName('x')), durable: 'late' })[Symbol.asyncIterator]().next(),
    ).rejects.toMatchObject({ code: 'invalid_argument' });
  });

  it("startAt 'new' delivers only messages published after the durable is created; resume keeps the position", async () => {
    const ns = freshNs();
    const subject = kvEventsSubject(ns, componentName('backend'));
    const p = await plane();
    for (let i = 1; i <= 3; i++) await p.publish(subject, { i });
    let ready!: () => void;
    const isReady = new Promise<void>((r) => (ready = r));
    const it1 = p.subscribe({ subject, durable: 'fresh', startAt: 'new', onReady: () => ready() })[Symbol.asyncIterator]();
    const pending = take(it1, 2);
    await isReady;
    await p.publish(subject, { i: 4 });
    await p.publish(subject, { i: 5 });
    const got = await pending;
    expect(got.map((m) => m.seq)).toEqual([4, 5]);
    got[0]!.ack();
    await it1.return?.(undefined);
    // existing durable: startAt is ignored, it resumes at its first unacked message (5), not at 1 or 'new'
    await p.publish(subject, { i: 6 });
    const it2 = p.subscribe({ subject, durable: 'fresh', startAt: 'new' })[Symbol.asyncIterator]();
    const again = await take(it2, 2);
    expect(again.map((m) => m.seq)).toEqual([5, 6]);
    for (const m of again) m.ack();
    await it2.return?.(undefined);

    // a 'new' durable that never got a message resumes after its creation point, not at 1
    const ac = new AbortController();
    const it3 = p.subscribe({ subject, durable: 'idle', startAt: 'new', signal: ac.signal, onReady: () => ac.abort() })[Symbol.asyncIterator]();
    expect((await it3.next()).done).toBe(true);
    await p.publish(subject, { i: 7 });
    const it4 = p.subscribe({ subject, durable: 'idle' })[Symbol.asyncIterator]();
    expect((await take(it4, 1)).map((m) => m.seq)).toEqual([7]);
    await it4.return?.(undefined);
    await expect(p.subscribe({ subject, durable: 'x', startAt: 'last' as never })[Symbol.asyncIterator]().next()).rejects.toMatchObject({
      code: 'invalid_argument',
    });
  });

  it('streams get max_age (default 1 h); an existing stream with another max_age is updated', async () => {
    const p = await plane();
    const ns1 = freshNs();
    await p.publish(kvEventsSubject(ns1, componentName('backend')), 1);
    const jsm = await jetstreamManager(p.nc);
    expect((await jsm.streams.info(kvEventsStream(ns1).name)).config.max_age).toBe(nanos(3_600_000));

    // a stream created without an age limit (an older version) keeps its messages and gets the limit
    const ns2 = freshNs();
    const spec = kvEventsStream(ns2);
    await jsm.streams.add({ name: spec.name, subjects: [spec.subjects], storage: StorageType.File });
    await p.publish(kvEventsSubject(ns2, componentName('backend')), 1);
    const p2 = await plane(undefined, { maxAgeMs: 60_000 });
    expect(await p2.publish(kvEventsSubject(ns2, componentName('backend')), 2)).toBe(2);
    const info = await jsm.streams.info(spec.name);
    expect(info.config.max_age).toBe(nanos(60_000));
    expect(info.config.subjects).toEqual([spec.subjects]);
    expect(info.state.messages).toBe(2);
    expect(() => JetStreamEventPlane.fromConnection(p.nc, { maxAgeMs: -1 })).toThrow(/maxAgeMs/);
  });

  it("the figure streams keep the shorter of the plane's retention and FIGURES_STREAM_MAX_AGE_MS", async () => {
    const jsm = await jetstreamManager((await plane()).nc);
    const ns = freshNs();
    await (await plane()).publish(forwardPassSubject(ns, componentName('backend')), 1);
    expect((await jsm.streams.info(forwardPassStream(ns).name)).config.max_age).toBe(nanos(FIGURES_STREAM_MAX_AGE_MS));
    await (await plane(undefined, { maxAgeMs: 30_000 })).publish(requestFiguresSubject(ns, componentName('router')), 1);
    expect((await jsm.streams.info(requestFiguresStream(ns).name)).config.max_age).toBe(nanos(30_000));
    const ns2 = freshNs();
    await (await plane(undefined, { maxAgeMs: 0 })).publish(requestFiguresSubject(ns2, componentName('router')), 1);
    expect((await jsm.streams.info(requestFiguresStream(ns2).name)).config.max_age).toBe(nanos(FIGURES_STREAM_MAX_AGE_MS));
  });

  it('the server deletes a durable nobody pulls from for durableInactiveMs; a live one stays', async () => {
    const ns = freshNs();
    const subject = kvEventsSubject(ns, componentName('backend'));
    const p = await plane(undefined, { durableInactiveMs: 2000 });
    const jsm = await jetstreamManager(p.nc);
    const stream = kvEventsStream(ns).name;
    await p.publish(subject, { i: 1 });
    const it = p.subscribe({ subject, durable: 'orphan' })[Symbol.asyncIterator]();
    (await take(it, 1))[0]!.ack();
    expect((await jsm.consumers.info(stream, 'orphan')).config.inactive_threshold).toBe(nanos(2000));
    // live and idle for longer than the threshold: kept
    await new Promise((r) => setTimeout(r, 3500));
    expect((await jsm.consumers.info(stream, 'orphan')).name).toBe('orphan');
    await it.return?.(undefined);
    const t0 = Date.now();
    let gone = false;
    while (!gone && Date.now() - t0 < 15_000) {
      await new Promise((r) => setTimeout(r, 250));
      gone = await jsm.consumers.info(stream, 'orphan').then(
        () => false,
        (e: unknown) => (e as { code?: number }).code === JetStreamApiCodes.ConsumerNotFound,
      );
    }
    expect(gone).toBe(true);
    console.log(`orphan durable deleted ${Date.now() - t0} ms after its subscription stopped`);
  }, 30_000);

  it('unacked messages come back after ack-wait within a live subscription', async () => {
    const ns = freshNs();
    const subject = kvEventsSubject(ns, componentName('backend'));
    const p = await plane(1000);
    await p.publish(subject, { i: 1 });
    const it = p.subscribe({ subject, durable: 'slow' })[Symbol.asyncIterator]();
    const [m1] = await take(it, 1);
    expect(m1).toMatchObject({ seq: 1, redeliveries: 0 });
    const [m2] = await take(it, 1);
    expect(m2).toMatchObject({ seq: 1, redeliveries: 1 });
    m2!.ack();
    await it.return?.(undefined);
  });

  it('rejects subjects outside the layout and bad durable names', async () => {
    const p = await plane();
    await expect(p.publish('some.other.subject', {})).rejects.toMatchObject({ code: 'invalid_argument' });
    await expect(
      p.subscribe({ subject: 'switchyard.x.kv_events.*', durable: 'Bad.Name' })[Symbol.asyncIterator]().next(),
    ).rejects.toMatchObject({ code: 'invalid_argument' });
  });

  it('close ends live subscriptions', async () => {
    const ns = freshNs();
    const p = await JetStreamEventPlane.connect({ url: nats.url });
    const it = p.subscribe({ subject: kvEventsSubject(ns, componentName('c')), durable: 'd' })[Symbol.asyncIterator]();
    const pending = it.next();
    await new Promise((r) => setTimeout(r, 200));
    await p.close();
    expect((await pending).done).toBe(true);
    await expect(p.publish(kvEventsSubject(ns, componentName('c')), 1)).rejects.toMatchObject({ code: 'unavailable' });
  });

  it('a durable deleted under a live subscription is re-created where the subscription stood', async () => {
    const { ns, subject, pub, sub, it } = await ackedAThenB();
    const jsm = await jetstreamManager(sub.nc);
    await jsm.consumers.delete(kvEventsStream(ns).name, 'd');
    await pub.publish(subject, 'c');
    const t0 = Date.now();
    // b was delivered but not acked: it comes again, then c
    expect((await take(it, 2)).map((m) => m.payload)).toEqual(['b', 'c']);
    expect(Date.now() - t0).toBeLessThan(5_000);
  });

  it('a subscription ends when its connection is closed under it (no resume against a closed connection)', async () => {
    const ns = freshNs();
    const subject = kvEventsSubject(ns, componentName('c'));
    const nc = await connect({ servers: nats.url });
    const p = JetStreamEventPlane.fromConnection(nc);
    const it = p.subscribe({ subject, durable: 'd' })[Symbol.asyncIterator]();
    const pending = it.next();
    await new Promise((r) => setTimeout(r, 200));
    await nc.close();
    expect((await pending).done).toBe(true);
    await p.close();
  });

  // These restart the file's nats-server: keep them last.
  it('a live subscription resumes within seconds of a server restart: the unacked message comes again, then new ones', async () => {
    const { subject, pub, it } = await ackedAThenB();
    await nats.restart();
    const t0 = Date.now();
    await publishOnceUp(pub, subject, 'c');
    const again = await take(it, 2);
    expect(again.map((m) => m.payload)).toEqual(['b', 'c']);
    expect(Date.now() - t0).toBeLessThan(5_000);
  });

  it('a server that lost its store: publishing re-creates the stream, a live subscription resumes from its start', async () => {
    const ns = freshNs();
    const subject = kvEventsSubject(ns, componentName('c'));
    const pub = await plane();
    const sub = await plane();
    const it = sub.subscribe({ subject, durable: 'd' })[Symbol.asyncIterator]();
    for (let i = 0; i < 5; i++) await pub.publish(subject, i);
    for (const m of await take(it, 5)) m.ack();
    await nats.restart({ wipe: true });
    const t0 = Date.now();
    expect(await publishOnceUp(pub, subject, 'after')).toBe(1); // a new stream
    const [m] = await take(it, 1);
    expect(m).toMatchObject({ seq: 1, payload: 'after' });
    expect(Date.now() - t0).toBeLessThan(5_000);
  });
});
