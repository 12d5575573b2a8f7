/**
 * The model configuration as a plain object: field names exactly as in `proto/model_config.proto`
 * (snake_case), enums as their names, int64/uint64 as numbers, every scalar/repeated/map field
 * present (proto3 defaults filled in), unset sub-messages and oneof members absent.
 *
 * This is the same shape Triton serves from `/v2/models/{m}/config` (protobuf JSON with
 * preserved field names and always-printed primitives), so rendering JSON is printing this
 * object in proto declaration order (`renderModelConfigJson`).
 *
 * Only the fields the worker reads are typed precisely; the rest ride along as `unknown`.
 */
export type DataTypeName =
  | 'TYPE_INVALID'
  | 'TYPE_BOOL'
  | 'TYPE_UINT8'
  | 'TYPE_UINT16'
  | 'TYPE_UINT32'
  | 'TYPE_UINT64'
  | 'TYPE_INT8'
  | 'TYPE_INT16'
  | 'TYPE_INT32'
  | 'TYPE_INT64'
  | 'TYPE_FP16'
  | 'TYPE_FP32'
  | 'TYPE_FP64'
  | 'TYPE_STRING'
  | 'TYPE_BF16';

export interface ModelTensorReshape {
  shape: number[];
}

export interface ModelInput {
  name: string;
  data_type: DataTypeName;
  format: string;
  dims: number[];
  reshape?: ModelTensorReshape;
  is_shape_tensor: boolean;
  allow_ragged_batch: boolean;
  optional: boolean;
  is_non_linear_format_io: boolean;
}

export interface ModelOutput {
  name: string;
  data_type: DataTypeName;
  dims: number[];
  reshape?: ModelTensorReshape;
  label_filename: string;
  is_shape_tensor: boolean;
  is_non_linear_format_io: boolean;
}

export type InstanceGroupKind = 'KIND_AUTO' | 'KIND_GPU' | 'KIND_CPU' | 'KIND_MODEL';

export interface ModelInstanceGroup {
  name: string;
  kind: InstanceGroupKind;
  count: number;
  gpus: number[];
  secondary_devices: unknown[];
  profile: string[];
  passive: boolean;
  host_policy: string;
  rate_limiter?: unknown;
}

export type ModelVersionPolicy =
  | { latest: { num_versions: number } }
  | { all: Record<string, never> }
  | { specific: { versions: number[] } };

export interface ModelQueuePolicy {
  timeout_action: 'REJECT' | 'DELAY';
  default_timeout_microseconds: number;
  allow_timeout_override: boolean;
  max_queue_size: number;
}

export interface ModelDynamicBatching {
  preferred_batch_size: number[];
  max_queue_delay_microseconds: number;
  preserve_ordering: boolean;
  priority_levels: number;
  default_priority_level: number;
  default_queue_policy?: ModelQueuePolicy;
  priority_queue_policy: Record<string, ModelQueuePolicy>;
}

export interface ModelWarmupInput {
  data_type: DataTypeName;
  dims: number[];
  zero_data?: boolean;
  random_data?: boolean;
  input_data_file?: string;
}

export interface ModelWarmup {
  name: string;
  batch_size: number;
  inputs: Record<string, ModelWarmupInput>;
  count: number;
}

export interface ModelParameter {
  string_value: string;
}

export interface ModelConfig {
  name: string;
  platform: string;
  backend: string;
  runtime: string;
  version_policy?: ModelVersionPolicy;
  max_batch_size: number;
  input: ModelInput[];
  output: ModelOutput[];
  batch_input: unknown[];
  batch_output: unknown[];
  optimization?: Record<string, unknown>;
  dynamic_batching?: ModelDynamicBatching;
  sequence_batching?: Record<string, unknown>;
  ensemble_scheduling?: Record<string, unknown>;
  instance_group: ModelInstanceGroup[];
  default_model_filename: string;
  cc_model_filenames: Record<string, string>;
  metric_tags: Record<string, string>;
  parameters: Record<string, ModelParameter>;
  model_warmup: ModelWarmup[];
  model_operations?: Record<string, unknown>;
  model_transaction_policy?: { decoupled: boolean };
  model_repository_agents?: Record<string, unknown>;
  response_cache?: { enable: boolean };
  model_metrics?: Record<string, unknown>;
}

// ---------------------------------------------------------------------------------------------
// Precise shapes for the sub-messages `ModelConfig` above types loosely. `ModelConfig` keeps its
// loose field types (siblings rely on them); cast to these when reading the details. Every
// object produced by this package's parsers has all the non-optional members below.

export interface ModelPinnedMemoryBuffer {
  enable: boolean;
}

export interface ModelOptimizationPolicy {
  [field: string]: unknown;
  graph?: { level: number };
  priority: 'PRIORITY_DEFAULT' | 'PRIORITY_MAX' | 'PRIORITY_MIN';
  cuda?: Record<string, unknown>;
  execution_accelerators?: Record<string, unknown>;
  input_pinned_memory?: ModelPinnedMemoryBuffer;
  output_pinned_memory?: ModelPinnedMemoryBuffer;
  gather_kernel_buffer_threshold: number;
  eager_batching: boolean;
}

export type SequenceControlKind =
  | 'CONTROL_SEQUENCE_START'
  | 'CONTROL_SEQUENCE_READY'
  | 'CONTROL_SEQUENCE_END'
  | 'CONTROL_SEQUENCE_CORRID';

export interface ModelSequenceControl {
  kind: SequenceControlKind;
  int32_false_true: number[];
  fp32_false_true: number[];
  bool_false_true: boolean[];
  data_type: DataTypeName;
}

export interface ModelSequenceControlInput {
  name: string;
  control: ModelSequenceControl[];
}

export interface ModelSequenceInitialState {
  data_type: DataTypeName;
  dims: number[];
  zero_data?: boolean;
  data_file?: string;
  name: string;
}

export interface ModelSequenceState {
  input_name: string;
  output_name: string;
  data_type: DataTypeName;
  dims: number[];
  initial_state: ModelSequenceInitialState[];
  use_same_buffer_for_input_output: boolean;
  use_growable_memory: boolean;
}

export interface ModelSequenceBatching {
  [field: string]: unknown;
  /** Present when the direct strategy is chosen explicitly (direct is the default either way). */
  direct?: { max_queue_delay_microseconds: number; minimum_slot_utilization: number };
  oldest?: {
    max_candidate_sequences: number;
    preferred_batch_size: number[];
    max_queue_delay_microseconds: number;
    preserve_ordering: boolean;
  };
  /** 0 in a config; normalised to 1000000. */
  max_sequence_idle_microseconds: number;
  control_input: ModelSequenceControlInput[];
  state: ModelSequenceState[];
  iterative_sequence: boolean;
}

export interface ModelEnsemblingStep {
  model_name: string;
  /** -1: the latest version. */
  model_version: number;
  /** Key: the step model's tensor name. Value: the ensemble tensor name. */
  input_map: Record<string, string>;
  output_map: Record<string, string>;
  model_namespace: string;
}

export interface ModelEnsembling {
  [field: string]: unknown;
  step: ModelEnsemblingStep[];
  /** 0: unlimited. */
  max_inflight_requests: number;
}

export interface ModelMetricControl {
  metric_identifier?: { family: string };
  histogram_options?: { buckets: number[] };
}

export interface ModelMetrics {
  [field: string]: unknown;
  metric_control: ModelMetricControl[];
}
