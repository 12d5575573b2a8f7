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
export type { ModelLoadStep } from './model/model-loader.js';
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
  GpuSupport,
  InstanceSpec,
  ResponseSender,
} from './backend.js';
export * from './embedding/embedding-io.js';
export { JavaScriptBackend } from './javascript/javascript-backend.js';
export type { JavaScriptBackendOptions } from './javascript/javascript-backend.js';
export type { NormalizedInput, NormalizedRequest } from './request-normalizer.js';
export { GPU_INSTALL_HINT, gpuPlacement } from './gpu/gpu-probe.js';
export type { GpuDevice, GpuInventory, GpuPlacement, GpuProbe, GpuSample } from './gpu/gpu-probe.js';
export { MemoryGpuProbe } from './gpu/memory-gpu-probe.js';
export { DEFAULT_GPU_SAMPLE_INTERVAL_MS, DEFAULT_NVIDIA_SMI_TIMEOUT_MS, NvidiaSmiProbe } from './gpu/nvidia-smi-probe.js';
export type { NvidiaSmiProbeOptions } from './gpu/nvidia-smi-probe.js';
