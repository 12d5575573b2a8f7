/**
 * Fuzz properties of the KV transfer wire (kv-transfer-wire.ts): whatever bytes a peer sends, split
 * however the network splits them, the reader and the decoder return a value or refuse with
 * invalid_argument (never another error, never more buffered than was pushed), and a decoded chunk
 * is verified or refused with internal. Valid messages survive the trip exactly.
 */
import { SwitchyardError } from '@switchyard/common';
import { describe, expect, it } from 'vitest';
import { fc, fuzz, parsesOrRefuses } from '@switchyard/testing/fuzz';
import { parseKvTransferOptions } from './kv-transfer-limits.js';
import type { KvPullRequest, KvTransferBlock } from './kv-transfer-plane.js';
import {
  FrameType,
  type KvWireMessage,
  WireReader,
  decodeMessage,
  encodeChunk,
  encodeEnd,
  encodeError,
  encodeHello,
  encodePull,
  encodeRelease,
  encodeReleased,
  maxRequestFrameBytes,
  verifyChunk,
} from './kv-transfer-wire.js';

const limits = parseKvTransferOptions({ maxHashesPerPull: 64 });
const MAX_FRAME = 4096;

/** Cut `bytes` at the given points (any order, any count). */
function split(bytes: Uint8Array, cuts: readonly number[]): Uint8Array[] {
  const at = [...new Set(cuts.map((c) => c % (bytes.length + 1)))].sort((a, b) => a - b);
  const pieces: Uint8Array[] = [];
  let prev = 0;
  for (const c of [...at, bytes.length]) {
    pieces.push(bytes.subarray(prev, c));
    prev = c;
  }
  return pieces;
}

/**
 * Feed `pieces` to a reader and drain it after each: every item decodes or is refused; a refusal ends
 * the connection (as the planes do). Returns the messages decoded, and whether it was refused.
 */
function readAll(pieces: readonly Uint8Array[], maxFrame = MAX_FRAME): { messages: KvWireMessage[]; refused: boolean } {
  const reader = new WireReader(maxFrame);
  const messages: KvWireMessage[] = [];
  let pushed = 0;
  for (const p of pieces) {
    reader.push(p);
    pushed += p.byteLength;
    expect(reader.buffered).toBeLessThanOrEqual(pushed);
    for (;;) {
      const ready = reader.ready();
      const r = parsesOrRefuses(() => {
        const item = reader.next();
        if (item === null || item.kind === 'hello') return item;
        return decodeMessage(item.type, item.body, limits);
      });
      if (!r.ok) return { messages, refused: true };
      if (r.value === null) {
        expect(ready).toBe(false);
        break;
      }
      expect(ready).toBe(true);
      if ('type' in r.value) messages.push(r.value);
    }
  }
  return { messages, refused: false };
}

const hash = fc.bigInt({ min: 0n, max: (1n << 64n) - 1n }).map((v) => v.toString(16).padStart(16, '0'));
const name = (max: number) => fc.oneof(fc.string({ minLength: 1, maxLength: max }), fc.string({ minLength: 1, maxLength: 8, unit: 'grapheme' }));
const pullRequest: fc.Arbitrary<KvPullRequest> = fc.record({
  model: name(40),
  leaseId: name(20),
  layoutDigest: name(20),
  hashes: fc.array(hash, { maxLength: 64 }),
});
const blocks: fc.Arbitrary<KvTransferBlock[]> = fc.array(fc.record({ hash, data: fc.uint8Array({ maxLength: 300 }) }), { minLength: 1, maxLength: 8 });

/** Any valid frame the protocol has, as bytes. */
const validFrame: fc.Arbitrary<Uint8Array> = fc.oneof(
  pullRequest.map((r) => encodePull(r)),
  fc.record({ model: name(20), leaseId: name(20) }).map((r) => encodeRelease(r)),
  fc.tuple(fc.nat(100), blocks).map(([first, b]) => Buffer.concat(encodeChunk(first, b))),
  fc.nat().map((n) => encodeEnd(n)),
  fc.boolean().map((b) => encodeReleased(b)),
  fc.tuple(fc.constantFrom('not_found', 'internal', 'invalid_argument'), fc.string({ maxLength: 50 })).map(([c, m]) => encodeError(new SwitchyardError(c, m))),
);

describe('KV transfer wire (fuzz)', () => {
  it('reads any bytes, split anywhere, as items or refuses them', () => {
    fuzz(fc.tuple(fc.uint8Array({ maxLength: 200 }), fc.array(fc.nat(), { maxLength: 6 })), ([bytes, cuts]) => {
      readAll(split(bytes, cuts));
    });
  });

  it('reads or refuses any frames behind a valid hello: random length prefixes, types and bodies', () => {
    const rawFrame = fc.tuple(fc.oneof(fc.nat(64), fc.constantFrom(0, MAX_FRAME, MAX_FRAME + 1, 0xffff_ffff)), fc.oneof(fc.constantFrom(...Object.values(FrameType)), fc.nat(255)), fc.uint8Array({ maxLength: 64 })).map(([len, type, body]) => {
      const b = Buffer.alloc(5 + body.length);
      b.writeUInt32BE(len, 0);
      b[4] = type;
      b.set(body, 5);
      return b;
    });
    fuzz(fc.tuple(fc.array(rawFrame, { maxLength: 4 }), fc.array(fc.nat(), { maxLength: 6 })), ([frames, cuts]) => {
      readAll(split(Buffer.concat([encodeHello(), ...frames]), cuts));
    });
  });

  it('reads or refuses valid frames with one byte changed, cut short or extended; decoded chunks verify or fail internal', () => {
    const edit = fc.oneof(
      fc.tuple(fc.constant('flip' as const), fc.nat(), fc.integer({ min: 1, max: 255 })),
      fc.tuple(fc.constant('cut' as const), fc.nat(), fc.constant(0)),
      fc.tuple(fc.constant('extend' as const), fc.nat(), fc.nat(255)),
    );
    fuzz(fc.tuple(validFrame, edit, fc.array(hash, { maxLength: 8 })), ([frame, [kind, pos, v], expected]) => {
      const b = Buffer.from(frame);
      const at = pos % b.length;
      const edited = kind === 'flip' ? (b.writeUInt8(b[at]! ^ v, at), b) : kind === 'cut' ? b.subarray(0, at) : Buffer.concat([b, Buffer.from([v])]);
      const { messages } = readAll([encodeHello(), edited], maxRequestFrameBytes(limits));
      for (const m of messages) {
        if (m.type === 'chunk') parsesOrRefuses(() => verifyChunk(m, [...expected, ...m.hashes], expected.length), ['internal']);
      }
    });
  });

  it('carries valid pulls and chunks exactly, whatever the split', () => {
    fuzz(fc.tuple(pullRequest, blocks, fc.array(fc.nat(), { maxLength: 8 })), ([request, chunk, cuts]) => {
      const bytes = Buffer.concat([encodeHello(), encodePull(request), ...encodeChunk(3, chunk), encodeEnd(3 + chunk.length)]);
      const { messages, refused } = readAll(split(bytes, cuts), maxRequestFrameBytes(limits) + 4096);
      expect(refused).toBe(false);
      expect(messages[0]).toEqual({ type: 'pull', request });
      const c = messages[1]!;
      if (c.type !== 'chunk') throw new Error('expected a chunk');
      const expected = ['0', '1', '2'].map((d) => d.repeat(16)).concat(chunk.map((b) => b.hash));
      const got = verifyChunk(c, expected, 3);
      expect(got.map((b) => ({ hash: b.hash, data: Buffer.from(b.data) }))).toEqual(chunk.map((b) => ({ hash: b.hash, data: Buffer.from(b.data) })));
      expect(messages[2]).toEqual({ type: 'end', blocks: 3 + chunk.length });
    });
  });

  it('refuses, before the body arrives, a frame over the limit and a pull over the hash limit', () => {
    const reader = new WireReader(MAX_FRAME);
    reader.push(encodeHello());
    reader.next();
    reader.push(Buffer.from([0x00, 0x00, 0x10, 0x01]));
    expect(reader.ready()).toBe(true);
    expect(() => reader.next()).toThrow(expect.objectContaining({ code: 'invalid_argument' }));
    const pull = encodePull({ model: 'm', leaseId: 'l', layoutDigest: 'd', hashes: Array.from({ length: 65 }, (_, i) => i.toString(16).padStart(16, '0')) });
    expect(() => decodeMessage(pull[4]!, pull.subarray(5), limits)).toThrow(expect.objectContaining({ code: 'invalid_argument', message: expect.stringMatching(/above the limit of 64/) }));
  });

  it('keeps a dripping peer to a bounded number of pieces', () => {
    const reader = new WireReader(1 << 20);
    const bytes = Buffer.concat([encodeHello(), encodePull({ model: 'm', leaseId: 'l', layoutDigest: 'd', hashes: Array.from({ length: 2000 }, (_, i) => i.toString(16).padStart(16, '0')) })]);
    for (const b of bytes) reader.push(Uint8Array.of(b));
    expect((reader as unknown as { chunks: unknown[] }).chunks.length).toBeLessThan(bytes.length / 1000);
    expect(reader.next()).toEqual({ kind: 'hello', version: 1 });
    const item = reader.next();
    expect(item).toMatchObject({ kind: 'frame', type: FrameType.PULL });
    expect(reader.buffered).toBe(0);
  });
});
