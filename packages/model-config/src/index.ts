/**
 * @switchyard/model-config: Triton model configuration (config.pbtxt) as plain objects.
 *
 * Parse (text format or the JSON load override) -> normalise -> validate -> serve as JSON.
 * Pure: the only IO is reading `proto/model_config.proto` once.
 */
export type * from './types.js';
export { DEFAULT_CONFIG_FILE_NAME, parseModelConfigText } from './text-parser.js';
export { parseModelConfigJson } from './json-parser.js';
export {
  DEFAULT_MAX_SEQUENCE_IDLE_MICROSECONDS,
  normalizeModelConfig,
  tritonDefaultInstanceCount,
} from './normalize.js';
export type { NormalizeOptions } from './normalize.js';
export { DEFAULT_MIN_COMPUTE_CAPABILITY, validateModelConfig } from './validate.js';
export type { ValidateOptions } from './validate.js';
export { renderModelConfigJson } from './json-render.js';
export { configDataTypeToWire, wireDataTypeToConfig } from './datatype.js';
export { modelConfigProtoRoot } from './schema.js';
