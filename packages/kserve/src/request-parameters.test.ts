import { describe, expect, it } from 'vitest';
import { decodeModelInferRequest } from './grpc-codec.js';
import { decodeHttpInferRequest } from './http-codec.js';
import { modelParameters } from './request-parameters.js';

const enc = new TextEncoder();

describe('modelParameters', () => {
  it('drops the request properties and keeps every other parameter, __proto__ included, in order', () => {
    const params = { sequence_id: 7n, sequence_start: true, sequence_end: false, priority: 2, timeout: 100, b: 'x', a: 1.5, headers: 'h' };
    Object.defineProperty(params, '__proto__', { value: true, enumerable: true, writable: true, configurable: true });
    expect(Object.entries(modelParameters(params))).toEqual([
      ['b', 'x'],
      ['a', 1.5],
      ['headers', 'h'],
      ['__proto__', true],
    ]);
  });

  it('an HTTP request keeps binary_data_output out of its parameters (the door consumes it)', () => {
    const body = enc.encode(JSON.stringify({ parameters: { binary_data_output: true, sequence_id: 3, key1: 'value1' }, inputs: [] }));
    const d = decodeHttpInferRequest({ modelName: 'm', modelVersion: undefined, body }, body.byteLength);
    expect(d.defaultOutputKind).toBe('binary');
    expect(d.request.parameters).toEqual({ sequence_id: 3, key1: 'value1' });
    expect(modelParameters(d.request.parameters)).toEqual({ key1: 'value1' });
  });

  it('a gRPC request keeps triton_enable_empty_final_response out; binary_data_output is a custom parameter there, as in Triton', () => {
    const d = decodeModelInferRequest({
      model_name: 'm',
      parameters: {
        triton_enable_empty_final_response: { bool_param: true },
        priority: { int64_param: '1' },
        binary_data_output: { bool_param: true },
        key2: { string_param: 'v' },
      },
      inputs: [],
    });
    expect(modelParameters(d.request.parameters)).toEqual({ binary_data_output: true, key2: 'v' });
  });
});
