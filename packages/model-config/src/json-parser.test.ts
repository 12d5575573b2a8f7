import { SwitchyardError } from '@switchyard/common';
import { describe, expect, it } from 'vitest';
import { withBigIntLimit } from '@switchyard/testing/fuzz';
import { parseModelConfigJson } from './json-parser.js';
import { parseModelConfigText } from './text-parser.js';

function errorOf(fn: () => unknown): string {
  try {
    fn();
  } catch (e) {
    expect(e).toBeInstanceOf(SwitchyardError);
    expect((e as SwitchyardError).code).toBe('invalid_argument');
    return (e as Error).message;
  }
  throw new Error('expected an error');
}

describe('parseModelConfigJson', () => {
  it('accepts the partial override tritonclient examples send', () => {
    const c = parseModelConfigJson('{"max_batch_size":"16"}');
    expect(c.max_batch_size).toBe(16);
    expect(c).toEqual({ ...parseModelConfigText(''), max_batch_size: 16 });
  });

  it('gives the same shape as the text parser', () => {
    const text = parseModelConfigText(`name: "m" backend: "onnxruntime" max_batch_size: 8
      input { name: "I" data_type: TYPE_FP32 dims: [ -1, 3 ] reshape { shape: [ 3 ] } }
      dynamic_batching { preferred_batch_size: 4 priority_queue_policy { key: 1 value { max_queue_size: 2 } } }
      parameters { key: "k" value { string_value: "v" } }
      instance_group { kind: KIND_CPU count: 1 }`);
    const json = parseModelConfigJson(`{"name":"m","backend":"onnxruntime","max_batch_size":8,
      "input":[{"name":"I","data_type":"TYPE_FP32","dims":["-1",3],"reshape":{"shape":[3]}}],
      "dynamic_batching":{"preferred_batch_size":[4],"priority_queue_policy":{"1":{"max_queue_size":2}}},
      "parameters":{"k":{"string_value":"v"}},
      "instance_group":[{"kind":"KIND_CPU","count":1}]}`);
    expect(json).toEqual(text);
  });

  it('accepts lowerCamelCase names, enum numbers, case-insensitive enum names and null', () => {
    const c = parseModelConfigJson(
      '{"maxBatchSize":2,"input":[{"dataType":11,"format":"format_nchw","isShapeTensor":false}],"platform":null,"output":null}',
    );
    expect(c.max_batch_size).toBe(2);
    expect(c.input[0]?.data_type).toBe('TYPE_FP32');
    expect(c.input[0]?.format).toBe('FORMAT_NCHW');
    expect(c.platform).toBe('');
    expect(c.output).toEqual([]);
  });

  it('accepts NaN/Infinity strings for floats and oneofs', () => {
    const c = parseModelConfigJson(
      '{"sequence_batching":{"direct":{"minimum_slot_utilization":"NaN"},"control_input":[{"control":[{"fp32_false_true":["-Infinity",1.5]}]}]},"version_policy":{"specific":{"versions":["3"]}}}',
    );
    const sb = c.sequence_batching as { direct: { minimum_slot_utilization: number }; control_input: { control: { fp32_false_true: number[] }[] }[] };
    expect(sb.direct.minimum_slot_utilization).toBeNaN();
    expect(sb.control_input[0]?.control[0]?.fp32_false_true).toEqual([-Infinity, 1.5]);
    expect(c.version_policy).toEqual({ specific: { versions: [3] } });
  });

  it.each([
    ['{"max_batch_size":', /^invalid model configuration JSON: /],
    ['[]', "invalid model configuration JSON: expected an object for message inference.ModelConfig"],
    ['{"bogus":1}', "invalid model configuration JSON: message inference.ModelConfig has no field named 'bogus'"],
    ['{"max_batch_size":1,"maxBatchSize":2}', "invalid model configuration JSON at 'max_batch_size': field 'max_batch_size' is given more than once"],
    ['{"max_batch_size":1.5}', "invalid model configuration JSON at 'max_batch_size': expected an integer, got 1.5"],
    ['{"max_batch_size":"x"}', `invalid model configuration JSON at 'max_batch_size': expected an integer, got "x"`],
    ['{"max_batch_size":4294967296}', "invalid model configuration JSON at 'max_batch_size': integer 4294967296 is out of range for int32"],
    ['{"dynamic_batching":{"priority_levels":-1}}', "invalid model configuration JSON at 'dynamic_batching.priority_levels': integer -1 is out of range for uint64"],
    ['{"input":[{"data_type":"TYPE_FLOAT"}]}', "invalid model configuration JSON at 'input[0].data_type': invalid enum value 'TYPE_FLOAT' for enum type inference.DataType"],
    ['{"input":{}}', "invalid model configuration JSON at 'input': expected an array for a repeated field"],
    ['{"name":3}', "invalid model configuration JSON at 'name': expected a string, got 3"],
    ['{"model_transaction_policy":{"decoupled":"true"}}', `invalid model configuration JSON at 'model_transaction_policy.decoupled': expected a boolean, got "true"`],
    ['{"dynamic_batching":{},"sequence_batching":{}}', "invalid model configuration JSON at 'sequence_batching': field 'sequence_batching' and field 'dynamic_batching' are both members of oneof 'scheduling_choice'"],
    ['{"dynamic_batching":{"priority_queue_policy":{"x":{}}}}', `invalid model configuration JSON at 'dynamic_batching.priority_queue_policy[x]': expected an integer, got "x"`],
    // Found by config-parsers.fuzz.test.ts: Object.prototype members were taken for fields (a TypeError) and for enum names.
    ['{"constructor":1}', "invalid model configuration JSON: message inference.ModelConfig has no field named 'constructor'"],
    ['{"input":[{"toString":1}]}', "invalid model configuration JSON at 'input[0]': message inference.ModelInput has no field named 'toString'"],
    ['{"input":[{"data_type":"1"}]}', "invalid model configuration JSON at 'input[0].data_type': invalid enum value '1' for enum type inference.DataType"],
    // Found by config-parsers.fuzz.test.ts: a long integer string went through BigInt's superlinear parse.
    ['{"max_batch_size":"-0000123456789012345678901"}', "invalid model configuration JSON at 'max_batch_size': integer -0000123456789012345678901 is out of range for int32"],
  ])('rejects %s', (json, message) => {
    const msg = errorOf(() => parseModelConfigJson(json));
    if (typeof message === 'string') expect(msg).toBe(message);
    else expect(msg).toMatch(message);
  });
});

describe('parseModelConfigJson: map keys', () => {
  it('keeps a __proto__ key as an entry, not as the prototype (found by config-parsers.fuzz.test.ts)', () => {
    const c = parseModelConfigJson('{"parameters":{"__proto__":{"string_value":"x"}}}');
    expect(Object.getPrototypeOf(c.parameters)).toBe(Object.prototype);
    expect(Object.entries(c.parameters)).toEqual([['__proto__', { string_value: 'x' }]]);
  });
});

describe('parseModelConfigJson: long integers', () => {
  it('refuses a long integer string without BigInt (found by config-parsers.fuzz.test.ts)', () => {
    // BigInt's decimal parse is superlinear: 3·10^6 digits took a second.
    expect(withBigIntLimit(() => errorOf(() => parseModelConfigJson(`{"max_batch_size":"1${'0'.repeat(1_000_000)}"}`)))).toMatch(/out of range for int32$/);
    expect(parseModelConfigJson('{"max_batch_size":"00000000000000000000000016"}').max_batch_size).toBe(16);
  });
});
