import { describe, expect, it } from 'vitest';
import { Cancellation, cancelled, internal } from '@switchyard/common';
import { fc, fuzzSettings } from '@switchyard/testing/fuzz';
import { endpointAddress } from './addressing.js';
import type { Payload, RequestEnvelope, ResponseFrame } from './protocols.js';
import { type EndpointHandler, StreamIncompleteError } from './request-plane.js';
import { isTerminal, readFrame, writeResponse } from './response-writer.js';

const envelope = (finalData: boolean): RequestEnvelope => ({ v: 1, requestId: 'r1', payload: null, deadline: null, ...(finalData ? { finalData: true as const } : {}) });
const turn = (): Promise<void> => new Promise((r) => setImmediate(r));
const later = (ms = 1): Promise<void> => new Promise((r) => setTimeout(r, ms));

async function write(handler: EndpointHandler, finalData: boolean, options: { abort?: Cancellation; stopped?: boolean } = {}): Promise<ResponseFrame[]> {
  const frames: ResponseFrame[] = [];
  await writeResponse({ handler, envelope: envelope(finalData), abort: options.abort ?? new Cancellation(), send: (f) => frames.push(f), stopped: () => options.stopped ?? false });
  return frames;
}

describe('writeResponse', () => {
  it('ends a unary response in its data frame when the caller announced finalData, else in a final frame', async () => {
    const unary: EndpointHandler = async function* () {
      yield { answer: 42 };
    };
    expect(await write(unary, true)).toEqual([{ v: 1, type: 'data', seq: 0, payload: { answer: 42 }, final: true }]);
    expect(await write(unary, false)).toEqual([
      { v: 1, type: 'data', seq: 0, payload: { answer: 42 } },
      { v: 1, type: 'final', seq: 1 },
    ]);
  });

  it('marks only the last data frame of a stream, and only when the end comes with it', async () => {
    const endsAtOnce: EndpointHandler = async function* () {
      for (let i = 0; i < 3; i++) {
        yield i;
        await later();
      }
      yield 3;
    };
    expect(await write(endsAtOnce, true)).toEqual([
      { v: 1, type: 'data', seq: 0, payload: 0 },
      { v: 1, type: 'data', seq: 1, payload: 1 },
      { v: 1, type: 'data', seq: 2, payload: 2 },
      { v: 1, type: 'data', seq: 3, payload: 3, final: true },
    ]);
    const endsLater: EndpointHandler = async function* () {
      yield 0;
      await later();
    };
    expect(await write(endsLater, true)).toEqual([
      { v: 1, type: 'data', seq: 0, payload: 0 },
      { v: 1, type: 'final', seq: 1 },
    ]);
    const empty: EndpointHandler = async function* () {};
    expect(await write(empty, true)).toEqual([{ v: 1, type: 'final', seq: 0 }]);
  });

  it('sends a streamed frame in the turn it was produced, not after the next one', async () => {
    const frames: ResponseFrame[] = [];
    const abort = new Cancellation();
    const done = writeResponse({
      handler: async function* (_p, ctx) {
        yield 'first token';
        await new Promise<void>((resolve) => ctx.signal.addEventListener('abort', () => resolve(), { once: true }));
      },
      envelope: envelope(true),
      abort,
      send: (f) => frames.push(f),
      stopped: () => false,
    });
    await turn();
    expect(frames).toEqual([{ v: 1, type: 'data', seq: 0, payload: 'first token' }]);
    abort.abort(cancelled('caller gone'));
    await done;
    expect(frames).toHaveLength(1); // nothing after a cancel
  });

  it('sends a held frame before the error of a handler that throws after it', async () => {
    const throws: EndpointHandler = async function* () {
      yield 'partial';
      throw internal('broke');
    };
    expect(await write(throws, true)).toEqual([
      { v: 1, type: 'data', seq: 0, payload: 'partial' },
      { v: 1, type: 'error', seq: 1, error: { code: 'internal', message: 'broke' } },
    ]);
  });

  it('on an abort while a frame is held: the frame, no final; a cancelled frame only when the endpoint stopped; the handler cleans up', async () => {
    for (const stopped of [false, true]) {
      const abort = new Cancellation();
      let cleaned = false;
      const aborts: EndpointHandler = async function* () {
        try {
          yield 'kept';
          abort.abort(cancelled('endpoint stopped'));
          yield 'dropped';
        } finally {
          cleaned = true;
        }
      };
      const frames = await write(aborts, true, { abort, stopped });
      expect(frames).toEqual([
        { v: 1, type: 'data', seq: 0, payload: 'kept' },
        ...(stopped ? [{ v: 1, type: 'error', seq: 1, error: { code: 'cancelled', message: 'endpoint stopped' } }] : []),
      ]);
      expect(cleaned).toBe(true);
    }
  });

  it('keeps the stream rules for any handler (property): seq 0.., every payload once in order, one terminal frame last', async () => {
    // a handler's steps: yield a payload now, yield after a timer, yield after a microtask; then end now, end later, or throw
    const step = fc.constantFrom('yield', 'yield-after-timer', 'yield-after-microtask');
    const ending = fc.constantFrom('end', 'end-after-timer', 'throw');
    await fc.assert(
      fc.asyncProperty(fc.array(step, { maxLength: 6 }), ending, fc.boolean(), async (steps, end, finalData) => {
        const handler: EndpointHandler = async function* () {
          for (const [i, s] of steps.entries()) {
            if (s === 'yield-after-timer') await later(0);
            if (s === 'yield-after-microtask') await Promise.resolve();
            yield i;
          }
          if (end === 'end-after-timer') await later(0);
          if (end === 'throw') throw internal('boom');
        };
        const frames = await write(handler, finalData);
        expect(frames.map((f) => f.seq)).toEqual(frames.map((_, i) => i));
        const payloads = frames.flatMap((f) => (f.type === 'data' ? [f.payload] : []));
        expect(payloads).toEqual(steps.map((_, i) => i));
        const terminals = frames.filter((f, i) => isTerminal(f, i));
        expect(terminals).toEqual([frames.at(-1)]);
        const last = frames.at(-1)!;
        if (end === 'throw') expect(last.type).toBe('error');
        // a data frame ends the stream only for a caller that announced it reads one
        if (last.type === 'data') expect(finalData && end === 'end').toBe(true);
        // and a caller reading it sees each payload and the end
        const read: Payload[] = [];
        try {
          for (const [i, f] of frames.entries()) {
            const r = readFrame(f, i, endpointAddress('prod', 'backend', 'generate'), read.length);
            if (r === null) break;
            read.push(r.payload);
            if (r.final) break;
          }
        } catch (e) {
          expect(end).toBe('throw');
          expect(e).not.toBeInstanceOf(StreamIncompleteError);
        }
        expect(read).toEqual(payloads);
      }),
      { ...fuzzSettings(), numRuns: Math.min(100, fuzzSettings().numRuns) },
    );
  });
});

describe('readFrame', () => {
  const target = endpointAddress('prod', 'backend', 'generate');
  it('yields a data frame marked final with final: true, and treats it as terminal', () => {
    const frame: ResponseFrame = { v: 1, type: 'data', seq: 0, payload: 7, final: true };
    expect(readFrame(frame, 0, target, 0)).toEqual({ payload: 7, final: true });
    expect(isTerminal(frame, 0)).toBe(true);
    expect(readFrame({ v: 1, type: 'data', seq: 0, payload: 7 }, 0, target, 0)).toEqual({ payload: 7, final: false });
    expect(isTerminal({ v: 1, type: 'data', seq: 0, payload: 7 }, 0)).toBe(false);
    expect(() => readFrame({ ...frame, seq: 1 }, 0, target, 0)).toThrow(StreamIncompleteError);
    expect(isTerminal({ ...frame, seq: 1 }, 0)).toBe(false);
  });
});
