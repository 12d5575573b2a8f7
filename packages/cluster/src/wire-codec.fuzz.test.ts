/**
 * Fuzz properties of the worker ↔ router codecs: every `decode*` takes any JSON (random, or a
 * valid message with one field corrupted) to a value or an invalid_argument; in-process values
 * survive `*ToWire` → JSON → `decode*` → `*FromWire` exactly (tensor bytes bit for bit, bigint
 * parameters, any parameter name), and so do keys a peer chose (statistics kinds, label outputs).
 * Binary payloads too: raw tensors through a whole request-plane message (`encodeMessage` →
 * `decodeMessage`) bit for bit, and hostile binary messages (lengths past the frame, huge counts,
 * blob counts that do not match the tensors, random bytes) refused `invalid_argument` with memory
 * bounded by the message.
 */
import { describe, expect, it } from 'vitest';
import { DATATYPES, elementByteSize, type DataType, type InferRequest, type InferResponse, type ParameterValue } from '@switchyard/kserve';
import { DEEP_NESTING, eachNodeReplaced, fc, fuzz, fuzzKey, jsonText, mutatedJson, nestedText, objectWith, parsesOrRefuses, rawTensor, withBigIntLimit, type JsonValue } from '@switchyard/testing/fuzz';
import { BinaryPayload, MAX_MESSAGE_BLOBS, decodeMessage, decodeResponseFrame, encodeMessage } from '@switchyard/runtime';
import {
  decodeLlmCardMetadata,
  decodeTensorCardMetadata,
  decodeWireGenerateOutput,
  decodeWireGenerateRequest,
  decodeWireInferRequest,
  decodeWireInferResponse,
  decodeWireForwardPass,
  decodeWireKvEvents,
  decodeWireLoad,
  decodeWireRequestFigures,
  decodeWireSnapshotChunk,
  decodeWireSnapshotRequest,
  decodeWireStats,
  decodeWireStatsRequest,
  generateOutputFromWire,
  generateOutputToWire,
  generateRequestToWire,
  inferRequestFromWire,
  inferRequestToBinary,
  inferRequestToWire,
  inferResponseFromWire,
  inferResponseToBinary,
  inferResponseToWire,
} from './wire-codec.js';

const ELEMENT_SIZES = Object.fromEntries(DATATYPES.map((d) => [d, elementByteSize(d)]));
const viaJson = (v: unknown): unknown => JSON.parse(JSON.stringify(v));
const H = '0123456789abcdef';
const duration = { count: 2, ns: 1000 };

const LAYOUT = { modelId: 'm@1', engine: 'mocker', dtype: 'fp32', numLayers: 2, numKvHeads: 2, headDim: 4, blockSize: 2, bytesPerBlock: 64 };
const HANDLE = { address: 'w1:7001', instanceId: H, leaseId: 'l1', blockHashes: [H], layout: LAYOUT, seed: 3 };
const tensorCard: JsonValue = { modelMetadata: { name: 'm' }, modelConfig: { name: 'm' }, versions: ['1'], decoupled: false, labels: { '1': { OUT: ['a', 'b'] } } };
const VALID: Array<[string, (v: unknown) => unknown, JsonValue]> = [
  ['generate request', decodeWireGenerateRequest, { v: 1, model: 'm', requestId: 'r', promptTokenIds: [1, 2], sampling: { temperature: 0 }, prefillOnly: false }],
  ['generate output', decodeWireGenerateOutput, { tokenIds: [5], finishReason: 'stop', stopReason: null, logprobs: [null, -0.5], usage: { promptTokens: 2, completionTokens: 1, cachedTokens: 0 } }],
  ['decode request', decodeWireGenerateRequest, { v: 1, model: 'm', requestId: 'r', promptTokenIds: [1, 2, 3], sampling: { max_tokens: 4 }, outputTokenIds: [9], kvTransfer: HANDLE }],
  ['prefill output', decodeWireGenerateOutput, { tokenIds: [5], finishReason: 'length', stopReason: null, usage: { promptTokens: 3, completionTokens: 1, cachedTokens: 0 }, kvTransfer: HANDLE }],
  ['decode output', decodeWireGenerateOutput, { tokenIds: [5], finishReason: null, stopReason: null, kvImport: { pulledBlocks: 1, cachedBlocks: 0, bytes: 64, ms: 0.5, fallback: 'lease gone' } }],
  ['stats request', decodeWireStatsRequest, { v: 1, model: 'm', version: 1 }],
  [
    'stats',
    decodeWireStats,
    {
      models: [
        {
          name: 'm',
          version: '1',
          last_inference: 1,
          inference_count: 1,
          execution_count: 1,
          inference_stats: { success: duration },
          response_stats: { '0': { success: duration } },
          batch_stats: [{ batch_size: 1, compute_input: duration, compute_infer: duration, compute_output: duration }],
          memory_usage: [{ type: 'CPU', id: 0, byte_size: 8 }],
        },
      ],
    },
  ],
  ['snapshot request', decodeWireSnapshotRequest, { v: 1, model: 'm' }],
  ['snapshot chunk', decodeWireSnapshotChunk, { last_event_id: 3, blocks: [{ block_hash: H, tokens_hash: H, parent_hash: null }], partial_blocks: 0, done: true }],
  [
    'KV events',
    decodeWireKvEvents,
    {
      v: 1,
      instanceId: 'i',
      model: 'm',
      events: [
        { event_id: 1, data: { type: 'stored', parent_hash: null, blocks: [{ block_hash: H, tokens_hash: H }] } },
        { event_id: 2, data: { type: 'removed', block_hashes: [H] } },
        { event_id: 3, data: { type: 'cleared' } },
      ],
    },
  ],
  [
    'load',
    decodeWireLoad,
    { v: 1, instanceId: 'i', model: 'm', ts: 1.5, numRunning: 1, numWaiting: 0, kvActiveBlocks: 1, kvTotalBlocks: 8, kvUsage: 0.125, prefixCacheQueries: 3, prefixCacheHits: 1 },
  ],
  [
    'forward pass',
    decodeWireForwardPass,
    { v: 1, instanceId: 'i', model: 'm', from: 1000, to: 2000, steps: [{ ts: 1500, wallMs: 2.5, prefillTokens: 40, decodeKvTokens: 0 }, { ts: 1600, wallMs: 1, prefillTokens: 0, decodeKvTokens: 41 }], dropped: 3 },
  ],
  [
    'request figures',
    decodeWireRequestFigures,
    {
      v: 1, routerId: 'r', model: 'm', from: 1000, to: 2000, requests: 2, heldRequests: 1,
      isl: { bounds: [16, 32], counts: [0, 2, 0] }, osl: { bounds: [16], counts: [1, 0] }, ttftMs: { bounds: [4, 8], counts: [0, 1, 1] }, itlMs: { bounds: [0.25], counts: [0, 5] },
    },
  ],
  ['tensor card metadata', decodeTensorCardMetadata, tensorCard],
  ['LLM card metadata', decodeLlmCardMetadata, { ...(tensorCard as object), engine: 'mocker', totalKvBlocks: 8, eosTokenIds: [2], created: 1, kvEvents: true }],
  ['LLM card metadata (disaggregated)', decodeLlmCardMetadata, { ...(tensorCard as object), engine: 'mocker', totalKvBlocks: 8, eosTokenIds: [2], created: 1, kvEvents: true, role: 'decode', kvTransfer: { address: '[::1]:7001', layout: LAYOUT } }],
];

/** Parameters as the front doors deliver them: any name (`__proto__` an own key, as http-json keeps it), bigints past 2^53. */
const parameters = fc
  .uniqueArray(
    fc.tuple(
      fuzzKey(),
      // JSON has no -0: a -0 parameter arrives as 0
      fc.oneof(fc.boolean(), fc.integer(), fc.double({ noNaN: true, noDefaultInfinity: true }).map((x) => x + 0), fc.string({ maxLength: 4 }), fc.bigInt({ min: -(2n ** 63n), max: 2n ** 64n - 1n })),
    ),
    { selector: ([k]) => k, maxLength: 4 },
  )
  .map((entries) => objectWith(entries as Array<[string, never]>) as Record<string, ParameterValue>);

const tensors = fc
  .array(fc.tuple(rawTensor(ELEMENT_SIZES), parameters), { maxLength: 3 })
  .map((list) => list.map(([t, p], i) => ({ name: `T${i}`, datatype: t.datatype as DataType, shape: t.shape, data: t.data, parameters: p })));

const inferRequest: fc.Arbitrary<InferRequest> = fc.record({
  id: fc.string({ maxLength: 4 }),
  modelName: fc.string({ minLength: 1, maxLength: 4 }),
  modelVersion: fc.option(fc.integer({ min: 1, max: 9 }), { nil: undefined }),
  parameters,
  inputs: tensors,
  outputs: fc.array(fc.record({ name: fc.string({ minLength: 1, maxLength: 3 }), parameters }), { maxLength: 2 }),
});

const inferResponse: fc.Arbitrary<InferResponse> = fc.record({
  id: fc.string({ maxLength: 4 }),
  modelName: fc.string({ minLength: 1, maxLength: 4 }),
  modelVersion: fc.constantFrom('1', '2'),
  parameters,
  outputs: tensors,
});

/** Tensor bytes compared bit for bit, parameters as their own entries (names like `__proto__` included). */
function comparable(v: InferRequest | InferResponse): unknown {
  const params = (p: Record<string, ParameterValue>) => Object.entries(p).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  const tensor = (t: InferRequest['inputs'][number]) => ({ ...t, data: Buffer.from(t.data).toString('hex'), parameters: params(t.parameters) });
  return 'inputs' in v
    ? { ...v, parameters: params(v.parameters), inputs: v.inputs.map(tensor), outputs: v.outputs.map((o) => ({ ...o, parameters: params(o.parameters) })) }
    : { ...v, parameters: params(v.parameters), outputs: v.outputs.map(tensor) };
}

describe('cluster wire decoders (fuzz)', () => {
  it.each(VALID)('%s: decodes the valid message, and decodes or refuses any JSON and any one-field corruption', (_what, decode, valid) => {
    parsesOrRefuses(() => decode(viaJson(valid)), []);
    fuzz(fc.oneof(fc.jsonValue({ maxDepth: 3 }), mutatedJson(fc.constant(valid))), (v) => {
      parsesOrRefuses(() => decode(JSON.parse(jsonText(v as JsonValue) || 'null')));
    }, { scale: 0.25 });
  });

  it.each(VALID)('%s: decodes or refuses the message with any one field nested 10^5 deep', (_what, decode, valid) => {
    for (const { text } of eachNodeReplaced(valid, nestedText(DEEP_NESTING))) {
      parsesOrRefuses(() => decode(JSON.parse(text)));
    }
  });

  it('reads a {"$bigint"} parameter of any length without a superlinear BigInt parse', () => {
    // BigInt's decimal parse is superlinear: a 3·10^6-digit value took a second on the event loop.
    fuzz(fc.integer({ min: 1, max: 200_000 }), (digits) => {
      const wire = { v: 1, id: '', modelName: 'm', modelVersion: null, parameters: { p: { $bigint: `9${'0'.repeat(digits - 1)}` } }, inputs: [], outputs: [] };
      const r = withBigIntLimit(() => parsesOrRefuses(() => inferRequestFromWire(decodeWireInferRequest(wire))));
      if (r.ok) expect(typeof r.value.parameters['p']).toBe('bigint');
    }, { scale: 0.1 });
  });

  it('decodes or refuses infer requests and responses with one field corrupted', () => {
    const corrupted = fc.oneof(
      inferRequest.map((r) => ['request', viaJson(inferRequestToWire(r)) as JsonValue] as const),
      inferResponse.map((r) => ['response', viaJson(inferResponseToWire(r)) as JsonValue] as const),
    ).chain(([kind, wire]) => mutatedJson(fc.constant(wire)).map((v) => [kind, v] as const));
    fuzz(corrupted, ([kind, v]) => {
      const value = JSON.parse(jsonText(v) || 'null') as unknown;
      parsesOrRefuses(() => (kind === 'request' ? decodeWireInferRequest(value) : decodeWireInferResponse(value)));
    });
  });
});

/** `payload` through a whole request-plane data frame on the wire (binary message format 2), marked final (the stream's end) or not. */
function viaMessage(payload: BinaryPayload, final = false): unknown {
  const frame = decodeResponseFrame(decodeMessage(encodeMessage(final ? { v: 1, type: 'data', seq: 0, payload, final: true } : { v: 1, type: 'data', seq: 0, payload })));
  if (frame.type !== 'data') throw new Error('not a data frame');
  expect(frame.final === true).toBe(final);
  return frame.payload;
}

/** A binary data frame by hand: `bodyText` as the payload's body (any text), `blobs` laid out as the format says. */
function binaryFrame(bodyText: string, blobs: readonly Uint8Array[]): Uint8Array {
  const h = Buffer.from(`{"v":1,"type":"data","seq":0,"payload":${bodyText}}`);
  const parts: Uint8Array[] = [Buffer.from([0, 0x53, 0x59, 2]), u32(h.length), u32(blobs.length), ...blobs.map((b) => u32(b.length)), h];
  let at = 12 + 4 * blobs.length + h.length;
  for (const b of blobs) {
    const pad = (8 - (at % 8)) % 8;
    parts.push(new Uint8Array(pad), b);
    at += pad + b.length;
  }
  return Buffer.concat(parts);
}
function u32(n: number): Uint8Array {
  const b = Buffer.alloc(4);
  b.writeUInt32LE(n);
  return b;
}

/** A binary message by hand: header JSON, blob lengths as given (lying ones too), `tail` bytes after the header. */
function handMade(header: string, lengths: readonly number[], tail: Uint8Array, count = lengths.length): Buffer {
  const h = Buffer.from(header);
  const out = Buffer.alloc(12 + 4 * lengths.length + h.length + tail.length);
  out.set([0, 0x53, 0x59, 2]);
  out.writeUInt32LE(h.length, 4);
  out.writeUInt32LE(count >>> 0, 8);
  lengths.forEach((n, i) => out.writeUInt32LE(n >>> 0, 12 + 4 * i));
  out.set(h, 12 + 4 * lengths.length);
  out.set(tail, 12 + 4 * lengths.length + h.length);
  return out;
}

describe('cluster binary payloads (fuzz)', () => {
  it('infer requests and responses survive a binary message exactly (tensor bytes bit for bit, blobs 8-aligned)', () => {
    fuzz(fc.tuple(inferRequest, inferResponse, fc.boolean()), ([request, response, endsStream]) => {
      const req = decodeWireInferRequest(viaMessage(inferRequestToBinary(request)));
      for (const t of req.inputs) expect(typeof t.data !== 'string' && t.data.byteOffset % 8).toBe(0);
      expect(comparable(inferRequestFromWire(req))).toEqual(comparable(request));
      const res = decodeWireInferResponse(viaMessage(inferResponseToBinary(response, true), endsStream));
      expect(res.final).toBe(true);
      expect(comparable(inferResponseFromWire(res))).toEqual(comparable(response));
    });
  });

  it('refuses a binary payload whose blobs do not match its tensors, or whose body carries base64 too', () => {
    fuzz(fc.tuple(inferRequest, fc.integer({ min: -2, max: 2 })), ([request, delta]) => {
      const p = inferRequestToBinary(request);
      const blobs = delta >= 0 ? [...p.blobs, ...Array.from({ length: delta }, () => new Uint8Array(1))] : p.blobs.slice(0, Math.max(0, p.blobs.length + delta));
      const r = parsesOrRefuses(() => decodeWireInferRequest(viaMessage(new BinaryPayload(p.body, blobs))));
      expect(r.ok).toBe(blobs.length === p.blobs.length);
    });
    const withData = new BinaryPayload({ v: 1, id: '', modelName: 'm', modelVersion: null, parameters: {}, inputs: [{ name: 'a', datatype: 'INT8', shape: [1], parameters: {}, data: 'AA==' }], outputs: [] }, [new Uint8Array(1)]);
    expect(parsesOrRefuses(() => decodeWireInferRequest(viaMessage(withData))).ok).toBe(false);
  });

  it('decodes or refuses binary infer payloads with one body field corrupted', () => {
    const corrupted = fc.oneof(
      inferRequest.map((r) => ['request', inferRequestToBinary(r)] as const),
      inferResponse.map((r) => ['response', inferResponseToBinary(r)] as const),
    ).chain(([kind, p]) => mutatedJson(fc.constant(viaJson(p.body) as JsonValue)).map((body) => [kind, binaryFrame(jsonText(body) || 'null', p.blobs)] as const));
    fuzz(corrupted, ([kind, bytes]) => {
      parsesOrRefuses(() => {
        const frame = decodeResponseFrame(decodeMessage(bytes));
        const payload = frame.type === 'data' ? frame.payload : null;
        return kind === 'request' ? decodeWireInferRequest(payload) : decodeWireInferResponse(payload);
      });
    });
  });

  it('refuses hostile binary headers (lengths past the frame, huge counts, trailing or missing bytes) with bounded memory', () => {
    const header = JSON.stringify({ v: 1, type: 'data', seq: 0, payload: null });
    const lengths = fc.array(fc.oneof(fc.nat(64), fc.constant(0xffffffff), fc.integer({ min: 0, max: 0xffffffff })), { maxLength: 6 });
    const count = fc.oneof(fc.constant(undefined), fc.constant(0xffffffff), fc.integer({ min: 0, max: 0xffffffff }), fc.constant(MAX_MESSAGE_BLOBS + 1));
    fuzz(fc.tuple(lengths, count, fc.uint8Array({ maxLength: 200 })), ([ls, n, tail]) => {
      const before = process.memoryUsage().arrayBuffers;
      const r = parsesOrRefuses(() => decodeMessage(handMade(header, ls, tail, n)));
      // nothing allocated beyond (a copy of) the message itself
      expect(process.memoryUsage().arrayBuffers - before).toBeLessThan(1 << 20);
      if (r.ok) expect(n === undefined || n === ls.length).toBe(true);
    });
    // a count that would need 16 GiB of lengths, in a 12-byte message
    expect(parsesOrRefuses(() => decodeMessage(handMade(header, [], new Uint8Array(0), 0xffffffff))).ok).toBe(false);
    // one blob claiming 4 GiB
    expect(parsesOrRefuses(() => decodeMessage(handMade(header, [0xffffffff], new Uint8Array(8)))).ok).toBe(false);
    // header length past the end
    const lying = handMade(header, [], new Uint8Array(0));
    lying.writeUInt32LE(0xfffffff0, 4);
    expect(parsesOrRefuses(() => decodeMessage(lying)).ok).toBe(false);
  });

  it('decodes or refuses any bytes, and a binary message with any byte changed', () => {
    // (a data frame marked final: the one message of a unary response to a caller that announced finalData)
    const valid = encodeMessage({ v: 1, type: 'data', seq: 0, payload: inferResponseToBinary({ id: 'x', modelName: 'm', modelVersion: '1', parameters: {}, outputs: [{ name: 'o', datatype: 'FP32', shape: [2], parameters: {}, data: new Uint8Array(8).fill(7) }] }), final: true });
    const mutated = fc.tuple(fc.nat(valid.length - 1), fc.nat(255)).map(([i, b]) => {
      const m = Uint8Array.from(valid);
      m[i] = b;
      return m;
    });
    const truncated = fc.nat(valid.length - 1).map((n) => valid.subarray(0, n));
    fuzz(fc.oneof(fc.uint8Array({ maxLength: 64 }).map((b) => Uint8Array.from([0, 0x53, 0x59, 2, ...b])), fc.uint8Array({ maxLength: 64 }), mutated, truncated), (bytes) => {
      parsesOrRefuses(() => {
        const frame = decodeResponseFrame(decodeMessage(bytes));
        return decodeWireInferResponse(frame.type === 'data' ? frame.payload : null);
      });
    });
  });

  it('refuses a binary message of another format clearly', () => {
    const bytes = Uint8Array.from(encodeMessage({ v: 1, type: 'data', seq: 0, payload: new BinaryPayload(null, []) }));
    bytes[3] = 3;
    const r = parsesOrRefuses(() => decodeMessage(bytes));
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.error.message).toMatch(/unsupported message format 3/);
  });
});

describe('cluster wire round trips (fuzz)', () => {
  it('infer requests and responses survive the wire exactly (tensor bytes bit for bit, any parameter name)', () => {
    fuzz(fc.tuple(inferRequest, inferResponse), ([request, response]) => {
      expect(comparable(inferRequestFromWire(decodeWireInferRequest(viaJson(inferRequestToWire(request)))))).toEqual(comparable(request));
      expect(comparable(inferResponseFromWire(decodeWireInferResponse(viaJson(inferResponseToWire(response, true)))))).toEqual(comparable(response));
    });
  });

  it('generate outputs survive the wire, -Infinity logprobs and top logprobs included', () => {
    const output = fc.record({
      tokenIds: fc.array(fc.nat(1000), { maxLength: 4 }),
      finishReason: fc.constantFrom(null, 'stop' as const, 'length' as const, 'abort' as const),
      stopReason: fc.option(fc.nat(1000), { nil: null }),
      // JSON has no -0 (a logprob of -0 and 0 are the same probability)
      logprobs: fc.array(fc.oneof(fc.double({ max: 0, noNaN: true }).map((x) => x + 0), fc.constant(-Infinity)), { maxLength: 4 }),
    });
    fuzz(output, (o) => {
      expect(generateOutputFromWire(decodeWireGenerateOutput(viaJson(generateOutputToWire(o))))).toEqual(o);
    });
    // top logprobs: one entry per token, each up to 20 alternatives
    const logprob = fc.oneof(fc.double({ max: 0, noNaN: true }).map((x) => x + 0), fc.constant(-Infinity));
    const top = fc.array(fc.tuple(fc.nat(1000), logprob), { maxLength: 20 }).map((pairs) => ({ tokenIds: pairs.map((p) => p[0]), logprobs: pairs.map((p) => p[1]) }));
    const withTop = fc.array(top, { maxLength: 4 }).map((topLogprobs) => ({
      tokenIds: topLogprobs.map((_, i) => i),
      finishReason: null,
      stopReason: null,
      topLogprobs,
    }));
    fuzz(withTop, (o) => {
      expect(generateOutputFromWire(decodeWireGenerateOutput(viaJson(generateOutputToWire(o))))).toEqual(o);
    });
  });

  it('disaggregation fields survive the wire: decode requests with handles, prefill outputs, import reports', () => {
    const hex = fc.stringMatching(/^[0-9a-f]{16}$/);
    const layout = fc.record({
      modelId: fc.string({ minLength: 1, maxLength: 8 }).filter((s) => !/[\u0000-\u001f\u007f]/.test(s)),
      engine: fc.constantFrom('llm' as const, 'mocker' as const),
      dtype: fc.constantFrom('fp32' as const, 'fp16' as const),
      numLayers: fc.integer({ min: 1, max: 100 }),
      numKvHeads: fc.integer({ min: 1, max: 64 }),
      headDim: fc.integer({ min: 1, max: 256 }),
      blockSize: fc.integer({ min: 1, max: 8 }),
      bytesPerBlock: fc.integer({ min: 1, max: 2 ** 40 }),
    });
    const address = fc.tuple(fc.constantFrom('w', 'a-b.c', '10.0.0.1', '[::1]', 'x_y'), fc.integer({ min: 1, max: 65535 })).map(([h, p]) => `${h}:${p}`);
    const prompt = fc.array(fc.nat(1000), { minLength: 1, maxLength: 40 });
    const request = fc
      .tuple(prompt, layout, address, hex, fc.string({ minLength: 1, maxLength: 12 }).filter((s) => !/[\u0000-\u001f\u007f]/.test(s)), fc.integer({ min: Number.MIN_SAFE_INTEGER, max: Number.MAX_SAFE_INTEGER }), fc.array(fc.nat(1000), { maxLength: 4 }))
      .chain(([p, l, a, inst, lease, seed, out]) =>
        fc.array(hex, { maxLength: Math.floor(p.length / l.blockSize) }).map((hashes) => ({
          model: 'm', requestId: 'r', promptTokenIds: p, sampling: { max_tokens: out.length + 1 }, outputTokenIds: out,
          kvTransfer: { address: a, instanceId: inst, leaseId: lease, blockHashes: hashes, layout: l, seed },
        })),
      );
    fuzz(request, (r) => {
      const wire = generateRequestToWire(r);
      const back = decodeWireGenerateRequest(viaJson(wire));
      expect(back).toEqual(wire);
      expect(back.outputTokenIds ?? []).toEqual(r.outputTokenIds);
      // as the prefill worker's final output: the same handle comes back
      const out = { tokenIds: [1], finishReason: 'length' as const, stopReason: null, usage: { promptTokens: r.promptTokenIds.length, completionTokens: 1, cachedTokens: 0 }, kvTransfer: r.kvTransfer };
      expect(decodeWireGenerateOutput(viaJson(out))).toEqual(out);
      const lease = { leaseId: r.kvTransfer.leaseId, blockHashes: r.kvTransfer.blockHashes, layout: r.kvTransfer.layout, seed: r.kvTransfer.seed, expiresAt: 0 };
      const made = generateOutputToWire({ ...out, kvTransfer: lease }, { transfer: { address: r.kvTransfer.address, instanceId: r.kvTransfer.instanceId } });
      expect(made).toEqual(out);
    });
  });

  it('request figures and forward-pass batches survive the wire; a decoded histogram always has one count more than bounds, ascending', () => {
    const histogram = fc
      .uniqueArray(fc.double({ min: 0, max: 1e9, noNaN: true }).map((x) => x + 0), { minLength: 1, maxLength: 20 })
      .chain((b) => fc.array(fc.nat(), { minLength: b.length + 1, maxLength: b.length + 1 }).map((counts) => ({ bounds: [...b].sort((x, y) => x - y), counts })));
    const figures = fc.record({
      v: fc.constant(1 as const),
      routerId: fc.constantFrom('r', 'router-1'),
      model: fc.constantFrom('m', 'a/b'),
      from: fc.integer({ min: 0, max: 1e12 }),
      to: fc.constant(1e12 + 1),
      requests: fc.nat(),
      heldRequests: fc.nat(),
      isl: histogram,
      osl: histogram,
      ttftMs: histogram,
      itlMs: histogram,
    });
    const step = fc.record({ ts: fc.integer(), wallMs: fc.double({ min: 0, max: 1e6, noNaN: true }).map((x) => x + 0), prefillTokens: fc.nat(), decodeKvTokens: fc.nat() });
    const batch = fc.record({ v: fc.constant(1 as const), instanceId: fc.constant('0000000000000001'), model: fc.constant('m'), from: fc.constant(0), to: fc.nat(), steps: fc.array(step, { maxLength: 8 }), dropped: fc.nat() });
    fuzz(fc.tuple(figures, batch), ([f, b]) => {
      expect(decodeWireRequestFigures(viaJson(f))).toEqual(f);
      expect(decodeWireForwardPass(viaJson(b))).toEqual(b);
    });
    fuzz(mutatedJson(fc.constant(VALID.find(([w]) => w === 'request figures')![2])), (v) => {
      const r = parsesOrRefuses(() => decodeWireRequestFigures(JSON.parse(jsonText(v) || 'null')));
      if (!r.ok) return;
      for (const h of [r.value.isl, r.value.osl, r.value.ttftMs, r.value.itlMs]) {
        expect(h.counts).toHaveLength(h.bounds.length + 1);
        h.bounds.forEach((x, i) => expect(i === 0 || x > h.bounds[i - 1]!).toBe(true));
      }
    });
  });

  it('keeps keys a peer chose as data: statistics kinds and card label outputs', () => {
    fuzz(fc.tuple(fuzzKey(), fuzzKey()), ([kind, output]) => {
      const stats = VALID.find(([w]) => w === 'stats')![2] as { models: Array<Record<string, JsonValue>> };
      const model = { ...stats.models[0]!, inference_stats: objectWith([[kind, duration]]), response_stats: objectWith([[kind, objectWith([[kind, duration]])]]) };
      const decoded = decodeWireStats(JSON.parse(JSON.stringify({ models: [model] }))).models[0]!;
      expect(Object.keys(decoded.inference_stats)).toEqual([kind]);
      expect(Object.keys(decoded.response_stats)).toEqual([kind]);
      expect(Object.keys(decoded.response_stats[kind] ?? {})).toEqual([kind]);
      const card = decodeTensorCardMetadata(JSON.parse(JSON.stringify({ ...(tensorCard as object), labels: objectWith([[kind, objectWith([[output, ['x']]])]]) })));
      expect(Object.keys(card.labels ?? {})).toEqual([kind]);
      expect(Object.entries(card.labels?.[kind] ?? {})).toEqual([[output, ['x']]]);
    });
  });
});
