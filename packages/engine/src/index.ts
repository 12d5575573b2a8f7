/**
 * @switchyard/engine — the single-node inference engine: model repository, lifecycle,
 * schedulers, backends and statistics behind the `InferenceEngine` interface.
 */
export type * from './types.js';
export { Engine, createEngine } from './engine.js';
export { inferViaSubmit } from './infer-via-submit.js';
export { DEFAULT_EXTENSIONS, DEFAULT_MODEL_LOAD_THREAD_COUNT, DEFAULT_POLL_INTERVAL_SECS, DEFAULT_SERVER_NAME, DEFAULT_SERVER_VERSION, checkModelConfigName } from './options.js';
export { DEFAULT_BACKEND_SETTINGS, compileBackendConfig } from './backend-config.js';
export type { BackendCommandLine, BackendSettings, OnnxRuntimeSettings } from './backend-config.js';
export type { ControlMode, EngineOptions } from './options.js';
export { DEFAULT_LOAD_LIMITS } from './load-limits.js';
export type { LoadLimits } from './load-limits.js';
export type {
  Backend,
  BackendInstance,
  BackendModel,
  BackendModelContext,
  BackendResponse,
  BackendResult,
  ExecutionOutcome,
  ExecutionTiming,
  InstanceSpec,
  ResponseSender,
} from './backend.js';
export { JavaScriptBackend } from './javascript/javascript-backend.js';
export type { JavaScriptBackendOptions } from './javascript/javascript-backend.js';
export type { NormalizedInput, NormalizedRequest } from './request-normalizer.js';
