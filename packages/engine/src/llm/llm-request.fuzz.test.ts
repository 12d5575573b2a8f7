/**
 * Fuzz the LLM backends' KServe request reader (`parseLlmRequest`: Triton's vLLM interface of
 * `text_input`, `stream`, `sampling_parameters` JSON, `exclude_input_in_output` and request
 * parameters): any request the normaliser lets through is parsed or refused as invalid_argument.
 */
import { describe, expect, it } from 'vitest';
import { DATATYPES, serializeBytesElements, type DataType, type Parameters } from '@switchyard/kserve';
import { DEEP_NESTING, eachNodeReplaced, fc, fuzz, fuzzKey, jsonText, mutatedJson, nestedText, parsesOrRefuses, type JsonValue } from '@switchyard/testing/fuzz';
import { parseLlmRequest } from './llm-instance.js';
import type { NormalizedInput, NormalizedRequest } from '../request-normalizer.js';

const enc = new TextEncoder();
const bytesOf = (...elements: Uint8Array[]) => serializeBytesElements(elements);

const validSampling: fc.Arbitrary<JsonValue> = fc.record(
  {
    max_tokens: fc.integer({ min: 1, max: 64 }),
    temperature: fc.double({ min: 0, max: 2, noNaN: true }),
    top_k: fc.integer({ min: -1, max: 20 }),
    stop: fc.oneof(fc.string({ minLength: 1, maxLength: 3 }), fc.constant('["a","b"]')),
    stop_token_ids: fc.oneof(fc.array(fc.nat(100), { maxLength: 2 }), fc.constant('[1,2]')),
    ignore_eos: fc.boolean(),
  },
  { requiredKeys: [] },
);

const input = (name: string, datatype: DataType, data: Uint8Array): NormalizedInput => ({ name, datatype, shape: [1], originalShape: [1], data });

/** The inputs a client may send: text as any bytes (valid BYTES or not), JSON sampling (valid or corrupted), BOOL flags. */
const inputs = fc
  .tuple(
    fc.oneof(fc.string({ maxLength: 8 }).map((s) => bytesOf(enc.encode(s))), fc.uint8Array({ maxLength: 12 }), fc.constant(bytesOf(new Uint8Array([0xff, 0xfe])))),
    fc.option(fc.oneof(validSampling.map(jsonText), mutatedJson(validSampling).map(jsonText), fc.string({ maxLength: 8 })), { nil: undefined }),
    fc.option(fc.uint8Array({ maxLength: 2 }), { nil: undefined }),
    fc.constantFrom(...DATATYPES),
  )
  .map(([text, json, stream, textType]) => {
    const list: NormalizedInput[] = [input('text_input', textType === 'BOOL' ? 'BYTES' : textType, text)];
    if (json !== undefined) list.push(input('sampling_parameters', 'BYTES', bytesOf(enc.encode(json))));
    if (stream !== undefined) list.push(input('stream', 'BOOL', stream));
    return list;
  });

const parameters: fc.Arbitrary<Parameters> = fc.dictionary(
  fc.oneof(fc.constantFrom('stream', 'exclude_input_in_output', 'max_tokens', 'temperature', 'stop', 'seed'), fuzzKey()),
  fc.oneof(fc.boolean(), fc.integer(), fc.double(), fc.string({ maxLength: 6 }), fc.bigInt({ min: -(2n ** 63n), max: 2n ** 64n - 1n })),
  { maxKeys: 4 },
);

const requestOf = (list: NormalizedInput[], params: Parameters = {}): NormalizedRequest => ({
  request: { id: '', modelName: 'llm', modelVersion: undefined, parameters: params, inputs: [], outputs: [] },
  batchSize: 0,
  inputs: list,
  requestedOutputs: ['text_output'],
});

describe('parseLlmRequest (fuzz)', () => {
  it('parses or refuses any inputs and parameters as invalid_argument', () => {
    fuzz(fc.tuple(inputs, parameters), ([list, params]) => {
      const r = parsesOrRefuses(() => parseLlmRequest(requestOf(list, params), 16));
      if (r.ok) expect(r.value.sampling.max_tokens === null || r.value.sampling.max_tokens >= 1).toBe(true);
    });
  });

  it('refuses sampling_parameters with any one field nested 10^5 deep as invalid_argument', () => {
    const valid: JsonValue = { max_tokens: 4, temperature: 0.5, top_k: 2, top_p: 0.9, seed: 1, stop: ['a'], stop_token_ids: [1], ignore_eos: false, logprobs: false };
    for (const { path, text } of eachNodeReplaced(valid, nestedText(DEEP_NESTING))) {
      const list = [input('text_input', 'BYTES', bytesOf(enc.encode('hi'))), input('sampling_parameters', 'BYTES', bytesOf(enc.encode(text)))];
      const r = parsesOrRefuses(() => parseLlmRequest(requestOf(list), 16));
      expect(r.ok, path).toBe(false);
    }
  });
});
