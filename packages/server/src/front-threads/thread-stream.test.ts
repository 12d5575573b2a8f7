import { describe, expect, it } from 'vitest';
import { status } from '@grpc/grpc-js';
import { type Answer, Outbox, STREAM_ACK_AT } from './front-messages.js';
import { ThreadStreamCall } from './thread-stream.js';

const turn = () => new Promise((resolve) => setImmediate(resolve));
const bytes = (s: string) => new Uint8Array(Buffer.from(s));

/** A call over a text "protocol": a message is its text; 'bad' cannot be deserialized. */
function setup(metadata: [string, string | Uint8Array][] = []) {
  const batches: Answer[][] = [];
  const answers = new Outbox<Answer>((batch) => batches.push(batch));
  let done = 0;
  const call = new ThreadStreamCall(7, metadata, {
    deserialize: (b) => {
      const text = b.toString();
      if (text === 'bad') throw new Error('no such wire type');
      return text;
    },
    serialize: (v) => Buffer.from(`<${String(v)}>`),
    answers,
    onDone: () => (done += 1),
  });
  const data: unknown[] = [];
  const events: string[] = [];
  call.on('data', (m: unknown) => data.push(m));
  call.on('end', () => events.push('end'));
  call.on('cancelled', () => events.push('cancelled'));
  const sent = () => batches.flat();
  return { call, data, events, sent, done: () => done };
}

describe('ThreadStreamCall (a front thread stream on the main thread)', () => {
  it('hands messages over in order; what it took rides on the next write, or goes alone once half the window is owed, one answer per turn', async () => {
    const { call, data, sent } = setup();
    for (const m of ['a', 'b', 'c']) call.receive(bytes(m));
    await turn();
    expect(data).toEqual(['a', 'b', 'c']);
    expect(sent()).toEqual([]);
    call.write('x');
    call.write('y');
    await turn();
    expect(sent().map((a) => ({ ...a, bytes: undefined }))).toEqual([
      { t: 'write', id: 7, took: 3, bytes: undefined },
      { t: 'write', id: 7, bytes: undefined },
    ]);
    const before = sent().length;
    for (let i = 0; i < 2 * STREAM_ACK_AT + 3; i++) call.receive(bytes(`m${i}`));
    await turn();
    expect(sent().slice(before)).toEqual([{ t: 'took', id: 7, n: 2 * STREAM_ACK_AT }]);
  });

  it('holds messages while paused, untaken, and hands them over on a later tick after resume; end comes after them', async () => {
    const { call, data, events, sent } = setup();
    call.pause();
    call.receive(bytes('a'));
    call.receive(bytes('b'));
    call.halfClose();
    await turn();
    expect(data).toEqual([]);
    expect(events).toEqual([]);
    call.resume();
    expect(data).toEqual([]);
    await turn();
    expect(data).toEqual(['a', 'b']);
    expect(events).toEqual(['end']);
  });

  it('stops at a pause asked for inside a data handler', async () => {
    const { call, data } = setup();
    call.on('data', () => call.pause());
    call.receive(bytes('a'));
    call.receive(bytes('b'));
    expect(data).toEqual(['a']);
    call.resume();
    await turn();
    expect(data).toEqual(['a', 'b']);
  });

  it('sends each response serialized, and the end; nothing after it', async () => {
    const { call, sent, done } = setup();
    expect(call.write('x')).toBe(true);
    call.end();
    expect(call.write('y')).toBe(false);
    call.receive(bytes('late'));
    await turn();
    expect(sent().map((a) => (a.t === 'write' ? { ...a, bytes: Buffer.from(a.bytes).toString() } : a))).toEqual([
      { t: 'write', id: 7, bytes: '<x>' },
      { t: 'end', id: 7, code: status.OK, details: '' },
    ]);
    expect(done()).toBe(1);
  });

  it('ends the call as grpc-js does when a message cannot be deserialized (status, then cancelled), and reads nothing more', async () => {
    const { call, data, events, sent, done } = setup();
    call.receive(bytes('bad'));
    call.receive(bytes('a'));
    await turn();
    expect(data).toEqual([]);
    expect(events).toEqual(['cancelled']);
    expect(call.cancelled).toBe(true);
    expect(done()).toBe(1);
    const details = process.env['GRPC_NODE_DEBUG_SEND_ERROR_DETAILS'] === 'true' ? 'Error deserializing request: no such wire type' : 'Error deserializing request';
    expect(sent()).toEqual([{ t: 'end', id: 7, code: status.INTERNAL, details }]);
  });

  it('ends the call with the status of an error emitted on it', async () => {
    const { call, sent } = setup();
    call.emit('error', { code: status.RESOURCE_EXHAUSTED, details: 'too big' });
    call.emit('error', new Error('second'));
    await turn();
    expect(sent()).toEqual([{ t: 'end', id: 7, code: status.RESOURCE_EXHAUSTED, details: 'too big' }]);
    const other = setup();
    other.call.emit('error', new Error('plain'));
    await turn();
    expect(other.sent()).toEqual([{ t: 'end', id: 7, code: status.UNKNOWN, details: 'plain' }]);
  });

  it('says the buffer is full while the thread says so, and drains', () => {
    const { call } = setup();
    let drained = 0;
    call.once('drain', () => (drained += 1));
    call.congested(true);
    expect(call.write('x')).toBe(false);
    call.congested(false);
    expect(drained).toBe(1);
    expect(call.write('y')).toBe(true);
  });

  it('a cancel is cancelled: the handler hears it, nothing is sent, later messages are dropped', async () => {
    const { call, data, events, sent, done } = setup();
    call.cancel();
    call.receive(bytes('a'));
    call.cancel();
    await turn();
    expect(call.cancelled).toBe(true);
    expect(events).toEqual(['cancelled']);
    expect(data).toEqual([]);
    expect(sent()).toEqual([]);
    expect(done()).toBe(1);
  });

  it('carries the client metadata, binary values as bytes', () => {
    const { call } = setup([
      ['x-tenant', 'acme'],
      ['x-tenant', 'beta'],
      ['trace-bin', new Uint8Array([1, 2, 3])],
    ]);
    expect(call.metadata.get('x-tenant')).toEqual(['acme', 'beta']);
    expect(call.metadata.get('trace-bin')).toEqual([Buffer.from([1, 2, 3])]);
  });

  it('drops metadata grpc-js would refuse instead of throwing', () => {
    const { call } = setup([
      ['x!y', 'v'],
      ['text-bin', 'not bytes'],
      ['ok', 'kept'],
    ]);
    expect(call.metadata.toJSON()).toEqual({ ok: ['kept'] });
  });
});
