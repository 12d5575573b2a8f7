import { afterEach, describe, expect, it, vi } from 'vitest';
import { capacityExhausted } from '@switchyard/common';
import { endpointAddress, instanceAddress, instanceIdFromLease } from './addressing.js';
import { MemoryRequestBroker, MemoryRequestPlane } from './memory-request-plane.js';
import { instanceSubject } from './addressing.js';
import { BinaryPayload, type Payload, type ResponseFrame, decodeMessage, decodeRequestEnvelope, decodeResponseFrame, encodeMessage } from './protocols.js';
import { type EndpointHandler, type RequestContext, NoRespondersError, StreamIncompleteError, isRetriable } from './request-plane.js';
import { collect, failure } from './test-support/streams.js';

const ep = endpointAddress('prod', 'backend', 'generate');
const inst = (n: number) => instanceAddress(ep, instanceIdFromLease(n));

/** A handler that yields `count` numbers, then waits forever (until aborted), recording its context. */
function hanging(count: number, seen: RequestContext[]): EndpointHandler {
  return async function* (_payload, ctx) {
    seen.push(ctx);
    for (let i = 0; i < count; i++) yield i;
    await new Promise<void>((resolve) => ctx.signal.addEventListener('abort', () => resolve(), { once: true }));
  };
}
const tick = () => new Promise<void>((r) => setImmediate(r));

afterEach(() => {
  vi.useRealTimers();
});

describe('MemoryRequestPlane', () => {
  it('streams responses in order and completes on the final marker', async () => {
    const broker = new MemoryRequestBroker();
    const worker = new MemoryRequestPlane(broker);
    await worker.serve(inst(1), async function* (payload) {
      const n = (payload as { n: number }).n;
      for (let i = 0; i < n; i++) yield { i };
    });
    const client = new MemoryRequestPlane(broker);
    expect(await collect(client.request(inst(1), { n: 5 }))).toEqual([0, 1, 2, 3, 4].map((i) => ({ i })));
    expect(await collect(client.request(ep, { n: 0 }))).toEqual([]);
  });

  it('carries binary payloads as raw blobs (8-aligned views) and answers JSON beside them; JSON messages stay JSON', async () => {
    const broker = new MemoryRequestBroker();
    const worker = new MemoryRequestPlane(broker);
    await worker.serve(inst(1), async function* (payload): AsyncGenerator<Payload> {
      if (!(payload instanceof BinaryPayload)) {
        yield { json: payload };
        return;
      }
      yield { aligned: payload.blobs.map((b) => b.byteOffset % 8 === 0) };
      yield new BinaryPayload(payload.body, payload.blobs.map((b) => b.map((x) => x + 1)));
    });
    const client = new MemoryRequestPlane(broker);
    const out = await collect(client.request(inst(1), new BinaryPayload({ k: 'v' }, [Uint8Array.of(1), new Uint8Array(0), Uint8Array.of(5, 6, 7)])));
    expect(out[0]).toEqual({ aligned: [true, true, true] });
    const back = out[1] as BinaryPayload;
    expect(back.body).toEqual({ k: 'v' });
    expect(back.blobs.map((b) => [...b])).toEqual([[2], [], [6, 7, 8]]);
    expect(await collect(client.request(inst(1), [1]))).toEqual([{ json: [1] }]);
    expect(encodeMessage({ v: 1, type: 'data', seq: 0, payload: { a: 1 } })[0]).toBe('{'.charCodeAt(0));
    expect(encodeMessage({ v: 1, type: 'data', seq: 0, payload: new BinaryPayload(null, []) })[0]).toBe(0);
  });

  it('fails with NoRespondersError when nobody serves the target', async () => {
    const broker = new MemoryRequestBroker();
    const client = new MemoryRequestPlane(broker);
    const { error } = await failure(client.request(ep, null));
    expect(error).toBeInstanceOf(NoRespondersError);
    expect(error).toMatchObject({ code: 'unavailable', retriable: true });
    const worker = new MemoryRequestPlane(broker);
    await worker.serve(inst(1), async function* () {});
    expect((await failure(client.request(inst(2), null))).error).toBeInstanceOf(NoRespondersError);
  });

  it('carries handler errors with their code, not retriable', async () => {
    const broker = new MemoryRequestBroker();
    await new MemoryRequestPlane(broker).serve(inst(1), async function* () {
      yield 'first';
      throw capacityExhausted('queue full');
    });
    const { error, received } = await failure(new MemoryRequestPlane(broker).request(ep, null));
    expect(received).toEqual(['first']);
    expect(error).toMatchObject({ code: 'capacity_exhausted', message: 'queue full' });
    expect(isRetriable(error)).toBe(false);
  });

  it('classifies a non-Switchyard handler failure as internal', async () => {
    const broker = new MemoryRequestBroker();
    await new MemoryRequestPlane(broker).serve(inst(1), async function* () {
      throw new TypeError('oops');
    });
    expect((await failure(new MemoryRequestPlane(broker).request(ep, null))).error).toMatchObject({ code: 'internal', message: 'oops' });
  });

  it('spreads queue-group requests round-robin; direct requests reach only their instance', async () => {
    const broker = new MemoryRequestBroker();
    for (const n of [1, 2, 3]) {
      await new MemoryRequestPlane(broker).serve(inst(n), async function* () {
        yield n;
      });
    }
    const client = new MemoryRequestPlane(broker);
    const hits: Payload[] = [];
    for (let i = 0; i < 6; i++) hits.push(...(await collect(client.request(ep, null))));
    expect(hits).toEqual([1, 2, 3, 1, 2, 3]);
    expect(await collect(client.request(inst(2), null))).toEqual([2]);
  });

  it('propagates caller cancellation to the handler signal', async () => {
    const broker = new MemoryRequestBroker();
    const seen: RequestContext[] = [];
    await new MemoryRequestPlane(broker).serve(inst(1), hanging(2, seen));
    const ac = new AbortController();
    const it = new MemoryRequestPlane(broker).request(inst(1), null, { signal: ac.signal, requestId: 'req-1' })[Symbol.asyncIterator]();
    expect((await it.next()).value).toBe(0);
    expect((await it.next()).value).toBe(1);
    const pending = it.next();
    ac.abort();
    await expect(pending).rejects.toMatchObject({ code: 'cancelled' });
    await tick();
    expect(seen[0]!.requestId).toBe('req-1');
    expect(seen[0]!.signal.aborted).toBe(true);
  });

  it('breaking out of the iteration cancels the request on the worker', async () => {
    const broker = new MemoryRequestBroker();
    const seen: RequestContext[] = [];
    await new MemoryRequestPlane(broker).serve(inst(1), hanging(3, seen));
    for await (const v of new MemoryRequestPlane(broker).request(ep, null)) {
      if (v === 1) break;
    }
    await tick();
    expect(seen[0]!.signal.aborted).toBe(true);
  });

  it("a caller's cancel of an attempt it gave up on does not stop its newer attempt of the same id", async () => {
    const broker = new MemoryRequestBroker();
    const seen: RequestContext[] = [];
    await new MemoryRequestPlane(broker).serve(inst(1), hanging(1, seen));
    const caller = new MemoryRequestPlane(broker);
    const first = caller.request(inst(1), null, { requestId: 'same-id' })[Symbol.asyncIterator]();
    await first.next();
    const second = caller.request(inst(1), null, { requestId: 'same-id' })[Symbol.asyncIterator]();
    expect((await second.next()).value).toBe(0); // the second attempt superseded the first on the worker
    await first.return!(); // the first attempt's cancel arrives now, after the second started
    await tick();
    expect(seen.map((c) => c.signal.aborted)).toEqual([true, false]);
    await second.return!();
    await tick();
    expect(seen[1]!.signal.aborted).toBe(true);
  });

  it('times out with deadline_exceeded and aborts the handler (fake clock)', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date'] });
    const broker = new MemoryRequestBroker();
    const seen: RequestContext[] = [];
    await new MemoryRequestPlane(broker).serve(inst(1), hanging(1, seen));
    const it = new MemoryRequestPlane(broker).request(inst(1), null, { timeoutMs: 5_000 })[Symbol.asyncIterator]();
    expect((await it.next()).value).toBe(0);
    expect(seen[0]!.deadline).toBe(Date.now() + 5_000);
    const pending = it.next();
    let settled = false;
    pending.catch(() => {}).finally(() => (settled = true));
    await vi.advanceTimersByTimeAsync(4_999);
    expect(settled).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    await expect(pending).rejects.toMatchObject({ code: 'deadline_exceeded' });
    expect(seen[0]!.signal.aborted).toBe(true);
  });

  it('a worker crash mid-stream is a retriable StreamIncompleteError, distinct from no responders', async () => {
    const broker = new MemoryRequestBroker();
    const worker = new MemoryRequestPlane(broker);
    const seen: RequestContext[] = [];
    await worker.serve(inst(1), hanging(2, seen));
    const it = new MemoryRequestPlane(broker).request(ep, null)[Symbol.asyncIterator]();
    await it.next();
    await it.next();
    const pending = it.next();
    worker.crash();
    const error = await pending.catch((e: unknown) => e);
    expect(error).toBeInstanceOf(StreamIncompleteError);
    expect(error).toMatchObject({ code: 'unavailable', retriable: true, received: 2 });
    expect(error).not.toBeInstanceOf(NoRespondersError);
    expect(seen[0]!.signal.aborted).toBe(true);
    expect((await failure(new MemoryRequestPlane(broker).request(ep, null))).error).toBeInstanceOf(NoRespondersError);
  });

  it('stop with drain lets in-flight requests finish; without drain ends them cancelled', async () => {
    const broker = new MemoryRequestBroker();
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const served = await new MemoryRequestPlane(broker).serve(inst(1), async function* () {
      yield 'a';
      await gate;
      yield 'b';
    });
    const client = new MemoryRequestPlane(broker);
    const done = collect(client.request(ep, null));
    await tick();
    const stopped = served.stop();
    expect((await failure(client.request(ep, null))).error).toBeInstanceOf(NoRespondersError);
    release();
    await stopped;
    expect(await done).toEqual(['a', 'b']);

    const seen: RequestContext[] = [];
    const served2 = await new MemoryRequestPlane(broker).serve(inst(2), hanging(1, seen));
    const running = failure(client.request(ep, null));
    await tick();
    await served2.stop({ drain: false });
    const { error, received } = await running;
    expect(received).toEqual([0]);
    expect(error).toMatchObject({ code: 'cancelled' });
  });

  it('refuses to serve the same instance twice', async () => {
    const broker = new MemoryRequestBroker();
    await new MemoryRequestPlane(broker).serve(inst(1), async function* () {});
    await expect(new MemoryRequestPlane(broker).serve(inst(1), async function* () {})).rejects.toMatchObject({ code: 'already_exists' });
  });

  describe('mixed versions: a unary response in one data frame marked final', () => {
    const unary: EndpointHandler = async function* (payload) {
      yield { echo: payload as number };
    };
    /** Sends an envelope as an older (or newer) caller would, straight through the broker; resolves with the frames. */
    function rawRequest(broker: MemoryRequestBroker, envelope: object): Promise<ResponseFrame[]> {
      const frames: ResponseFrame[] = [];
      return new Promise((resolve) => {
        const sent = broker.request(instanceSubject(inst(1)), encodeMessage(envelope as never), {
          deliver: (bytes) => {
            const frame = decodeResponseFrame(decodeMessage(bytes));
            frames.push(frame);
            if (frame.type !== 'data' || frame.final === true) resolve(frames);
          },
          drop: () => resolve(frames),
        });
        expect(sent).toBe(true);
      });
    }

    it('a caller that does not announce finalData gets a data frame and a final frame; one that does gets one frame', async () => {
      const broker = new MemoryRequestBroker();
      await new MemoryRequestPlane(broker).serve(inst(1), unary);
      expect(await rawRequest(broker, { v: 1, requestId: 'old', payload: 1, deadline: null })).toEqual([
        { v: 1, type: 'data', seq: 0, payload: { echo: 1 } },
        { v: 1, type: 'final', seq: 1 },
      ]);
      expect(await rawRequest(broker, { v: 1, requestId: 'new', payload: 2, deadline: null, finalData: true })).toEqual([
        { v: 1, type: 'data', seq: 0, payload: { echo: 2 }, final: true },
      ]);
      // and the plane's own caller announces it
      expect(await collect(new MemoryRequestPlane(broker).request(inst(1), 3))).toEqual([{ echo: 3 }]);
    });

    it('a worker that ignores finalData (two frames) still serves the announcing caller, which sends no cancel after either ending', async () => {
      const broker = new MemoryRequestBroker();
      const cancels: Uint8Array[] = [];
      const announced: boolean[] = [];
      // an older worker: answers every request with a data frame and a final frame
      broker.subscribe({
        address: inst(1),
        owner: undefined as never,
        onRequest: (bytes, reply) => {
          const envelope = decodeRequestEnvelope(decodeMessage(bytes));
          announced.push(envelope.finalData === true);
          reply.deliver(encodeMessage({ v: 1, type: 'data', seq: 0, payload: { old: envelope.payload as number } }));
          reply.deliver(encodeMessage({ v: 1, type: 'final', seq: 1 }));
        },
        onCancel: (bytes) => cancels.push(bytes),
      });
      const client = new MemoryRequestPlane(broker);
      expect(await collect(client.request(inst(1), 5))).toEqual([{ old: 5 }]);
      expect(announced).toEqual([true]);
      await tick();
      expect(cancels).toEqual([]);
    });

    it('a caller that stops reading after the final data frame sends no cancel', async () => {
      const broker = new MemoryRequestBroker();
      const worker = new MemoryRequestPlane(broker);
      await worker.serve(inst(1), unary);
      const cancels: Uint8Array[] = [];
      broker.subscribe({ address: inst(2), owner: undefined as never, onRequest: () => undefined, onCancel: (bytes) => cancels.push(bytes) });
      const client = new MemoryRequestPlane(broker);
      for await (const v of client.request(inst(1), 9)) {
        expect(v).toEqual({ echo: 9 });
        break;
      }
      await tick();
      expect(cancels).toEqual([]);
    });
  });
});
