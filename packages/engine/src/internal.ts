/**
 * Things sibling packages and tests need but users do not: the pure building blocks
 * (normalisation, repository rules, ORT config rules, statistics) and the roles' internals.
 */
export { compileEngineOptions } from './options.js';
export type { CompiledEngineOptions } from './options.js';
export { normalizeRequest, requestPrefix, dimsToString, applyReshape } from './request-normalizer.js';
export {
  validateModelName,
  listRepositoryModels,
  locateModel,
  parseVersionDir,
  selectVersions,
  completeBackendFields,
  checkConfigName,
  DEFAULT_MODEL_FILENAMES,
} from './repository.js';
export { readModelSource, materializeOverride } from './model/model-source.js';
export type { ModelSource, OverrideFolder } from './model/model-source.js';
export { resolveBackend, backendNameOf, PLATFORM_BACKENDS } from './backend.js';
export { OnnxRuntimeBackend, sessionIo } from './onnxruntime/onnxruntime-backend.js';
export type { OnnxRuntimeBackendOptions } from './onnxruntime/onnxruntime-backend.js';
export { SessionLoadError, SessionThread } from './onnxruntime/session-thread.js';
export type { WireTensor, WireValueMetadata } from './onnxruntime/session-thread.js';
export { autoCompleteOnnxConfig, checkOnnxIo, ONNX_DEFAULT_MAX_BATCH_SIZE } from './onnxruntime/onnx-io-config.js';
export type { OnnxIo, OnnxIoInfo } from './onnxruntime/onnx-io-config.js';
export { ortTypeOf, configTypeOfOrt, toWireTensor, fromWireTensor, concatBatch, splitBatch } from './onnxruntime/onnx-tensor-codec.js';
export { createScheduler } from './scheduler-factory.js';
export type { SchedulerFactoryContext } from './scheduler-factory.js';
export type { Scheduler, SchedulerContext, BatchRunner } from './scheduler.js';
export { DefaultScheduler, JobQueue } from './default-scheduler.js';
export { executeBatch } from './batch-executor.js';
export { InferenceJob } from './inference-job.js';
export type { JobState } from './inference-job.js';
export { ModelStatsCollector } from './statistics.js';
export type { SuccessTimes } from './statistics.js';
export { ModelLifecycle, UNLOADED_REASON } from './model/model-lifecycle.js';
export { LoadedVersion } from './model/loaded-version.js';
export { buildBaseConfig, loadVersion } from './model/model-loader.js';
export { runWarmup } from './warmup.js';
export { threadDecoderSession, createOnnxLlmExecutor } from './llm/llm-session.js';
export { sequenceOf, inSequence, correlationText } from './sequence/sequence-controls.js';
export type { CorrelationId, RequestSequence } from './sequence/sequence-controls.js';
// The KServe face of an LLM, for routers that answer it over their own LlmEndpoint (cluster router).
export { LlmInstance, parseLlmRequest } from './llm/llm-instance.js';
export type { LlmInstanceOptions } from './llm/llm-instance.js';
export { compileLlmOptions } from './llm/llm-options.js';
