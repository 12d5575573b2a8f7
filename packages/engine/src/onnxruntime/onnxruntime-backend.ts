/**
 * The ONNX Runtime backend (Triton's `onnxruntime` backend).
 *
 * One `InferenceSession` per model instance, each on its own worker thread (`SessionThread`).
 * A `KIND_GPU` instance's session uses the CUDA execution provider on the instance's device (one
 * session per instance per GPU, as Triton's backend makes them); every other instance uses the CPU.
 * A GPU instance on an install without the CUDA provider fails the load, saying what to install
 * (`cudaProviderStatus` of @switchyard/ort), instead of quietly running on the CPU.
 * onnxruntime-node computes `session.run` synchronously on the calling thread, so running it
 * on the main thread would stall the server's sockets and serialise the instances. Each
 * instance executes one batch at a time; the instances of a model compute in parallel.
 * Sessions are created with `intraOpNumThreads = 1` and `interOpNumThreads = 1` unless the
 * config parameters `intra_op_thread_count` / `inter_op_thread_count` say otherwise (Triton's
 * names): with Triton's default of two CPU instances, that is one core per instance.
 */
import { readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { internal, invalidArgument, resolveConfinedPath, unavailable, type SwitchyardError } from '@switchyard/common';
import { elementCount, type DataType, type InferTensor } from '@switchyard/kserve';
import { configDataTypeToWire, type ModelConfig, type ModelOutput } from '@switchyard/model-config';
import type * as ort from 'onnxruntime-node';
import { cudaProviderStatus, type ProviderStatus } from '@switchyard/ort';
import type {
  Backend,
  BackendInstance,
  BackendModel,
  BackendModelContext,
  BackendResult,
  ExecutionOutcome,
  GpuSupport,
  InstanceSpec,
} from '../backend.js';
import { autoCompleteOnnxConfig, checkOnnxIo, type OnnxIo, type OnnxIoInfo } from './onnx-io-config.js';
import { borrowedWireTensor, checkOrtStrings, concatBatch, configTypeOfOrt, fromWireTensor, splitBatch, toWireTensor } from './onnx-tensor-codec.js';
import { batchInputTensor, compileRaggedLayout, raggedFeed, scatterOutput, type RaggedLayout } from './ragged-batch.js';
import { SessionLoadError, SessionThread, type TimedRun, type WireTensor, type WireValueMetadata } from './session-thread.js';
import { DEFAULT_INLINE_LIMITS, InlineSession, type InlineLimits } from './inline-session.js';
import { valueDependentWork } from './onnx-op-scan.js';
import type { NormalizedRequest } from '../request-normalizer.js';
import { DEFAULT_BACKEND_SETTINGS, type OnnxRuntimeSettings } from '../backend-config.js';

const now = (): bigint => process.hrtime.bigint();

/**
 * Resolve the model file: `<version>/<default_model_filename>`, or `model.onnx` inside it when it is
 * a folder, through the confined resolver (a name or link leading outside the version folder is
 * refused before anything is opened, with a message that does not depend on what exists outside).
 */
async function resolveModelFile(context: BackendModelContext): Promise<string> {
  const fileName = context.config.default_model_filename || 'model.onnx';
  const what = `default_model_filename '${fileName}' of model '${context.modelName}'`;
  const found = resolveConfinedPath(context.versionPath, fileName, what, 'its version folder');
  const missing = (path: string): never => {
    throw unavailable(`unable to load model '${context.modelName}': unable to find '${path}' for model '${context.modelName}'`);
  };
  if (!found.exists) return missing(found.path);
  const info = await stat(found.path);
  if (!info.isDirectory()) return found.path;
  const inner = resolveConfinedPath(context.versionPath, join(fileName, 'model.onnx'), what, 'its version folder');
  return inner.exists ? inner.path : missing(inner.path);
}

function intParameter(config: ModelConfig, key: string, fallback: number): number {
  const raw = config.parameters[key]?.string_value;
  if (raw === undefined || raw === '') return fallback;
  const value = Number.parseInt(raw, 10);
  if (!Number.isFinite(value)) throw invalidArgument(`failed to convert '${raw}' to integral number`);
  return value;
}

/** A boolean model parameter, read as Triton's backends read one ("true"/"false", "1"/"0", "on"/"off"). */
function boolParameter(config: ModelConfig, key: string, fallback: boolean): boolean {
  return optionalBoolParameter(config, key) ?? fallback;
}

/** `boolParameter` with no fallback: undefined when the parameter is absent or empty. */
function optionalBoolParameter(config: ModelConfig, key: string): boolean | undefined {
  const raw = config.parameters[key]?.string_value;
  if (raw === undefined || raw === '') return undefined;
  const value = raw.trim().toLowerCase();
  if (value === 'true' || value === '1' || value === 'on') return true;
  if (value === 'false' || value === '0' || value === 'off') return false;
  throw invalidArgument(`failed to convert '${raw}' to boolean value`);
}

function graphLevel(config: ModelConfig): 'disabled' | 'basic' | 'extended' | 'all' {
  const graph = (config.optimization as { graph?: { level?: number } } | undefined)?.graph;
  switch (graph?.level) {
    case -1:
      return 'basic';
    case 1:
      return 'extended';
    case 2:
      return 'disabled';
    default:
      return 'all';
  }
}

/** Where a session runs: the CPU, or the CUDA execution provider on one device. */
type SessionDevice = { kind: 'cpu' } | { kind: 'cuda'; deviceId: number };
const CPU: SessionDevice = { kind: 'cpu' };

function sessionOptions(config: ModelConfig, settings: OnnxRuntimeSettings, device: SessionDevice): ort.InferenceSession.SessionOptions {
  // The command line's global threadpool settings win over the model's parameters (as in Triton);
  // there 0 leaves the count to onnxruntime (one thread per core).
  const global = settings.sessionThreads;
  const intra = global !== undefined ? global.intraOp : Math.max(intParameter(config, 'intra_op_thread_count', 1), 1);
  const inter = global !== undefined ? global.interOp : Math.max(intParameter(config, 'inter_op_thread_count', 1), 1);
  return {
    // ONNX Runtime places the nodes the CUDA provider cannot run on its CPU provider by itself.
    executionProviders: device.kind === 'cuda' ? [{ name: 'cuda', deviceId: device.deviceId }] : ['cpu'],
    graphOptimizationLevel: graphLevel(config),
    ...(intra > 0 ? { intraOpNumThreads: intra } : {}),
    ...(inter > 0 ? { interOpNumThreads: inter } : {}),
    executionMode: intParameter(config, 'execution_mode', 0) === 1 ? 'parallel' : 'sequential',
    logSeverityLevel: 3,
  };
}

/** Said after ONNX Runtime's own message when a CUDA session fails to start. */
const CUDA_SESSION_HINT = 'the CUDA execution provider needs the NVIDIA driver, CUDA 12 and cuDNN 9 libraries on the library path';

async function createSession(context: BackendModelContext, path: string, settings: OnnxRuntimeSettings, device: SessionDevice = CPU): Promise<SessionThread> {
  try {
    return await SessionThread.create(path, sessionOptions(context.config, settings, device));
  } catch (e) {
    const message = e instanceof SessionLoadError ? e.message : `cannot start a session thread: ${e instanceof Error ? e.message : String(e)}`;
    const where = device.kind === 'cuda' ? ` (GPU ${device.deviceId}: ${CUDA_SESSION_HINT})` : '';
    throw unavailable(`unable to load model '${context.modelName}': onnx runtime error: ${message}${where}`, e);
  }
}

/** What a CPU session was built from (`LoadHandoff` key): a session is reused only for the same file and options. */
function sessionKey(modelFile: string, options: ort.InferenceSession.SessionOptions): string {
  return `onnxruntime-session ${JSON.stringify([modelFile, options])}`;
}

function ioInfo(metadata: readonly WireValueMetadata[]): OnnxIoInfo[] {
  return metadata.map((m) => ({
    name: m.name,
    type: m.isTensor ? (m.type ?? 'non-tensor') : 'non-tensor',
    dims: m.isTensor ? m.shape.map((d) => (typeof d === 'number' && d >= 0 ? d : -1)) : [],
  }));
}

export function sessionIo(session: SessionThread): OnnxIo {
  return { inputs: ioInfo(session.inputMetadata), outputs: ioInfo(session.outputMetadata) };
}

/**
 * The shape an output leaves this backend in: a scalar ONNX output expands to its config dims. An
 * output with `reshape` stays in the model's shape: the engine turns it into `dims` for every
 * backend (output-reshape.ts).
 */
function clientShape(output: ModelOutput | undefined, actual: number[], batched: boolean): number[] {
  // `actual` is made for this response: returned as it is unless a scalar expands.
  if (output === undefined || output.reshape !== undefined || output.dims.length === 0) return actual;
  if (actual.length > (batched ? 1 : 0)) return actual;
  return [...actual, ...output.dims];
}

/**
 * Executions a scheduler may hand one instance at once: they cross to the session thread in one
 * message and run there one after another, so the instance's thread is kept fed and a hop carries
 * several requests.
 */
export const ONNX_PIPELINE_DEPTH = 8;

class OnnxRuntimeInstance implements BackendInstance {
  readonly pipelineDepth = ONNX_PIPELINE_DEPTH;
  private readonly outputs: Map<string, ModelOutput>;
  private readonly ragged: RaggedLayout;

  /**
   * Executions of this instance on its session thread, not yet answered. An execution runs inline
   * only while there is none: it never overtakes one on the thread. Executions handed over together
   * (under load) all run inline then, one after another on the event loop: each costs it the run
   * (at most the gate's bound, tens of microseconds for the models that pass it), where the hop to
   * the thread costs a wake-up and a copy each way.
   */
  private onThread = 0;

  constructor(
    readonly name: string,
    private readonly session: SessionThread,
    private readonly config: ModelConfig,
    /** The model's main-thread session for tiny executions (CPU instances of small models; see inline-session.ts). */
    private readonly inline?: InlineSession,
  ) {
    this.outputs = new Map(config.output.map((o) => [o.name, o]));
    this.ragged = compileRaggedLayout(config);
  }

  /**
   * Requests whose string inputs ORT cannot carry unchanged (see `checkOrtStrings`) get their refusal; the
   * others of the batch run without them.
   */
  async execute(requests: readonly NormalizedRequest[]): Promise<ExecutionOutcome> {
    const refusals = requests.map((r) => this.stringRefusal(r));
    if (refusals.every((e) => e === undefined)) return this.run(requests);
    const runnable = requests.filter((_, i) => refusals[i] === undefined);
    const startNs = now();
    const ran = runnable.length > 0 ? await this.run(runnable) : undefined;
    const endNs = now();
    let next = 0;
    const results: BackendResult[] = refusals.map((error) => (error !== undefined ? { error } : (ran?.results[next++] as BackendResult)));
    return { results, timing: ran?.timing ?? { computeStartNs: startNs, computeInputEndNs: startNs, computeOutputStartNs: endNs, computeEndNs: endNs } };
  }

  private stringRefusal(request: NormalizedRequest): SwitchyardError | undefined {
    for (const input of request.inputs) {
      if (input.datatype !== 'BYTES') continue;
      const refusal = checkOrtStrings(input, this.config.name, request.request.id);
      if (refusal !== undefined) return refusal;
    }
    return undefined;
  }

  private async run(requests: readonly NormalizedRequest[]): Promise<ExecutionOutcome> {
    const computeStartNs = now();
    const batched = this.config.max_batch_size > 0;
    if (requests.length > 1 && !batched) throw internal(`batch of ${requests.length} requests for '${this.config.name}', which does not support batching`);
    // A single request's feeds borrow its bytes: an inline run reads them in place, a run on the thread
    // copies them into its slot (or, by message, into buffers of their own): no copy made here.
    const borrowed: string[] = [];
    const feeds = this.buildFeeds(requests, borrowed);
    // A request's outputs are already distinct (normalisation refuses repeats).
    const fetches = requests.length === 1 ? (requests[0] as NormalizedRequest).requestedOutputs : [...new Set(requests.flatMap((r) => r.requestedOutputs))];
    const inputNs = now() - computeStartNs;
    let ran: TimedRun;
    try {
      const inline = this.inline;
      if (inline !== undefined && this.onThread === 0 && inline.admits(feeds)) {
        ran = await inline.runTimed(feeds, fetches);
      } else {
        // An eligible run on the thread is measured there: its time decides whether the gate opens.
        const probe = inline !== undefined && !inline.open && inline.eligible(feeds);
        this.onThread++;
        try {
          ran = await this.session.runTimed(feeds, fetches, borrowed);
        } finally {
          this.onThread--;
        }
        if (probe) inline.noteThreadRun(Number(ran.times.inferEndNs - ran.times.inferStartNs));
      }
    } catch (e) {
      throw internal(`onnx runtime error: ${e instanceof Error ? e.message : String(e)}`, e);
    }
    const produced = ran.outputs;
    const outputStartNs = now();
    const batchSizes = requests.map((r) => Math.max(r.batchSize, 1));
    // Per output, each request's shape (as the client sees it) and bytes.
    const sliced = new Map<string, { datatype: DataType; parts: { shape: number[]; data: Uint8Array }[] }>();
    for (const name of fetches) {
      const tensor = produced[name];
      if (tensor === undefined) throw internal(`onnx runtime did not produce output '${name}'`);
      const data = fromWireTensor(tensor);
      // Outputs outside config.output (sequence implicit-state outputs) take the model's type.
      const output = this.outputs.get(name);
      const datatype = configDataTypeToWire(output?.data_type ?? configTypeOfOrt(tensor.type));
      const source = this.ragged.scatterOutputs.get(name);
      if (source !== undefined) {
        const shapes = requests.map((r) => r.inputs.find((i) => i.name === source)?.shape ?? []);
        sliced.set(name, { datatype, parts: scatterOutput(this.config.name, name, datatype, data, tensor.dims, shapes) });
        continue;
      }
      const rowShape = batched ? tensor.dims.slice(1) : [...tensor.dims];
      const cut = requests.length === 1 ? [data] : splitBatch(datatype, data, batchSizes, elementCount(rowShape));
      const parts = cut.map((part, i) => {
        const actual = requests.length === 1 ? [...tensor.dims] : [batchSizes[i] ?? 1, ...rowShape];
        return { shape: clientShape(output, actual, batched), data: part };
      });
      sliced.set(name, { datatype, parts });
    }
    const results: BackendResult[] = requests.map((request, i) => {
      const outputs: InferTensor[] = request.requestedOutputs.map((name) => {
        const entry = sliced.get(name)!;
        const part = entry.parts[i]!;
        return { name, datatype: entry.datatype, shape: part.shape, data: part.data, parameters: {} };
      });
      return { outputs };
    });
    // This execution's own work: building the feeds here and converting them on the thread, the
    // run, converting and slicing the outputs. The hops to and from the thread, and any wait
    // behind the runs handed to the instance before it, are not compute (they count as queue time).
    const t = ran.times;
    const timing = { computeStartNs: t.startNs - inputNs, computeInputEndNs: t.inferStartNs, computeOutputStartNs: t.inferEndNs, computeEndNs: t.endNs + (now() - outputStartNs) };
    return { results, timing };
  }

  /**
   * The session's feeds for `requests`: a single request's inputs as views of its bytes
   * (`borrowedWireTensor`; their names are added to `borrowed`, for `SessionThread.runTimed`), the
   * others (batches, ragged and batch inputs) in buffers made for the run.
   */
  private buildFeeds(requests: readonly NormalizedRequest[], borrowed: string[]): Record<string, WireTensor> {
    const feeds: Record<string, WireTensor> = {};
    const first = requests[0];
    if (first === undefined) return feeds;
    for (const input of first.inputs) {
      if (this.ragged.raggedInputs.has(input.name)) {
        // One 1-D tensor of the batch's elements, even for a single request (the model's input is [-1]).
        const parts = requests.map((r) => {
          const match = r.inputs.find((i) => i.name === input.name);
          if (match === undefined) throw internal(`input '${input.name}' missing from a request of the batch`);
          return match;
        });
        const feed = raggedFeed(parts);
        feeds[input.name] = toWireTensor(input.datatype, feed.shape, feed.data);
        continue;
      }
      if (requests.length === 1) {
        const feed = borrowedWireTensor(input.datatype, input.shape, input.data);
        feeds[input.name] = feed;
        if (feed.data.buffer === input.data.buffer) borrowed.push(input.name);
        continue;
      }
      const parts = requests.map((r) => {
        const match = r.inputs.find((i) => i.name === input.name);
        if (match === undefined) throw internal(`input '${input.name}' missing from a request of the batch`);
        return match.data;
      });
      const total = requests.reduce((n, r) => n + r.batchSize, 0);
      const batch = concatBatch(parts);
      feeds[input.name] = toWireTensor(input.datatype, [total, ...input.shape.slice(1)], batch, batch !== parts[0]);
    }
    for (const spec of this.ragged.batchInputs) {
      const shapes = requests.map((r) => {
        const source = r.inputs.find((i) => i.name === spec.source);
        if (source === undefined) throw internal(`source input '${spec.source}' of a batch input missing from a request of the batch`);
        return source.shape;
      });
      const tensor = batchInputTensor(spec, shapes);
      for (const target of spec.targets) feeds[target] = toWireTensor(spec.datatype, tensor.shape, tensor.data);
    }
    return feeds;
  }

  async release(): Promise<void> {
    await this.session.release();
  }
}

class OnnxRuntimeModel implements BackendModel {
  /** Each instance's session starts on its own thread: they may start side by side (as in Triton's backend). */
  readonly parallelInstanceLoading = true;

  constructor(
    private readonly context: BackendModelContext,
    private readonly modelFile: string,
    private firstSession: SessionThread | undefined,
    private readonly cudaStatus: () => ProviderStatus,
    private readonly settings: OnnxRuntimeSettings,
    /** Shared by the CPU instances (they all run on the one main thread); absent when off or not eligible. */
    readonly inline: InlineSession | undefined,
  ) {}

  async createInstance(spec: InstanceSpec): Promise<BackendInstance> {
    if (spec.kind === 'KIND_GPU') return new OnnxRuntimeInstance(spec.name, await this.gpuSession(spec), this.context.config);
    // The (CPU) session used for the I/O check on load becomes the first CPU instance's session.
    let session = this.firstSession;
    this.firstSession = undefined;
    session ??= await createSession(this.context, this.modelFile, this.settings);
    return new OnnxRuntimeInstance(spec.name, session, this.context.config, this.inline);
  }

  private async gpuSession(spec: InstanceSpec): Promise<SessionThread> {
    const cuda = this.cudaStatus();
    if (!cuda.available) {
      throw unavailable(`unable to load model '${this.context.modelName}': instance ${spec.name} is on GPU ${spec.deviceId}, but ${cuda.reason}`);
    }
    // No CPU instance will take the load-time session: free it before the GPU sessions start.
    if (this.context.config.instance_group.every((g) => g.kind === 'KIND_GPU')) await this.releaseFirstSession();
    return createSession(this.context, this.modelFile, this.settings, { kind: 'cuda', deviceId: spec.deviceId });
  }

  private async releaseFirstSession(): Promise<void> {
    await this.firstSession?.release();
    this.firstSession = undefined;
  }

  async release(): Promise<void> {
    await Promise.all([this.releaseFirstSession(), this.inline?.release()]);
  }
}

/**
 * The model's main-thread session for tiny executions (see inline-session.ts), when the model
 * qualifies: a CPU instance group, a model file of at most `limits.maxModelBytes`, and sessions that
 * compute on the calling thread alone (one intra-op thread). The config parameter
 * `enable_inline_execution` decides beyond that: `false` never, `true` always, and absent (the
 * default) only when the graph's work depends on its input shapes alone (`valueDependentWork`):
 * no subgraphs, no output sized by a computed tensor's values, standard operator domains. Such a
 * model's runs are as long as its input sizes make them, which the gate bounds; a model whose run
 * time could follow an input value (a loop count, a requested shape) could stall the event loop.
 */
async function inlineSession(
  context: BackendModelContext,
  modelFile: string,
  settings: OnnxRuntimeSettings,
  limits: InlineLimits,
): Promise<InlineSession | undefined> {
  const config = context.config;
  const asked = optionalBoolParameter(config, 'enable_inline_execution');
  if (asked === false) return undefined;
  if (!config.instance_group.some((g) => g.kind !== 'KIND_GPU')) return undefined;
  const options = sessionOptions(config, settings, CPU);
  if (options.intraOpNumThreads !== 1) return undefined;
  if ((await stat(modelFile)).size > limits.maxModelBytes) return undefined;
  if (asked === undefined) {
    const reason = valueDependentWork(await readFile(modelFile));
    if (reason !== undefined) {
      context.logger.debug({ model: context.modelName, reason }, 'onnx runtime inline execution off: the run time may depend on input values');
      return undefined;
    }
  }
  return new InlineSession(modelFile, options, limits, (message) =>
    context.logger.warn({ model: context.modelName, reason: message }, 'onnx runtime main-thread session not created: every execution stays on the session threads'),
  );
}

export interface OnnxRuntimeBackendOptions {
  /** Whether the CUDA execution provider is installed; default `cudaProviderStatus` (tests substitute it). */
  cudaStatus?: () => ProviderStatus;
  /** The command line's (`--backend-config=onnxruntime,...` and the global default-max-batch-size). */
  settings?: OnnxRuntimeSettings;
  /** Bounds of inline execution; default `DEFAULT_INLINE_LIMITS` (tests and benchmarks vary them). */
  inlineLimits?: InlineLimits;
}

export class OnnxRuntimeBackend implements Backend {
  readonly name = 'onnxruntime';
  readonly #cudaStatus: () => ProviderStatus;
  private readonly settings: OnnxRuntimeSettings;
  private readonly inlineLimits: InlineLimits;

  constructor(options: OnnxRuntimeBackendOptions = {}) {
    this.#cudaStatus = options.cudaStatus ?? (() => cudaProviderStatus());
    this.settings = options.settings ?? DEFAULT_BACKEND_SETTINGS.onnxruntime;
    this.inlineLimits = options.inlineLimits ?? DEFAULT_INLINE_LIMITS;
  }

  gpuSupport(): GpuSupport {
    const cuda = this.#cudaStatus();
    return cuda.available ? { usable: true } : { usable: false, reason: cuda.reason };
  }

  async autoCompleteConfig(context: BackendModelContext): Promise<ModelConfig> {
    const config = context.config;
    if (config.input.length + config.batch_input.length > 0 && config.output.length > 0) return config;
    const modelFile = await resolveModelFile(context);
    const session = await createSession(context, modelFile, this.settings);
    let kept = false;
    try {
      const completed = autoCompleteOnnxConfig(config, sessionIo(session), this.settings.defaultMaxBatchSize);
      if (completed.max_batch_size !== config.max_batch_size) {
        context.logger.warn(
          { maxBatchSize: completed.max_batch_size },
          'autofilled max_batch_size since batching is supported but no max_batch_size is specified in the model configuration',
        );
      }
      // The load takes this session for its I/O check (and first CPU instance) when it opens the same
      // file with the same options: the model is read and optimised once, not twice.
      if (context.handoff !== undefined) {
        context.handoff.keep(sessionKey(modelFile, sessionOptions(config, this.settings, CPU)), session, () => session.release());
        kept = true;
      }
      return completed;
    } finally {
      if (!kept) await session.release();
    }
  }

  async loadModel(context: BackendModelContext): Promise<BackendModel> {
    const modelFile = await resolveModelFile(context);
    const handedOff = context.handoff?.take(sessionKey(modelFile, sessionOptions(context.config, this.settings, CPU)));
    const session = handedOff instanceof SessionThread ? handedOff : await createSession(context, modelFile, this.settings);
    let inline: InlineSession | undefined;
    try {
      checkOnnxIo(context.config, sessionIo(session));
      inline = await inlineSession(context, modelFile, this.settings, this.inlineLimits);
    } catch (e) {
      await session.release();
      throw e;
    }
    return new OnnxRuntimeModel(context, modelFile, session, this.#cudaStatus, this.settings, inline);
  }
}
