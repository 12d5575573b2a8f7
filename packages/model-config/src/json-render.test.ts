import { describe, expect, it } from 'vitest';
import { parseModelConfigJson } from './json-parser.js';
import { renderModelConfigJson } from './json-render.js';
import { normalizeModelConfig } from './normalize.js';
import { parseModelConfigText } from './text-parser.js';

// GET /v2/models/densenet_onnx/config from a real Triton (ONNX model on CPU).
const DENSENET_JSON =
  '{"name":"densenet_onnx","platform":"onnxruntime_onnx","backend":"onnxruntime","runtime":"","version_policy":{"latest":{"num_versions":1}},"max_batch_size":0,"input":[{"name":"data_0","data_type":"TYPE_FP32","format":"FORMAT_NONE","dims":[1,3,224,224],"is_shape_tensor":false,"allow_ragged_batch":false,"optional":false,"is_non_linear_format_io":false}],"output":[{"name":"fc6_1","data_type":"TYPE_FP32","dims":[1,1000,1,1],"label_filename":"","is_shape_tensor":false,"is_non_linear_format_io":false}],"batch_input":[],"batch_output":[],"optimization":{"priority":"PRIORITY_DEFAULT","input_pinned_memory":{"enable":true},"output_pinned_memory":{"enable":true},"gather_kernel_buffer_threshold":0,"eager_batching":false},"instance_group":[{"name":"densenet_onnx","kind":"KIND_CPU","count":2,"gpus":[],"secondary_devices":[],"profile":[],"passive":false,"host_policy":""}],"default_model_filename":"model.onnx","cc_model_filenames":{},"metric_tags":{},"parameters":{},"model_warmup":[]}';

const render = (pbtxt: string, modelName = 'm'): string =>
  renderModelConfigJson(normalizeModelConfig(parseModelConfigText(pbtxt), { modelName }));

describe('renderModelConfigJson', () => {
  it("matches Triton's /config output for densenet_onnx byte for byte", () => {
    const pbtxt = `
      platform: "onnxruntime_onnx"
      max_batch_size: 0
      input [ { name: "data_0" data_type: TYPE_FP32 dims: [ 1, 3, 224, 224 ] } ]
      output [ { name: "fc6_1" data_type: TYPE_FP32 dims: [ 1, 1000, 1, 1 ] } ]`;
    expect(render(pbtxt, 'densenet_onnx')).toBe(DENSENET_JSON);
  });

  it('round-trips through the JSON parser', () => {
    expect(renderModelConfigJson(parseModelConfigJson(DENSENET_JSON))).toBe(DENSENET_JSON);
  });

  it('prints dynamic batching in full, with 64-bit fields as numbers', () => {
    const json = render('backend: "onnxruntime" max_batch_size: 4 dynamic_batching { }');
    expect(json).toContain(
      '"dynamic_batching":{"preferred_batch_size":[4],"max_queue_delay_microseconds":0,"preserve_ordering":false,"priority_levels":0,"default_priority_level":0,"priority_queue_policy":{}}',
    );
  });

  it('prints oneof members only when set, and maps as objects in key order', () => {
    const json = JSON.parse(
      render(`backend: "onnxruntime" max_batch_size: 4
        dynamic_batching { priority_levels: 10 default_priority_level: 1
          priority_queue_policy { key: 10 value { max_queue_size: 1 } }
          priority_queue_policy { key: 2 value { default_timeout_microseconds: 7 } } }
        parameters { key: "b" value { string_value: "2" } }
        parameters { key: "a" value { string_value: "1" } }`),
    ) as Record<string, unknown>;
    expect(Object.keys(json)).not.toContain('sequence_batching');
    expect(Object.keys(json)).not.toContain('ensemble_scheduling');
    expect(Object.keys(json['parameters'] as object)).toEqual(['a', 'b']);
    const db = json['dynamic_batching'] as { priority_queue_policy: Record<string, unknown> };
    expect(Object.keys(db.priority_queue_policy)).toEqual(['2', '10']);
    expect(db.priority_queue_policy['2']).toEqual({
      timeout_action: 'REJECT', default_timeout_microseconds: 7, allow_timeout_override: false, max_queue_size: 0,
    });
  });

  it('renders sequence batching, ensemble steps and warmup dims as numbers', () => {
    const seq = render(`backend: "onnxruntime" max_batch_size: 2
      sequence_batching { oldest { max_queue_delay_microseconds: 5 } state { dims: [ 3 ] initial_state { dims: [ 3 ] zero_data: true } }
        control_input { name: "C" control { kind: CONTROL_SEQUENCE_START fp32_false_true: [ 0, 0.1 ] } } }
      model_warmup { name: "w" batch_size: 1 inputs { key: "x" value { data_type: TYPE_FP32 dims: [ 2 ] random_data: true } } }`);
    expect(seq).toContain('"max_sequence_idle_microseconds":1000000');
    expect(seq).toContain('"oldest":{"max_candidate_sequences":0,"preferred_batch_size":[2],"max_queue_delay_microseconds":5,"preserve_ordering":false}');
    expect(seq).toContain('"fp32_false_true":[0,0.1]');
    // Triton leaves initial_state dims as protobuf's strings (its fix-up looks in the wrong object).
    expect(seq).toContain('"state":[{"input_name":"","output_name":"","data_type":"TYPE_INVALID","dims":[3],"initial_state":[{"data_type":"TYPE_INVALID","dims":["3"],"zero_data":true,"name":""}]');
    expect(seq).toContain('"inputs":{"x":{"data_type":"TYPE_FP32","dims":[2],"random_data":true}}');

    const ens = render(`platform: "ensemble" ensemble_scheduling { step { model_name: "a" model_version: -1 input_map { key: "i" value: "I" } output_map { key: "o" value: "O" } } }`);
    expect(ens).toContain('"ensemble_scheduling":{"step":[{"model_name":"a","model_version":-1,"input_map":{"i":"I"},"output_map":{"o":"O"},"model_namespace":""}],"max_inflight_requests":0}');
    expect(ens).not.toContain('"optimization"');
    expect(ens).toContain('"instance_group":[]');
  });

  it('escapes strings the way rapidjson does and prints non-finite floats as strings', () => {
    const json = render(String.raw`backend: "x" parameters { key: "q\"\\\n\001" value { string_value: "é" } }
      sequence_batching { direct { minimum_slot_utilization: inf } }`);
    expect(json).toContain('"parameters":{"q\\"\\\\\\n\\u0001":{"string_value":"é"}}');
    expect(json).toContain('"minimum_slot_utilization":"Infinity"');
  });
});
