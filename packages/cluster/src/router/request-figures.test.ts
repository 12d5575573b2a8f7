import { afterEach, describe, expect, it } from 'vitest';
import { silentLogger } from '@switchyard/common';
import { MemoryRoutingTable } from '@switchyard/kv-router';
import { compileSamplingParams } from '@switchyard/llm';
import { MemoryEventPlane, MemoryEventStore, componentName, namespace, requestFiguresSubject, type EventPlane } from '@switchyard/runtime';
import { type HttpFrontDoor, ServerSettings, SharedMemoryManager, createHttpServer } from '@switchyard/server';
import { ITL_MS_BOUNDS, TOKEN_BOUNDS, TTFT_MS_BOUNDS, bucketOf } from '../figure-histogram.js';
import { ROUTER_COMPONENT, type WireHistogram, type WireRequestFigures } from '../protocols.js';
import { decodeWireRequestFigures } from '../wire-codec.js';
import { RequestFiguresPublisher, RequestFiguresRecorder } from './request-figures.js';
import { type RouterCore, startRouterCore } from './router-core.js';
import { LLM, MockCluster, NS, waitFor } from './test-support/mock-cluster.js';

const SUBJECT = 'switchyard.t.request_figures.router';

function published(store: MemoryEventStore, subject = SUBJECT): WireRequestFigures[] {
  const out: WireRequestFigures[] = [];
  for (let seq = 1; seq <= store.lastSeq; seq++) {
    const m = store.at(seq)!;
    if (m.subject === subject) out.push(decodeWireRequestFigures(JSON.parse(new TextDecoder().decode(m.bytes))));
  }
  return out;
}
const total = (h: WireHistogram): number => h.counts.reduce((a, b) => a + b, 0);
const countAt = (h: WireHistogram, value: number): number => h.counts[bucketOf(h.bounds, value)]!;

describe('RequestFiguresRecorder + RequestFiguresPublisher', () => {
  it('publishes one message per model with traffic per period, with fixed-bound histograms; nothing for a quiet model', async () => {
    const store = new MemoryEventStore();
    let now = 1000;
    const recorder = new RequestFiguresRecorder();
    const p = new RequestFiguresPublisher({ eventPlane: new MemoryEventPlane(store), subject: SUBJECT, routerId: 'r1', recorder, models: () => ['a', 'b'], logger: silentLogger, now: () => now });
    recorder.arrived('a', 100);
    recorder.arrived('a', 3000);
    recorder.firstToken('a', 250);
    recorder.laterTokens('a', 20, 1);
    recorder.laterTokens('a', 30, 3); // three tokens in one frame: three gaps of 10 ms
    recorder.finished('a', 5);
    now = 2000;
    await p.tick();
    const [m, ...rest] = published(store);
    expect(rest).toEqual([]);
    expect(m).toMatchObject({ v: 1, routerId: 'r1', model: 'a', from: 1000, to: 2000, requests: 2, heldRequests: 0 });
    expect(m!.isl.bounds).toEqual(TOKEN_BOUNDS);
    expect(m!.ttftMs.bounds).toEqual(TTFT_MS_BOUNDS);
    expect(m!.itlMs.bounds).toEqual(ITL_MS_BOUNDS);
    expect([total(m!.isl), countAt(m!.isl, 100), countAt(m!.isl, 3000)]).toEqual([2, 1, 1]);
    expect([total(m!.osl), countAt(m!.osl, 5)]).toEqual([1, 1]);
    expect([total(m!.ttftMs), countAt(m!.ttftMs, 250)]).toEqual([1, 1]);
    expect([total(m!.itlMs), countAt(m!.itlMs, 20), countAt(m!.itlMs, 10)]).toEqual([4, 1, 3]);
    // the next period starts empty: no traffic, no message
    now = 3000;
    await p.tick();
    expect(published(store)).toHaveLength(1);
  });

  it('the size of a message does not grow with the traffic; garbage figures are ignored, never NaN', async () => {
    const store = new MemoryEventStore();
    const recorder = new RequestFiguresRecorder();
    const p = new RequestFiguresPublisher({ eventPlane: new MemoryEventPlane(store), subject: SUBJECT, routerId: 'r1', recorder, models: () => [], logger: silentLogger });
    recorder.arrived('a', 10);
    await p.tick();
    for (let i = 0; i < 50_000; i++) {
      recorder.arrived('a', i);
      recorder.firstToken('a', i / 7);
      recorder.laterTokens('a', (i % 100) + 0.5, 1);
      recorder.finished('a', i % 4000);
    }
    recorder.firstToken('a', Number.NaN);
    recorder.laterTokens('a', -1, 1);
    recorder.finished('a', Number.POSITIVE_INFINITY);
    await p.tick();
    const [small, big] = published(store);
    expect(JSON.stringify(big).length).toBeLessThan(JSON.stringify(small).length + 2000);
    expect(big!.requests).toBe(50_000);
    expect([total(big!.isl), total(big!.osl), total(big!.ttftMs), total(big!.itlMs)]).toEqual([50_000, 50_000, 50_000, 50_000]);
  });

  it('held requests: published for models without traffic while held, then one last 0; a throwing callback reads as 0', async () => {
    const store = new MemoryEventStore();
    const recorder = new RequestFiguresRecorder();
    const held = new Map<string, number>([['cold', 3]]);
    let throws = false;
    const p = new RequestFiguresPublisher({
      eventPlane: new MemoryEventPlane(store),
      subject: SUBJECT,
      routerId: 'r1',
      recorder,
      // the cold model has no worker, so the registry does not list it
      models: () => ['warm'],
      heldRequests: (m) => {
        if (throws) throw new Error('bug');
        return held.get(m) ?? 0;
      },
      logger: silentLogger,
    });
    recorder.arrived('cold', 8);
    await p.tick();
    expect(published(store).map((m) => [m.model, m.requests, m.heldRequests])).toEqual([['cold', 1, 3]]);
    await p.tick();
    expect(published(store).map((m) => [m.model, m.requests, m.heldRequests]).at(-1)).toEqual(['cold', 0, 3]);
    held.set('cold', 0);
    await p.tick();
    expect(published(store).map((m) => [m.model, m.requests, m.heldRequests]).at(-1)).toEqual(['cold', 0, 0]);
    const n = published(store).length;
    await p.tick();
    expect(published(store)).toHaveLength(n);
    held.set('warm', 2);
    throws = true;
    await p.tick();
    expect(published(store)).toHaveLength(n);
  });

  it('a failed publish drops the period and the next one goes out', async () => {
    const store = new MemoryEventStore();
    const real = new MemoryEventPlane(store);
    let fail = true;
    const flaky: EventPlane = { publish: (s, v) => (fail ? Promise.reject(new Error('down')) : real.publish(s, v)), subscribe: (o) => real.subscribe(o), close: () => real.close() };
    const recorder = new RequestFiguresRecorder();
    const p = new RequestFiguresPublisher({ eventPlane: flaky, subject: SUBJECT, routerId: 'r1', recorder, models: () => [], logger: silentLogger });
    recorder.arrived('a', 1);
    await p.tick();
    fail = false;
    recorder.arrived('a', 1);
    recorder.arrived('a', 1);
    await p.stop();
    expect(published(store).map((m) => m.requests)).toEqual([2]);
  });
});

describe('request figures of a router (memory cluster)', () => {
  let cluster: MockCluster | undefined;
  let router: RouterCore | undefined;
  let door: HttpFrontDoor | undefined;
  afterEach(async () => {
    await door?.close();
    await router?.close();
    await cluster?.close();
    door = router = cluster = undefined;
  });

  it('counts OpenAI-path and KServe-path generations alike: arrivals, prompt and output lengths, TTFT, ITL', async () => {
    cluster = new MockCluster();
    await cluster.addWorker();
    router = await startRouterCore({ ...cluster.routerRoles(), routingTable: new MemoryRoutingTable(), namespace: NS, routerId: 'fig', requestFiguresIntervalMs: 50 });
    await waitFor(() => router!.engine.llmEndpoint(LLM) !== undefined, 5000, 'the LLM');
    const llm = router.engine.llmEndpoint(LLM)!;
    const sampling = compileSamplingParams({ temperature: 0, max_tokens: 20, ignore_eos: true });
    for (let i = 0; i < 2; i++) for await (const _ of llm.generate({ requestId: `o${i}`, promptTokenIds: Array.from({ length: 40 }, (_, j) => 10 + j + i), sampling }));
    door = createHttpServer({ engine: router.engine, shm: new SharedMemoryManager({ enabled: false }), settings: new ServerSettings(), port: 0, host: '127.0.0.1' });
    const base = `http://127.0.0.1:${await door.listen()}`;
    const r = await fetch(`${base}/v2/models/${LLM}/generate`, { method: 'POST', body: JSON.stringify({ text_input: 'alpha bravo charlie delta', parameters: { max_tokens: 3, temperature: 0 } }) });
    expect(r.status, await r.text()).toBe(200);

    const subject = requestFiguresSubject(namespace(NS), componentName(ROUTER_COMPONENT));
    const sum = () => {
      const msgs = published(cluster!.events, subject).filter((m) => m.model === LLM);
      return {
        requests: msgs.reduce((a, m) => a + m.requests, 0),
        isl: msgs.reduce((a, m) => a + total(m.isl), 0),
        osl: msgs.reduce((a, m) => a + total(m.osl), 0),
        osl20: msgs.reduce((a, m) => a + countAt(m.osl, 20), 0),
        ttft: msgs.reduce((a, m) => a + total(m.ttftMs), 0),
        itl: msgs.reduce((a, m) => a + total(m.itlMs), 0),
        routers: new Set(msgs.map((m) => m.routerId)),
      };
    };
    await waitFor(() => sum().osl === 3, 5000, 'three finished requests in the figures');
    const s = sum();
    expect(s).toMatchObject({ requests: 3, isl: 3, osl: 3, osl20: 2, ttft: 3, itl: 19 + 19 + 2 });
    expect([...s.routers]).toEqual(['fig']);
  });
});
