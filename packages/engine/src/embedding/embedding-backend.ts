/**
 * The `embedding` backend: a sentence-transformers ONNX export (Optimum's feature-extraction
 * signature) served as sentence embeddings, batched by the engine's schedulers like any tensor model
 * (`dynamic_batching` in config.pbtxt batches concurrent requests).
 *
 * The version folder: the ONNX file (`default_model_filename`, default `model.onnx`) with inputs
 * `input_ids`, `attention_mask` and, when the export has it, `token_type_ids` (all INT64
 * [batch, seq]), and one of the outputs `sentence_embedding` [batch, dim] (the export pools: used as
 * is), `last_hidden_state` or `token_embeddings` [batch, seq, hidden] (pooled here); `tokenizer.json`
 * (+ `tokenizer_config.json`) read by the LLM package's tokenizer; sentence-transformers' files for
 * pooling, normalisation and length (embedding-options.ts).
 *
 * The KServe interface is fixed (embedding-io.ts) and filled in by auto-complete. One execution: every
 * sequence of every request is checked (length, `dimensions`; a refused request gets its own error,
 * the others run), then all run as ONE padded batch: right-padded with the pad id (0 when the
 * tokenizer has none) to the longest sequence, attention mask 0 on padding, token types 0. Pooling,
 * truncation and normalisation follow on the event loop (small: batch × seq × hidden).
 *
 * Each instance owns its ONNX session on its own thread (`SessionThread`), so a forward pass never
 * blocks the event loop; text is tokenized off the loop when long (`encodeOffLoop`). A KIND_GPU
 * instance runs its session on the CUDA execution provider of its device (`gpuSupport` tells the
 * loader when that provider is missing, so KIND_GPU is refused with the reason).
 */
import { invalidArgument, resolveConfinedPath, toSwitchyardError, unavailable, type Logger, type SwitchyardError } from '@switchyard/common';
import { type InferTensor, deserializeStringElements, modelParameters } from '@switchyard/kserve';
import { Tokenizer, readModelFolder } from '@switchyard/llm';
import type { ModelConfig } from '@switchyard/model-config';
import { cudaProviderStatus, type ProviderStatus } from '@switchyard/ort';
import type { Backend, BackendInstance, BackendModel, BackendModelContext, BackendResult, ExecutionOutcome, GpuSupport, InstanceSpec } from '../backend.js';
import type { NormalizedRequest } from '../request-normalizer.js';
import { SessionThread, type WireTensor } from '../onnxruntime/session-thread.js';
import {
  EMBEDDING_DIMENSIONS_PARAMETER,
  EMBEDDING_IDS_INPUT,
  EMBEDDING_OUTPUT,
  EMBEDDING_TEXT_INPUT,
  EMBEDDING_TOKENS_OUTPUT,
  EMBEDDING_TRUNCATE_PARAMETER,
  embeddingTooLongMessage,
} from './embedding-io.js';
import { readEmbeddingOptions, type EmbeddingModelOptions } from './embedding-options.js';
import { normalizeEmbedding, poolSequence, truncateEmbedding } from './pooling.js';

const now = (): bigint => process.hrtime.bigint();
/** Model outputs this backend reads, in order of preference. */
const POOLED_OUTPUT = 'sentence_embedding';
const TOKEN_OUTPUTS = ['last_hidden_state', 'token_embeddings'] as const;

function completeIo(config: ModelConfig): ModelConfig {
  const out = { ...config } as ModelConfig;
  const io = (name: string, dataType: string, dims: number[], ragged: boolean) => ({
    name,
    data_type: dataType,
    format: 'FORMAT_NONE',
    dims,
    is_shape_tensor: false,
    allow_ragged_batch: ragged,
    optional: true,
    is_non_linear_format_io: false,
  });
  if (config.input.length === 0) {
    out.input = [io(EMBEDDING_TEXT_INPUT, 'TYPE_STRING', [1], false), io(EMBEDDING_IDS_INPUT, 'TYPE_INT64', [-1], true)] as ModelConfig['input'];
  }
  if (config.output.length === 0) {
    const output = (name: string, dataType: string, dims: number[]) => ({ name, data_type: dataType, dims, label_filename: '', is_shape_tensor: false, is_non_linear_format_io: false });
    out.output = [output(EMBEDDING_OUTPUT, 'TYPE_FP32', [-1]), output(EMBEDDING_TOKENS_OUTPUT, 'TYPE_INT32', [1])] as ModelConfig['output'];
  }
  return out;
}

/** An integer request parameter: a JSON number, or a gRPC `int64_param` (a bigint); else undefined. */
function integerParameter(v: unknown): number | undefined {
  if (typeof v === 'bigint') return v >= BigInt(Number.MIN_SAFE_INTEGER) && v <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(v) : undefined;
  return typeof v === 'number' && Number.isSafeInteger(v) ? v : undefined;
}

/** One sequence to embed, checked. */
interface Sequence {
  readonly request: number;
  readonly ids: readonly number[];
}

/** What one request asks beyond its sequences. */
interface RequestPlan {
  readonly dimensions: number | undefined;
  readonly sequences: number;
}

class EmbeddingModel implements BackendModel {
  /** Each instance is a session of its own on its own thread: they may start side by side. */
  readonly parallelInstanceLoading = true;

  constructor(
    private readonly context: BackendModelContext,
    private readonly file: string,
    private readonly tokenizer: Tokenizer,
    private readonly options: EmbeddingModelOptions,
  ) {}

  async createInstance(spec: InstanceSpec): Promise<BackendInstance> {
    const { modelName } = this.context;
    let thread: SessionThread;
    try {
      thread = await SessionThread.create(this.file, {
        graphOptimizationLevel: 'all',
        intraOpNumThreads: 1,
        ...(spec.kind === 'KIND_GPU' ? { executionProviders: [{ name: 'cuda', deviceId: spec.deviceId }] } : {}),
      });
    } catch (e) {
      throw unavailable(`unable to load model '${modelName}': ${e instanceof Error ? e.message : String(e)}`, e);
    }
    const inputs = new Set(thread.inputMetadata.map((m) => m.name));
    const outputs = thread.outputMetadata.map((m) => m.name);
    const output = outputs.includes(POOLED_OUTPUT) ? POOLED_OUTPUT : TOKEN_OUTPUTS.find((o) => outputs.includes(o));
    const missing = ['input_ids', 'attention_mask'].filter((n) => !inputs.has(n));
    const extra = [...inputs].filter((n) => n !== 'input_ids' && n !== 'attention_mask' && n !== 'token_type_ids');
    const why =
      missing.length > 0
        ? `its ONNX model has no input ${missing.map((n) => `'${n}'`).join(', ')}`
        : extra.length > 0
          ? `its ONNX model has inputs this backend cannot feed: ${extra.map((n) => `'${n}'`).join(', ')}`
          : output === undefined
            ? `its ONNX model has none of the outputs '${POOLED_OUTPUT}', '${TOKEN_OUTPUTS.join("', '")}'`
            : undefined;
    if (why !== undefined) {
      await thread.release();
      throw unavailable(`unable to load model '${modelName}': ${why}`);
    }
    return new EmbeddingInstance(spec.name, thread, inputs.has('token_type_ids'), output!, this.tokenizer, this.options, this.context.logger);
  }

  async release(): Promise<void> {}
}

class EmbeddingInstance implements BackendInstance {
  constructor(
    readonly name: string,
    private readonly thread: SessionThread,
    private readonly tokenTypes: boolean,
    private readonly output: string,
    private readonly tokenizer: Tokenizer,
    private readonly options: EmbeddingModelOptions,
    private readonly logger: Logger,
  ) {}

  async execute(requests: readonly NormalizedRequest[]): Promise<ExecutionOutcome> {
    const computeStartNs = now();
    const results: BackendResult[] = new Array(requests.length);
    const plans: Array<RequestPlan | undefined> = [];
    const sequences: Sequence[] = [];
    for (let r = 0; r < requests.length; r++) {
      try {
        const { plan, ids } = await this.prepare(requests[r]!);
        plans.push(plan);
        for (const seq of ids) sequences.push({ request: r, ids: seq });
      } catch (e) {
        plans.push(undefined);
        results[r] = { error: toSwitchyardError(e) };
      }
    }
    const computeInputEndNs = now();
    let pooled: Float32Array[] = [];
    if (sequences.length > 0) {
      try {
        pooled = await this.run(sequences);
      } catch (e) {
        const error: SwitchyardError = toSwitchyardError(e);
        this.logger.error({ err: e, instance: this.name }, 'embedding forward pass failed');
        for (let r = 0; r < requests.length; r++) if (results[r] === undefined) results[r] = { error };
        pooled = [];
      }
    }
    const computeOutputStartNs = now();
    let next = 0;
    for (let r = 0; r < requests.length; r++) {
      const plan = plans[r];
      if (plan === undefined || results[r] !== undefined) {
        if (plan !== undefined) next += plan.sequences;
        continue;
      }
      const rows: Float32Array[] = [];
      const counts = new Int32Array(plan.sequences);
      for (let s = 0; s < plan.sequences; s++) {
        const seq = sequences[next]!;
        let v = truncateEmbedding(pooled[next]!, plan.dimensions);
        if (this.options.normalize) v = normalizeEmbedding(v); // in place: the pooled vector is ours
        rows.push(v);
        counts[s] = seq.ids.length;
        next++;
      }
      results[r] = { outputs: this.outputs(requests[r]!, rows, counts) };
    }
    return { results, timing: { computeStartNs, computeInputEndNs, computeOutputStartNs, computeEndNs: now() } };
  }

  /** The request's sequences as token ids, checked; throws invalid_argument for the request. */
  private async prepare(request: NormalizedRequest): Promise<{ plan: RequestPlan; ids: number[][] }> {
    const text = request.inputs.find((i) => i.name === EMBEDDING_TEXT_INPUT);
    const given = request.inputs.find((i) => i.name === EMBEDDING_IDS_INPUT);
    if ((text === undefined) === (given === undefined)) {
      throw invalidArgument(`expected exactly one of the inputs '${EMBEDDING_TEXT_INPUT}' and '${EMBEDDING_IDS_INPUT}' for model '${request.request.modelName}'`);
    }
    const params = modelParameters(request.request.parameters);
    const dimensions = this.dimensionsOf(params[EMBEDDING_DIMENSIONS_PARAMETER], request.request.modelName);
    const truncate = this.truncationOf(params[EMBEDDING_TRUNCATE_PARAMETER]);
    let ids: number[][];
    if (text !== undefined) {
      const strings = deserializeStringElements(text.data, text.name);
      ids = [];
      for (const s of strings) ids.push(await this.tokenizer.encodeOffLoop(s, { addSpecialTokens: true }));
    } else {
      const input = given!;
      const rows = input.shape.length >= 2 ? input.shape[0]! : 1;
      const width = input.shape[input.shape.length - 1] ?? 0;
      // Refused before anything is copied: a sequence longer than the model takes and not truncated.
      if (truncate === undefined && width > this.options.maxSeqLength) throw invalidArgument(embeddingTooLongMessage(this.options.maxSeqLength, width));
      const all = new BigInt64Array(input.data.buffer.slice(input.data.byteOffset, input.data.byteOffset + input.data.byteLength));
      const vocab = this.tokenizer.vocabSize;
      ids = [];
      for (let r = 0; r < rows; r++) {
        const row: number[] = [];
        for (let i = 0; i < width; i++) {
          const id = all[r * width + i]!;
          if (id < 0n || id >= BigInt(vocab)) throw invalidArgument(`token id ${id} is out of vocabulary (vocab size ${vocab})`);
          row.push(Number(id));
        }
        ids.push(row);
      }
    }
    const max = this.options.maxSeqLength;
    ids = ids.map((seq) => {
      const kept = truncate === undefined ? seq : seq.slice(Math.max(0, seq.length - (truncate === -1 ? max : truncate)));
      if (kept.length > max) throw invalidArgument(embeddingTooLongMessage(max, kept.length));
      if (kept.length === 0) throw invalidArgument('Input cannot be empty: it has no tokens');
      return kept;
    });
    return { plan: { dimensions, sequences: ids.length }, ids };
  }

  /** vLLM's checks of `dimensions`. */
  private dimensionsOf(raw: unknown, model: string): number | undefined {
    if (raw === undefined) return undefined;
    const value = integerParameter(raw);
    if (value === undefined) throw invalidArgument(`parameter '${EMBEDDING_DIMENSIONS_PARAMETER}' must be an integer`);
    const allowed = this.options.matryoshka;
    if (allowed === undefined) throw invalidArgument(`Model "${model}" does not support matryoshka representation, changing output dimensions will lead to poor results.`);
    if (allowed !== 'any' && !allowed.includes(value)) {
      throw invalidArgument(`Model "${model}" only supports [${allowed.join(', ')}] matryoshka dimensions, use other output dimensions will lead to poor results.`);
    }
    if (value < 1) throw invalidArgument('Dimensions must be greater than 0');
    return value;
  }

  /** vLLM's `truncate_prompt_tokens`: -1 = the model's length, k >= 1 keeps the last k tokens. */
  private truncationOf(raw: unknown): number | undefined {
    if (raw === undefined) return undefined;
    const value = integerParameter(raw);
    if (value === undefined || (value < 1 && value !== -1)) {
      throw invalidArgument(`parameter '${EMBEDDING_TRUNCATE_PARAMETER}' must be -1 or an integer >= 1`);
    }
    const max = this.options.maxSeqLength;
    if (value > max) throw invalidArgument(`truncate_prompt_tokens value (${value}) is greater than max_model_len (${max}). Please, select a smaller truncation size.`);
    return value;
  }

  /** One padded forward pass over every sequence; returns each sequence's pooled (not normalised) vector. */
  private async run(sequences: readonly Sequence[]): Promise<Float32Array[]> {
    const batch = sequences.length;
    const seqLen = sequences.reduce((m, s) => Math.max(m, s.ids.length), 0);
    const pad = BigInt(this.tokenizer.padTokenId ?? 0);
    const ids = new BigInt64Array(batch * seqLen).fill(pad);
    const mask = new BigInt64Array(batch * seqLen);
    sequences.forEach((s, b) => {
      for (let t = 0; t < s.ids.length; t++) {
        ids[b * seqLen + t] = BigInt(s.ids[t]!);
        mask[b * seqLen + t] = 1n;
      }
    });
    const dims = [batch, seqLen];
    const feeds: Record<string, WireTensor> = { input_ids: { type: 'int64', dims, data: ids }, attention_mask: { type: 'int64', dims, data: mask } };
    if (this.tokenTypes) feeds['token_type_ids'] = { type: 'int64', dims, data: new BigInt64Array(batch * seqLen) };
    const out = (await this.thread.run(feeds, [this.output]))[this.output];
    if (out === undefined || !(out.data instanceof Float32Array)) throw unavailable(`the model's '${this.output}' output is not FLOAT`);
    const data = out.data;
    if (this.output === POOLED_OUTPUT) {
      if (out.dims.length !== 2 || out.dims[0] !== batch) throw unavailable(`the model's '${POOLED_OUTPUT}' output has shape [${out.dims.join(', ')}], expected [${batch}, dim]`);
      const width = out.dims[1]!;
      return sequences.map((_, b) => data.slice(b * width, (b + 1) * width));
    }
    if (out.dims.length !== 3 || out.dims[0] !== batch || out.dims[1] !== seqLen) {
      throw unavailable(`the model's '${this.output}' output has shape [${out.dims.join(', ')}], expected [${batch}, ${seqLen}, hidden]`);
    }
    const width = out.dims[2]!;
    return sequences.map((s, b) => poolSequence(this.options.pooling, data, b * seqLen * width, s.ids.length, width));
  }

  private outputs(request: NormalizedRequest, rows: Float32Array[], counts: Int32Array): InferTensor[] {
    const width = rows[0]?.length ?? 0;
    const vectors = new Float32Array(rows.length * width);
    rows.forEach((r, i) => vectors.set(r, i * width));
    const batched = request.batchSize > 0;
    const all: InferTensor[] = [
      { name: EMBEDDING_OUTPUT, datatype: 'FP32', shape: batched ? [rows.length, width] : [width], data: new Uint8Array(vectors.buffer), parameters: {} },
      { name: EMBEDDING_TOKENS_OUTPUT, datatype: 'INT32', shape: batched ? [rows.length, 1] : [1], data: new Uint8Array(counts.buffer), parameters: {} },
    ];
    return all.filter((t) => request.requestedOutputs.includes(t.name));
  }

  release(): Promise<void> {
    return this.thread.release();
  }
}

export class EmbeddingBackend implements Backend {
  readonly name = 'embedding';

  constructor(
    /** Whether onnxruntime-node's CUDA execution provider is installed (tests substitute it). */
    private readonly cudaStatus: () => ProviderStatus = () => cudaProviderStatus(),
  ) {}

  /** KIND_GPU instances run their session on the CUDA provider, which must be installed. */
  gpuSupport(): GpuSupport {
    const cuda = this.cudaStatus();
    return cuda.available ? { usable: true } : { usable: false, reason: cuda.reason };
  }

  async autoCompleteConfig(context: BackendModelContext): Promise<ModelConfig> {
    return completeIo(context.config);
  }

  async loadModel(context: BackendModelContext): Promise<BackendModel> {
    const { config, modelName, versionPath } = context;
    const fail = (why: string, cause?: unknown): never => {
      throw unavailable(`unable to load model '${modelName}': ${why}`, cause);
    };
    if (config.model_transaction_policy?.decoupled === true) fail(`the 'embedding' backend answers each request once: remove model_transaction_policy { decoupled: true }`);
    const names = new Set(config.input.map((i) => i.name));
    if (!names.has(EMBEDDING_TEXT_INPUT) || !names.has(EMBEDDING_IDS_INPUT) || !config.output.some((o) => o.name === EMBEDDING_OUTPUT)) {
      fail(`the 'embedding' backend's interface is fixed (inputs '${EMBEDDING_TEXT_INPUT}', '${EMBEDDING_IDS_INPUT}'; outputs '${EMBEDDING_OUTPUT}', '${EMBEDDING_TOKENS_OUTPUT}'): leave input and output out of config.pbtxt`);
    }
    const name = config.default_model_filename !== '' ? config.default_model_filename : 'model.onnx';
    const found = resolveConfinedPath(versionPath, name, `default_model_filename '${name}' of model '${modelName}'`, 'its version folder');
    if (!found.exists) fail(`unable to find '${found.path}' for model '${modelName}'`);
    let tokenizer: Tokenizer;
    let options: EmbeddingModelOptions;
    try {
      const files = await readModelFolder(versionPath);
      tokenizer = Tokenizer.fromModelFolderFiles(files);
      options = await readEmbeddingOptions(config, versionPath, files);
    } catch (e) {
      return fail(e instanceof Error ? e.message.replace(`unable to load model '${modelName}': `, '') : String(e), e);
    }
    return new EmbeddingModel(context, found.path, tokenizer, options);
  }
}
