import { describe, expect, it } from 'vitest';
import { invalidArgument } from '@switchyard/common';
import type { InferRequest, InferResponse } from '@switchyard/kserve';
import type { GenerateOutput } from '@switchyard/llm';
import {
  decodeLlmCardMetadata,
  decodeTensorCardMetadata,
  decodeWireGenerateOutput,
  decodeWireGenerateRequest,
  decodeWireInferRequest,
  decodeWireInferResponse,
  decodeWireKvEvents,
  decodeWireForwardPass,
  decodeWireLoad,
  decodeWirePlannerDecision,
  decodeWireRequestFigures,
  decodeWireSnapshotChunk,
  decodeWireSnapshotRequest,
  decodeWireStats,
  decodeWireStatsRequest,
  generateOutputFromWire,
  generateOutputToWire,
  generateRequestToWire,
  inferErrorFromWire,
  inferErrorToWire,
  inferRequestFromWire,
  inferRequestToWire,
  inferResponseFromWire,
  inferResponseToWire,
  MAX_WIRE_CONTEXT_TOKENS,
  MAX_WIRE_ID_LENGTH,
} from './wire-codec.js';
import { MAX_WIRE_FORWARD_PASS_STEPS, MAX_WIRE_HISTOGRAM_BOUNDS } from './protocols.js';

/** Through JSON text, as the request and event planes carry it. */
const viaJson = (v: unknown): unknown => JSON.parse(JSON.stringify(v));

function expectInvalid(f: () => unknown, message: RegExp): void {
  try {
    f();
  } catch (e) {
    expect((e as { code?: string }).code).toBe('invalid_argument');
    expect((e as Error).message).toMatch(message);
    return;
  }
  throw new Error('expected invalid_argument');
}

describe('infer codecs', () => {
  const bytes = new Uint8Array([0, 1, 2, 250, 255, 7, 8, 9]);
  const request: InferRequest = {
    id: 'req-1',
    modelName: 'add_sub',
    modelVersion: 3,
    parameters: { sequence_id: 2n ** 63n - 1n, priority: 2, flag: true, note: 'x' },
    // a view into a larger buffer: only the view's bytes may travel
    inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1, 1], data: bytes.subarray(2, 6), parameters: {} }],
    outputs: [{ name: 'OUTPUT0', parameters: { binary_data: true } }],
  };

  it('round-trips a request through JSON, bigint parameters and tensor bytes included', () => {
    const back = inferRequestFromWire(decodeWireInferRequest(viaJson(inferRequestToWire(request))));
    expect(back).toEqual({ ...request, inputs: [{ ...request.inputs[0], data: new Uint8Array([2, 250, 255, 7]) }] });
    expect(back.parameters['sequence_id']).toBe(2n ** 63n - 1n);
    expect(back.inputs[0]!.data.constructor).toBe(Uint8Array);
  });

  it('keeps a parameter named __proto__ as a parameter (found by wire-codec.fuzz.test.ts)', () => {
    // http-json keeps `"__proto__"` as an own key; the wire used to set it as the prototype and drop it
    const parameters = JSON.parse('{"__proto__": 5, "n": 1}') as InferRequest['parameters'];
    const back = inferRequestFromWire(decodeWireInferRequest(viaJson(inferRequestToWire({ ...request, parameters }))));
    expect(Object.entries(back.parameters)).toEqual([['__proto__', 5], ['n', 1]]);
    const wire = JSON.parse('{"v":1,"id":"","modelName":"m","modelVersion":null,"parameters":{"__proto__":{"$bigint":"1"}},"inputs":[],"outputs":[]}');
    expect(Object.entries(inferRequestFromWire(decodeWireInferRequest(wire)).parameters)).toEqual([['__proto__', 1n]]);
  });

  it('refuses a $bigint parameter longer than 20 digits before parsing it (found by wire-codec.fuzz.test.ts)', () => {
    const wire = (digits: string) => ({ v: 1, id: '', modelName: 'm', modelVersion: null, parameters: { p: { $bigint: digits } }, inputs: [], outputs: [] });
    expect(inferRequestFromWire(decodeWireInferRequest(wire('18446744073709551615'))).parameters['p']).toBe(18446744073709551615n);
    expectInvalid(() => decodeWireInferRequest(wire('184467440737095516150')), /parameter 'p' must be/);
    expectInvalid(() => decodeWireInferRequest(wire(`1${'0'.repeat(1_000_000)}`)), /parameter 'p' must be/);
  });

  it('maps an absent version to null and back', () => {
    const wire = inferRequestToWire({ ...request, modelVersion: undefined });
    expect(wire.modelVersion).toBeNull();
    expect(inferRequestFromWire(decodeWireInferRequest(viaJson(wire))).modelVersion).toBeUndefined();
  });

  it('round-trips a response', () => {
    const response: InferResponse = {
      id: 'r',
      modelName: 'm',
      modelVersion: '1',
      parameters: { triton_final_response: false, big: -(2n ** 62n) * 4n },
      outputs: [{ name: 'OUT', datatype: 'BYTES', shape: [1], data: new Uint8Array([3, 0, 0, 0, 97, 98, 99]), parameters: { x: 1 } }],
    };
    expect(inferResponseFromWire(decodeWireInferResponse(viaJson(inferResponseToWire(response))))).toEqual(response);
  });

  it('round-trips a non-final error response of a decoupled stream', () => {
    const wire = decodeWireInferResponse(viaJson(inferErrorToWire({ id: 'r', modelName: 'm' }, invalidArgument('element 2 is bad'))));
    expect(wire).toMatchObject({ id: 'r', modelName: 'm', outputs: [], error: { code: 'invalid_argument', message: 'element 2 is bad' } });
    expect(inferErrorFromWire(wire)).toMatchObject({ code: 'invalid_argument', message: 'element 2 is bad' });
    expect(inferErrorFromWire(decodeWireInferResponse(viaJson(inferResponseToWire({ id: 'r', modelName: 'm', modelVersion: '1', parameters: {}, outputs: [] }))))).toBeUndefined();
    const base = viaJson(inferErrorToWire({ id: 'r', modelName: 'm' }, invalidArgument('x'))) as Record<string, unknown>;
    expect(decodeWireInferResponse({ ...base, error: { code: 'from_the_future', message: 'x' } }).error!.code).toBe('unknown');
    expectInvalid(() => decodeWireInferResponse({ ...base, final: true }), /never final/);
    expectInvalid(() => decodeWireInferResponse({ ...base, error: { code: 'internal' } }), /message/);
    expectInvalid(() => decodeWireInferResponse({ ...base, error: 'bad' }), /error/);
  });

  it('rejects malformed requests with invalid_argument', () => {
    const wire = viaJson(inferRequestToWire(request)) as Record<string, unknown>;
    expectInvalid(() => decodeWireInferRequest({ ...wire, v: 2 }), /version/);
    expectInvalid(() => decodeWireInferRequest({ ...wire, modelVersion: 0 }), /modelVersion/);
    expectInvalid(() => decodeWireInferRequest({ ...wire, parameters: { p: { $bigint: '1.5' } } }), /parameter 'p'/);
    expectInvalid(() => decodeWireInferRequest({ ...wire, parameters: { p: [1] } }), /parameter 'p'/);
    const input = (wire['inputs'] as Record<string, unknown>[])[0]!;
    expectInvalid(() => decodeWireInferRequest({ ...wire, inputs: [{ ...input, data: 'not base64!' }] }), /base64/);
    expectInvalid(() => decodeWireInferRequest({ ...wire, inputs: [{ ...input, datatype: 'INT3' }] }), /datatype/);
    expectInvalid(() => decodeWireInferRequest({ ...wire, inputs: [{ ...input, shape: [-1] }] }), /All input dimensions should be specified for input 'INPUT0'/);
    expectInvalid(() => decodeWireInferRequest({ ...wire, modelName: '' }), /modelName/);
  });
});

describe('generate codecs', () => {
  it('decodes a request and rejects bad token ids', () => {
    const req = { v: 1, model: 'mock_llm', requestId: 'a', promptTokenIds: [1, 2, 3], sampling: { max_tokens: 4 }, prefillOnly: true };
    expect(decodeWireGenerateRequest(viaJson(req))).toEqual(req);
    expect(decodeWireGenerateRequest({ ...req, prefillOnly: undefined }).prefillOnly).toBeUndefined();
    expectInvalid(() => decodeWireGenerateRequest({ ...req, promptTokenIds: [1, -2] }), /promptTokenIds\[1\]/);
    expectInvalid(() => decodeWireGenerateRequest({ ...req, sampling: 3 }), /sampling/);
    expectInvalid(() => decodeWireGenerateRequest({ ...req, requestId: 5 }), /requestId/);
  });

  it('round-trips outputs, -Infinity logprobs included', () => {
    const outputs: GenerateOutput[] = [
      { tokenIds: [5, 6], finishReason: null, stopReason: null, logprobs: [-0.5, -Infinity] },
      { tokenIds: [], finishReason: 'stop', stopReason: 2, usage: { promptTokens: 3, completionTokens: 2, cachedTokens: 0 } },
    ];
    for (const o of outputs) expect(generateOutputFromWire(decodeWireGenerateOutput(viaJson(generateOutputToWire(o))))).toEqual(o);
    expectInvalid(() => decodeWireGenerateOutput({ tokenIds: [], finishReason: 'eos', stopReason: null }), /finishReason/);
    expectInvalid(() => decodeWireGenerateOutput({ tokenIds: [], finishReason: null, stopReason: null, usage: { promptTokens: 1 } }), /completionTokens/);
  });

  it('round-trips top logprobs, one entry per token, and refuses malformed ones', () => {
    const o: GenerateOutput = {
      tokenIds: [5, 6],
      finishReason: null,
      stopReason: null,
      logprobs: [-0.5, -1],
      topLogprobs: [
        { tokenIds: [5, 9], logprobs: [-0.5, -Infinity] },
        { tokenIds: [1, 6], logprobs: [-0.1, -1] },
      ],
    };
    expect(generateOutputFromWire(decodeWireGenerateOutput(viaJson(generateOutputToWire(o))))).toEqual(o);
    const base = { tokenIds: [5], finishReason: null, stopReason: null };
    expectInvalid(() => decodeWireGenerateOutput({ ...base, topLogprobs: [] }), /one entry per token/);
    expectInvalid(() => decodeWireGenerateOutput({ ...base, topLogprobs: [{ tokenIds: [1, 2], logprobs: [-1] }] }), /same length/);
    expectInvalid(() => decodeWireGenerateOutput({ ...base, topLogprobs: [{ tokenIds: [-1], logprobs: [-1] }] }), /tokenIds\[0\]/);
    expectInvalid(() => decodeWireGenerateOutput({ ...base, topLogprobs: [{ tokenIds: [1], logprobs: ['x'] }] }), /logprobs\[0\]/);
    const many = Array.from({ length: 21 }, (_, i) => i);
    expectInvalid(() => decodeWireGenerateOutput({ ...base, topLogprobs: [{ tokenIds: many, logprobs: many.map(() => -1) }] }), /at most 20/);
  });
});

describe('disaggregation fields', () => {
  const h = (n: number) => n.toString(16).padStart(16, '0');
  const layout = { modelId: 'sha256:abc', engine: 'mocker', dtype: 'fp16', numLayers: 2, numKvHeads: 4, headDim: 8, blockSize: 4, bytesPerBlock: 1024 } as const;
  const handle = { address: 'worker-1.local:7001', instanceId: h(0xab), leaseId: 'lease-1', blockHashes: [h(1), h(2)], layout, seed: -7 };
  const decodeReq = { v: 1, model: 'm', requestId: 'r', promptTokenIds: [1, 2, 3, 4, 5, 6, 7, 8, 9], sampling: { max_tokens: 5 }, outputTokenIds: [42], kvTransfer: handle };

  it('carries outputTokenIds and a transfer handle on a decode request, both ways', () => {
    const wire = generateRequestToWire({ model: 'm', requestId: 'r', promptTokenIds: decodeReq.promptTokenIds, sampling: { max_tokens: 5 }, outputTokenIds: [42], kvTransfer: handle });
    expect(wire).toEqual(decodeReq);
    expect(decodeWireGenerateRequest(viaJson(wire))).toEqual(decodeReq);
    // absent, false and empty stay off the wire
    expect(generateRequestToWire({ model: 'm', requestId: 'r', promptTokenIds: [1], sampling: {}, prefillOnly: false, outputTokenIds: [] })).toEqual({ v: 1, model: 'm', requestId: 'r', promptTokenIds: [1], sampling: {} });
  });

  it('refuses bad outputTokenIds', () => {
    expectInvalid(() => decodeWireGenerateRequest({ ...decodeReq, outputTokenIds: [1, -1] }), /outputTokenIds\[1\]/);
    expectInvalid(() => decodeWireGenerateRequest({ ...decodeReq, outputTokenIds: [1.5] }), /outputTokenIds\[0\]/);
    expectInvalid(() => decodeWireGenerateRequest({ ...decodeReq, outputTokenIds: 'x' }), /outputTokenIds/);
    expectInvalid(() => decodeWireGenerateRequest({ ...decodeReq, outputTokenIds: [1, 2, 3, 4, 5, 6] }), /more than sampling.max_tokens \(5\)/);
    // the length bound is checked before a single element is read
    const huge: number[] = [];
    huge.length = MAX_WIRE_CONTEXT_TOKENS; // sparse, nothing allocated: reading its elements would fail the check
    expectInvalid(() => decodeWireGenerateRequest({ ...decodeReq, kvTransfer: undefined, sampling: {}, outputTokenIds: huge }), /above the limit of 16777216 tokens/);
  });

  it('refuses a transfer handle that is malformed, unbounded or out of place', () => {
    const bad = (patch: object, message: RegExp) => expectInvalid(() => decodeWireGenerateRequest({ ...decodeReq, kvTransfer: { ...handle, ...patch } }), message);
    bad({ address: 'no-port' }, /address/);
    bad({ address: 'host:0' }, /address/);
    bad({ address: 'host:65536' }, /address/);
    bad({ address: 'host:+80' }, /address/);
    bad({ address: 'a b:80' }, /address/);
    bad({ address: `${'a'.repeat(300)}:80` }, /address/);
    bad({ address: 7001 }, /address/);
    bad({ instanceId: 'i' }, /instanceId/);
    bad({ leaseId: '' }, /leaseId/);
    bad({ leaseId: 'x'.repeat(257) }, /leaseId/);
    bad({ leaseId: 'a\nb' }, /leaseId/);
    bad({ blockHashes: [h(1), 'XYZ'] }, /blockHashes\[1\]/);
    bad({ blockHashes: [h(1), h(2), h(3)] }, /'blockHashes' is 3 blocks, above the limit of 2 blocks/); // 9 tokens = 2 full blocks of 4
    bad({ seed: 1.5 }, /seed/);
    bad({ seed: 2 ** 53 }, /seed/);
    bad({ layout: { ...layout, dtype: 'bf16' } }, /dtype/);
    bad({ layout: { ...layout, engine: 'vllm' } }, /engine/);
    bad({ layout: { ...layout, blockSize: 0 } }, /blockSize/);
    bad({ layout: { ...layout, numLayers: -1 } }, /numLayers/);
    bad({ layout: { ...layout, bytesPerBlock: 1e300 } }, /bytesPerBlock/);
    bad({ layout: { ...layout, modelId: '' } }, /modelId/);
    expectInvalid(() => decodeWireGenerateRequest({ ...decodeReq, prefillOnly: true }), /prefill-only request cannot carry 'kvTransfer'/);
    // IPv6 and IPv4 addresses are fine
    for (const address of ['[::1]:9000', '10.0.0.7:1', 'w_1:65535']) expect(decodeWireGenerateRequest({ ...decodeReq, kvTransfer: { ...handle, address } }).kvTransfer!.address).toBe(address);
  });

  it('turns the engine lease into a handle on the prefill output, and the import report on the decode output', () => {
    const lease = { leaseId: 'lease-1', blockHashes: [h(1), h(2)], layout, seed: -7, expiresAt: 123 };
    const prefill: GenerateOutput = { tokenIds: [42], finishReason: 'length', stopReason: null, usage: { promptTokens: 9, completionTokens: 1, cachedTokens: 4 }, kvTransfer: lease };
    const wire = generateOutputToWire(prefill, { transfer: { address: handle.address, instanceId: handle.instanceId } });
    expect(wire.kvTransfer).toEqual(handle);
    expect(decodeWireGenerateOutput(viaJson(wire))).toEqual(wire);
    // no transfer address: the lease stays off the wire; the caller's view never has the handle
    expect(generateOutputToWire(prefill).kvTransfer).toBeUndefined();
    expect(generateOutputFromWire(decodeWireGenerateOutput(viaJson(wire)))).toEqual({ tokenIds: [42], finishReason: 'length', stopReason: null, usage: prefill.usage });
    const kvImport = { pulledBlocks: 2, cachedBlocks: 0, bytes: 2048, ms: 1.25, fallback: 'KV layout mismatch: dtype is fp16 on the prefill worker and fp32 here' };
    const first = generateOutputToWire({ tokenIds: [7], finishReason: null, stopReason: null }, { kvImport });
    expect(decodeWireGenerateOutput(viaJson(first))).toEqual({ tokenIds: [7], finishReason: null, stopReason: null, kvImport });
  });

  it('refuses a handle on the wrong output and bad import reports', () => {
    const out = { tokenIds: [42], finishReason: 'length', stopReason: null, usage: { promptTokens: 9, completionTokens: 1, cachedTokens: 0 }, kvTransfer: handle };
    expect(decodeWireGenerateOutput(out).kvTransfer).toEqual(handle);
    expectInvalid(() => decodeWireGenerateOutput({ ...out, finishReason: 'stop' }), /only on a final output that finished with 'length'/);
    expectInvalid(() => decodeWireGenerateOutput({ ...out, finishReason: null }), /only on a final output/);
    expectInvalid(() => decodeWireGenerateOutput({ ...out, usage: { ...out.usage, promptTokens: 7 } }), /above the limit of 1 blocks/);
    const rep = { pulledBlocks: 1, cachedBlocks: 0, bytes: 10, ms: 2 };
    const o = { tokenIds: [1], finishReason: null, stopReason: null };
    expect(decodeWireGenerateOutput({ ...o, kvImport: rep }).kvImport).toEqual(rep);
    expectInvalid(() => decodeWireGenerateOutput({ ...o, kvImport: { ...rep, ms: -1 } }), /ms/);
    expectInvalid(() => decodeWireGenerateOutput({ ...o, kvImport: { ...rep, pulledBlocks: 0.5 } }), /pulledBlocks/);
    expectInvalid(() => decodeWireGenerateOutput({ ...o, kvImport: { ...rep, fallback: 'x'.repeat(5000) } }), /fallback/);
    expectInvalid(() => decodeWireGenerateOutput({ ...o, kvImport: { ...rep, fallback: 3 } }), /fallback/);
  });

  it('decodes the role and the transfer address on LLM cards', () => {
    const meta = {
      modelMetadata: { name: 'm' }, modelConfig: { name: 'm' }, versions: ['1'], decoupled: true,
      engine: 'llm', totalKvBlocks: 64, eosTokenIds: [2], created: 1700000000, kvEvents: true,
      role: 'prefill', kvTransfer: { address: '10.1.2.3:7001', layout },
    };
    expect(decodeLlmCardMetadata(viaJson(meta))).toEqual(meta);
    const { role: _r, kvTransfer: _t, ...plain } = meta;
    expect(decodeLlmCardMetadata(plain)).toEqual(plain);
    expectInvalid(() => decodeLlmCardMetadata({ ...meta, role: 'both' }), /role/);
    expectInvalid(() => decodeLlmCardMetadata({ ...meta, kvTransfer: { address: ':80', layout } }), /address/);
    expectInvalid(() => decodeLlmCardMetadata({ ...meta, kvTransfer: { address: 'h:80', layout: { ...layout, headDim: 0 } } }), /headDim/);
  });

  it("decodes an LLM card's chat output parsing: known parser names only", () => {
    const meta = {
      modelMetadata: { name: 'm' }, modelConfig: { name: 'm' }, versions: ['1'], decoupled: true,
      engine: 'llm', totalKvBlocks: 64, eosTokenIds: [2], created: 1700000000, kvEvents: true,
      outputParsing: { toolCallParser: 'hermes', enableAutoToolChoice: true, reasoningParser: 'qwen3' },
    };
    expect(decodeLlmCardMetadata(viaJson(meta))).toEqual(meta);
    // the ids the model samples from (narrower than its tokenizer for Gemma 3)
    expect(decodeLlmCardMetadata(viaJson({ ...meta, vocabSize: 262144 }))).toEqual({ ...meta, vocabSize: 262144 });
    expectInvalid(() => decodeLlmCardMetadata({ ...meta, vocabSize: 0 }), /vocabSize/);
    expectInvalid(() => decodeLlmCardMetadata({ ...meta, vocabSize: '262144' }), /vocabSize/);
    expectInvalid(() => decodeLlmCardMetadata({ ...meta, outputParsing: { toolCallParser: 'x' } }), /unknown tool call parser 'x'/);
    expectInvalid(() => decodeLlmCardMetadata({ ...meta, outputParsing: { reasoningParser: 1 } }), /reasoningParser/);
    expectInvalid(() => decodeLlmCardMetadata({ ...meta, outputParsing: { enableAutoToolChoice: 'yes' } }), /enableAutoToolChoice/);
    expectInvalid(() => decodeLlmCardMetadata({ ...meta, outputParsing: [] }), /outputParsing/);
  });
});

describe('snapshot, events and metadata', () => {
  const h = (n: number) => n.toString(16).padStart(16, '0');

  it('decodes snapshot requests and chunks', () => {
    expect(decodeWireSnapshotRequest({ v: 1, model: 'm' })).toEqual({ v: 1, model: 'm' });
    const chunk = { last_event_id: -1, blocks: [{ block_hash: h(1), tokens_hash: h(2), parent_hash: null }], partial_blocks: 0, done: true };
    expect(decodeWireSnapshotChunk(viaJson(chunk))).toEqual(chunk);
    expectInvalid(() => decodeWireSnapshotChunk({ ...chunk, blocks: [{ block_hash: 'xyz', tokens_hash: h(2), parent_hash: null }] }), /block_hash/);
    expectInvalid(() => decodeWireSnapshotChunk({ ...chunk, done: 'yes' }), /done/);
  });

  it('decodes KV event batches through the llm decoder', () => {
    const batch = {
      v: 1,
      instanceId: '00000000000000ab',
      model: 'm',
      events: [
        { event_id: 0, data: { type: 'stored', parent_hash: null, blocks: [{ block_hash: h(1), tokens_hash: h(2) }] } },
        { event_id: 1, data: { type: 'removed', block_hashes: [h(1)] } },
      ],
    };
    expect(decodeWireKvEvents(viaJson(batch))).toEqual(batch);
    expectInvalid(() => decodeWireKvEvents({ ...batch, events: [{ event_id: -1, data: { type: 'cleared' } }] }), /event_id/);
  });

  it('decodes load samples', () => {
    const load = {
      v: 1, instanceId: 'i', model: 'm', ts: 1, numRunning: 1, numWaiting: 0, kvActiveBlocks: 2, kvTotalBlocks: 8, kvUsage: 0.25,
      prefixCacheQueries: 10, prefixCacheHits: 4,
    };
    expect(decodeWireLoad(load)).toEqual(load);
    expectInvalid(() => decodeWireLoad({ ...load, numWaiting: 0.5 }), /numWaiting/);
    expectInvalid(() => decodeWireLoad({ ...load, instanceId: 'i'.repeat(MAX_WIRE_ID_LENGTH + 1) }), /instanceId/);
  });

  it('decodes planner decisions: known pools and directions, bounded ids and reason', () => {
    const d = { v: 1, plannerId: 'host-1-abc', model: 'org/m', ts: 5, pool: 'decode', from: 1, to: 2, direction: 'up', reason: 'kv_usage_high', dryRun: false };
    expect(decodeWirePlannerDecision(viaJson(d))).toEqual(d);
    expectInvalid(() => decodeWirePlannerDecision({ ...d, v: 2 }), /version/);
    expectInvalid(() => decodeWirePlannerDecision({ ...d, pool: 'all' }), /pool/);
    expectInvalid(() => decodeWirePlannerDecision({ ...d, direction: 'sideways' }), /direction/);
    expectInvalid(() => decodeWirePlannerDecision({ ...d, from: -1 }), /from/);
    expectInvalid(() => decodeWirePlannerDecision({ ...d, to: 1.5 }), /'to'/);
    expectInvalid(() => decodeWirePlannerDecision({ ...d, reason: 'r'.repeat(MAX_WIRE_ID_LENGTH + 1) }), /reason/);
    expectInvalid(() => decodeWirePlannerDecision({ ...d, reason: 'a\nb' }), /reason/);
    expectInvalid(() => decodeWirePlannerDecision({ ...d, dryRun: 'no' }), /dryRun/);
    expectInvalid(() => decodeWirePlannerDecision({ ...d, ts: Number.NaN }), /ts/);
  });

  it('decodes forward-pass batches within their limits', () => {
    const batch = { v: 1, instanceId: 'i', model: 'm', from: 1, to: 2, steps: [{ ts: 1.5, wallMs: 3, prefillTokens: 16, decodeKvTokens: 0 }], dropped: 0 };
    expect(decodeWireForwardPass(viaJson(batch))).toEqual(batch);
    expectInvalid(() => decodeWireForwardPass({ ...batch, to: 0 }), /'to'/);
    expectInvalid(() => decodeWireForwardPass({ ...batch, dropped: -1 }), /dropped/);
    expectInvalid(() => decodeWireForwardPass({ ...batch, steps: [{ ...batch.steps[0], wallMs: -1 }] }), /wallMs/);
    expectInvalid(() => decodeWireForwardPass({ ...batch, steps: new Array(MAX_WIRE_FORWARD_PASS_STEPS + 1).fill(batch.steps[0]) }), /at most/);
    expectInvalid(() => decodeWireForwardPass({ ...batch, model: 'x'.repeat(MAX_WIRE_ID_LENGTH + 1) }), /model/);
  });

  it('decodes request figures; histograms have ascending bounds and one count more', () => {
    const h = { bounds: [1, 2], counts: [0, 3, 1] };
    const figures = { v: 1, routerId: 'r', model: 'm', from: 1, to: 2, requests: 4, heldRequests: 0, isl: h, osl: h, ttftMs: h, itlMs: h };
    expect(decodeWireRequestFigures(viaJson(figures))).toEqual(figures);
    expectInvalid(() => decodeWireRequestFigures({ ...figures, isl: { bounds: [2, 1], counts: [0, 0, 0] } }), /ascend/);
    expectInvalid(() => decodeWireRequestFigures({ ...figures, osl: { bounds: [1, 2], counts: [0, 0] } }), /one entry more/);
    expectInvalid(() => decodeWireRequestFigures({ ...figures, ttftMs: { bounds: [], counts: [0] } }), /bounds/);
    expectInvalid(() => decodeWireRequestFigures({ ...figures, itlMs: { bounds: [1], counts: [0, -1] } }), /counts/);
    expectInvalid(() => decodeWireRequestFigures({ ...figures, itlMs: { bounds: new Array(MAX_WIRE_HISTOGRAM_BOUNDS + 1).fill(0).map((_, i) => i), counts: [] } }), /bounds/);
    expectInvalid(() => decodeWireRequestFigures({ ...figures, requests: 0.5 }), /requests/);
  });

  it('decodes LLM card metadata', () => {
    const meta = {
      modelMetadata: { name: 'm' }, modelConfig: { name: 'm' }, versions: ['1'], decoupled: true,
      engine: 'mocker', totalKvBlocks: 64, eosTokenIds: [2], created: 1700000000, kvEvents: true,
    };
    expect(decodeLlmCardMetadata(viaJson(meta))).toEqual(meta);
    expectInvalid(() => decodeLlmCardMetadata({ ...meta, engine: 'vllm' }), /engine/);
    expectInvalid(() => decodeLlmCardMetadata({ ...meta, versions: [1] }), /versions\[0\]/);
  });

  it('decodes tensor card metadata with classification labels per version', () => {
    const meta = { modelMetadata: { name: 'm' }, modelConfig: { name: 'm' }, versions: ['1'], decoupled: false, labels: { '1': { OUT: ['cat', '', 'dog'] } } };
    expect(decodeTensorCardMetadata(viaJson(meta))).toEqual(meta);
    const { labels: _labels, ...without } = meta;
    expect(decodeTensorCardMetadata(without)).toEqual(without);
    expectInvalid(() => decodeTensorCardMetadata({ ...meta, labels: { '1': { OUT: [1] } } }), /labels\['1'\]: 'OUT\[0\]'/);
    expectInvalid(() => decodeTensorCardMetadata({ ...meta, labels: { '1': ['cat'] } }), /labels\['1'\]/);
  });

  it('decodes stats requests and answers', () => {
    expect(decodeWireStatsRequest({ v: 1, model: null, version: null })).toEqual({ v: 1, model: null, version: null });
    expect(decodeWireStatsRequest({ v: 1, model: 'm', version: 2 })).toEqual({ v: 1, model: 'm', version: 2 });
    expectInvalid(() => decodeWireStatsRequest({ v: 1, model: 'm', version: 0 }), /version/);
    expectInvalid(() => decodeWireStatsRequest({ v: 1, model: '', version: null }), /model/);
    const d = { count: 1, ns: 5 };
    const one = {
      name: 'm', version: '1', last_inference: 7, inference_count: 1, execution_count: 1,
      inference_stats: { success: d, fail: d }, response_stats: { '0': { success: d } },
      batch_stats: [{ batch_size: 1, compute_input: d, compute_infer: d, compute_output: d }], memory_usage: [],
    };
    expect(decodeWireStats(viaJson({ models: [one] }))).toEqual({ models: [one] });
    expectInvalid(() => decodeWireStats({ models: [{ ...one, inference_stats: { success: { count: -1, ns: 0 } } }] }), /inference_stats.success/);
    expectInvalid(() => decodeWireStats({ models: [{ ...one, batch_stats: [{ batch_size: 1 }] }] }), /batch_stats\[0\]/);
  });

  it('keeps __proto__ as a key in statistics and labels (found by wire-codec.fuzz.test.ts)', () => {
    const d = { count: 1, ns: 5 };
    const stats = JSON.parse(
      '{"models":[{"name":"m","version":"1","last_inference":0,"inference_count":0,"execution_count":0,"inference_stats":{"__proto__":{"count":1,"ns":5}},"response_stats":{"__proto__":{"__proto__":{"count":1,"ns":5}}},"batch_stats":[],"memory_usage":[]}]}',
    );
    const m = decodeWireStats(stats).models[0]!;
    expect(Object.entries(m.inference_stats)).toEqual([['__proto__', d]]);
    expect(Object.entries(m.response_stats).map(([k, v]) => [k, Object.entries(v)])).toEqual([['__proto__', [['__proto__', d]]]]);
    const card = decodeTensorCardMetadata(JSON.parse('{"modelMetadata":{},"modelConfig":{},"versions":[],"decoupled":false,"labels":{"__proto__":{"__proto__":["a"]}}}'));
    expect(Object.entries(card.labels!).map(([k, v]) => [k, Object.entries(v)])).toEqual([['__proto__', [['__proto__', ['a']]]]]);
  });
});
