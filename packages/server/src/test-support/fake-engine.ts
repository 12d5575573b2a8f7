/**
 * Test support: a scriptable in-memory `InferenceEngine` with a fixed catalogue of models, so the
 * front doors (HTTP, gRPC, metrics) can be tested over real sockets without the real engine. Not
 * exported from the package entries.
 *
 * Catalogue (`models`; every model has the single version 1; a test may add its own):
 * - `simple`: INT32 INPUT0/INPUT1 [-1,16] (max_batch_size 8) → OUTPUT0 = a+b, OUTPUT1 = a−b;
 *   only the requested outputs when the request names some. A request parameter `delay_ms`
 *   delays the answer (stream ordering tests).
 * - `identity` (FP32 [-1]), `identity_bytes` (BYTES [1]), `two_dynamic` (FP16 [-1,-1]),
 *   `fp16_out` (FP16 [-1]): every input echoed, `INPUT…` renamed `OUTPUT…`.
 * - `with_params`: like `identity`, and every response carries parameters.
 * - `repeat` (decoupled, INT32 IN [-1]): one response per element (OUT [1]), then a final
 *   result without a response.
 * - `slow`: answers only when aborted, with `cancelled`.
 * - `busy`: fails with unavailable (a full queue).
 * - `fail`: fails with `failWith` (default internal "backend failed").
 *
 * LLMs for the OpenAI door: `llms` (none by default; a test adds `FakeLlmEndpoint`s), served by
 * `llmEndpoint` / `llmEndpoints`.
 *
 * What the tests observe: `calls` (everything the engine was asked that has arguments worth
 * checking), `signals` (the abort signal of each request in flight, by request id) and
 * `abortedRequests` (requests aborted while in flight). Canned answers: `ready`, `snapshot`
 * (the metrics snapshot), statistics from `fakeStatistics`.
 */
import { type CancelSignal, cancelled, internal, invalidArgument, notFound, unavailable, type SwitchyardError } from '@switchyard/common';
import type {
  InferResult,
  InferenceEngine,
  LoadModelOptions,
  ModelIndexEntry,
  ModelMetadata,
  ModelMetricsSnapshot,
  ModelStatistics,
  ServerMetadata,
  SubmitOptions,
  UnloadModelOptions,
} from '@switchyard/engine';
import { bytesOf, type DataType, type InferRequest, type InferResponse, type InferTensor, type Parameters } from '@switchyard/kserve';
import type { LlmEndpoint } from '@switchyard/llm';
import { configDataTypeToWire, wireDataTypeToConfig, type ModelConfig } from '@switchyard/model-config';

export interface FakeModel {
  config: ModelConfig;
  /**
   * The responses' outputs, in order (several only for a decoupled model); rejects with a
   * `SwitchyardError` to fail the request. `signal` is the request's abort signal.
   */
  run(request: InferRequest, signal?: CancelSignal): Promise<InferTensor[][]>;
  /** Parameters of every response. Default none. */
  responseParameters?: Parameters;
}

/** The engine methods whose calls are recorded, with their arguments as received. */
export interface RecordedArgs {
  submit: [request: InferRequest];
  modelStatistics: [name: string | undefined, version: number | undefined];
  repositoryIndex: [readyOnly: boolean];
  loadModel: [name: string, options: LoadModelOptions | undefined];
  unloadModel: [name: string, options: UnloadModelOptions | undefined];
}

export type EngineCall = { [M in keyof RecordedArgs]: { method: M; args: RecordedArgs[M] } }[keyof RecordedArgs];

type Io = Array<[name: string, datatype: DataType, dims: number[]]>;

function config(name: string, maxBatch: number, inputs: Io, outputs: Io, decoupled = false): ModelConfig {
  return {
    name,
    platform: '',
    backend: 'fake',
    runtime: '',
    version_policy: { latest: { num_versions: 1 } },
    max_batch_size: maxBatch,
    input: inputs.map(([n, t, dims]) => ({
      name: n,
      data_type: wireDataTypeToConfig(t),
      format: 'FORMAT_NONE',
      dims,
      is_shape_tensor: false,
      allow_ragged_batch: false,
      optional: false,
      is_non_linear_format_io: false,
    })),
    output: outputs.map(([n, t, dims]) => ({
      name: n,
      data_type: wireDataTypeToConfig(t),
      dims,
      label_filename: '',
      is_shape_tensor: false,
      is_non_linear_format_io: false,
    })),
    batch_input: [],
    batch_output: [],
    instance_group: [],
    default_model_filename: '',
    cc_model_filenames: {},
    metric_tags: {},
    parameters: {},
    model_warmup: [],
    model_transaction_policy: { decoupled },
  };
}

const zero = { count: 0, ns: 0 };

/** Statistics of one model version: all zero, except what `overrides` says. */
export function fakeStatistics(name: string, version = '1', overrides: Partial<ModelStatistics> = {}): ModelStatistics {
  return {
    name,
    version,
    last_inference: 0,
    inference_count: 0,
    execution_count: 0,
    inference_stats: {
      success: zero,
      fail: zero,
      queue: zero,
      compute_input: zero,
      compute_infer: zero,
      compute_output: zero,
      cache_hit: zero,
      cache_miss: zero,
    },
    response_stats: {},
    batch_stats: [],
    memory_usage: [],
    ...overrides,
  };
}

const tensor = (name: string, datatype: DataType, shape: number[], data: Uint8Array): InferTensor => ({ name, datatype, shape, data, parameters: {} });

function int32s(t: InferTensor | undefined): Int32Array {
  if (t === undefined) throw invalidArgument('missing input');
  const copy = new Uint8Array(t.data); // a copy, aligned (Buffer#slice would be a view)
  return new Int32Array(copy.buffer, 0, copy.byteLength / 4);
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));
const echo = async (r: InferRequest): Promise<InferTensor[][]> => [r.inputs.map((i) => tensor(i.name.replace('INPUT', 'OUTPUT'), i.datatype, i.shape, i.data))];
const failing = (error: () => SwitchyardError) => async (): Promise<InferTensor[][]> => {
  throw error();
};

export class FakeEngine implements InferenceEngine {
  ready = true;
  /** The error the `fail` model answers with. */
  failWith: SwitchyardError = internal('backend failed');
  /** What `metricsSnapshot()` returns. */
  snapshot: ModelMetricsSnapshot[] = [];
  readonly models = new Map<string, FakeModel>();
  /** Ready LLMs by name, for the OpenAI door. */
  readonly llms = new Map<string, LlmEndpoint>();
  /** Every recorded call, oldest first. */
  readonly calls: EngineCall[] = [];
  /** Signals of requests currently inside the engine, by request id. */
  readonly signals = new Map<string, CancelSignal | undefined>();
  /** Requests whose signal was aborted before their final result. */
  abortedRequests = 0;
  /** Calls of `modelConfig` (the doors read a model's config per request on the event loop). */
  configReads = 0;

  constructor() {
    const fp32: Io = [['INPUT0', 'FP32', [-1]]];
    const fp32Out: Io = [['OUTPUT0', 'FP32', [-1]]];
    this.models.set('simple', {
      config: config('simple', 8, [['INPUT0', 'INT32', [16]], ['INPUT1', 'INT32', [16]]], [['OUTPUT0', 'INT32', [16]], ['OUTPUT1', 'INT32', [16]]]),
      run: async (r) => {
        const a = int32s(r.inputs.find((i) => i.name === 'INPUT0'));
        const b = int32s(r.inputs.find((i) => i.name === 'INPUT1'));
        const shape = r.inputs[0]?.shape ?? [];
        const all = [
          tensor('OUTPUT0', 'INT32', shape, bytesOf(a.map((v, i) => v + (b[i] ?? 0)))),
          tensor('OUTPUT1', 'INT32', shape, bytesOf(a.map((v, i) => v - (b[i] ?? 0)))),
        ];
        const delay = Number(r.parameters['delay_ms'] ?? 0);
        if (delay > 0) await sleep(delay);
        const wanted = r.outputs.map((o) => o.name);
        return [wanted.length === 0 ? all : all.filter((t) => wanted.includes(t.name))];
      },
    });
    this.models.set('identity', { config: config('identity', 0, fp32, fp32Out), run: echo });
    this.models.set('identity_bytes', { config: config('identity_bytes', 0, [['INPUT0', 'BYTES', [1]]], [['OUTPUT0', 'BYTES', [1]]]), run: echo });
    this.models.set('two_dynamic', { config: config('two_dynamic', 0, [['INPUT0', 'FP16', [-1, -1]]], [['OUTPUT0', 'FP16', [-1, -1]]]), run: echo });
    this.models.set('fp16_out', { config: config('fp16_out', 0, [['INPUT0', 'FP16', [-1]]], [['OUTPUT0', 'FP16', [-1]]]), run: echo });
    this.models.set('with_params', {
      config: config('with_params', 0, fp32, fp32Out),
      run: echo,
      responseParameters: { note: 'hi', count: 3, flag: true },
    });
    this.models.set('repeat', {
      config: config('repeat', 8, [['IN', 'INT32', [-1]]], [['OUT', 'INT32', [1]]], true),
      run: async (r) => Array.from(int32s(r.inputs[0]), (v) => [tensor('OUT', 'INT32', [1], bytesOf(Int32Array.of(v)))]),
    });
    this.models.set('slow', {
      config: config('slow', 0, fp32, fp32Out),
      run: (_r, signal) =>
        new Promise((_resolve, reject) => {
          const abort = (): void => reject(cancelled('Request was cancelled'));
          if (signal?.aborted === true) abort();
          else signal?.addEventListener('abort', abort, { once: true });
        }),
    });
    this.models.set('busy', {
      config: config('busy', 0, fp32, fp32Out),
      run: failing(() => unavailable('[request id: <id_unknown>] Exceeds maximum queue size')),
    });
    this.models.set('fail', { config: config('fail', 0, fp32, fp32Out), run: failing(() => this.failWith) });
  }

  /** Arguments of the latest recorded call to `method`; undefined when there was none. */
  lastCall<M extends keyof RecordedArgs>(method: M): RecordedArgs[M] | undefined {
    return this.calls.findLast((c) => c.method === method)?.args as RecordedArgs[M] | undefined;
  }

  private lookup(name: string, version?: number): FakeModel {
    const m = this.models.get(name);
    if (m === undefined) throw invalidArgument(`Request for unknown model: '${name}' is not found`);
    if (version !== undefined && version !== 1) throw notFound(`Request for unknown model: '${name}' version ${version} is not found`);
    return m;
  }

  llmEndpoint(name: string): LlmEndpoint | undefined {
    return this.llms.get(name);
  }
  llmEndpoints(): LlmEndpoint[] {
    return [...this.llms.values()].sort((a, b) => (a.card.name < b.card.name ? -1 : a.card.name > b.card.name ? 1 : 0));
  }

  isLive(): boolean {
    return true;
  }
  isReady(): boolean {
    return this.ready;
  }
  serverMetadata(): ServerMetadata {
    return { name: 'triton', version: '2.73.0', extensions: ['classification', 'binary_tensor_data'] };
  }
  modelMetadata(name: string, version?: number): ModelMetadata {
    const c = this.lookup(name, version).config;
    const shape = (dims: number[]) => (c.max_batch_size > 0 ? [-1, ...dims] : dims);
    return {
      name,
      versions: ['1'],
      platform: c.backend,
      inputs: c.input.map((i) => ({ name: i.name, datatype: configDataTypeToWire(i.data_type), shape: shape(i.dims) })),
      outputs: c.output.map((o) => ({ name: o.name, datatype: configDataTypeToWire(o.data_type), shape: shape(o.dims) })),
    };
  }
  isModelReady(name: string, version?: number): boolean {
    return this.models.has(name) && (version === undefined || version === 1);
  }
  modelConfig(name: string, version?: number): ModelConfig {
    this.configReads += 1;
    return this.lookup(name, version).config;
  }
  /** Every model reports 3 inferences, the last at 1_700_000_000_000 ms. */
  modelStatistics(name?: string, version?: number): ModelStatistics[] {
    this.calls.push({ method: 'modelStatistics', args: [name, version] });
    const names = name === undefined ? [...this.models.keys()] : [(this.lookup(name, version), name)];
    return names.map((n) => fakeStatistics(n, '1', { inference_count: 3, last_inference: 1_700_000_000_000 }));
  }
  metricsSnapshot(): ModelMetricsSnapshot[] {
    return this.snapshot;
  }
  /** Every model READY, then `never_loaded` (known on disk, never loaded) unless `readyOnly`. */
  async repositoryIndex(readyOnly: boolean): Promise<ModelIndexEntry[]> {
    this.calls.push({ method: 'repositoryIndex', args: [readyOnly] });
    const entries: ModelIndexEntry[] = [...this.models.keys()].map((name) => ({ name, version: '1', state: 'READY' }));
    return readyOnly ? entries : [...entries, { name: 'never_loaded' }];
  }
  async loadModel(name: string, options?: LoadModelOptions): Promise<void> {
    this.calls.push({ method: 'loadModel', args: [name, options] });
  }
  async unloadModel(name: string, options?: UnloadModelOptions): Promise<void> {
    this.calls.push({ method: 'unloadModel', args: [name, options] });
  }

  submit(request: InferRequest, onResult: (result: InferResult) => void, options?: SubmitOptions): void {
    this.calls.push({ method: 'submit', args: [request] });
    const signal = options?.signal;
    const onAbort = (): void => {
      this.abortedRequests += 1;
    };
    this.signals.set(request.id, signal);
    signal?.addEventListener('abort', onAbort, { once: true });
    const done = (result: InferResult): void => {
      if (result.final) {
        this.signals.delete(request.id);
        signal?.removeEventListener('abort', onAbort);
      }
      onResult(result);
    };
    let model: FakeModel;
    try {
      model = this.lookup(request.modelName, request.modelVersion);
    } catch (e) {
      done({ error: e as SwitchyardError, final: true });
      return;
    }
    const respond = (outputs: InferTensor[]): InferResponse => ({
      id: request.id,
      modelName: request.modelName,
      modelVersion: '1',
      parameters: { ...model.responseParameters },
      outputs,
    });
    model.run(request, signal).then(
      (responses) => {
        const decoupled = model.config.model_transaction_policy?.decoupled === true;
        responses.forEach((outputs, i) => done({ response: respond(outputs), final: !decoupled && i === responses.length - 1 }));
        if (decoupled || responses.length === 0) done({ final: true });
      },
      (e: unknown) => done({ error: e as SwitchyardError, final: true }),
    );
  }

  infer(request: InferRequest, options?: SubmitOptions): Promise<InferResponse> {
    return new Promise((resolve, reject) => {
      this.submit(
        request,
        (r) => {
          if (r.error !== undefined) reject(r.error);
          else if (r.response !== undefined) resolve(r.response);
        },
        options,
      );
    });
  }

  async shutdown(): Promise<void> {}
}
