import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type NatsServer, startNats } from '@switchyard/testing';
import { componentName, kvEventsSubject, namespace } from './addressing.js';
import { JetStreamEventPlane } from './jetstream-event-plane.js';

let nats: NatsServer;
beforeAll(async () => { nats = await startNats({ jetstream: true }); });
afterAll(async () => { await nats?.stop(); });

describe('restart', () => {
  for (let round = 0; round < 6; round++) {
  it(`resumes after restart ${round}`, async () => {
    const ns = namespace(`r${round}`);
    const subject = kvEventsSubject(ns, componentName('c'));
    const pub = await JetStreamEventPlane.connect({ url: nats.url });
    const sub = await JetStreamEventPlane.connect({ url: nats.url });
    const it = sub.subscribe({ subject, durable: 'd' })[Symbol.asyncIterator]();
    await pub.publish(subject, 0);
    const first = await it.next();
    first.value.ack();
    await nats.restart();
    const t0 = Date.now();
    for (;;) { try { await pub.publish(subject, 1); break; } catch (e) { await new Promise((r) => setTimeout(r, 50)); } }
    const tPub = Date.now() - t0;
    const next = await it.next();
    console.log(`round ${round}: published after ${tPub} ms, delivered after ${Date.now() - t0} ms`, next.value.payload);
    await pub.close(); await sub.close();
  }, 60_000);
  }
});
