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
