import { SwitchyardError } from '@switchyard/common';
import { describe, expect, it } from 'vitest';
import { withBigIntLimit } from '@switchyard/testing/fuzz';
import { parseModelConfigText } from './text-parser.js';
import type { ModelSequenceBatching, ModelEnsembling } from './types.js';

/** The error thrown by `fn`, asserting it is invalid_argument. */
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

const parse = (text: string) => parseModelConfigText(text);

describe('parseModelConfigText: grammar', () => {
  it('fills every scalar, repeated and map field with its default and leaves sub-messages unset', () => {
    const c = parse('');
    expect(c).toEqual({
      name: '', platform: '', backend: '', runtime: '', max_batch_size: 0,
      input: [], output: [], batch_input: [], batch_output: [], instance_group: [],
      default_model_filename: '', cc_model_filenames: {}, metric_tags: {}, parameters: {}, model_warmup: [],
    });
  });

  it('fills defaults inside sub-messages that are set', () => {
    const c = parse('input { name: "x" } dynamic_batching { }');
    expect(c.input[0]).toEqual({
      name: 'x', data_type: 'TYPE_INVALID', format: 'FORMAT_NONE', dims: [], is_shape_tensor: false,
      allow_ragged_batch: false, optional: false, is_non_linear_format_io: false,
    });
    expect(c.dynamic_batching).toEqual({
      preferred_batch_size: [], max_queue_delay_microseconds: 0, preserve_ordering: false,
      priority_levels: 0, default_priority_level: 0, priority_queue_policy: {},
    });
  });

  it('skips # comments and accepts whitespace before ":"', () => {
    const c = parse('# header\nname : "m" # trailing\n  max_batch_size\t: 4');
    expect(c.name).toBe('m');
    expect(c.max_batch_size).toBe(4);
  });

  it('accepts messages with and without ":", and <> delimiters', () => {
    const c = parse('input { name: "a" } input: { name: "b" } input < name: "c" > input: < name: "d" >');
    expect(c.input.map((i) => i.name)).toEqual(['a', 'b', 'c', 'd']);
  });

  it('accepts repeated fields by repetition and by [ ] lists, empty lists included', () => {
    const c = parse(`
      input [ { name: "a" dims: [ 16 ] }, { name: "b", dims: 4, dims: -1 } ]
      output: [ { name: "c" dims: [] } ]
      dynamic_batching { preferred_batch_size: [ 4, 8 ] preferred_batch_size: 16 }`);
    expect(c.input.map((i) => i.dims)).toEqual([[16], [4, -1]]);
    expect(c.output[0]?.dims).toEqual([]);
    expect(c.dynamic_batching?.preferred_batch_size).toEqual([4, 8, 16]);
  });

  it('accepts optional "," and ";" separators after fields', () => {
    const c = parse('name: "m"; max_batch_size: 2, platform: "p";');
    expect([c.name, c.max_batch_size, c.platform]).toEqual(['m', 2, 'p']);
  });

  it('reads enums by name and by number', () => {
    const c = parse('input { data_type: TYPE_FP32 format: 2 } instance_group { kind: KIND_GPU }');
    expect(c.input[0]?.data_type).toBe('TYPE_FP32');
    expect(c.input[0]?.format).toBe('FORMAT_NCHW');
    expect(c.instance_group[0]?.kind).toBe('KIND_GPU');
  });

  it('reads every boolean spelling', () => {
    const values = ['true', 'True', 't', '1', 'false', 'False', 'f', '0'].map(
      (v) => parse(`model_transaction_policy { decoupled: ${v} }`).model_transaction_policy?.decoupled,
    );
    expect(values).toEqual([true, true, true, true, false, false, false, false]);
  });

  it('reads single/double quoted strings with C escapes and concatenates adjacent literals', () => {
    const c = parse(String.raw`name: 'a\'b' "\"c\"" platform: "\x41\101\u00e9\n\t\\" backend: "one" 'two'`);
    expect(c.name).toBe(`a'b"c"`);
    expect(c.platform).toBe('AAé\n\t\\');
    expect(c.backend).toBe('onetwo');
  });

  it('reads negative, hex, octal and float numbers, inf and nan', () => {
    const c = parse(`
      max_batch_size: 0x10
      input { dims: [ -1, 010, 0X1f ] }
      sequence_batching { direct { minimum_slot_utilization: .5 }
        control_input { control { fp32_false_true: [ -inf, 1.5e1, 2.5f, nan, 3 ] } } }`);
    expect(c.max_batch_size).toBe(16);
    expect(c.input[0]?.dims).toEqual([-1, 8, 31]);
    const sb = c.sequence_batching as ModelSequenceBatching;
    expect(sb.direct?.minimum_slot_utilization).toBe(0.5);
    expect(sb.control_input[0]?.control[0]?.fp32_false_true).toEqual([-Infinity, 15, 2.5, NaN, 3]);
  });

  it('refuses a long integer literal without BigInt and reads long ones in float fields (found by config-parsers.fuzz.test.ts)', () => {
    // BigInt's decimal parse is superlinear: 3·10^6 digits took seconds.
    expect(withBigIntLimit(() => errorOf(() => parse(`max_batch_size: 1${'0'.repeat(1_000_000)}`)))).toMatch(
      /^config\.pbtxt:1:17: Integer out of range \(10+\) for field "max_batch_size" of type int32\.$/,
    );
    expect(errorOf(() => parse(`max_batch_size: 123456789012345678901`))).toMatch(/Integer out of range/);
    const c = parse(`sequence_batching { direct { minimum_slot_utilization: 1${'0'.repeat(30)} } }`);
    expect((c.sequence_batching as { direct: { minimum_slot_utilization: number } }).direct.minimum_slot_utilization).toBe(1e30);
  });

  it('reads a 3·10^6-character string literal within two seconds (found by config-parsers.fuzz.test.ts)', () => {
    // One TextEncoder call and one array spread per character took over four seconds (now ~0.1 s).
    const start = performance.now();
    const c = parse(`name: "é\\x41${'0'.repeat(3_000_000)}"`);
    expect(performance.now() - start).toBeLessThan(2_000);
    expect(c.name).toBe(`éA${'0'.repeat(3_000_000)}`);
  });

  it('converts int64/uint64 to numbers', () => {
    const c = parse('dynamic_batching { max_queue_delay_microseconds: 18446744073709551615 } version_policy { specific { versions: [ -9223372036854775808 ] } }');
    expect(c.dynamic_batching?.max_queue_delay_microseconds).toBe(18446744073709551615);
    expect(c.version_policy).toEqual({ specific: { versions: [-9223372036854775808] } });
  });

  it('reads maps as repeated key/value entries, with or without ":", also in list form', () => {
    const c = parse(`
      parameters { key: "a" value: { string_value: "1" } }
      parameters { key: "b" value { string_value: "2" } }
      parameters [ { key: "c", value: { string_value: "3" } }, { key: "a" value { string_value: "4" } } ]
      metric_tags { key: "k" value: "v" }
      cc_model_filenames: { value: "only-value" }`);
    expect(c.parameters).toEqual({ a: { string_value: '4' }, b: { string_value: '2' }, c: { string_value: '3' } });
    expect(c.metric_tags).toEqual({ k: 'v' });
    expect(c.cc_model_filenames).toEqual({ '': 'only-value' });
  });

  it('keeps a __proto__ map key as an entry, not as the prototype (found by config-parsers.fuzz.test.ts)', () => {
    const c = parse('parameters { key: "__proto__" value { string_value: "x" } }');
    expect(Object.getPrototypeOf(c.parameters)).toBe(Object.prototype);
    expect(Object.entries(c.parameters)).toEqual([['__proto__', { string_value: 'x' }]]);
  });

  it('keys uint64 maps by the decimal key', () => {
    const c = parse(`dynamic_batching {
      priority_levels: 2 default_priority_level: 1
      priority_queue_policy { key: 0x2 value: { timeout_action: DELAY default_timeout_microseconds: 100 } }
      priority_queue_policy [ { key: 1 value: { max_queue_size: 3 } } ] }`);
    expect(c.dynamic_batching?.priority_queue_policy).toEqual({
      '2': { timeout_action: 'DELAY', default_timeout_microseconds: 100, allow_timeout_override: false, max_queue_size: 0 },
      '1': { timeout_action: 'REJECT', default_timeout_microseconds: 0, allow_timeout_override: false, max_queue_size: 3 },
    });
  });

  it('reads oneof members; unset members stay absent', () => {
    const c = parse('version_policy { all { } } model_warmup { inputs { key: "x" value { zero_data: true dims: 1 } } }');
    expect(c.version_policy).toEqual({ all: {} });
    expect(c.model_warmup[0]?.inputs['x']).toEqual({ data_type: 'TYPE_INVALID', dims: [1], zero_data: true });
  });
});

describe('parseModelConfigText: errors name file, line and column', () => {
  it('defaults the file name to config.pbtxt', () => {
    expect(errorOf(() => parse('bogus: 1'))).toBe(
      'config.pbtxt:1:1: Message type "inference.ModelConfig" has no field named "bogus".',
    );
  });

  it('refuses Object.prototype member names as fields (found by config-parsers.fuzz.test.ts: a TypeError)', () => {
    expect(errorOf(() => parse('constructor: 1'))).toBe('config.pbtxt:1:1: Message type "inference.ModelConfig" has no field named "constructor".');
    expect(errorOf(() => parse('input { __proto__ { } }'))).toBe('config.pbtxt:1:9: Message type "inference.ModelInput" has no field named "__proto__".');
  });

  it('uses the given file name and points at the offending token', () => {
    expect(errorOf(() => parseModelConfigText('name: "m"\ninput {\n  dims: [ 1, x ]\n}', 'models/m/config.pbtxt'))).toBe(
      'models/m/config.pbtxt:3:14: Expected integer, got: x',
    );
  });

  it.each([
    ['input { nope: 1 }', '1:9: Message type "inference.ModelInput" has no field named "nope".'],
    ['input { data_type: TYPE_FLOAT }', '1:20: Unknown enumeration value of "TYPE_FLOAT" for field "data_type".'],
    ['input { data_type: 99 }', '1:20: Unknown enumeration value of "99" for field "data_type".'],
    ['max_batch_size: "8"', '1:17: Expected integer, got: "8"'],
    ['max_batch_size: 1.5', '1:17: Expected integer, got: 1.5'],
    ['name: foo', '1:7: Expected string, got: foo'],
    ['model_transaction_policy { decoupled: yes }', '1:39: Invalid value for boolean field "decoupled". Value: "yes".'],
    ['max_batch_size: 2147483648', '1:17: Integer out of range (2147483648) for field "max_batch_size" of type int32.'],
    ['max_batch_size: -2147483649', '1:18: Integer out of range (-2147483649) for field "max_batch_size" of type int32.'],
    ['dynamic_batching { priority_levels: -1 }', '1:38: Integer out of range (-1) for field "priority_levels" of type uint64.'],
    ['instance_group { gpus: 4294967296 }', '1:24: Integer out of range (4294967296) for field "gpus" of type int32.'],
    ['name: "a"\nname: "b"', '2:1: Non-repeated field "name" is specified multiple times.'],
    ['dynamic_batching {} dynamic_batching {}', '1:21: Non-repeated field "dynamic_batching" is specified multiple times.'],
    [
      'dynamic_batching { }\nsequence_batching { }',
      '2:1: Field "sequence_batching" is specified along with field "dynamic_batching", another member of oneof "scheduling_choice" for type "inference.ModelConfig".',
    ],
    [
      'version_policy { latest {} specific {} }',
      '1:28: Field "specific" is specified along with field "latest", another member of oneof "policy_choice" for type "inference.ModelVersionPolicy".',
    ],
    ['[inference.foo]: 1', '1:1: Extension and Any field names ("[...]") are not supported in a model configuration.'],
    ['name "x"', '1:6: Expected ":", found ""x"".'],
    ['input { name: "a"', '1:18: Expected "}".'],
    ['input { name: "a" >', '1:19: Expected identifier, got: >'],
    ['}', '1:1: Expected identifier, got: }'],
    ['name: [ "a" ]', '1:7: Expected string, got: ['],
    ['input [ { name: "a" } { name: "b" } ]', '1:23: Expected ",", found "{".'],
    ['parameters { key: "a" other: 1 }', '1:23: Message type "inference.ModelConfig.ParametersEntry" has no field named "other".'],
    ['parameters { key: "a" key: "b" }', '1:23: Non-repeated field "key" is specified multiple times.'],
    ['name: "abc', '1:7: String literals cannot cross line boundaries.'],
    ['name: "\\q"', '1:7: Invalid escape sequence in string literal.'],
    ['max_batch_size: 09', '1:17: Numbers starting with leading zero must be in octal.'],
    ['max_batch_size: 8abc', '1:17: Need space between number and identifier.'],
    ['name: "a" @', '1:11: Invalid character "@".'],
  ])('%s', (text, where) => {
    expect(errorOf(() => parse(text))).toBe(`config.pbtxt:${where}`);
  });
});

describe('parseModelConfigText: real Triton configs', () => {
  it('simple', () => {
    const c = parse(`name: "simple"
platform: "onnxruntime_onnx"
max_batch_size: 8
input [
  { name: "INPUT0" data_type: TYPE_INT32 dims: [ 16 ] },
  { name: "INPUT1" data_type: TYPE_INT32 dims: [ 16 ] }
]
output [
  { name: "OUTPUT0" data_type: TYPE_INT32 dims: [ 16 ] },
  { name: "OUTPUT1" data_type: TYPE_INT32 dims: [ 16 ] }
]`);
    expect(c.input.map((i) => [i.name, i.data_type, i.dims])).toEqual([
      ['INPUT0', 'TYPE_INT32', [16]],
      ['INPUT1', 'TYPE_INT32', [16]],
    ]);
    expect(c.output).toHaveLength(2);
    expect(c.output[0]?.label_filename).toBe('');
  });

  it('simple_sequence', () => {
    const c = parse(`name: "simple_sequence"
platform: "onnxruntime_onnx"
max_batch_size: 8
sequence_batching {
  control_input [
    { name: "START" control [ { kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] } ] },
    { name: "READY" control [ { kind: CONTROL_SEQUENCE_READY int32_false_true: [ 0, 1 ] } ] }
  ]
}
input [ { name: "INPUT" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "OUTPUT" data_type: TYPE_INT32 dims: [ 1 ] } ]
instance_group [ { kind: KIND_CPU } ]`);
    const sb = c.sequence_batching as ModelSequenceBatching;
    expect(sb.direct).toBeUndefined();
    expect(sb.max_sequence_idle_microseconds).toBe(0);
    expect(sb.control_input.map((ci) => [ci.name, ci.control[0]?.kind, ci.control[0]?.int32_false_true])).toEqual([
      ['START', 'CONTROL_SEQUENCE_START', [0, 1]],
      ['READY', 'CONTROL_SEQUENCE_READY', [0, 1]],
    ]);
    expect(c.instance_group[0]).toEqual({
      name: '', kind: 'KIND_CPU', count: 0, gpus: [], secondary_devices: [], profile: [], passive: false, host_policy: '',
    });
  });

  it('simple_dyna_sequence', () => {
    const c = parse(`name: "simple_dyna_sequence"
platform: "custom"
max_batch_size: 8
default_model_filename: "libdyna_sequence.so"
sequence_batching {
    max_sequence_idle_microseconds: 10000000
    oldest {
      max_candidate_sequences: 1024
      max_queue_delay_microseconds: 10000
    }

  control_input [
    { name: "START" control [ { kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] } ] },
    { name: "END" control [ { kind: CONTROL_SEQUENCE_END int32_false_true: [ 0, 1 ] } ] },
    { name: "READY" control [ { kind: CONTROL_SEQUENCE_READY int32_false_true: [ 0, 1 ] } ] },
    { name: "CORRID" control [ { kind: CONTROL_SEQUENCE_CORRID data_type: TYPE_UINT64 } ] }
  ]
}
input [ { name: "INPUT" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "OUTPUT" data_type: TYPE_INT32 dims: [ 1 ] } ]
parameters [ { key: "execute_delay_ms" value: { string_value: "3" } } ]
instance_group [ { count: 2 kind: KIND_CPU } ]`);
    const sb = c.sequence_batching as ModelSequenceBatching;
    expect(sb.max_sequence_idle_microseconds).toBe(10_000_000);
    expect(sb.oldest).toEqual({
      max_candidate_sequences: 1024, preferred_batch_size: [], max_queue_delay_microseconds: 10000, preserve_ordering: false,
    });
    expect(sb.control_input[3]?.control[0]?.data_type).toBe('TYPE_UINT64');
    expect(c.parameters).toEqual({ execute_delay_ms: { string_value: '3' } });
    expect(c.instance_group[0]?.count).toBe(2);
  });

  it('repeat_int32 (decoupled: True)', () => {
    const c = parse(`
backend: "repeat"
max_batch_size: 0
model_transaction_policy {
  decoupled: True
}
input [
  { name: "IN" data_type: TYPE_INT32 dims: [ -1 ] },
  { name: "DELAY" data_type: TYPE_UINT32 dims: [ -1 ] },
  { name: "WAIT" data_type: TYPE_UINT32 dims: [ 1 ] }
]
output [
  { name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] },
  { name: "IDX" data_type: TYPE_UINT32 dims: [ 1 ] }
]
instance_group [{ kind: KIND_CPU }]`);
    expect(c.model_transaction_policy).toEqual({ decoupled: true });
    expect(c.input.map((i) => i.data_type)).toEqual(['TYPE_INT32', 'TYPE_UINT32', 'TYPE_UINT32']);
  });

  it('an ensemble with input_map/output_map', () => {
    const c = parse(`name: "preprocess_resnet50_ensemble"
platform: "ensemble"
max_batch_size: 128
input [ { name: "INPUT" data_type: TYPE_STRING dims: [ 1 ] } ]
output [ { name: "OUTPUT" data_type: TYPE_FP32 dims: [ 1000 ] label_filename: "resnet50_labels.txt" } ]
ensemble_scheduling {
  step [
    {
      model_name: "image_preprocess_nchw_3x224x224_inception"
      model_version: -1
      input_map { key: "INPUT" value: "INPUT" }
      output_map { key: "OUTPUT" value: "preprocessed_image" }
    },
    {
      model_name: "resnet50_netdef"
      model_version: -1
      input_map { key: "gpu_0/data" value: "preprocessed_image" }
      output_map { key: "gpu_0/softmax" value: "OUTPUT" }
    }
  ]
}`);
    const ens = c.ensemble_scheduling as ModelEnsembling;
    expect(ens.max_inflight_requests).toBe(0);
    expect(ens.step[1]).toEqual({
      model_name: 'resnet50_netdef', model_version: -1, input_map: { 'gpu_0/data': 'preprocessed_image' },
      output_map: { 'gpu_0/softmax': 'OUTPUT' }, model_namespace: '',
    });
  });

  it('dynamic batching with a priority_queue_policy map keyed by uint64', () => {
    const c = parse(`name: "dyn"
backend: "onnxruntime"
max_batch_size: 8
dynamic_batching {
  preferred_batch_size: [ 2, 4 ]
  max_queue_delay_microseconds: 100
  priority_levels: 2
  default_priority_level: 2
  default_queue_policy { timeout_action: REJECT default_timeout_microseconds: 5000 allow_timeout_override: true max_queue_size: 10 }
  priority_queue_policy { key: 1 value: { timeout_action: DELAY default_timeout_microseconds: 1000 } }
}`);
    expect(c.dynamic_batching?.default_queue_policy).toEqual({
      timeout_action: 'REJECT', default_timeout_microseconds: 5000, allow_timeout_override: true, max_queue_size: 10,
    });
    expect(Object.keys(c.dynamic_batching?.priority_queue_policy ?? {})).toEqual(['1']);
  });
});
