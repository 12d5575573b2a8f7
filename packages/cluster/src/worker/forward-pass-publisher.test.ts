import { describe, expect, it } from 'vitest';
import { silentLogger } from '@switchyard/common';
import type { ForwardPassFigures, ForwardPassSink, LlmEndpoint } from '@switchyard/llm';
import { MemoryEventPlane, MemoryEventStore, instanceId, type EventPlane } from '@switchyard/runtime';
import { decodeWireForwardPass } from '../wire-codec.js';
import { ForwardPassPublisher } from './forward-pass-publisher.js';

const ID = instanceId('00000000000000aa');
const SUBJECT = 'switchyard.t.forward_pass.backend';
const step = (i: number): ForwardPassFigures => ({ endedAt: i, wallMs: 1 + i, prefillTokens: i, decodeKvTokens: 2 * i });

/** An endpoint double with only what the publisher uses: step listeners. */
function steppingEndpoint(): { endpoint: LlmEndpoint; emit(f: ForwardPassFigures): void; listeners(): number } {
  const listeners = new Set<ForwardPassSink>();
  const endpoint = {
    onForwardPass: (l: ForwardPassSink) => {
      listeners.add(l);
      return () => listeners.delete(l);
    },
  } as unknown as LlmEndpoint;
  return { endpoint, emit: (f) => listeners.forEach((l) => l(f)), listeners: () => listeners.size };
}

function published(store: MemoryEventStore) {
  const out = [];
  for (let seq = 1; seq <= store.lastSeq; seq++) out.push(decodeWireForwardPass(JSON.parse(new TextDecoder().decode(store.at(seq)!.bytes))));
  return out;
}

describe('ForwardPassPublisher', () => {
  it('sends one batch per model per round with every step while under the cap, and nothing for an idle model', async () => {
    const store = new MemoryEventStore();
    let now = 1000;
    const p = new ForwardPassPublisher({ eventPlane: new MemoryEventPlane(store), subject: SUBJECT, instanceId: ID, logger: silentLogger, now: () => now });
    const a = steppingEndpoint();
    const b = steppingEndpoint();
    p.attach('a', a.endpoint);
    p.attach('b', b.endpoint);
    now = 1100;
    a.emit(step(1));
    a.emit(step(2));
    now = 2000;
    await p.tick();
    expect(published(store)).toEqual([
      {
        v: 1,
        instanceId: ID,
        model: 'a',
        from: 1000,
        to: 2000,
        steps: [
          { ts: 1100, wallMs: 2, prefillTokens: 1, decodeKvTokens: 2 },
          { ts: 1100, wallMs: 3, prefillTokens: 2, decodeKvTokens: 4 },
        ],
        dropped: 0,
      },
    ]);
    now = 3000;
    await p.tick();
    expect(store.lastSeq).toBe(1);
    b.emit(step(3));
    now = 4000;
    await p.tick();
    expect(published(store)[1]).toMatchObject({ model: 'b', from: 3000, to: 4000, dropped: 0 });
  });

  it('caps a busy second at maxSteps, a uniform sample of its steps, and counts the rest as dropped', async () => {
    const store = new MemoryEventStore();
    // a deterministic generator: the sample must still span the whole second
    let x = 7;
    const random = () => ((x = (x * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
    const p = new ForwardPassPublisher({ eventPlane: new MemoryEventPlane(store), subject: SUBJECT, instanceId: ID, logger: silentLogger, maxSteps: 64, random });
    const a = steppingEndpoint();
    p.attach('a', a.endpoint);
    for (let i = 0; i < 10_000; i++) a.emit(step(i));
    await p.tick();
    const [batch] = published(store);
    expect(batch!.steps).toHaveLength(64);
    expect(batch!.dropped).toBe(10_000 - 64);
    const ids = batch!.steps.map((s) => s.prefillTokens);
    expect(new Set(ids).size).toBe(64);
    // not the first 64: a reservoir reaches into the whole period
    expect(Math.max(...ids)).toBeGreaterThan(5000);
    expect(JSON.stringify(batch).length).toBeLessThan(8 * 1024);
  });

  it('detach stops the listener; steps already batched still go out; a failed publish is dropped, not retried', async () => {
    const store = new MemoryEventStore();
    let fail = true;
    const real = new MemoryEventPlane(store);
    const flaky: EventPlane = {
      publish: (subject, payload) => (fail ? Promise.reject(new Error('down')) : real.publish(subject, payload)),
      subscribe: (o) => real.subscribe(o),
      close: () => real.close(),
    };
    const p = new ForwardPassPublisher({ eventPlane: flaky, subject: SUBJECT, instanceId: ID, logger: silentLogger });
    const a = steppingEndpoint();
    const detach = p.attach('a', a.endpoint);
    a.emit(step(1));
    await p.tick();
    expect(store.lastSeq).toBe(0);
    fail = false;
    a.emit(step(2));
    detach();
    expect(a.listeners()).toBe(0);
    a.emit(step(3));
    await p.stop();
    expect(published(store).map((b) => b.steps.map((s) => s.prefillTokens))).toEqual([[2]]);
  });
});
