import net from 'node:net';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type NatsServer, startNats } from '@switchyard/testing';
import { connect } from '@nats-io/transport-node';
import { endpointAddress, instanceAddress, instanceIdFromLease, instanceSubject } from '../addressing.js';
import { NatsRequestPlane } from '../nats-request-plane.js';
import { BinaryPayload, type JsonValue, type Payload, decodeRequestEnvelope } from '../protocols.js';
import { NoRespondersError, StreamIncompleteError } from '../request-plane.js';
import { encodeFrame, encodeHello } from '../wire-reader.js';
import {
  CALL_HOME_MAGIC,
  CALL_HOME_VERSION,
  CallHomeFrame,
  CallHomeListener,
  INLINE_MESSAGE_BYTES,
  MAX_CALL_HOME_TOKEN_BYTES,
  decodeRequestFrame,
  decodeTokenFrame,
  encodeHeartbeatFrame,
  encodeRequestFrame,
  encodeResponseFrame,
} from './call-home.js';
import { collect, failure, until } from '../test-support/streams.js';

let nats: NatsServer;
const planes: NatsRequestPlane[] = [];
let counter = 0;

function freshInstance() {
  counter++;
  return instanceAddress(endpointAddress('callhome', `backend${counter}`, 'generate'), instanceIdFromLease(counter));
}

async function plane(options: Parameters<typeof NatsRequestPlane.connect>[0] extends infer O ? Omit<O, 'url'> : never = {}): Promise<NatsRequestPlane> {
  const p = await NatsRequestPlane.connect({ url: nats.url, ...options });
  planes.push(p);
  return p;
}

/** Requests until one answers over call-home (the first ones go over NATS while the worker dials). */
async function untilHome(caller: NatsRequestPlane, send: () => Promise<unknown>): Promise<void> {
  const end = Date.now() + 5000;
  for (;;) {
    const before = caller.callHomeFrames;
    await send();
    if (caller.callHomeFrames > before) return;
    if (Date.now() > end) throw new Error('no response came over call-home');
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** Connect to the listener, write `bytes`, resolve how the connection ended and what came back. */
function rawPeer(address: string, bytes: Uint8Array, holdMs = 3000): Promise<{ closed: boolean; received: Buffer }> {
  const [host, port] = [address.slice(0, address.lastIndexOf(':')), Number(address.slice(address.lastIndexOf(':') + 1))];
  return new Promise((resolve) => {
    const s = net.connect({ host, port });
    const got: Buffer[] = [];
    const timer = setTimeout(() => {
      s.destroy();
      resolve({ closed: false, received: Buffer.concat(got) });
    }, holdMs);
    s.on('connect', () => s.write(bytes));
    s.on('data', (d) => got.push(d));
    s.on('error', () => {});
    s.on('close', () => {
      clearTimeout(timer);
      resolve({ closed: true, received: Buffer.concat(got) });
    });
  });
}

beforeAll(async () => {
  nats = await startNats({ jetstream: true });
});
afterAll(async () => {
  await Promise.all(planes.map((p) => p.close()));
  await nats?.stop();
});

describe('call-home wire', () => {
  it('a RESPONSE or HEARTBEAT frame reads back as its token and message, from any split of its body', () => {
    fc.assert(
      fc.property(fc.string({ minLength: 1, maxLength: 200 }), fc.uint8Array({ maxLength: 300 }), fc.integer({ min: 0, max: 400 }), (token, message, cut) => {
        fc.pre(Buffer.byteLength(token) <= MAX_CALL_HOME_TOKEN_BYTES && Buffer.from(token).toString() === token);
        const whole = Buffer.concat(encodeResponseFrame(token, message)).subarray(5); // past length and type
        const at = Math.min(cut, whole.length);
        const back = decodeTokenFrame([whole.subarray(0, at), whole.subarray(at)]);
        expect(back.token).toBe(token);
        expect(Buffer.from(back.message).equals(Buffer.from(message))).toBe(true);
        const beat = decodeTokenFrame([encodeHeartbeatFrame(token).subarray(5)]);
        expect([beat.token, beat.message.byteLength]).toEqual([token, 0]);
      }),
    );
  });

  it('a REQUEST frame reads back as its token, subject and message; a frame is one buffer up to INLINE_MESSAGE_BYTES, past it the message is not copied', () => {
    fc.assert(
      fc.property(fc.string({ minLength: 1, maxLength: 100 }), fc.string({ minLength: 1, maxLength: 100 }), fc.uint8Array({ maxLength: 300 }), (token, subject, message) => {
        fc.pre(Buffer.from(token).toString() === token && Buffer.from(subject).toString() === subject);
        const parts = encodeRequestFrame(token, subject, message);
        expect(parts).toHaveLength(1);
        const whole = parts[0]!;
        expect(whole.readUInt32BE(0)).toBe(whole.length - 4);
        expect(whole[4]).toBe(CallHomeFrame.REQUEST);
        const back = decodeRequestFrame([whole.subarray(5)]);
        expect([back.token, back.subject]).toEqual([token, subject]);
        expect(Buffer.from(back.message).equals(Buffer.from(message))).toBe(true);
      }),
    );
    for (const size of [INLINE_MESSAGE_BYTES, INLINE_MESSAGE_BYTES + 1]) {
      const message = new Uint8Array(size).fill(7);
      for (const parts of [encodeResponseFrame('t', message), encodeRequestFrame('t', 'sub.x', message)]) {
        expect(parts).toHaveLength(size > INLINE_MESSAGE_BYTES ? 2 : 1);
        if (parts.length === 2) expect(parts[1]!.buffer).toBe(message.buffer); // a view, not a copy
        const whole = Buffer.concat(parts);
        expect(whole.readUInt32BE(0)).toBe(whole.length - 4);
        expect(whole.subarray(whole.length - size).equals(Buffer.from(message))).toBe(true);
      }
    }
  });

  it('refuses a frame without a whole token', () => {
    for (const body of [[], [0], [0, 0], [0, 5, 1, 2], [0xff, 0xff, 1]]) {
      expect(() => decodeTokenFrame([Uint8Array.from(body)])).toThrow(/call-home/);
    }
    expect(() => encodeResponseFrame('', new Uint8Array(1))).toThrow(/token/);
    expect(() => encodeResponseFrame('x'.repeat(MAX_CALL_HOME_TOKEN_BYTES + 1), new Uint8Array(1))).toThrow(/token/);
  });

  it('keeps an envelope callHome only when it is well formed', () => {
    const base = { v: 1, requestId: 'r', payload: {}, deadline: null };
    expect(decodeRequestEnvelope({ ...base, callHome: { address: '10.0.0.5:4100', key: 'abc_-9' } }).callHome).toEqual({ address: '10.0.0.5:4100', key: 'abc_-9' });
    expect(decodeRequestEnvelope({ ...base, callHome: { address: '[::1]:4100', key: 'k' } }).callHome).toEqual({ address: '[::1]:4100', key: 'k' });
    for (const callHome of [null, 'x', { address: 'nohost', key: 'k' }, { address: 'h:0', key: 'k' }, { address: 'h:99999', key: 'k' }, { address: 'h:1', key: '' }, { address: 'h:1', key: 'a b' }, { address: 'h:1', key: 'k'.repeat(65) }, { address: `${'h'.repeat(300)}:1`, key: 'k' }]) {
      expect(decodeRequestEnvelope({ ...base, callHome }).callHome).toBeUndefined();
    }
  });
});

describe('NatsRequestPlane with call-home response streams (real nats-server)', () => {
  it('streams responses home once the worker holds a connection: same payloads, in order, JSON and binary, large ones whole', async () => {
    const target = freshInstance();
    const worker = await plane();
    await worker.serve(target, async function* (payload): AsyncGenerator<Payload> {
      if (payload instanceof BinaryPayload) {
        yield new BinaryPayload({ reversed: true }, [...payload.blobs].reverse());
        return;
      }
      const n = (payload as { n: number }).n;
      for (let i = 0; i < n; i++) yield { i };
      yield { echo: 'y'.repeat((payload as { big?: number }).big ?? 0) };
    });
    const caller = await plane({ callHome: {} });
    expect(caller.callHomeAddress).toMatch(/^127\.0\.0\.1:\d+$/);
    await untilHome(caller, () => collect(caller.request(target, { n: 1 })));
    const before = caller.callHomeFrames;
    const out = await collect(caller.request(target, { n: 50, big: 3_000_000 }));
    expect(out.slice(0, 50)).toEqual(Array.from({ length: 50 }, (_, i) => ({ i })));
    expect((out[50] as { echo: string }).echo.length).toBe(3_000_000);
    // every frame came home (the last data frame marked final ends the stream: 51 frames)
    expect(caller.callHomeFrames - before).toBe(51);
    const big = new Uint8Array(2_500_000).map((_, i) => (i * 7) & 255);
    const [back] = await collect(caller.request(target, new BinaryPayload({}, [Uint8Array.from([1, 2, 3]), big])));
    expect(back).toBeInstanceOf(BinaryPayload);
    const blobs = (back as BinaryPayload).blobs;
    expect(blobs.map((b) => b.length)).toEqual([2_500_000, 3]);
    expect(Buffer.from(blobs[0]!).equals(Buffer.from(big))).toBe(true);
    expect(blobs.every((b) => b.byteOffset % 8 === 0)).toBe(true);
  });

  it('requests go down the worker\'s connection once it announced the instance: nothing crosses NATS', async () => {
    const target = freshInstance();
    const worker = await plane();
    await worker.serve(target, async function* (payload): AsyncGenerator<Payload> {
      yield { echo: payload as JsonValue };
    });
    const caller = await plane({ callHome: {} });
    const spy = await connect({ servers: nats.url });
    let onNats = 0;
    spy.subscribe(instanceSubject(target), {
      callback: () => {
        onNats++;
      },
    });
    await spy.flush();
    await untilHome(caller, () => collect(caller.request(target, { i: -1 })));
    await until(() => (caller as unknown as { subjectHome: Map<string, unknown> }).subjectHome.has(instanceSubject(target)));
    const [natsBefore, sentBefore] = [onNats, caller.callHomeRequests];
    const out = await Promise.all(Array.from({ length: 20 }, (_, i) => collect(caller.request(target, { i }))));
    expect(out).toEqual(Array.from({ length: 20 }, (_, i) => [{ echo: { i } }]));
    expect(caller.callHomeRequests - sentBefore).toBe(20);
    await new Promise((r) => setTimeout(r, 100));
    expect(onNats - natsBefore).toBe(0);
    // a queue-group request (no instance) still goes over NATS
    expect(await collect(caller.request(endpointAddress(target.namespace, target.component, target.endpoint), { q: 1 }))).toEqual([{ echo: { q: 1 } }]);
    await spy.close();
  });

  it('frames keep their order whatever the pauses between them: on an idle link at once, within a busy turn together (property)', async () => {
    const target = freshInstance();
    const worker = await plane();
    // 0: none, 1: a microtask, 2: the next turn, 3: a timer
    const pause = (p: number): Promise<unknown> | undefined =>
      p === 0 ? undefined : p === 1 ? Promise.resolve() : p === 2 ? new Promise((r) => setImmediate(r)) : new Promise((r) => setTimeout(r, 1));
    await worker.serve(target, async function* (payload): AsyncGenerator<Payload> {
      const pauses = (payload as { pauses: number[] }).pauses;
      for (let i = 0; i < pauses.length; i++) {
        await pause(pauses[i]!);
        yield { i };
      }
    });
    const caller = await plane({ callHome: {} });
    await untilHome(caller, () => collect(caller.request(target, { pauses: [0] })));
    await until(() => (caller as unknown as { subjectHome: Map<string, unknown> }).subjectHome.has(instanceSubject(target)));
    await fc.assert(
      fc.asyncProperty(fc.array(fc.array(fc.integer({ min: 0, max: 3 }), { minLength: 1, maxLength: 40 }), { minLength: 1, maxLength: 4 }), async (streams) => {
        const [framesBefore, requestsBefore] = [caller.callHomeFrames, caller.callHomeRequests];
        const outs = await Promise.all(streams.map((pauses) => collect(caller.request(target, { pauses }))));
        outs.forEach((out, k) => expect(out).toEqual(streams[k]!.map((_, i) => ({ i }))));
        // every request went down the link and every frame came back on it
        expect(caller.callHomeRequests - requestsBefore).toBe(streams.length);
        expect(caller.callHomeFrames - framesBefore).toBe(streams.reduce((n, s) => n + s.length, 0));
      }),
      { numRuns: 30 },
    );
  });

  it('a worker that dies before answering fails the request at once (the router resends it), not after a stall probe', async () => {
    const target = freshInstance();
    const worker = await plane();
    await worker.serve(target, async function* (payload, ctx): AsyncGenerator<Payload> {
      if ((payload as { hang?: boolean }).hang) await new Promise<void>((r) => ctx.signal.addEventListener('abort', () => r()));
      yield { ok: true };
    });
    const caller = await plane({ callHome: {}, idleTimeoutMs: 60_000 });
    await untilHome(caller, () => collect(caller.request(target, {})));
    await until(() => (caller as unknown as { subjectHome: Map<string, unknown> }).subjectHome.size > 0);
    const started = Date.now();
    const pending = collect(caller.request(target, { hang: true }));
    await new Promise((r) => setTimeout(r, 100));
    worker.callHomeDialer.close(); // its connection goes, as when its process dies
    await expect(pending).rejects.toMatchObject({ received: 0, local: false, cause: { message: "the worker's call-home connection closed" } });
    expect(Date.now() - started).toBeLessThan(5000);
    // with the connection gone the instance is reached over NATS again
    expect((caller as unknown as { subjectHome: Map<string, unknown> }).subjectHome.size).toBe(0);
  });

  it('a stopping endpoint is withdrawn: a request that reaches it down the link is refused as no responders', async () => {
    const target = freshInstance();
    const worker = await plane();
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    const ep = await worker.serve(target, async function* (payload): AsyncGenerator<Payload> {
      if ((payload as { hold?: boolean }).hold) await held;
      yield { ok: true };
    });
    const caller = await plane({ callHome: {} });
    await untilHome(caller, () => collect(caller.request(target, {})));
    await until(() => (caller as unknown as { subjectHome: Map<string, unknown> }).subjectHome.size > 0);
    const inFlight = collect(caller.request(target, { hold: true }));
    await new Promise((r) => setTimeout(r, 50));
    const stopping = ep.stop(); // drains: waits for the held request
    // sent before the withdrawal reaches the caller, or after: either way refused, never lost
    await expect(collect(caller.request(target, {}))).rejects.toBeInstanceOf(NoRespondersError);
    await until(() => !(caller as unknown as { subjectHome: Map<string, unknown> }).subjectHome.has(instanceSubject(target)));
    release();
    expect(await inFlight).toEqual([{ ok: true }]);
    await stopping;
  });

  it('a connection that goes away mid-stream (the worker died) fails the stream at once, not after the idle timeout, as incomplete', async () => {
    const target = freshInstance();
    const worker = await plane();
    await worker.serve(target, async function* (payload, ctx): AsyncGenerator<Payload> {
      yield { first: true };
      if ((payload as { hang?: boolean }).hang) await new Promise<void>((r) => ctx.signal.addEventListener('abort', () => r()));
    });
    const caller = await plane({ callHome: {}, idleTimeoutMs: 60_000 });
    await untilHome(caller, () => collect(caller.request(target, {})));
    expect(caller.callHomeConnections).toBe(1);
    const received: Payload[] = [];
    const started = Date.now();
    const stream = (async () => {
      for await (const p of caller.request(target, { hang: true })) {
        received.push(p);
        worker.callHomeDialer.close(); // its connections go, as when its process dies
      }
    })();
    await expect(stream).rejects.toBeInstanceOf(StreamIncompleteError);
    await expect(stream).rejects.toMatchObject({ received: 1, local: false, cause: { message: "the worker's call-home connection closed" } });
    expect(caller.callHomeConnections).toBe(0);
    expect(received).toEqual([{ first: true }]);
    expect(Date.now() - started).toBeLessThan(5000);
  });

  it('answers over NATS when the caller cannot be reached, and keeps answering', async () => {
    const target = freshInstance();
    const worker = await plane();
    await worker.serve(target, async function* (): AsyncGenerator<Payload> {
      yield { ok: true };
    });
    // an address where nothing listens (a port just freed)
    const probe = net.createServer();
    await new Promise<void>((r) => probe.listen(0, '127.0.0.1', r));
    const freePort = (probe.address() as net.AddressInfo).port;
    await new Promise((r) => probe.close(r));
    const caller = await plane({ callHome: { advertiseHost: '127.0.0.1', port: 0 } });
    // point the envelope elsewhere: the listener's own address is fine, so fake a caller that advertises the dead port
    (caller as unknown as { callHome: { target: { address: string; key: string } } }).callHome.target = { address: `127.0.0.1:${freePort}`, key: 'nobody' };
    for (let i = 0; i < 5; i++) {
      expect(await collect(caller.request(target, {}))).toEqual([{ ok: true }]);
      await new Promise((r) => setTimeout(r, 20));
    }
    expect(caller.callHomeFrames).toBe(0);
  });

  it('a worker with answerCallHome false never dials: its streams answer over NATS', async () => {
    const target = freshInstance();
    const worker = await plane({ answerCallHome: false });
    await worker.serve(target, async function* (): AsyncGenerator<Payload> {
      yield { ok: true };
    });
    const caller = await plane({ callHome: {} });
    for (let i = 0; i < 5; i++) {
      expect(await collect(caller.request(target, {}))).toEqual([{ ok: true }]);
      await new Promise((r) => setTimeout(r, 20));
    }
    expect(caller.callHomeFrames).toBe(0);
    // not even dialed
    expect((worker.callHomeDialer as unknown as { links: Map<string, unknown> }).links.size).toBe(0);
  });

  it('a worker presenting the wrong key is refused: its streams answer over NATS', async () => {
    const target = freshInstance();
    const worker = await plane();
    await worker.serve(target, async function* (): AsyncGenerator<Payload> {
      yield { ok: true };
    });
    const caller = await plane({ callHome: {} });
    const real = (caller as unknown as { callHome: { target: { address: string; key: string } } }).callHome;
    real.target = { address: real.target.address, key: 'wrongkey' };
    for (let i = 0; i < 5; i++) {
      expect(await collect(caller.request(target, {}))).toEqual([{ ok: true }]);
      await new Promise((r) => setTimeout(r, 20));
    }
    expect(caller.callHomeFrames).toBe(0);
  });

  it('heartbeats travel home too: a silent handler outlives the caller idle timeout', async () => {
    const target = freshInstance();
    const worker = await plane({ heartbeatIntervalMs: 100 });
    await worker.serve(target, async function* (payload): AsyncGenerator<Payload> {
      if ((payload as { wait?: number }).wait) await new Promise((r) => setTimeout(r, (payload as { wait: number }).wait));
      yield { done: true };
    });
    const caller = await plane({ callHome: {}, idleTimeoutMs: 400 });
    await untilHome(caller, () => collect(caller.request(target, {})));
    const before = caller.callHomeFrames;
    expect(await collect(caller.request(target, { wait: 1200 }))).toEqual([{ done: true }]);
    expect(caller.callHomeFrames - before).toBeGreaterThanOrEqual(5); // heartbeats, then the frame
  });

  it('a caller that stops iterating cancels the worker handler, as over NATS', async () => {
    const target = freshInstance();
    const worker = await plane();
    let aborted = 0;
    await worker.serve(target, async function* (payload, ctx): AsyncGenerator<Payload> {
      if (!(payload as { forever?: boolean }).forever) {
        yield { ok: true };
        return;
      }
      ctx.signal.addEventListener('abort', () => aborted++);
      for (let i = 0; !ctx.signal.aborted; i++) {
        yield { i };
        await new Promise((r) => setTimeout(r, 5));
      }
    });
    const caller = await plane({ callHome: {} });
    await untilHome(caller, () => collect(caller.request(target, {})));
    let seen = 0;
    for await (const _ of caller.request(target, { forever: true })) if (++seen === 5) break;
    await until(() => aborted === 1);
  });

  it('hostile connections to the listener are closed and it keeps serving: garbage, another magic or version, a wrong key, a huge length, an unknown frame, silence', async () => {
    const target = freshInstance();
    const worker = await plane();
    await worker.serve(target, async function* (): AsyncGenerator<Payload> {
      yield { ok: true };
    });
    const caller = await plane({ callHome: { limits: { handshakeTimeoutMs: 300 } } });
    const address = caller.callHomeAddress!;
    const key = (caller as unknown as { callHome: { target: { key: string } } }).callHome.target.key;
    const hello = encodeHello(CALL_HOME_MAGIC, CALL_HOME_VERSION);
    const keyFrame = encodeFrame(CallHomeFrame.KEY, [Buffer.from(key)]);
    const huge = Buffer.alloc(5);
    huge.writeUInt32BE(0xffff_fff0, 0);
    huge[4] = CallHomeFrame.RESPONSE;
    const cases: Array<[string, Uint8Array]> = [
      ['garbage', Buffer.from('GET / HTTP/1.1\r\n\r\n')],
      ['another magic', encodeHello(0x53594b56, 1)],
      ['another version', encodeHello(CALL_HOME_MAGIC, 9)],
      ['wrong key', Buffer.concat([hello, encodeFrame(CallHomeFrame.KEY, [Buffer.from('nope')])])],
      ['a response before the key', Buffer.concat([hello, ...encodeResponseFrame('t', Buffer.from('{}'))])],
      ['a huge length', Buffer.concat([hello, keyFrame, huge])],
      ['an unknown frame', Buffer.concat([hello, keyFrame, encodeFrame(0x7f, [Buffer.from('x')])])],
      ['a frame without its token', Buffer.concat([hello, keyFrame, encodeFrame(CallHomeFrame.RESPONSE, [Buffer.from([0])])])],
      ['silence', new Uint8Array(0)],
      ['a hello alone', hello],
    ];
    for (const [what, bytes] of cases) {
      const r = await rawPeer(address, bytes);
      expect({ what, closed: r.closed }).toEqual({ what, closed: true });
    }
    // the right handshake is answered with the caller's hello, and frames for unknown streams are ignored
    const ok = await rawPeer(address, Buffer.concat([hello, keyFrame, ...encodeResponseFrame('_INBOX.nobody.1', Buffer.from('{"v":1}'))]), 300);
    expect(ok.closed).toBe(false);
    expect(ok.received.equals(hello)).toBe(true);
    await untilHome(caller, () => collect(caller.request(target, {})));
  });

  it('a response frame over the call-home limit ends its stream with an error; the connection, and the other streams, go on', async () => {
    const target = freshInstance();
    const worker = await plane({ callHomeLimits: { maxMessageBytes: 64 * 1024 } });
    await worker.serve(target, async function* (payload): AsyncGenerator<Payload> {
      yield { small: true };
      const big = (payload as { big?: number }).big;
      if (big !== undefined) yield { text: 'b'.repeat(big) };
    });
    const caller = await plane({ callHome: {} });
    await untilHome(caller, () => collect(caller.request(target, {})));
    const { error, received } = await failure(caller.request(target, { big: 100_000 }));
    expect(received).toEqual([{ small: true }]);
    expect(error).toMatchObject({ code: 'internal', message: expect.stringMatching(/over the call-home limit of 65536 bytes/) });
    expect(caller.callHomeConnections).toBe(1);
    const before = caller.callHomeFrames;
    expect(await collect(caller.request(target, { big: 1000 }))).toEqual([{ small: true }, { text: 'b'.repeat(1000) }]);
    expect(caller.callHomeFrames - before).toBe(2);
  });

  it('a caller that stops reading: the worker gives the link up past its buffer bound and stops the handler', async () => {
    const target = freshInstance();
    const worker = await plane({ callHomeLimits: { maxBufferedBytes: 1 << 20 } });
    let aborted = false;
    let produced = 0;
    await worker.serve(target, async function* (payload, ctx): AsyncGenerator<Payload> {
      if ((payload as { n?: number }).n === 0) {
        yield { ok: true };
        return;
      }
      ctx.signal.addEventListener('abort', () => (aborted = true));
      while (!ctx.signal.aborted && produced < 400) {
        produced++;
        yield { chunk: 'z'.repeat(64 * 1024) };
        await new Promise((r) => setImmediate(r));
      }
    });
    // a "caller" that completes the handshake, then never reads again
    const sockets: net.Socket[] = [];
    const stuck = net.createServer((socket) => {
      sockets.push(socket);
      socket.once('data', () => {
        socket.write(encodeHello(CALL_HOME_MAGIC, CALL_HOME_VERSION));
        socket.pause();
      });
    });
    await new Promise<void>((r) => stuck.listen(0, '127.0.0.1', r));
    const caller = await plane({ callHome: {}, idleTimeoutMs: 3000 });
    const home = (caller as unknown as { callHome: { target: { address: string; key: string } } }).callHome;
    home.target = { address: `127.0.0.1:${(stuck.address() as net.AddressInfo).port}`, key: 'stuck' };
    // the first request dials (it answers over NATS), the next goes to the stuck caller
    expect(await collect(caller.request(target, { n: 0 }))).toEqual([{ ok: true }]);
    await until(() => sockets.length === 1);
    await new Promise((r) => setTimeout(r, 100));
    await caller.request(target, {})[Symbol.asyncIterator]().next().catch(() => undefined);
    await until(() => aborted, 10_000);
    // given up after about the bound (the socket's own buffers take some more), long before 400 frames
    expect(produced).toBeLessThan(200);
    for (const sock of sockets) sock.destroy();
    await new Promise((r) => stuck.close(r));
  });

  it('the listener closes with the plane, and a closed listener refuses connections', async () => {
    const caller = await NatsRequestPlane.connect({ url: nats.url, callHome: {} });
    const address = caller.callHomeAddress!;
    await caller.close();
    const r = await rawPeer(address, encodeHello(CALL_HOME_MAGIC, CALL_HOME_VERSION), 1000);
    expect(r.closed).toBe(true);
    expect(r.received.length).toBe(0);
    // a listener on a port in use fails the connect, with nothing left open
    const other = await CallHomeListener.listen({ onFrame: () => {}, onClose: () => {} });
    const port = Number(other.address.split(':')[1]);
    await expect(NatsRequestPlane.connect({ url: nats.url, callHome: { port } })).rejects.toMatchObject({ code: 'unavailable' });
    await other.close();
  });
});
