import { afterAll, describe, expect, it } from 'vitest';
import { SwitchyardError } from '@switchyard/common';
import { decodeHttpInferRequest } from '@switchyard/kserve';
import { CodecThread } from './codec-thread.js';

const thread = new CodecThread();
afterAll(() => thread.close());

const src = (body: Uint8Array) => ({ modelName: 'm', modelVersion: 2, body });
function header(json: object, blob?: Uint8Array): { body: Uint8Array; headerLength: number } {
  const text = Buffer.from(JSON.stringify(json));
  return { body: blob === undefined ? text : Buffer.concat([text, blob]), headerLength: text.byteLength };
}
function failure(fn: () => unknown): unknown {
  try {
    fn();
  } catch (e) {
    return e;
  }
  throw new Error('expected a throw');
}

describe('CodecThread', () => {
  it('decodes exactly as the event loop does: JSON BYTES and numbers, binary blobs, parameters, outputs', async () => {
    const strings = Array.from({ length: 50_000 }, (_, i) => (i % 5 === 0 ? `é${i}` : String(i)));
    const { body, headerLength } = header(
      {
        id: 'x',
        parameters: { priority: 2, sequence_id: 18446744073709551615n.toString(), custom: true },
        inputs: [
          { name: 'S', datatype: 'BYTES', shape: [1, strings.length], data: strings },
          { name: 'I', datatype: 'INT64', shape: [3], data: [1, -2, 3] },
          { name: 'B', datatype: 'INT32', shape: [2], parameters: { binary_data_size: 8 } },
        ],
        outputs: [{ name: 'O', parameters: { binary_data: true, classification: 2 } }],
      },
      new Uint8Array([1, 0, 0, 0, 2, 0, 0, 0]),
    );
    const inline = decodeHttpInferRequest(src(body), headerLength);
    const offLoop = await thread.decodeHttp(src(new Uint8Array(body)), headerLength);
    expect(offLoop.request).toEqual(inline.request);
    expect(offLoop.defaultOutputKind).toBe(inline.defaultOutputKind);
    expect([...offLoop.outputs]).toEqual([...inline.outputs]);
  });

  it('refuses what the event loop refuses, with the same code and message', async () => {
    const bad = [
      Buffer.from('{"inputs": [ {"name": "A"'),
      Buffer.from(JSON.stringify({ inputs: [{ name: 'S', datatype: 'BYTES', shape: [2], data: ['a', 1] }] })),
      Buffer.from(JSON.stringify({ inputs: [{ name: 'S', datatype: 'BYTES', shape: [1], parameters: { binary_data_size: 99 } }] })),
    ];
    for (const body of bad) {
      const expected = failure(() => decodeHttpInferRequest(src(body), body.byteLength)) as SwitchyardError;
      const got = await thread.decodeHttp(src(body), body.byteLength).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(got).toBeInstanceOf(SwitchyardError);
      expect((got as SwitchyardError).code).toBe(expected.code);
      expect((got as SwitchyardError).message).toBe(expected.message);
    }
  });

  it('keeps many requests in flight and leaves the caller’s buffer usable when it is a view', async () => {
    const { body, headerLength } = header({ inputs: [{ name: 'S', datatype: 'BYTES', shape: [3], data: ['a', 'b', 'c'] }] });
    const outer = new Uint8Array(body.byteLength + 10);
    outer.set(body, 5);
    const view = outer.subarray(5, 5 + body.byteLength);
    const results = await Promise.all(Array.from({ length: 20 }, () => thread.decodeHttp(src(view), headerLength)));
    for (const r of results) expect(r.request.inputs[0]?.data).toEqual(decodeHttpInferRequest(src(body), headerLength).request.inputs[0]?.data);
    expect(outer.byteLength).toBe(body.byteLength + 10); // not detached
  });
});

describe('CodecThread.encode', () => {
  it('encodes exactly as the event loop does (JSON BYTES, binary, classification with labels) and leaves the response usable', async () => {
    const { encodeHttpInferResponse, serializeStringElements } = await import('@switchyard/kserve');
    const strings = Array.from({ length: 20_000 }, (_, i) => (i % 3 === 0 ? `é${i}` : String(i)));
    const shared = new Uint8Array(64);
    new Float32Array(shared.buffer, 16, 4).set([0.5, 2, 1, 3]);
    const response = {
      id: 'r',
      modelName: 'm',
      modelVersion: '1',
      parameters: { sequence_id: 3 },
      outputs: [
        { name: 'S', datatype: 'BYTES' as const, shape: [1, strings.length], data: serializeStringElements(strings), parameters: {} },
        { name: 'F', datatype: 'FP32' as const, shape: [1, 4], data: shared.subarray(16, 32), parameters: {} },
        { name: 'C', datatype: 'FP32' as const, shape: [1, 4], data: shared.subarray(16, 32), parameters: {} },
      ],
    };
    const options = {
      defaultOutputKind: 'json' as const,
      outputs: new Map([
        ['F', { name: 'F', kind: 'binary' as const, classification: 0 }],
        ['C', { name: 'C', kind: 'json' as const, classification: 2 }],
      ]),
      batching: true,
      labels: new Map([['C', ['a', 'b', 'c', 'd']]]),
    };
    const inline = encodeHttpInferResponse(response, options);
    const offLoop = await thread.encodeHttp(response, options);
    expect(offLoop.headerLength).toBe(inline.headerLength);
    expect(offLoop.binary).toBe(inline.binary);
    expect(Buffer.concat(offLoop.chunks.map((c) => Buffer.from(c)))).toEqual(Buffer.concat(inline.chunks.map((c) => Buffer.from(c))));
    expect(shared.byteLength).toBe(64); // the engine's buffer was copied, not transferred
  });
});
