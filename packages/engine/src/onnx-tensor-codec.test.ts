import { describe, expect, it } from 'vitest';
import { deserializeBytesElements, serializeBytesElements } from '@switchyard/kserve';
import { concatBatch, fromWireTensor, splitBatch, toWireTensor } from './onnx-tensor-codec.js';

const enc = new TextEncoder();
const bytes = (...s: string[]) => serializeBytesElements(s.map((x) => enc.encode(x)));
const strings = (data: Uint8Array) => deserializeBytesElements(data).map((e) => new TextDecoder().decode(e));

describe('BYTES ↔ ORT string tensors', () => {
  it('round-trips strings, multi-byte ones included', () => {
    const wire = toWireTensor('BYTES', [1, 4], bytes('a', 'é', '', '日本'));
    expect(wire).toEqual({ type: 'string', dims: [1, 4], data: ['a', 'é', '', '日本'] });
    expect(strings(fromWireTensor(wire))).toEqual(['a', 'é', '', '日本']);
  });

  it('splits a batched BYTES output by rows, as the requests were concatenated', () => {
    const batched = concatBatch([bytes('a', 'b'), bytes('cc', 'é', 'f', 'g'), bytes('', 'h')]);
    const parts = splitBatch('BYTES', batched, [1, 2, 1], 2);
    expect(parts.map(strings)).toEqual([['a', 'b'], ['cc', 'é', 'f', 'g'], ['', 'h']]);
  });
});
