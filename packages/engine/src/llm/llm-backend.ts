/**
 * The LLM backends: `backend: "llm"` runs a decoder-only ONNX model (Hugging Face / Optimum export
 * signature) through the LLM engine's ONNX executor; `backend: "mocker"` runs the same engine with the
 * simulated executor (Dynamo's mocker: no model, timing from a polynomial fit, deterministic tokens).
 * Both keep the KV cache in the engine's paged blocks with prefix caching and KV events.
 *
 * A version folder is a Hugging Face model folder: `tokenizer.json` (required), `tokenizer_config.json`
 * (chat template, special tokens), `config.json` (EOS ids, max_position_embeddings, vocab_size),
 * `generation_config.json` (extra end ids; sampling defaults in mode `auto`), `chat_template.jinja`
 * (optional), and for `llm` the ONNX file (`default_model_filename`, default `model.onnx`). A user's
 * export drops in unchanged. Engine settings are config parameters (llm-options.ts).
 *
 * Vocabulary: tokens are sampled from the first `vocab_size` logits (config.json's, as vLLM sizes
 * the LM head; else the tokenizer's), never beyond the tokenizer's ids: Gemma 3's tokenizer has one
 * id more than its logits, which that id then never is.
 *
 * One `LlmEngine` per loaded version, shared by the version's instances (continuous batching happens
 * inside the engine, not across instances). The ONNX session runs on its own worker thread
 * (`SessionThread`), so the server's event loop never waits for a forward pass; scheduling, KV
 * gather/scatter and sampling stay on the event loop between steps. Models must be decoupled.
 *
 * Devices: the engine is one per version, so instance groups do not multiply it. For `llm`, when the
 * version has a `KIND_GPU` group (placed by the loader on GPUs that exist), its ONNX session runs on
 * the CUDA execution provider of the first GPU of the first such group, and a missing provider fails
 * the load saying what to install; otherwise on the CPU. The `mocker` computes nothing: it runs the
 * same wherever its groups are placed (it stands in for a GPU engine, as Dynamo's mocker does).
 *
 * The version's `BackendModel.llm` is its `LlmEndpoint`: the OpenAI door generates through it directly.
 *
 * KV transfer (disaggregated prefill/decode): the endpoint's `kvTransfer` leases and imports blocks.
 * Its layout's model identity is, for `llm`, a SHA-256 digest of the ONNX file's bytes (two workers
 * loading the same export agree); for `mocker`, a digest of config.json's architecture fields. Lease
 * TTL and the mocker's simulated bandwidth are engine options (`LlmBackendSettings`).
 */
import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { enforceLimits, invalidArgument, resolveConfinedPath, unavailable, type Logger } from '@switchyard/common';
import {
  ChatTemplate,
  LlmEngine,
  SimulatedExecutor,
  Tokenizer,
  TokenVocabulary,
  reasoningMarkersOf,
  generationDefaults,
  readModelFolder,
  withoutModelEos,
  type Executor,
  type GenerationConfigMode,
  type SamplingDefaults,
  type ForwardPassSink,
  type KvEventSink,
  type LlmEndpoint,
  type ModelFolderFiles,
} from '@switchyard/llm';
import type { ModelConfig } from '@switchyard/model-config';
import { cudaProviderStatus, type ProviderStatus } from '@switchyard/ort';
import type { Backend, BackendInstance, BackendModel, BackendModelContext, GpuSupport, InstanceSpec } from '../backend.js';
import { LlmInstance } from './llm-instance.js';
import { DEFAULT_KV_TRANSFER_GBPS, DEFAULT_KV_TRANSFER_TTL_MS } from '../options.js';
import { DEFAULT_MAX_MODEL_LEN, compileLlmOptions, unknownLlmParameters, type LlmKind, type LlmModelOptions } from './llm-options.js';
import { createOnnxLlmExecutor } from './llm-session.js';
import { DEFAULT_LOAD_LIMITS, kvCacheLimitCheck, llmLimitChecks, type LoadLimits } from '../load-limits.js';

/** The KServe interface of an LLM model, as Triton's vLLM backend declares it. */
function completeIo(config: ModelConfig): ModelConfig {
  const io = (name: string, dataType: string, dims: number[], optional: boolean) => ({
    name,
    data_type: dataType,
    format: 'FORMAT_NONE',
    dims,
    is_shape_tensor: false,
    allow_ragged_batch: false,
    optional,
    is_non_linear_format_io: false,
  });
  const out = { ...config } as ModelConfig;
  if (config.input.length === 0) {
    out.input = [
      io('text_input', 'TYPE_STRING', [1], false),
      io('stream', 'TYPE_BOOL', [1], true),
      io('sampling_parameters', 'TYPE_STRING', [1], true),
      io('exclude_input_in_output', 'TYPE_BOOL', [1], true),
    ] as ModelConfig['input'];
  }
  if (config.output.length === 0) {
    out.output = [
      { name: 'text_output', data_type: 'TYPE_STRING', dims: [-1], label_filename: '', is_shape_tensor: false, is_non_linear_format_io: false },
    ] as ModelConfig['output'];
  }
  out.model_transaction_policy ??= { decoupled: true };
  return out;
}

class LlmModel implements BackendModel {
  constructor(
    readonly llm: LlmEndpoint,
    private readonly engine: LlmEngine,
    private readonly options: LlmModelOptions,
    private readonly logger: Logger,
    private readonly releaseExecutor: () => Promise<void>,
  ) {}

  async createInstance(spec: InstanceSpec): Promise<BackendInstance> {
    return new LlmInstance({ name: spec.name, endpoint: this.llm, defaultMaxTokens: this.options.defaultMaxTokens, logger: this.logger });
  }

  async release(): Promise<void> {
    await this.engine.shutdown();
    await this.releaseExecutor();
  }
}

/** Engine-wide settings of the LLM backends (EngineOptions.kvTransferTtlMs / kvTransferGbps / generationConfig). */
export interface LlmBackendSettings {
  readonly ttlMs: number;
  readonly gbps: number;
  /** A model's `generation_config` parameter overrides it. */
  readonly generationConfig: GenerationConfigMode;
}

const DEFAULT_SETTINGS: LlmBackendSettings = { ttlMs: DEFAULT_KV_TRANSFER_TTL_MS, gbps: DEFAULT_KV_TRANSFER_GBPS, generationConfig: 'auto' };

/** SHA-256 of a file's bytes, hex, streamed (model files may be large). */
export async function fileDigest(path: string): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of createReadStream(path)) hash.update(chunk as Buffer);
  return hash.digest('hex');
}

export class LlmBackend implements Backend {
  constructor(
    readonly name: LlmKind,
    private readonly limits: LoadLimits = DEFAULT_LOAD_LIMITS,
    private readonly transfer: LlmBackendSettings = DEFAULT_SETTINGS,
    /** Parameter defaults from the command line (`--backend-config=<llm|mocker>,<parameter>=<value>`); a model's own parameters win. */
    private readonly parameterDefaults: Readonly<Record<string, string>> = {},
    /** Whether onnxruntime-node's CUDA execution provider is installed (tests substitute it). */
    private readonly cudaStatus: () => ProviderStatus = () => cudaProviderStatus(),
  ) {}

  /** `llm` runs its session on the CUDA provider when it has one; the mocker runs anywhere. */
  gpuSupport(): GpuSupport {
    if (this.name === 'mocker') return { usable: true };
    const cuda = this.cudaStatus();
    return cuda.available ? { usable: true } : { usable: false, reason: cuda.reason };
  }

  async autoCompleteConfig(context: BackendModelContext): Promise<ModelConfig> {
    return completeIo(context.config);
  }

  async loadModel(context: BackendModelContext): Promise<BackendModel> {
    const { config, modelName, versionPath, logger } = context;
    const fail = (why: string, cause?: unknown): never => {
      throw unavailable(`unable to load model '${modelName}': ${why}`, cause);
    };
    if (config.model_transaction_policy?.decoupled !== true) {
      fail(`the '${this.name}' backend serves decoupled models only: set model_transaction_policy { decoupled: true }`);
    }
    if (config.max_batch_size !== 0) fail(`the '${this.name}' backend batches inside its engine: set max_batch_size: 0`);
    const options = compileLlmOptions(config, this.name, undefined, this.parameterDefaults);
    // Refused before anything is read or allocated (see load-limits.ts).
    const limitPrefix = `unable to load model '${modelName}'`;
    enforceLimits(limitPrefix, llmLimitChecks(options, this.limits));
    const unknown = unknownLlmParameters(config);
    if (unknown.length > 0) logger.warn({ model: modelName, parameters: unknown }, 'ignoring unknown LLM parameters');

    let files: ModelFolderFiles;
    let tokenizer: Tokenizer;
    let chatTemplate: ChatTemplate | undefined;
    let generation: SamplingDefaults;
    let vocabSize: number;
    try {
      files = await readModelFolder(versionPath);
      tokenizer = Tokenizer.fromModelFolderFiles(files);
      chatTemplate = ChatTemplate.fromTokenizerConfig(files.tokenizerConfig, files.chatTemplateFile);
      generation = generationDefaults(files.generationConfig, options.generationConfig ?? this.transfer.generationConfig);
      vocabSize = sampledVocabSize(tokenizer.vocabSize, files.modelConfig?.vocab_size);
    } catch (e) {
      return fail(e instanceof Error ? e.message : String(e), e);
    }
    const positions = files.modelConfig?.['max_position_embeddings'];
    const maxModelLen = options.maxModelLen ?? (typeof positions === 'number' && positions >= 2 ? positions : DEFAULT_MAX_MODEL_LEN);
    // config.json's max_position_embeddings counts too when the parameter is not given.
    enforceLimits(limitPrefix, llmLimitChecks({ ...options, maxModelLen }, this.limits));

    let executor: Executor;
    let releaseExecutor = async (): Promise<void> => {};
    if (this.name === 'mocker') {
      executor = new SimulatedExecutor({
        speedupRatio: options.speedupRatio,
        seed: options.seed,
        vocabSize,
        kvTransfer: { blockSize: options.blockSize, modelConfig: files.modelConfig, gbps: this.transfer.gbps },
      });
    } else {
      const name = config.default_model_filename !== '' ? config.default_model_filename : 'model.onnx';
      const found = resolveConfinedPath(versionPath, name, `default_model_filename '${name}' of model '${modelName}'`, 'its version folder');
      if (!found.exists) fail(`unable to find '${found.path}' for model '${modelName}'`);
      const file = found.path;
      const gpu = config.instance_group.find((g) => g.kind === 'KIND_GPU')?.gpus[0];
      if (gpu !== undefined) {
        const cuda = this.cudaStatus();
        if (!cuda.available) fail(`its KIND_GPU instances run on GPU ${gpu}, but ${cuda.reason}`);
      }
      // Its refusal is wrapped by `fail`, which names the model.
      const checkKv = (bytes: number): void => enforceLimits('', [kvCacheLimitCheck(bytes, this.limits)]);
      // The digest is read while the session loads (large files take a while either way).
      const modelId = fileDigest(file).catch((e: unknown) => fail(`unable to read '${file}': ${e instanceof Error ? e.message : String(e)}`, e));
      modelId.catch(() => {}); // awaited by createOnnxLlmExecutor; not unhandled when the session fails first
      // A reasoning model's guided decoding leaves its reasoning free (vLLM's rule: `guided/reasoning-gate.ts`).
      const markers = options.outputParsing.reasoningParser === undefined ? undefined : reasoningMarkersOf(tokenizer);
      if (options.outputParsing.reasoningParser !== undefined && markers === undefined) {
        logger.warn({ model: modelName }, "reasoning_parser is set but '</think>' is not one token of the tokenizer: guided decoding holds from the first token");
      }
      const created = await createOnnxLlmExecutor(file, options, vocabSize, checkKv, modelId, gpu, () => TokenVocabulary.fromTokenizer(tokenizer, vocabSize), markers).catch((e: unknown) => fail(e instanceof Error ? e.message : String(e), e));
      executor = created.executor;
      releaseExecutor = created.release;
    }

    // Mocker tokens are random ids: an EOS among them would end a simulated request at random, so the
    // mocker generates to max_tokens as Dynamo's does.
    const eosTokenIds = this.name === 'mocker' ? [] : [...tokenizer.eosTokenIds];
    // The generation config's other end ids stop requests as stop ids (not the mocker's, as above).
    const samplingDefaults = this.name === 'mocker' ? withoutModelEos(generation, generation.eos_token_ids ?? []) : withoutModelEos(generation, eosTokenIds);
    // KV events fan out to whoever listens (the cluster worker's publisher); with no listener the
    // block manager's callback is one empty-set check.
    const kvListeners = new Set<KvEventSink>();
    const onKvEvent: KvEventSink = (event) => {
      for (const listener of kvListeners) {
        try {
          listener(event);
        } catch (e) {
          logger.error({ err: e, model: modelName }, 'KV event listener threw');
        }
      }
    };
    // Step figures fan out the same way (the worker's forward-pass publisher).
    const stepListeners = new Set<ForwardPassSink>();
    const onForwardPass: ForwardPassSink = (figures) => {
      for (const listener of stepListeners) {
        try {
          listener(figures);
        } catch (e) {
          logger.error({ err: e, model: modelName }, 'forward-pass listener threw');
        }
      }
    };
    const engine = new LlmEngine({
      blockSize: options.blockSize,
      numBlocks: options.numBlocks,
      enablePrefixCaching: options.enablePrefixCaching,
      scheduler: {
        maxNumSeqs: options.maxNumSeqs,
        maxNumBatchedTokens: options.maxNumBatchedTokens,
        watermark: options.watermark,
        enableChunkedPrefill: options.enableChunkedPrefill,
      },
      maxModelLen,
      eosTokenIds,
      vocabSize,
      executor,
      onKvEvent,
      onForwardPass,
      kvTransferTtlMs: this.transfer.ttlMs,
    });
    const endpoint: LlmEndpoint = {
      card: {
        name: modelName,
        kind: this.name,
        blockSize: options.blockSize,
        contextLength: maxModelLen,
        totalKvBlocks: options.numBlocks,
        eosTokenIds,
        vocabSize,
        samplingDefaults,
        created: Math.floor(Date.now() / 1000),
        ...(Object.keys(options.outputParsing).length === 0 ? {} : { outputParsing: options.outputParsing }),
      },
      tokenizer,
      chatTemplate,
      modelFolder: versionPath,
      generate: (request, signal) => engine.generate(request, signal),
      metrics: () => engine.metrics(),
      kv: {
        onEvent: (listener) => {
          // a wrapper per subscription, so the same function subscribed twice unsubscribes separately
          const entry: KvEventSink = (event) => listener(event);
          kvListeners.add(entry);
          return () => kvListeners.delete(entry);
        },
        snapshot: () => engine.snapshot(),
      },
      onForwardPass: (listener) => {
        const entry: ForwardPassSink = (figures) => listener(figures);
        stepListeners.add(entry);
        return () => stepListeners.delete(entry);
      },
      ...(engine.kvTransfer === undefined ? {} : { kvTransfer: engine.kvTransfer }),
    };
    logger.info({ model: modelName, kind: this.name, blockSize: options.blockSize, numBlocks: options.numBlocks, maxModelLen }, 'LLM engine ready');
    return new LlmModel(endpoint, engine, options, logger, releaseExecutor);
  }
}

/**
 * How many logits tokens are sampled from: config.json's `vocab_size` (the LM head's width, as vLLM
 * takes it) when it is given and below the tokenizer's size, else the tokenizer's (padding rows of an
 * LM head past the tokenizer's ids are never sampled: no text could be decoded for them).
 */
export function sampledVocabSize(tokenizerVocabSize: number, configVocabSize: unknown): number {
  if (configVocabSize === undefined || configVocabSize === null) return tokenizerVocabSize;
  if (typeof configVocabSize !== 'number' || !Number.isSafeInteger(configVocabSize) || configVocabSize < 1) {
    throw invalidArgument(`config.json: vocab_size must be a positive integer, got ${String(configVocabSize)}`);
  }
  return Math.min(tokenizerVocabSize, configVocabSize);
}
