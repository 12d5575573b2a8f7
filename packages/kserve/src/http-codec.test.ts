import { describe, expect, it } from 'vitest';
import { SwitchyardError } from '@switchyard/common';
import { decodeHttpInferRequest, decodeHttpRawInferRequest, encodeHttpInferResponse, parseInferenceHeaderLength } from './http-codec.js';
import { classifyTensor, MAX_CLASSIFICATION_ELEMENTS } from './http-classification.js';
import { decodeHttpGenerateRequest, encodeHttpGenerateResponse } from './http-generate.js';
import type { InferResponse, InferTensor } from './protocols.js';
import { deserializeBytesElements } from './tensor.js';

const enc = new TextEncoder();
const dec = new TextDecoder();
function err(fn: () => unknown): [string, string] {
  try {
    fn();
  } catch (e) {
    if (e instanceof SwitchyardError) return [e.code, e.message];
    throw e;
  }
  throw new Error('expected a throw');
}
const decodeJson = (doc: unknown, blobs: Uint8Array[] = []) => {
  const json = enc.encode(typeof doc === 'string' ? doc : JSON.stringify(doc));
  const body = new Uint8Array(json.byteLength + blobs.reduce((n, b) => n + b.byteLength, 0));
  body.set(json);
  let off = json.byteLength;
  for (const b of blobs) {
    body.set(b, off);
    off += b.byteLength;
  }
  return decodeHttpInferRequest({ modelName: 'm', modelVersion: 2, body }, json.byteLength);
};
const input = (extra: object) => ({ name: 'X', datatype: 'INT32', shape: [2], ...extra });

describe('parseInferenceHeaderLength', () => {
  it('behaves like atoi with a range check', () => {
    expect(parseInferenceHeaderLength(undefined, 10)).toBe(10);
    expect(parseInferenceHeaderLength('4', 10)).toBe(4);
    expect(parseInferenceHeaderLength('abc', 10)).toBe(0);
    expect(err(() => parseInferenceHeaderLength('11', 10))).toEqual(['invalid_argument', 'inference header size should be in range (0, 10), got: 11']);
    expect(err(() => parseInferenceHeaderLength('-1', 10))[1]).toBe('inference header size should be in range (0, 10), got: -1');
  });
});

describe('decodeHttpInferRequest', () => {
  it('decodes ids, parameters, JSON / binary / shm inputs and requested outputs', () => {
    const d = decodeJson(
      {
        id: 'abc',
        parameters: { sequence_id: 18446744073709551615n.toString(), sequence_start: true, priority: 3, timeout: 100, custom: 1.5, flag: false },
        inputs: [
          input({ data: [1, 2] }),
          { name: 'B', datatype: 'FP32', shape: [1], parameters: { binary_data_size: 4 } },
          { name: 'Z', datatype: 'FP32', shape: [0], parameters: { binary_data_size: 0 } },
          { name: 'S', datatype: 'FP32', shape: [4], parameters: { shared_memory_region: 'r', shared_memory_offset: 8, shared_memory_byte_size: 16 } },
        ],
        outputs: [{ name: 'O1', parameters: { binary_data: true } }, { name: 'O2', parameters: { classification: 3 } }, { name: 'O3', parameters: { shared_memory_region: 'q', shared_memory_byte_size: 8 } }],
      },
      [new Uint8Array(new Float32Array([7]).buffer)],
    );
    expect(d.request.id).toBe('abc');
    expect(d.request.modelVersion).toBe(2);
    expect(d.request.parameters).toEqual({ sequence_id: '18446744073709551615', sequence_start: true, priority: 3, timeout: 100, custom: 1.5, flag: false });
    expect(d.request.inputs.map((i) => [i.name, i.data.byteLength])).toEqual([['X', 8], ['B', 4], ['Z', 0], ['S', 0]]);
    expect(Object.getPrototypeOf(d.request.inputs[1]?.data)).toBe(Uint8Array.prototype);
    expect(d.request.inputs[3]?.parameters).toEqual({ shared_memory_region: 'r', shared_memory_offset: 8, shared_memory_byte_size: 16 });
    expect([...d.outputs.values()].map((o) => [o.name, o.kind, o.classification])).toEqual([['O1', 'binary', 0], ['O2', 'json', 3], ['O3', 'shm', 0]]);
    expect(d.request.outputs.map((o) => o.parameters)).toEqual([
      { binary_data: true },
      { classification: 3 },
      { shared_memory_region: 'q', shared_memory_offset: 0, shared_memory_byte_size: 8 },
    ]);
    expect(d.defaultOutputKind).toBe('json');
  });

  it('keeps a custom parameter named __proto__ (found by http-codec.fuzz.test.ts: it vanished)', () => {
    expect(Object.entries(decodeJson('{"parameters":{"__proto__":1},"inputs":[]}').request.parameters)).toEqual([['__proto__', 1]]);
    const g = decodeHttpGenerateRequest({ modelName: 'm', modelVersion: undefined, body: enc.encode('{"__proto__":"x","parameters":{"__proto__":true}}') }, []);
    expect(Object.entries(g.parameters)).toEqual([['__proto__', true]]);
  });

  it('keeps a uint64 sequence_id exact', () => {
    const d = decodeJson('{"parameters":{"sequence_id":18446744073709551615,"binary_data_output":true},"inputs":[]}');
    expect(d.request.parameters.sequence_id).toBe(18446744073709551615n);
    expect(d.defaultOutputKind).toBe('binary');
  });

  it('refuses malformed requests with Triton messages', () => {
    const cases: Array<[unknown, string, string]> = [
      [{ id: 5, inputs: [] }, 'internal', "Unable to parse 'id': attempt to access JSON non-string as string"],
      [{ inputs: {} }, 'internal', "Unable to parse 'inputs': attempt to access JSON non-array as array"],
      [{ inputs: [{ datatype: 'INT32', shape: [1], data: [1] }] }, 'internal', "Unable to parse 'name': attempt to access non-existing object member 'name'"],
      [{ inputs: [input({ data: [1, 2], parameters: { binary_data_size: 8 } })] }, 'invalid_argument', "Input must set only one of the following fields: 'data', 'binary_data_size' in 'parameters', 'shared_memory_region' in 'parameters'. But set 'data' 'binary_data_size'"],
      [{ inputs: [input({ data: [1, 2] }), input({ data: [1, 2] })] }, 'invalid_argument', "input 'X' already exists in request"],
      [{ inputs: [input({ datatype: 'INT31', data: [1, 2] })] }, 'invalid_argument', 'invalid datatype for input X'],
      [{ inputs: [input({ shape: [-1], data: [1] })] }, 'internal', "Unable to parse 'shape': attempt to access JSON non-unsigned-integer as unsigned-integer"],
      [{ parameters: { priority: -1 }, inputs: [] }, 'internal', "Unable to parse 'priority': attempt to access JSON non-unsigned-integer as unsigned-integer"],
      [{ parameters: { sequence_start: 1 }, inputs: [] }, 'internal', "Unable to parse 'sequence_start': attempt to access JSON non-boolean as boolean"],
      [{ parameters: { x: [1] }, inputs: [] }, 'invalid_argument', "parameter 'x' has invalid type. It should be either 'int', 'bool', or 'string'."],
      [{ inputs: [], outputs: [{ name: 'O' }, { name: 'O' }] }, 'invalid_argument', "output 'O' already exists in request"],
      [{ inputs: [], outputs: [{ name: 'O', parameters: { shared_memory_region: 'r', classification: 1 } }] }, 'invalid_argument', "Output can't set both 'shared_memory_region' and 'classification'"],
      [{ inputs: [], outputs: [{ name: 'O', parameters: { classification: 'x' } }] }, 'internal', "Unable to set 'classification': attempt to access JSON non-unsigned-integer as unsigned-integer"],
      [{ inputs: [input({ parameters: { shared_memory_region: 7 } })] }, 'internal', "Unable to parse 'shared_memory_region': attempt to access JSON non-string as string"],
    ];
    for (const [doc, code, msg] of cases) expect(err(() => decodeJson(doc)), msg).toEqual([code, msg]);
  });

  it('refuses shapes no tensor can have before sizing anything from them (JSON, binary and shm inputs)', () => {
    const huge = { datatype: 'FP32', shape: [1, 2_000_000_000] };
    const overflow = "[request id: r] byte size overflow for input 'X' for model 'm': shape [1,2000000000] of FP32 takes 8000000000 bytes";
    for (const extra of [{ data: [1] }, { parameters: { binary_data_size: 4 } }, { parameters: { shared_memory_region: 'r', shared_memory_byte_size: 4 } }]) {
      const blobs = 'binary_data_size' in (extra.parameters ?? {}) ? [new Uint8Array(4)] : [];
      const [code, msg] = err(() => decodeJson({ id: 'r', inputs: [input({ ...huge, ...extra })] }, blobs));
      expect(code).toBe('invalid_argument');
      expect(msg).toContain(overflow);
    }
    const [code, msg] = err(() => decodeJson({ inputs: [input({ shape: [16, 2 ** 60 + 2], data: [1] })] }));
    expect(code).toBe('invalid_argument');
    expect(msg).toContain('causes total element count to exceed maximum size of 9223372036854775807');
  });
});

describe('decodeHttpRawInferRequest', () => {
  const body = new Uint8Array(24);
  it('adds a batch of 1 and deduces the variable dimension', () => {
    const d = decodeHttpRawInferRequest({ modelName: 'm', modelVersion: undefined, body }, { maxBatchSize: 4, inputs: [{ name: 'I', datatype: 'FP32', dims: [-1, 2] }] });
    expect(d.request.inputs[0]?.shape).toEqual([1, 3, 2]);
    expect(d.defaultOutputKind).toBe('binary');
  });
  it('prefixes BYTES with the length and requires dims [1]', () => {
    const d = decodeHttpRawInferRequest({ modelName: 'm', modelVersion: undefined, body: enc.encode('hey') }, { maxBatchSize: 0, inputs: [{ name: 'I', datatype: 'BYTES', dims: [1] }] });
    expect(deserializeBytesElements(d.request.inputs[0]?.data as Uint8Array).map((b) => dec.decode(b))).toEqual(['hey']);
    expect(err(() => decodeHttpRawInferRequest({ modelName: 'm', modelVersion: undefined, body }, { maxBatchSize: 0, inputs: [{ name: 'I', datatype: 'BYTES', dims: [-1] }] }))[1]).toBe(
      "[request id: <id_unknown>] For BYTE datatype raw input 'I', the model must have input shape [1]",
    );
  });
});

const out = (name: string, datatype: InferTensor['datatype'], shape: number[], data: ArrayBufferView): InferTensor => ({
  name,
  datatype,
  shape,
  data: new Uint8Array(data.buffer, data.byteOffset, data.byteLength),
  parameters: {},
});
const response = (outputs: InferTensor[], extra: Partial<InferResponse> = {}): InferResponse => ({ id: '', modelName: 'm', modelVersion: '3', parameters: {}, outputs, ...extra });

describe('encodeHttpInferResponse', () => {
  it('writes JSON, binary (zero-size blobs append nothing) and shm outputs', () => {
    const e = encodeHttpInferResponse(
      response([out('A', 'INT32', [2], new Int32Array([1, 2])), out('B', 'FP32', [1], new Float32Array([0.5])), out('C', 'FP32', [0], new Float32Array([])), out('D', 'INT32', [1], new Int32Array([9]))], { id: 'x', parameters: { p: 1 } }),
      {
        defaultOutputKind: 'json',
        outputs: new Map([
          ['B', { name: 'B', kind: 'binary', classification: 0 }],
          ['C', { name: 'C', kind: 'binary', classification: 0 }],
          ['D', { name: 'D', kind: 'shm', classification: 0, shm: { region: 'r', offset: 0, byteSize: 4 } }],
        ]),
        batching: false,
      },
    );
    const json = dec.decode(e.chunks[0]);
    expect(json).toBe(
      '{"id":"x","model_name":"m","model_version":"3","parameters":{"p":1},"outputs":[{"name":"A","datatype":"INT32","shape":[2],"data":[1,2]},{"name":"B","datatype":"FP32","shape":[1],"parameters":{"binary_data_size":4}},{"name":"C","datatype":"FP32","shape":[0],"parameters":{"binary_data_size":0}},{"name":"D","datatype":"INT32","shape":[1]}]}',
    );
    expect(e.headerLength).toBe(e.chunks[0]?.byteLength);
    expect(e.chunks).toHaveLength(2);
    expect(e.binary).toBe(true);
  });

  it('is plain JSON when no binary bytes follow', () => {
    const e = encodeHttpInferResponse(response([out('C', 'FP32', [0], new Float32Array([]))]), { defaultOutputKind: 'binary', outputs: new Map(), batching: false });
    expect(e.binary).toBe(false);
  });

  it('classifies per batch entry', () => {
    const t = out('P', 'FP32', [2, 3], new Float32Array([0.1, 0.7, 0.2, 3, 1, 2]));
    const c = classifyTensor(t, 2, true);
    expect(c.shape).toEqual([2, 2]);
    expect(deserializeBytesElements(c.data).map((b) => dec.decode(b))).toEqual(['0.700000:1', '0.200000:2', '3.000000:0', '2.000000:2']);
    const ints = classifyTensor(out('I', 'INT32', [3], new Int32Array([5, 9, 1])), 5, false, ['a', 'b', 'c']);
    expect(ints.shape).toEqual([3]);
    expect(deserializeBytesElements(ints.data).map((b) => dec.decode(b))).toEqual(['9:1:b', '5:0:a', '1:2:c']);
  });

  it('appends only non-empty labels, and labels reach the HTTP response', () => {
    const t = out('P', 'FP32', [1, 4], new Float32Array([0.1, 0.4, 0.3, 0.2]));
    const c = classifyTensor(t, 4, true, ['zero', '', 'two']);
    expect(deserializeBytesElements(c.data).map((b) => dec.decode(b))).toEqual(['0.400000:1', '0.300000:2:two', '0.200000:3', '0.100000:0:zero']);
    const encoded = encodeHttpInferResponse(response([t]), {
      defaultOutputKind: 'json',
      outputs: new Map([['P', { name: 'P', kind: 'json', classification: 1 }]]),
      batching: true,
      labels: new Map([['P', ['a', 'b']]]),
    });
    expect(JSON.parse(dec.decode(encoded.chunks[0])).outputs[0]).toEqual({ name: 'P', datatype: 'BYTES', shape: [1, 1], data: ['0.400000:1:b'] });
  });

  it('refuses to classify outputs without numeric values', () => {
    const strings = out('S', 'BYTES', [1], new Uint8Array([1, 0, 0, 0, 120]));
    expect(err(() => classifyTensor(strings, 1, false))).toEqual(['invalid_argument', "class result not available for output due to unsupported type 'BYTES'"]);
  });

  it('refuses a batch entry of more than MAX_CLASSIFICATION_ELEMENTS classes, and accepts exactly that many', () => {
    const n = MAX_CLASSIFICATION_ELEMENTS;
    const tooLarge = out('P', 'FP32', [1, n + 1], new Float32Array(n + 1));
    expect(err(() => classifyTensor(tooLarge, 5, true))).toEqual(['invalid_argument', 'classification output tensor too large']);
    const noBatch = out('P', 'UINT8', [n + 1], new Uint8Array(n + 1));
    expect(err(() => classifyTensor(noBatch, 1, false))).toEqual(['invalid_argument', 'classification output tensor too large']);
    // The limit is per batch entry: two entries of n/2 + 1 classes together exceed n and still classify.
    const half = n / 2 + 1;
    expect(classifyTensor(out('P', 'UINT8', [2, half], new Uint8Array(2 * half)), 1, true).shape).toEqual([2, 1]);
    const atLimit = new Uint8Array(n);
    atLimit[n - 1] = 7;
    const c = classifyTensor(out('P', 'UINT8', [n], atLimit), 1, false);
    expect(deserializeBytesElements(c.data).map((b) => dec.decode(b))).toEqual([`7:${n - 1}`]);
  });
});

describe('generate extension codec', () => {
  it('maps keys to inputs (deducing shapes) or parameters', () => {
    const r = decodeHttpGenerateRequest(
      { modelName: 'm', modelVersion: undefined, body: enc.encode('{"text":"hi","ids":[1,2,3,4],"stream":false,"max_tokens":8}') },
      [
        { name: 'text', datatype: 'BYTES', shape: [-1, 1] },
        { name: 'ids', datatype: 'INT32', shape: [-1, -1, 2] },
      ],
    );
    expect(r.inputs.map((i) => [i.name, i.shape])).toEqual([['text', [1, 1]], ['ids', [1, 2, 2]]]);
    expect(r.parameters).toEqual({ stream: false, max_tokens: 8 });
    const nested = decodeHttpGenerateRequest(
      { modelName: 'm', modelVersion: undefined, body: enc.encode('{"text":"hi","parameters":{"stream":true,"temperature":0.5},"seed":3}') },
      [{ name: 'text', datatype: 'BYTES', shape: [1] }],
    );
    expect(nested.parameters).toEqual({ stream: true, temperature: 0.5, seed: 3 });
    expect(
      err(() => decodeHttpGenerateRequest({ modelName: 'm', modelVersion: undefined, body: enc.encode('{"text":"hi","parameters":{"stop":["a"]}}') }, [{ name: 'text', datatype: 'BYTES', shape: [1] }]))[1],
    ).toBe("parameter 'stop' has invalid type. It should be either 'int', 'bool', 'double', or 'string'.");
    expect(
      err(() => decodeHttpGenerateRequest({ modelName: 'm', modelVersion: undefined, body: enc.encode('{"ids":[1,2,3]}') }, [{ name: 'ids', datatype: 'INT32', shape: [2] }]))[1],
    ).toBe("The schema can not convert input 'ids' to tensor with proper shape");
  });

  it('answers a flat object in key order', () => {
    const text = encodeHttpGenerateResponse(response([out('text_output', 'INT32', [1], new Int32Array([7])), out('A', 'FP32', [2], new Float32Array([1, 2]))], { id: 'q' }));
    expect(text).toBe('{"A":[1.0,2.0],"id":"q","model_name":"m","model_version":"3","text_output":7}');
  });
});
