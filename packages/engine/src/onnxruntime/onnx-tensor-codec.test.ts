import { describe, expect, it } from 'vitest';
import { deserializeBytesElements, serializeBytesElements } from '@switchyard/kserve';
import { concatBatch, fromWireTensor, splitBatch, toWireTensor } from './onnx-tensor-codec.js';

const enc = new TextEncoder();
const bytes = (...s: string[]) => serializeBytesElements(s.map((x) => enc.encode(x)));
const strings = (data: Uint8Array) => deserializeBytesElements(data).map((e) => new TextDecoder().decode(e));

describe('BYTES ↔ ORT string tensors', () => {
  it('sends strings to the session thread as BYTES bytes in a buffer of their own', () => {
    const body = new Uint8Array(64);
    const data = bytes('a', 'é', '', '日本');
    body.set(data, 8);
    const wire = toWireTensor('BYTES', [1, 4], body.subarray(8, 8 + data.byteLength));
    expect(wire.type).toBe('string');
    expect(wire.dims).toEqual([1, 4]);
    expect(wire.data.buffer).not.toBe(body.buffer);
    expect(wire.data.byteLength).toBe(wire.data.buffer.byteLength);
    expect(strings(fromWireTensor(wire))).toEqual(['a', 'é', '', '日本']);
  });

  it('splits a batched BYTES output by rows, as the requests were concatenated', () => {
    const batched = concatBatch([bytes('a', 'b'), bytes('cc', 'é', 'f', 'g'), bytes('', 'h')]);
    const parts = splitBatch('BYTES', batched, [1, 2, 1], 2);
    expect(parts.map(strings)).toEqual([['a', 'b'], ['cc', 'é', 'f', 'g'], ['', 'h']]);
  });
});

describe('fixed-size tensors for the session thread', () => {
  it('copies request bytes into a buffer of their own, and hands a fresh whole batch over without a copy', () => {
    const body = new Uint8Array(64);
    body.set(new Uint8Array(Float32Array.from([1, 2]).buffer), 8);
    const view = body.subarray(8, 16);
    const copied = toWireTensor('FP32', [1, 2], view);
    expect(copied.data.buffer).not.toBe(body.buffer);
    expect(Array.from(copied.data as Float32Array)).toEqual([1, 2]);
    // "fresh" but only part of its buffer: still copied, so the rest is not transferred along.
    expect(toWireTensor('FP32', [1, 2], view, true).data.buffer).not.toBe(body.buffer);
    const batch = concatBatch([view, view]);
    const handed = toWireTensor('FP32', [2, 2], batch, true);
    expect(handed.data.buffer).toBe(batch.buffer);
    expect(Array.from(handed.data as Float32Array)).toEqual([1, 2, 1, 2]);
    expect(toWireTensor('FP32', [2, 2], batch).data.buffer).not.toBe(batch.buffer);
  });
});
