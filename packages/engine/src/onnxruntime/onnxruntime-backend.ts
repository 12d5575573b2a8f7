/**
 * The ONNX Runtime backend (Triton's `onnxruntime` backend, CPU execution provider only).
 *
 * One `InferenceSession` per model instance, each on its own worker thread (`SessionThread`):
 * onnxruntime-node computes `session.run` synchronously on the calling thread, so running it
 * on the main thread would stall the server's sockets and serialise the instances. Each
 * instance executes one batch at a time; the instances of a model compute in parallel.
 * Sessions are created with `intraOpNumThreads = 1` and `interOpNumThreads = 1` unless the
 * config parameters `intra_op_thread_count` / `inter_op_thread_count` say otherwise (Triton's
 * names): with Triton's default of two CPU instances, that is one core per instance.
 */
import { stat } from 'node:fs/promises';
import { join } from 'node:path';
import { internal, invalidArgument, resolveConfinedPath, unavailable, type SwitchyardError } from '@switchyard/common';
import { elementCount, type DataType, type InferTensor } from '@switchyard/kserve';
import { configDataTypeToWire, type ModelConfig, type ModelOutput } from '@switchyard/model-config';
import type * as ort from 'onnxruntime-node';
import type {
  Backend,
  BackendInstance,
  BackendModel,
  BackendModelContext,
  BackendResult,
  ExecutionOutcome,
  InstanceSpec,
} from '../backend.js';
import { autoCompleteOnnxConfig, checkOnnxIo, type OnnxIo, type OnnxIoInfo } from './onnx-io-config.js';
import { checkOrtStrings, concatBatch, configTypeOfOrt, fromWireTensor, splitBatch, toWireTensor } from './onnx-tensor-codec.js';
import { SessionLoadError, SessionThread, type WireTensor, type WireValueMetadata } from './session-thread.js';
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

function sessionOptions(config: ModelConfig, settings: OnnxRuntimeSettings): ort.InferenceSession.SessionOptions {
  // The command line's global threadpool settings win over the model's parameters (as in Triton);
  // there 0 leaves the count to onnxruntime (one thread per core).
  const global = settings.sessionThreads;
  const intra = global !== undefined ? global.intraOp : Math.max(intParameter(config, 'intra_op_thread_count', 1), 1);
  const inter = global !== undefined ? global.interOp : Math.max(intParameter(config, 'inter_op_thread_count', 1), 1);
  return {
    executionProviders: ['cpu'],
    graphOptimizationLevel: graphLevel(config),
    ...(intra > 0 ? { intraOpNumThreads: intra } : {}),
    ...(inter > 0 ? { interOpNumThreads: inter } : {}),
    executionMode: intParameter(config, 'execution_mode', 0) === 1 ? 'parallel' : 'sequential',
    logSeverityLevel: 3,
  };
}

async function createSession(context: BackendModelContext, path: string, settings: OnnxRuntimeSettings): Promise<SessionThread> {
  try {
    return await SessionThread.create(path, sessionOptions(context.config, settings));
  } catch (e) {
    const message = e instanceof SessionLoadError ? e.message : `cannot start a session thread: ${e instanceof Error ? e.message : String(e)}`;
    throw unavailable(`unable to load model '${context.modelName}': onnx runtime error: ${message}`, e);
  }
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

/** The shape reported to the client for an output: undo `reshape`, expand scalars to config dims. */
function clientShape(output: ModelOutput | undefined, actual: readonly number[], batched: boolean): number[] {
  if (output === undefined) return [...actual];
  const batchDims = batched ? actual.slice(0, 1) : [];
  const rest = batched ? actual.slice(1) : [...actual];
  if (output.reshape !== undefined) {
    const variable: number[] = [];
    output.reshape.shape.forEach((d, i) => {
      if (d === -1) variable.push(rest[i] ?? 0);
    });
    return [...batchDims, ...output.dims.map((d) => (d === -1 ? (variable.shift() ?? 0) : d))];
  }
  if (rest.length === 0 && output.dims.length > 0) return [...batchDims, ...output.dims];
  return [...actual];
}

class OnnxRuntimeInstance implements BackendInstance {
  private readonly outputs: Map<string, ModelOutput>;

  constructor(
    readonly name: string,
    private readonly session: SessionThread,
    private readonly config: ModelConfig,
  ) {
    this.outputs = new Map(config.output.map((o) => [o.name, o]));
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
    const feeds = this.buildFeeds(requests);
    const fetches = [...new Set(requests.flatMap((r) => r.requestedOutputs))];
    const computeInputEndNs = now();
    let produced: Record<string, WireTensor>;
    try {
      produced = await this.session.run(feeds, fetches);
    } catch (e) {
      throw internal(`onnx runtime error: ${e instanceof Error ? e.message : String(e)}`, e);
    }
    const computeOutputStartNs = now();
    const batchSizes = requests.map((r) => Math.max(r.batchSize, 1));
    const sliced = new Map<string, { tensor: WireTensor; parts: Uint8Array[]; rowShape: number[]; datatype: DataType }>();
    for (const name of fetches) {
      const tensor = produced[name];
      if (tensor === undefined) throw internal(`onnx runtime did not produce output '${name}'`);
      const data = fromWireTensor(tensor);
      const rowShape = batched ? tensor.dims.slice(1) : [...tensor.dims];
      // Outputs outside config.output (sequence implicit-state outputs) take the model's type.
      const datatype = configDataTypeToWire(this.outputs.get(name)?.data_type ?? configTypeOfOrt(tensor.type));
      const parts = requests.length === 1 ? [data] : splitBatch(datatype, data, batchSizes, elementCount(rowShape));
      sliced.set(name, { tensor, parts, rowShape, datatype });
    }
    const results: BackendResult[] = requests.map((request, i) => {
      const outputs: InferTensor[] = request.requestedOutputs.map((name) => {
        const entry = sliced.get(name)!;
        const actual = requests.length === 1 ? [...entry.tensor.dims] : [batchSizes[i] ?? 1, ...entry.rowShape];
        const output = this.outputs.get(name);
        return {
          name,
          datatype: entry.datatype,
          shape: clientShape(output, actual, batched),
          data: entry.parts[i] as Uint8Array,
          parameters: {},
        };
      });
      return { outputs };
    });
    return { results, timing: { computeStartNs, computeInputEndNs, computeOutputStartNs, computeEndNs: now() } };
  }

  private buildFeeds(requests: readonly NormalizedRequest[]): Record<string, WireTensor> {
    const feeds: Record<string, WireTensor> = {};
    const first = requests[0];
    if (first === undefined) return feeds;
    for (const input of first.inputs) {
      if (requests.length === 1) {
        feeds[input.name] = toWireTensor(input.datatype, input.shape, input.data);
        continue;
      }
      const parts = requests.map((r) => {
        const match = r.inputs.find((i) => i.name === input.name);
        if (match === undefined) throw internal(`input '${input.name}' missing from a request of the batch`);
        return match.data;
      });
      const total = requests.reduce((n, r) => n + r.batchSize, 0);
      feeds[input.name] = toWireTensor(input.datatype, [total, ...input.shape.slice(1)], concatBatch(parts));
    }
    return feeds;
  }

  async release(): Promise<void> {
    await this.session.release();
  }
}

class OnnxRuntimeModel implements BackendModel {
  constructor(
    private readonly context: BackendModelContext,
    private readonly modelFile: string,
    private firstSession: SessionThread | undefined,
    private readonly settings: OnnxRuntimeSettings,
  ) {}

  async createInstance(spec: InstanceSpec): Promise<BackendInstance> {
    // The session used for the I/O check on load becomes the first instance's session.
    let session = this.firstSession;
    this.firstSession = undefined;
    session ??= await createSession(this.context, this.modelFile, this.settings);
    return new OnnxRuntimeInstance(spec.name, session, this.context.config);
  }

  async release(): Promise<void> {
    await this.firstSession?.release();
    this.firstSession = undefined;
  }
}

export class OnnxRuntimeBackend implements Backend {
  readonly name = 'onnxruntime';

  /** `settings`: the command line's (`--backend-config=onnxruntime,...` and the global default-max-batch-size). */
  constructor(private readonly settings: OnnxRuntimeSettings = DEFAULT_BACKEND_SETTINGS.onnxruntime) {}

  async autoCompleteConfig(context: BackendModelContext): Promise<ModelConfig> {
    const config = context.config;
    if (config.input.length + config.batch_input.length > 0 && config.output.length > 0) return config;
    const session = await createSession(context, await resolveModelFile(context), this.settings);
    try {
      const completed = autoCompleteOnnxConfig(config, sessionIo(session), this.settings.defaultMaxBatchSize);
      if (completed.max_batch_size !== config.max_batch_size) {
        context.logger.warn(
          { maxBatchSize: completed.max_batch_size },
          'autofilled max_batch_size since batching is supported but no max_batch_size is specified in the model configuration',
        );
      }
      return completed;
    } finally {
      await session.release();
    }
  }

  async loadModel(context: BackendModelContext): Promise<BackendModel> {
    const modelFile = await resolveModelFile(context);
    const session = await createSession(context, modelFile, this.settings);
    try {
      checkOnnxIo(context.config, sessionIo(session));
    } catch (e) {
      await session.release();
      throw e;
    }
    return new OnnxRuntimeModel(context, modelFile, session, this.settings);
  }
}
