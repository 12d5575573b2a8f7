export {};
export { OFF_LOOP_TOKENIZE_CHARS, Tokenizer, type EncodeOptions, type DecodeOptions } from './tokenizer/tokenizer.js';
export { ChatTemplate, detectContentFormat, type ChatMessage, type ChatTextPart, type ContentFormat, type RenderOptions, type TemplateSpecialTokens } from './chat-template.js';
export {
  readModelFolder,
  readModelFolderText,
  type ModelFolderFiles,
  type ModelConfigJson,
  type TokenizerConfigJson,
  type TokenizerJson,
  type SpecialTokenValue,
} from './tokenizer/tokenizer-files.js';
export {
  KV_HASH_SEED,
  blockHashFromBigInt,
  blockHashToBigInt,
  chainSequenceHash,
  hashTokenBlock,
  hashTokenBlocks,
  type LocalBlockHash,
  type SequenceHash,
  type TokenBlockHashes,
} from './block-hash.js';
export {
  KvBlockManager,
  type AllocationRequest,
  type BlockId,
  type BlockRef,
  type FullBlockSpec,
  type KVCacheBlocks,
  type KvBlockManagerOptions,
  type KvBlockStats,
  type PartialBlockId,
} from './kv-block-manager.js';
export {
  applyKvEvent,
  decodeKvCacheEvent,
  type KvCacheEvent,
  type KvCacheEventData,
  type KvEventSink,
  type KvSnapshot,
  type SnapshotBlock,
  type StoredBlock,
} from './kv-events.js';
export {
  DEFAULT_FREQUENCY_PENALTY,
  DEFAULT_MIN_P,
  DEFAULT_PRESENCE_PENALTY,
  DEFAULT_REPETITION_PENALTY,
  DEFAULT_TEMPERATURE,
  DEFAULT_TOP_K,
  DEFAULT_TOP_P,
  DEFAULT_MIN_TOKENS,
  LOGIT_BIAS_LIMIT,
  MAX_LOGIT_BIAS_ENTRIES,
  MAX_TOP_LOGPROBS,
  checkLogitBiasIds,
  compileSamplingParams,
  decodeSamplingDefaults,
  type CompiledSamplingParams,
  type SamplingDefaults,
  type SamplingParams,
} from './sampling-params.js';
export {
  DEFAULT_GENERATION_CONFIG_MODE,
  GENERATION_CONFIG_MODES,
  MAX_GENERATION_CONFIG_BYTES,
  generationDefaults,
  parseGenerationConfigMode,
  withoutModelEos,
  type GenerationConfigMode,
} from './generation-config.js';
export { createSamplerState, sample, type SampleResult, type SamplerState, type TopLogprobs } from './sampling.js';
export { compileJsonSchema, decodeGuidedDecoding, type GuidedDecoding } from './guided/json-schema.js';
export { compileTokenConstraint, type TokenConstraint } from './guided/token-constraint.js';
export { TokenVocabulary } from './guided/token-vocabulary.js';
export { gateOnReasoning, reasoningEnded, reasoningMarkersOf, type ReasoningMarkers } from './guided/reasoning-gate.js';
export { StopChecker, type FinishReason, type StopStep } from './stop-checker.js';
export { IncrementalDetokenizer, type DecodeFn, type TextDeltaSource } from './detokenizer.js';
export { LlmSequence, type LlmRequest, type SequenceStatus } from './llm-sequence.js';
export {
  DEFAULT_MAX_NUM_BATCHED_TOKENS,
  DEFAULT_MAX_NUM_SEQS,
  DEFAULT_WATERMARK,
  LlmScheduler,
  type LlmSchedulerOptions,
  type ScheduledSequence,
  type SchedulerOutput,
  type SequenceOutput,
} from './llm-scheduler.js';
export type { Executor, ExecutorOutput } from './executor.js';
export {
  DEFAULT_KV_TRANSFER_GBPS,
  DEFAULT_SIM_VOCAB_SIZE,
  SIM_KV_DEFAULTS,
  SimulatedExecutor,
  simulatedKvLayout,
  type SimulatedExecutorOptions,
  type SimulatedKvTransferOptions,
} from './simulated-executor.js';
export { DEFAULT_KV_TRANSFER_TTL_MS } from './kv-exchange.js';
export { VirtualClock, polynomialTimingModel, stepMs, systemClock, type Clock, type TimingModel } from './timing-model.js';
export { EngineCore, forwardPassFigures, replay, type ForwardPassFigures, type ForwardPassSink, type RequestMetrics, type StepResult } from './engine-core.js';
export type {
  GenerateError,
  GenerateOutput,
  GenerateRequest,
  GenerateUsage,
  HistogramSnapshot,
  LlmEndpoint,
  LlmEngineMetrics,
  LlmKvSource,
  LlmModelCard,
} from './llm-endpoint.js';
export { modelVocabSize } from './llm-endpoint.js';
export { kvLayoutMismatch, type KvBlockData, type KvImport, type KvLayout, type KvTransferLease, type LlmKvTransfer } from './kv-transfer.js';
export {
  DEFAULT_COMPLETION_MAX_TOKENS,
  InvalidParamError,
  MAX_CHOICES,
  MAX_N,
  decodeJsonBody,
  errorParam,
  parseChatCompletionRequest,
  parseCompletionRequest,
  samplingFor,
  type ChatCompletion,
  type ChatCompletionChunk,
  type ChatCompletionMessageParam,
  type ChatCompletionRequest,
  type ChatContentPart,
  type ChatLogprobs,
  type ChatTool,
  type ChatToolCall,
  type ChatToolCallDelta,
  type ToolChoice,
  type ChatTokenLogprob,
  type Completion,
  type CompletionChunk,
  type CompletionLogprobs,
  type CompletionPrompt,
  type CompletionRequest,
  type OpenAiErrorBody,
  type OpenAiFinishReason,
  type OpenAiModel,
  type OpenAiModelList,
  type OpenAiSamplingFields,
  type OpenAiUsage,
  type ParsedChatRequest,
  type ParsedCompletionRequest,
  type ParsedOpenAiRequest,
} from './openai-protocol.js';
export {
  ChatAssembler,
  CompletionAssembler,
  openAiModel,
  openAiUsage,
  withChoices,
  type AssemblerOptions,
  type ChatParsing,
  type ResponseHead,
  type TokenText,
} from './openai-response.js';
export { OutputProcessor, type OutputProcessorOptions, type ProcessedOutput, type ProcessedToken } from './output-processor.js';
export { ChatOutputParser, chatOutputParser, checkParserName, type ParserKind } from './output-parsers/chat-output-parser.js';
export { chatParsingFor, checkOutputParsing, resolveOutputParsing, type ChatParsingPlan, type OutputParsingConfig } from './output-parsers/chat-parsing.js';
export { collectEvents, type ParsedOutput, type ParserEvent, type StreamParser } from './output-parsers/parser-events.js';
export { REASONING_PARSERS, promptEndsReasoning, type ReasoningContext } from './output-parsers/reasoning-parsers.js';
export { TOOL_CALL_PARSERS, type ToolCallIdStyle, type ToolCallParserSpec } from './output-parsers/tool-call-parsers.js';
export { chatPrompt, completionPrompt, textPromptTokens, type ChatPromptOptions, type PreprocessedPrompt, type PreprocessorEndpoint } from './preprocessor.js';
export {
  configureSharedPreprocessPool,
  DEFAULT_PREPROCESS_IDLE_INLINE_CHARS,
  DEFAULT_PREPROCESS_INLINE_CHARS,
  DEFAULT_PREPROCESS_MAX_PENDING,
  DEFAULT_PREPROCESS_THREADS,
  PreprocessPool,
  sharedPreprocessPool,
  type ChatPromptJob,
  type PreprocessPoolOptions,
  type PromptTextAndIds,
} from './preprocess-pool.js';
export { LlmEngine, type LlmEngineOptions } from './llm-engine.js';
export { E2E_BUCKETS_S, Histogram, ITL_BUCKETS_S, TTFT_BUCKETS_S } from './histogram.js';
export {
  createOrtDecoderSession,
  type DecoderSession,
  type DecoderTensor,
  type DecoderTensorType,
  type DecoderValueMetadata,
} from './decoder-session.js';
export { PagedKvCache, type GatherRow, type KvDtype, type PagedKvCacheOptions, type ScatterRow } from './paged-kv-cache.js';
export { OnnxExecutor, THREAD_SAMPLING_MIN_VOCAB, type OnnxExecutorOptions } from './onnx-executor.js';
export { promptTooLongError, refuseOverlongPromptText, requestTooLongError, tokenByteBound } from './context-length.js';
