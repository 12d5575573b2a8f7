import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect, createInbox } from '@nats-io/transport-node';
import { capacityExhausted } from '@switchyard/common';
import { type NatsServer, startNats } from '@switchyard/testing';
import { cancelSubject, endpointAddress, instanceAddress, instanceIdFromLease, instanceSubject } from './addressing.js';
import { NatsRequestPlane } from './nats-request-plane.js';
import { REFUSED_DESCRIPTION } from './nats-framing.js';
import { BinaryPayload, type Payload, type ResponseFrame, decodeMessage, decodeRequestEnvelope, decodeResponseFrame, encodeMessage } from './protocols.js';
import { type RequestContext, NoRespondersError, StreamIncompleteError, isRetriable } from './request-plane.js';
import { collect, failure, until } from './test-support/streams.js';

let nats: NatsServer;
const planes: NatsRequestPlane[] = [];
let counter = 0;

/** A fresh endpoint per test, so tests never see each other's workers. */
function freshEndpoint() {
  counter++;
  return endpointAddress('itest', `backend${counter}`, 'generate');
}
const inst = (ep: ReturnType<typeof freshEndpoint>, n: number) => instanceAddress(ep, instanceIdFromLease(n));

async function plane(idleTimeoutMs?: number): Promise<NatsRequestPlane> {
  const p = await NatsRequestPlane.connect({ url: nats.url, ...(idleTimeoutMs === undefined ? {} : { idleTimeoutMs }) });
  planes.push(p);
  return p;
}

beforeAll(async () => {
  nats = await startNats({ jetstream: true });
});
afterAll(async () => {
  await Promise.all(planes.map((p) => p.close()));
  await nats?.stop();
});

describe('NatsRequestPlane (real nats-server)', () => {
  it('streams responses in order and completes on the final marker', async () => {
    const ep = freshEndpoint();
    const worker = await plane();
    const served = await worker.serve(inst(ep, 1), async function* (payload) {
      const n = (payload as { n: number }).n;
      for (let i = 0; i < n; i++) yield { i };
    });
    expect(served.subject).toBe(`switchyard.itest.req.${ep.component}.generate.${inst(ep, 1).instanceId}`);
    const client = await plane();
    expect(await collect(client.request(inst(ep, 1), { n: 200 }))).toEqual(Array.from({ length: 200 }, (_, i) => ({ i })));
    expect(await collect(client.request(ep, { n: 3 }))).toEqual([{ i: 0 }, { i: 1 }, { i: 2 }]);
    expect(await collect(client.request(ep, { n: 0 }))).toEqual([]);
  });

  it('fails with NoRespondersError when nobody serves the target', async () => {
    const ep = freshEndpoint();
    const client = await plane();
    const t0 = Date.now();
    const { error } = await failure(client.request(ep, null));
    expect(error).toBeInstanceOf(NoRespondersError);
    expect(error).toMatchObject({ code: 'unavailable', retriable: true });
    expect(Date.now() - t0).toBeLessThan(1000);
    const worker = await plane();
    await worker.serve(inst(ep, 1), async function* () {});
    expect(await collect(client.request(ep, null))).toEqual([]);
    expect((await failure(client.request(inst(ep, 2), null))).error).toBeInstanceOf(NoRespondersError);
  });

  it("keeps a handler error's code and does not mark it retriable", async () => {
    const ep = freshEndpoint();
    const worker = await plane();
    await worker.serve(inst(ep, 1), async function* () {
      yield 'partial';
      throw capacityExhausted('queue full');
    });
    const client = await plane();
    const { error, received } = await failure(client.request(ep, null));
    expect(received).toEqual(['partial']);
    expect(error).toMatchObject({ code: 'capacity_exhausted', message: 'queue full' });
    expect(isRetriable(error)).toBe(false);
  });

  it('spreads queue-group requests over two serving planes, direct requests reach one', async () => {
    const ep = freshEndpoint();
    const a = await plane();
    const b = await plane();
    const seen: string[] = [];
    await a.serve(inst(ep, 1), async function* () {
      seen.push('a');
      yield 'a';
    });
    await b.serve(inst(ep, 2), async function* () {
      seen.push('b');
      yield 'b';
    });
    const client = await plane();
    const results = await Promise.all(Array.from({ length: 40 }, () => collect(client.request(ep, null))));
    const flat = results.flat();
    expect(flat).toHaveLength(40);
    expect(flat.filter((x) => x === 'a').length).toBeGreaterThan(0);
    expect(flat.filter((x) => x === 'b').length).toBeGreaterThan(0);
    expect(await collect(client.request(inst(ep, 2), null))).toEqual(['b']);
  });

  it("carries the caller's abort to the handler's AbortSignal (signal and break)", async () => {
    const ep = freshEndpoint();
    const worker = await plane();
    const seen: RequestContext[] = [];
    await worker.serve(inst(ep, 1), async function* (_p, ctx) {
      seen.push(ctx);
      yield 0;
      await new Promise<void>((resolve) => ctx.signal.addEventListener('abort', () => resolve(), { once: true }));
    });
    const client = await plane();
    const ac = new AbortController();
    const received: Payload[] = [];
    const done = (async () => {
      for await (const v of client.request(ep, null, { signal: ac.signal, requestId: 'req-abort' })) {
        received.push(v);
        ac.abort();
      }
    })();
    await expect(done).rejects.toMatchObject({ code: 'cancelled' });
    expect(received).toEqual([0]);
    await until(() => seen[0]?.signal.aborted === true);
    expect(seen[0]!.requestId).toBe('req-abort');
    expect(seen[0]!.signal.reason).toMatchObject({ code: 'cancelled' });

    // breaking out of the loop cancels too
    for await (const v of client.request(inst(ep, 1), null)) {
      expect(v).toBe(0);
      break;
    }
    await until(() => seen[1]?.signal.aborted === true);

    // timeoutMs: deadline_exceeded on the caller, abort on the worker
    const { error } = await failure(client.request(ep, null, { timeoutMs: 100 }));
    expect(error).toMatchObject({ code: 'deadline_exceeded' });
    await until(() => seen[2]?.signal.aborted === true);
  });

  it('a worker whose connection dies mid-stream gives StreamIncompleteError with received', async () => {
    const ep = freshEndpoint();
    const nc = await connect({ servers: nats.url });
    const worker = NatsRequestPlane.fromConnection(nc);
    const seen: RequestContext[] = [];
    await worker.serve(inst(ep, 1), async function* (_p, ctx) {
      seen.push(ctx);
      yield 'x';
      yield 'y';
      await new Promise<void>((resolve) => ctx.signal.addEventListener('abort', () => resolve(), { once: true }));
    });
    const client = await plane(500);
    const received: Payload[] = [];
    let error: unknown;
    const t0 = Date.now();
    try {
      for await (const v of client.request(ep, null)) {
        received.push(v);
        if (received.length === 2) await nc.close();
      }
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(StreamIncompleteError);
    expect(error).toMatchObject({ received: 2, retriable: true, code: 'unavailable' });
    expect(received).toEqual(['x', 'y']);
    expect(Date.now() - t0).toBeLessThan(3000);
    // the dead worker's handler was aborted locally
    expect(seen[0]!.signal.aborted).toBe(true);
  });

  it("the caller's own connection closing mid-stream is StreamIncompleteError", async () => {
    const ep = freshEndpoint();
    const worker = await plane();
    await worker.serve(inst(ep, 1), async function* (_p, ctx) {
      yield 1;
      await new Promise<void>((resolve) => ctx.signal.addEventListener('abort', () => resolve(), { once: true }));
    });
    const nc = await connect({ servers: nats.url });
    const client = NatsRequestPlane.fromConnection(nc);
    const received: Payload[] = [];
    let error: unknown;
    try {
      for await (const v of client.request(ep, null)) {
        received.push(v);
        await nc.close();
      }
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(StreamIncompleteError);
    expect(error).toMatchObject({ received: 1 });
  });

  it('stop without drain ends in-flight streams with a cancelled error frame; with drain waits', async () => {
    const ep = freshEndpoint();
    const worker = await plane();
    const served = await worker.serve(inst(ep, 1), async function* (_p, ctx) {
      yield 1;
      await new Promise<void>((resolve) => ctx.signal.addEventListener('abort', () => resolve(), { once: true }));
    });
    const client = await plane();
    const received: Payload[] = [];
    const done = (async () => {
      for await (const v of client.request(ep, null)) {
        received.push(v);
        void served.stop({ drain: false });
      }
    })();
    await expect(done).rejects.toMatchObject({ code: 'cancelled' });
    expect((await failure(client.request(ep, null))).error).toBeInstanceOf(NoRespondersError);
  });

  it('a draining endpoint refuses new requests to its instance at once with the no-responders status, and finishes the one in flight', async () => {
    const ep = freshEndpoint();
    const target = inst(ep, 1);
    const worker = await plane();
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    const served = await worker.serve(target, async function* () {
      yield 'first';
      await released;
      yield 'last';
    });
    const client = await plane();
    const first = client.request(target, null)[Symbol.asyncIterator]();
    expect((await first.next()).value).toBe('first');
    const stopped = served.stop({ drain: true });
    // Sent while the drain runs: the worker itself answers (its instance subscription is kept), not
    // the server, so a request that reached it in the instant around an UNSUB is never left unanswered.
    const raw = await connect({ servers: nats.url });
    try {
      const inbox = createInbox();
      const sub = raw.subscribe(inbox, { max: 1 });
      raw.publish(instanceSubject(target), encodeMessage({ v: 1, requestId: 'late', attempt: 'a', payload: null, deadline: null }), { reply: inbox });
      let answer: { data: Uint8Array; headers?: { code: number; description: string } } | undefined;
      for await (const m of sub) answer = m as never;
      expect(answer?.data.length).toBe(0);
      expect(answer?.headers?.code).toBe(503);
      expect(answer?.headers?.description).toBe(REFUSED_DESCRIPTION);
    } finally {
      await raw.close();
    }
    const t0 = Date.now();
    expect((await failure(client.request(target, null))).error).toBeInstanceOf(NoRespondersError);
    expect(Date.now() - t0).toBeLessThan(1000);
    release();
    expect(await collect({ [Symbol.asyncIterator]: () => first })).toEqual(['last']);
    await stopped;
    // stopped: the server now answers for the subject itself
    expect((await failure(client.request(target, null))).error).toBeInstanceOf(NoRespondersError);
  });
});

describe('NatsRequestPlane across NATS outages (nats.js drops whatever is published while disconnected)', () => {
  const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
  /** Yields `i` every 10 ms until aborted (`n` frames at most). */
  async function* ticker(payload: Payload, ctx: RequestContext): AsyncGenerator<Payload> {
    const n = (payload as { n: number }).n;
    for (let i = 0; i < n && !ctx.signal.aborted; i++) {
      yield i;
      await sleep(10);
    }
  }

  it("the caller's own disconnect fails its open streams at once (local), and a request made while disconnected is sent after the reconnect", async () => {
    const ep = freshEndpoint();
    // one connection serves and calls, so no reconnect race between two clients decides the outcome
    const p = await plane();
    await p.serve(inst(ep, 1), ticker);
    const stream = p.request(inst(ep, 1), { n: 100_000 })[Symbol.asyncIterator]();
    expect((await stream.next()).value).toBe(0);
    const t0 = Date.now();
    await p.nc.reconnect();
    let error: unknown;
    try {
      while (!(await stream.next()).done);
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(StreamIncompleteError);
    expect(error).toMatchObject({ local: true, retriable: true });
    expect(Date.now() - t0).toBeLessThan(1000); // not the 30 s idle timeout
    // still disconnected (the client waits before redialing): this request is held, then sent
    expect(p.isConnected()).toBe(false);
    expect(await collect(p.request(inst(ep, 1), { n: 3 }))).toEqual([0, 1, 2]);
  });

  it('just after its own reconnect, a request that draws no responders is sent again until its worker serves (workers redial a moment behind); far from one it fails at once', async () => {
    const ep = freshEndpoint();
    const caller = await plane();
    await caller.nc.reconnect();
    await until(() => !caller.isConnected());
    await until(() => caller.isConnected(), 10_000);
    const worker = await plane();
    // nobody serves the instance yet: answered no responders, re-sent every 100 ms
    const pending = collect(caller.request(inst(ep, 1), { n: 2 }));
    await sleep(350);
    await worker.serve(inst(ep, 1), ticker);
    expect(await pending).toEqual([0, 1]);
    // a plane that did not reconnect lately fails at once
    const t0 = Date.now();
    expect((await failure((await plane()).request(inst(ep, 2), { n: 1 }))).error).toBeInstanceOf(NoRespondersError);
    expect(Date.now() - t0).toBeLessThan(1000);
  });

  it("a worker's disconnect ends a stream whose frames it lost with a gap or a cancelled frame, not a silent stall", async () => {
    const ep = freshEndpoint();
    const worker = await plane();
    let handlerAborted: unknown;
    await worker.serve(inst(ep, 1), async function* (payload, ctx) {
      yield* ticker(payload, ctx);
      handlerAborted = ctx.signal.reason;
    });
    const client = await plane(); // default idle timeout: 30 s
    const received: Payload[] = [];
    let error: unknown;
    const t0 = Date.now();
    try {
      for await (const v of client.request(inst(ep, 1), { n: 100_000 })) {
        received.push(v);
        if (received.length === 3) void worker.nc.reconnect();
      }
    } catch (e) {
      error = e;
    }
    // a lost data frame shows as a sequence gap; if none was lost, the held `cancelled` frame arrives
    const gap = error instanceof StreamIncompleteError && !error.local;
    const cancelledFrame = (error as { code?: string } | undefined)?.code === 'cancelled';
    expect(gap || cancelledFrame, String(error)).toBe(true);
    expect(Date.now() - t0).toBeLessThan(10_000);
    expect(handlerAborted).toMatchObject({ code: 'cancelled' });
  });

  it('a re-sent request id supersedes its attempt still running on the worker (the engine never sees it twice)', async () => {
    const ep = freshEndpoint();
    const worker = await plane();
    const live = new Set<string>();
    let overlap = false;
    await worker.serve(inst(ep, 1), async function* (payload, ctx) {
      if (live.has(ctx.requestId)) overlap = true;
      live.add(ctx.requestId);
      try {
        yield* ticker(payload, ctx);
      } finally {
        await sleep(50); // an engine takes a moment to release an aborted sequence
        live.delete(ctx.requestId);
      }
    });
    // the first attempt's caller vanishes without a cancel (its connection closes)
    const nc = await connect({ servers: nats.url });
    const first = NatsRequestPlane.fromConnection(nc);
    const firstStream = first.request(inst(ep, 1), { n: 100_000 }, { requestId: 'same-id' })[Symbol.asyncIterator]();
    await firstStream.next();
    const client = await plane();
    expect(await collect(client.request(inst(ep, 1), { n: 3 }, { requestId: 'same-id' }))).toEqual([0, 1, 2]);
    expect(overlap).toBe(false);
    await nc.close();
  });
});

describe('NatsRequestPlane attempts', () => {
  it("a caller's cancel of an attempt it gave up on does not stop its newer attempt of the same id", async () => {
    const ep = freshEndpoint();
    const worker = await plane();
    const contexts: RequestContext[] = [];
    await worker.serve(inst(ep, 1), async function* (_payload, ctx) {
      contexts.push(ctx);
      for (let i = 0; !ctx.signal.aborted; i++) {
        yield i;
        await new Promise((r) => setTimeout(r, 20));
      }
    });
    const client = await plane();
    const first = client.request(inst(ep, 1), null, { requestId: 'same-id' })[Symbol.asyncIterator]();
    await first.next();
    // the caller re-sends (a migration back to the same worker): the worker supersedes the first attempt
    const second = client.request(inst(ep, 1), null, { requestId: 'same-id' })[Symbol.asyncIterator]();
    expect((await second.next()).value).toBe(0);
    // ... and the first attempt's cancel arrives after the second started (as when both were held
    // through an outage): the second keeps streaming
    await first.return!();
    await until(() => contexts[0]!.signal.aborted);
    for (let i = 1; i <= 10; i++) expect((await second.next()).value).toBe(i);
    expect(contexts[1]!.signal.aborted).toBe(false);
    await second.return!();
    await until(() => contexts[1]!.signal.aborted);
  });
});

describe('NatsRequestPlane framing (chunks beyond max_payload, heartbeats)', () => {
  it('carries a request and responses larger than the server max_payload (1 MiB) in chunks, to one instance', async () => {
    const ep = freshEndpoint();
    const worker = await plane();
    await worker.serve(inst(ep, 1), async function* (payload): AsyncGenerator<Payload> {
      const text = (payload as { text: string }).text;
      yield { length: text.length, last: text.slice(-5) };
      yield { echo: text }; // 3 MB back
    });
    const client = await plane();
    const text = 'x'.repeat(3_000_000) + 'tail!';
    const out = await collect(client.request(inst(ep, 1), { text }));
    expect(out[0]).toEqual({ length: text.length, last: 'tail!' });
    expect((out[1] as { echo: string }).echo === text).toBe(true);
    // a queue group could split the chunks between instances: refused before anything is sent
    const { error } = await failure(client.request(ep, { text }));
    expect(error).toMatchObject({ code: 'invalid_argument' });
  });

  it('carries binary payloads (raw blobs) both ways, chunked beyond max_payload, and JSON beside them', async () => {
    const ep = freshEndpoint();
    const worker = await plane();
    await worker.serve(inst(ep, 1), async function* (payload): AsyncGenerator<Payload> {
      if (!(payload instanceof BinaryPayload)) {
        yield { json: payload };
        return;
      }
      yield { sizes: payload.blobs.map((b) => b.length), aligned: payload.blobs.every((b) => b.byteOffset % 8 === 0) };
      yield new BinaryPayload({ reversed: true }, [...payload.blobs].reverse());
    });
    const client = await plane();
    const big = new Uint8Array(2_500_000).map((_, i) => (i * 7) & 255);
    const small = Uint8Array.from([1, 2, 3]);
    const out = await collect(client.request(inst(ep, 1), new BinaryPayload({ n: 2 }, [small, big])));
    expect(out[0]).toEqual({ sizes: [3, 2_500_000], aligned: true });
    const back = out[1] as BinaryPayload;
    expect(back).toBeInstanceOf(BinaryPayload);
    expect(back.body).toEqual({ reversed: true });
    expect(Buffer.from(back.blobs[0]!).equals(Buffer.from(big))).toBe(true);
    expect([...back.blobs[1]!]).toEqual([1, 2, 3]);
    expect(await collect(client.request(inst(ep, 1), { plain: 1 }))).toEqual([{ json: { plain: 1 } }]);
  });

  it('a binary message of an unknown format is refused with an error frame that says so', async () => {
    const ep = freshEndpoint();
    const worker = await plane();
    await worker.serve(inst(ep, 1), async function* () {
      yield 'never';
    });
    const nc = await connect({ servers: nats.url });
    try {
      const bytes = Uint8Array.from([0, 0x53, 0x59, 9, 0, 0, 0, 0, 0, 0, 0, 0]);
      const reply = await nc.request(instanceSubject(inst(ep, 1)), bytes, { timeout: 5000 });
      expect(reply.json()).toMatchObject({ type: 'error', seq: 0, error: { code: 'invalid_argument', message: expect.stringMatching(/unsupported message format 9/) } });
    } finally {
      await nc.close();
    }
  });

  it('a handler silent for longer than the caller idle timeout is kept alive by heartbeats', async () => {
    const ep = freshEndpoint();
    const p = await NatsRequestPlane.connect({ url: nats.url, heartbeatIntervalMs: 100 });
    planes.push(p);
    await p.serve(inst(ep, 1), async function* () {
      await new Promise((resolve) => setTimeout(resolve, 2500));
      yield 'done';
    });
    const client = await plane(1000);
    expect(await collect(client.request(inst(ep, 1), null))).toEqual(['done']);
    // without heartbeats the same wait is an incomplete stream
    const silent = await NatsRequestPlane.connect({ url: nats.url, heartbeatIntervalMs: 60_000 });
    planes.push(silent);
    await silent.serve(inst(ep, 2), async function* () {
      await new Promise((resolve) => setTimeout(resolve, 2500));
      yield 'done';
    });
    expect((await failure(client.request(inst(ep, 2), null))).error).toBeInstanceOf(StreamIncompleteError);
  });
});

describe('NatsRequestPlane mixed versions: a unary response in one data frame marked final', () => {
  /** The frames answering `envelope`, sent as an older (or newer) caller would, until a terminal one. */
  async function rawRequest(subject: string, envelope: object): Promise<ResponseFrame[]> {
    const nc = await connect({ servers: nats.url });
    try {
      const inbox = createInbox();
      const frames: ResponseFrame[] = [];
      const sub = nc.subscribe(inbox);
      nc.publish(subject, encodeMessage(envelope as never), { reply: inbox });
      for await (const m of sub) {
        const frame = decodeResponseFrame(decodeMessage(m.data));
        frames.push(frame);
        if (frame.type !== 'data' || frame.final === true) break;
      }
      return frames;
    } finally {
      await nc.close();
    }
  }

  it('a caller that does not announce finalData gets a data frame and a final frame; one that does gets one message', async () => {
    const ep = freshEndpoint();
    const worker = await plane();
    await worker.serve(inst(ep, 1), async function* (payload) {
      yield { echo: payload as number };
    });
    const subject = instanceSubject(inst(ep, 1));
    expect(await rawRequest(subject, { v: 1, requestId: 'old', payload: 1, deadline: null })).toEqual([
      { v: 1, type: 'data', seq: 0, payload: { echo: 1 } },
      { v: 1, type: 'final', seq: 1 },
    ]);
    expect(await rawRequest(subject, { v: 1, requestId: 'new', payload: 2, deadline: null, finalData: true })).toEqual([
      { v: 1, type: 'data', seq: 0, payload: { echo: 2 }, final: true },
    ]);
    // a binary response ends in its binary message alike
    const worker2 = await plane();
    await worker2.serve(inst(ep, 2), async function* () {
      yield new BinaryPayload({ n: 1 }, [new Uint8Array([7, 8])]);
    });
    const [frame, ...rest] = await rawRequest(instanceSubject(inst(ep, 2)), { v: 1, requestId: 'bin', payload: 0, deadline: null, finalData: true });
    expect(rest).toEqual([]);
    expect(frame).toMatchObject({ type: 'data', seq: 0, final: true });
    expect(frame!.type === 'data' && frame!.payload instanceof BinaryPayload && [...frame!.payload.blobs[0]!]).toEqual([7, 8]);
  });

  it('a worker that ignores finalData (two frames) still serves the announcing caller; no cancel follows either ending', async () => {
    const ep = freshEndpoint();
    const nc = await connect({ servers: nats.url });
    const announced: boolean[] = [];
    const cancels: unknown[] = [];
    try {
      // an older worker: a data frame and a final frame, whatever the envelope says
      nc.subscribe(instanceSubject(inst(ep, 1)), {
        callback: (_err, m) => {
          const envelope = decodeRequestEnvelope(decodeMessage(m.data));
          announced.push(envelope.finalData === true);
          m.respond(encodeMessage({ v: 1, type: 'data', seq: 0, payload: { old: envelope.payload as number } }));
          m.respond(encodeMessage({ v: 1, type: 'final', seq: 1 }));
        },
      });
      nc.subscribe(cancelSubject(inst(ep, 1)), {
        callback: (_err, m) => {
          cancels.push(m.json());
        },
      });
      await nc.flush();
      const client = await plane();
      expect(await collect(client.request(inst(ep, 1), 5))).toEqual([{ old: 5 }]);
      expect(announced).toEqual([true]);
      // a new worker's one-frame answer, read by a caller that stops at its first payload
      const worker = await plane();
      await worker.serve(inst(ep, 2), async function* (payload) {
        yield { echo: payload as number };
      });
      for await (const v of client.request(inst(ep, 2), 6)) {
        expect(v).toEqual({ echo: 6 });
        break;
      }
      await new Promise((r) => setImmediate(r)); // the plane's outbox (a cancel would be in it)
      await client.nc.flush();
      await nc.flush();
      expect(cancels).toEqual([]);
    } finally {
      await nc.close();
    }
  });
});
