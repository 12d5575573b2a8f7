import { describe, expect, it } from 'vitest';
import { endpointAddress, instanceAddress, instanceSubject, modelName } from './addressing.js';
import {
  type InstanceInfo,
  type ModelCard,
  type ResponseFrame,
  decodeCancelMessage,
  decodeInstanceInfo,
  decodeJson,
  decodeModelCard,
  decodeRequestEnvelope,
  decodeMessage,
  decodeResponseFrame,
  encodeJson,
  encodeMessage,
  BinaryPayload,
} from './protocols.js';

const inst = instanceAddress(endpointAddress('prod', 'backend', 'generate'), '00000000000000ff');
const roundTrip = (v: unknown): unknown => decodeJson(encodeJson(v));

describe('discovery records', () => {
  it('round-trips instance info', () => {
    const info: InstanceInfo = { v: 1, ...inst, subject: instanceSubject(inst), metadata: { engine: 'mocker', rank: 0 } };
    expect(decodeInstanceInfo(roundTrip(info))).toEqual(info);
  });
  it('rejects bad instance info with invalid_argument', () => {
    const info = { v: 1, ...inst, subject: instanceSubject(inst), metadata: {} };
    expect(() => decodeInstanceInfo({ ...info, namespace: 'Bad.Name' })).toThrow(/instance info: invalid namespace/);
    expect(() => decodeInstanceInfo({ ...info, v: 2 })).toThrow(/unsupported version/);
    expect(() => decodeInstanceInfo({ ...info, subject: '' })).toThrow(/subject/);
    expect(() => decodeInstanceInfo([])).toThrow(/expected an object/);
  });
  it('round-trips llm and tensor model cards', () => {
    const llm: ModelCard = {
      v: 1,
      model: modelName('Qwen/Qwen2.5-0.5B-Instruct'),
      kind: 'llm',
      namespace: inst.namespace,
      component: inst.component,
      endpoint: inst.endpoint,
      instanceId: inst.instanceId,
      tokenizer: { type: 'inline', files: { 'tokenizer.json': '{}' } },
      kvBlockSize: 16,
      contextLength: 4096,
      metadata: {},
    };
    expect(decodeModelCard(roundTrip(llm))).toEqual(llm);
    const tensor: ModelCard = { ...llm, kind: 'tensor', model: modelName('densenet_onnx') };
    delete (tensor as { tokenizer?: unknown }).tokenizer;
    delete (tensor as { kvBlockSize?: unknown }).kvBlockSize;
    delete (tensor as { contextLength?: unknown }).contextLength;
    expect(decodeModelCard(roundTrip(tensor))).toEqual(tensor);
    expect(() => decodeModelCard({ ...tensor, kvBlockSize: 16 })).toThrow(/only for kind 'llm'/);
    expect(() => decodeModelCard({ ...llm, kvBlockSize: 0 })).toThrow(/kvBlockSize/);
    expect(() => decodeModelCard({ ...llm, tokenizer: { type: 'inline', files: { a: 1 } } })).toThrow(/tokenizer file 'a'/);
    expect(() => decodeModelCard({ ...llm, tokenizer: undefined })).toThrow(/tokenizer/);
    expect(() => decodeModelCard({ ...llm, kind: 'vision' })).toThrow(/kind/);
  });
});

describe('request plane frames', () => {
  it('round-trips the envelope, frames and cancel', () => {
    const env = { v: 1, requestId: 'r1', payload: { tokens: [1, 2, 3] }, deadline: null };
    expect(decodeRequestEnvelope(roundTrip(env))).toEqual(env);
    const frames: ResponseFrame[] = [
      { v: 1, type: 'data', seq: 0, payload: null },
      { v: 1, type: 'final', seq: 1 },
      { v: 1, type: 'error', seq: 2, error: { code: 'capacity_exhausted', message: 'full' } },
    ];
    for (const f of frames) expect(decodeResponseFrame(roundTrip(f))).toEqual(f);
    expect(decodeCancelMessage(roundTrip({ v: 1, type: 'cancel', requestId: 'r1' }))).toEqual({ v: 1, type: 'cancel', requestId: 'r1' });
    // a re-sent request is a new attempt; cancels name the attempt they mean
    const attempt = { ...env, attempt: 'a2' };
    expect(decodeRequestEnvelope(roundTrip(attempt))).toEqual(attempt);
    const cancel = { v: 1, type: 'cancel', requestId: 'r1', attempt: 'a2' };
    expect(decodeCancelMessage(roundTrip(cancel))).toEqual(cancel);
  });
  it('rejects malformed messages', () => {
    expect(() => decodeJson(new Uint8Array([0x7b]))).toThrow(/malformed JSON/);
    expect(() => decodeJson(new Uint8Array([0xff]))).toThrow(/malformed JSON/);
    expect(() => decodeRequestEnvelope({ v: 1, requestId: 'r', deadline: null })).toThrow(/payload/);
    expect(() => decodeRequestEnvelope({ v: 1, requestId: 'r', payload: 1, deadline: 'soon' })).toThrow(/deadline/);
    expect(() => decodeResponseFrame({ v: 1, type: 'data', seq: -1, payload: 1 })).toThrow(/seq/);
    expect(() => decodeResponseFrame({ v: 1, type: 'data', seq: 1.5, payload: 1 })).toThrow(/seq/);
    expect(() => decodeResponseFrame({ v: 1, type: 'more', seq: 0 })).toThrow(/type/);
    expect(() => decodeCancelMessage({ v: 1, type: 'cancel' })).toThrow(/requestId/);
    expect(() => decodeCancelMessage({ v: 1, type: 'cancel', requestId: 'r', attempt: 7 })).toThrow(/attempt/);
    expect(() => decodeRequestEnvelope({ v: 1, requestId: 'r', attempt: '', payload: 1, deadline: null })).toThrow(/attempt/);
  });
  it('carries the finalData announcement and the final mark of a data frame, in JSON and binary messages', () => {
    const env = { v: 1, requestId: 'r1', attempt: 'a1', payload: { x: 1 }, deadline: null, finalData: true };
    expect(decodeRequestEnvelope(roundTrip(env))).toEqual(env);
    // false is the same as absent
    expect(decodeRequestEnvelope({ ...env, finalData: false })).toEqual({ v: 1, requestId: 'r1', attempt: 'a1', payload: { x: 1 }, deadline: null });
    const last: ResponseFrame = { v: 1, type: 'data', seq: 3, payload: [1, 2], final: true };
    expect(decodeResponseFrame(roundTrip(last))).toEqual(last);
    expect(decodeResponseFrame({ ...last, final: false })).toEqual({ v: 1, type: 'data', seq: 3, payload: [1, 2] });
    expect(() => decodeRequestEnvelope({ ...env, finalData: 'yes' })).toThrow(/request: 'finalData' must be a boolean/);
    expect(() => decodeResponseFrame({ ...last, final: 1 })).toThrow(/response frame: 'final' must be a boolean/);
    const blob = new Uint8Array([1, 2, 3]);
    const binary = decodeResponseFrame(decodeMessage(encodeMessage({ v: 1, type: 'data', seq: 0, payload: new BinaryPayload({ k: 'v' }, [blob]), final: true })));
    expect(binary).toMatchObject({ type: 'data', seq: 0, final: true });
    expect(binary.type === 'data' && binary.payload instanceof BinaryPayload && [...binary.payload.blobs[0]!]).toEqual([1, 2, 3]);
    const request = decodeRequestEnvelope(decodeMessage(encodeMessage({ v: 1, requestId: 'r', payload: new BinaryPayload(null, [blob]), deadline: 5, finalData: true })));
    expect(request.finalData).toBe(true);
  });
  it('ignores fields it does not know (a newer peer\'s)', () => {
    const env = { v: 1, requestId: 'r1', payload: 1, deadline: null };
    expect(decodeRequestEnvelope({ ...env, someday: { x: 1 } })).toEqual(env);
    expect(decodeResponseFrame({ v: 1, type: 'final', seq: 2, someday: true })).toEqual({ v: 1, type: 'final', seq: 2 });
  });
  it('keeps an unknown error code as unknown', () => {
    expect(decodeResponseFrame({ v: 1, type: 'error', seq: 0, error: { code: 'teapot', message: 'x' } })).toEqual({
      v: 1,
      type: 'error',
      seq: 0,
      error: { code: 'unknown', message: 'x' },
    });
  });
});
