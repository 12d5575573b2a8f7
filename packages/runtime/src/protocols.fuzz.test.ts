/**
 * Fuzz properties of the runtime's wire edge: JSON message bytes (`decodeJson`), every record and
 * frame decoder of protocols.ts, and the NATS chunk assembler. Whatever a peer or a stranger on
 * the bus sends is a value or an invalid_argument, within the time bound; chunks never join past
 * the byte limit.
 */
import type { Msg, MsgHdrs } from '@nats-io/nats-core';
import { describe, expect, it } from 'vitest';
import { DEEP_NESTING, eachNodeReplaced, fc, fuzz, jsonText, mutatedJson, nestedText, parsesOrRefuses, type JsonValue } from '@switchyard/testing/fuzz';
import { endpointAddress, instanceAddress, instanceSubject } from './addressing.js';
import { CHUNK_HEADER, ChunkAssembler } from './nats-framing.js';
import { decodeCancelMessage, decodeInstanceInfo, decodeJson, decodeModelCard, decodeRequestEnvelope, decodeResponseFrame, encodeJson } from './protocols.js';

const inst = instanceAddress(endpointAddress('prod', 'backend', 'generate'), '00000000000000ff');
const address = { namespace: inst.namespace, component: inst.component, endpoint: inst.endpoint, instanceId: inst.instanceId };

const VALID: Array<[string, (v: unknown) => unknown, JsonValue]> = [
  ['instance info', decodeInstanceInfo, { v: 1, ...address, subject: instanceSubject(inst), metadata: { engine: 'mocker', rank: 0 } }],
  [
    'model card',
    decodeModelCard,
    { v: 1, model: 'org/m', kind: 'llm', ...address, tokenizer: { type: 'inline', files: { 'tokenizer.json': '{}' } }, kvBlockSize: 16, contextLength: 2048, metadata: {} },
  ],
  ['request envelope', decodeRequestEnvelope, { v: 1, requestId: 'r1', attempt: 'a1', payload: { x: [1, 2] }, deadline: 1_700_000_000_000 }],
  ['request envelope announcing finalData', decodeRequestEnvelope, { v: 1, requestId: 'r1', payload: null, deadline: null, finalData: true }],
  ['data frame', decodeResponseFrame, { v: 1, type: 'data', seq: 0, payload: 'x' }],
  ['data frame marked final', decodeResponseFrame, { v: 1, type: 'data', seq: 4, payload: { y: 'x' }, final: true }],
  ['error frame', decodeResponseFrame, { v: 1, type: 'error', seq: 3, error: { code: 'unavailable', message: 'gone' } }],
  ['cancel message', decodeCancelMessage, { v: 1, type: 'cancel', requestId: 'r1', attempt: 'a1' }],
];

describe('runtime wire decoders (fuzz)', () => {
  it('decodes any bytes as JSON or refuses them', () => {
    fuzz(fc.oneof(fc.uint8Array({ maxLength: 48 }), fc.json({ maxDepth: 3 }).map((t) => new TextEncoder().encode(t))), (bytes) => {
      parsesOrRefuses(() => decodeJson(bytes));
    });
  });

  it.each(VALID)('%s: decodes the valid value, and decodes or refuses any JSON and any one-field corruption', (_what, decode, valid) => {
    expect(decode(decodeJson(encodeJson(valid)))).toEqual(valid);
    fuzz(fc.oneof(fc.jsonValue({ maxDepth: 3 }), mutatedJson(fc.constant(valid))), (v) => {
      parsesOrRefuses(() => decode(decodeJson(new TextEncoder().encode(jsonText(v as JsonValue)))));
    }, { scale: 0.5 });
  });

  it.each(VALID)('%s: decodes or refuses the message with any one field nested 10^5 deep', (_what, decode, valid) => {
    for (const { text } of eachNodeReplaced(valid, nestedText(DEEP_NESTING))) {
      parsesOrRefuses(() => decode(decodeJson(new TextEncoder().encode(text))));
    }
  });
});

class Headers {
  constructor(private readonly map: Map<string, string>) {}
  has(k: string): boolean {
    return this.map.has(k);
  }
  get(k: string): string {
    return this.map.get(k) ?? '';
  }
}
const msg = (data: Uint8Array, tag?: string): Msg => ({ data, headers: tag === undefined ? undefined : (new Headers(new Map([[CHUNK_HEADER, tag]])) as unknown as MsgHdrs) }) as Msg;

describe('ChunkAssembler (fuzz)', () => {
  const tag = fc.oneof(
    fc.tuple(fc.nat(5), fc.nat(6)).map(([i, n]) => `${i}/${n}`),
    fc.constantFrom('0/99999999999999999999', '1/1', '-1/2', '0/2x', '', '/', '0/0', '9007199254740993/9007199254740994'),
    fc.string({ maxLength: 6 }),
  );

  it('joins or refuses any sequence of messages and never passes the byte limit', () => {
    const sequence = fc.array(fc.tuple(fc.constantFrom('a', 'b'), fc.uint8Array({ maxLength: 12 }), fc.option(tag, { nil: undefined })), { maxLength: 12 });
    fuzz(sequence, (messages) => {
      const assembler = new ChunkAssembler(32);
      for (const [key, data, t] of messages) {
        const r = parsesOrRefuses(() => assembler.accept(key, msg(data, t)));
        if (r.ok && r.value !== null && t !== undefined) expect(r.value.byteLength).toBeLessThanOrEqual(32);
      }
      expect(assembler.size).toBeLessThanOrEqual(2);
    });
  });

  it('reassembles any message split into chunks in order', () => {
    fuzz(fc.array(fc.uint8Array({ maxLength: 8 }), { minLength: 2, maxLength: 6 }), (parts) => {
      const assembler = new ChunkAssembler();
      let out: Uint8Array | null = null;
      parts.forEach((p, i) => {
        out = assembler.accept('k', msg(p, `${i}/${parts.length}`));
      });
      expect(Buffer.from(out ?? new Uint8Array(1)).equals(Buffer.concat(parts))).toBe(true);
      expect(assembler.size).toBe(0);
    });
  });
});
