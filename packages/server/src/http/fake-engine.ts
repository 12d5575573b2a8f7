/**
 * Test support: a small in-memory `InferenceEngine` with a handful of fixed models, so the
 * front doors can be tested over real sockets without the real engine. Not exported from the
 * package entry.
 *
 * Models: `simple` (INT32 [-1,16] ×2 → sum, difference; batching 8), `identity` (FP32 [-1]),
 * `identity_bytes` (BYTES [1]), `two_dynamic` (FP16 [-1,-1]), `repeat` (decoupled INT32 [-1]:
 * one response per element), `slow` (waits until aborted), `busy` (fails with unavailable),
 * `fp16_out` (FP16 output), `with_params` (response parameters).
 */
import { SwitchyardError, cancelled, invalidArgument, notFound, unavailable } from '@switchyard/common';
import type {
  InferResult,
  InferenceEngine,
  LoadModelOptions,
  ModelIndexEntry,
  ModelMetadata,
  ModelStatistics,
  SubmitOptions,
  UnloadModelOptions,
} from '@switchyard/engine';
import type { DataType, InferRequest, InferResponse, InferTensor } from '@switchyard/kserve';
import type { DataTypeName, ModelConfig } from '@switchyard/model-config';

interface FakeModel {
  config: ModelConfig;
  run(request: InferRequest, signal?: AbortSignal): Promise<InferTensor[][]>;
}

const WIRE_TO_CONFIG: Record<DataType, DataTypeName> = {
  BOOL: 'TYPE_BOOL',
  UINT8: 'TYPE_UINT8',
  UINT16: 'TYPE_UINT16',
  UINT32: 'TYPE_UINT32',
  UINT64: 'TYPE_UINT64',
  INT8: 'TYPE_INT8',
  INT16: 'TYPE_INT16',
  INT32: 'TYPE_INT32',
  INT64: 'TYPE_INT64',
  FP16: 'TYPE_FP16',
  FP32: 'TYPE_FP32',
  FP64: 'TYPE_FP64',
  BYTES: 'TYPE_STRING',
  BF16: 'TYPE_BF16',
};

function config(
  name: string,
  maxBatch: number,
  inputs: Array<[string, DataType, number[]]>,
  outputs: Array<[string, DataType, number[]]>,
  decoupled = false,
): ModelConfig {
  return {
    name,
    platform: '',
    backend: 'fake',
    runtime: '',
    version_policy: { latest: { num_versions: 1 } },
    max_batch_size: maxBatch,
    input: inputs.map(([n, t, dims]) => ({
      name: n,
      data_type: WIRE_TO_CONFIG[t],
      format: 'FORMAT_NONE',
      dims,
      is_shape_tensor: false,
      allow_ragged_batch: false,
      optional: false,
      is_non_linear_format_io: false,
    })),
    output: outputs.map(([n, t, dims]) => ({
      name: n,
      data_type: WIRE_TO_CONFIG[t],
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

const tensor = (name: string, datatype: DataType, shape: number[], data: Uint8Array): InferTensor => ({ name, datatype, shape, data, parameters: {} });

function int32s(t: InferTensor | undefined): Int32Array {
  if (t === undefined) throw invalidArgument('missing input');
  const copy = new Uint8Array(t.data); // a copy, aligned (Buffer#slice would be a view)
  return new Int32Array(copy.buffer, 0, copy.byteLength / 4);
}

const bytes = (a: ArrayBufferView) => new Uint8Array(a.buffer, a.byteOffset, a.byteLength);
const echo = async (r: InferRequest) => [r.inputs.map((i) => tensor(i.name.replace('INPUT', 'OUTPUT'), i.datatype, i.shape, i.data))];

export class FakeEngine implements InferenceEngine {
  ready = true;
  readonly models = new Map<string, FakeModel>();
  readonly loads: Array<{ name: string; options?: LoadModelOptions }> = [];
  readonly unloads: Array<{ name: string; options?: UnloadModelOptions }> = [];
  readonly requests: InferRequest[] = [];
  abortedRequests = 0;

  constructor() {
    this.models.set('simple', {
      config: config('simple', 8, [['INPUT0', 'INT32', [16]], ['INPUT1', 'INT32', [16]]], [['OUTPUT0', 'INT32', [16]], ['OUTPUT1', 'INT32', [16]]]),
      run: async (r) => {
        const a = int32s(r.inputs.find((i) => i.name === 'INPUT0'));
        const b = int32s(r.inputs.find((i) => i.name === 'INPUT1'));
        const shape = r.inputs[0]?.shape ?? [];
        const all = [
          tensor('OUTPUT0', 'INT32', shape, bytes(a.map((v, i) => v + (b[i] as number)))),
          tensor('OUTPUT1', 'INT32', shape, bytes(a.map((v, i) => v - (b[i] as number)))),
        ];
        const wanted = r.outputs.map((o) => o.name);
        return [wanted.length === 0 ? all : all.filter((t) => wanted.includes(t.name))];
      },
    });
    this.models.set('identity', { config: config('identity', 0, [['INPUT0', 'FP32', [-1]]], [['OUTPUT0', 'FP32', [-1]]]), run: echo });
    this.models.set('identity_bytes', { config: config('identity_bytes', 0, [['INPUT0', 'BYTES', [1]]], [['OUTPUT0', 'BYTES', [1]]]), run: echo });
    this.models.set('two_dynamic', { config: config('two_dynamic', 0, [['INPUT0', 'FP16', [-1, -1]]], [['OUTPUT0', 'FP16', [-1, -1]]]), run: echo });
    this.models.set('fp16_out', { config: config('fp16_out', 0, [['INPUT0', 'FP16', [-1]]], [['OUTPUT0', 'FP16', [-1]]]), run: echo });
    this.models.set('repeat', {
      config: config('repeat', 0, [['IN', 'INT32', [-1]]], [['OUT', 'INT32', [1]]], true),
      run: async (r) => Array.from(int32s(r.inputs[0]), (v) => [tensor('OUT', 'INT32', [1], bytes(new Int32Array([v])))]),
    });
    this.models.set('slow', {
      config: config('slow', 0, [['INPUT0', 'FP32', [-1]]], [['OUTPUT0', 'FP32', [-1]]]),
      run: (_r, signal) =>
        new Promise((_resolve, reject) => {
          signal?.addEventListener('abort', () => {
            this.abortedRequests += 1;
            reject(cancelled('request cancelled'));
          });
        }),
    });
    this.models.set('busy', {
      config: config('busy', 0, [['INPUT0', 'FP32', [-1]]], [['OUTPUT0', 'FP32', [-1]]]),
      run: async () => {
        throw unavailable('[request id: <id_unknown>] Exceeds maximum queue size');
      },
    });
    this.models.set('with_params', {
      config: config('with_params', 0, [['INPUT0', 'FP32', [-1]]], [['OUTPUT0', 'FP32', [-1]]]),
      run: echo,
    });
  }

  private lookup(name: string, version?: number): FakeModel {
    const m = this.models.get(name);
    if (m === undefined) throw invalidArgument(`Request for unknown model: '${name}' is not found`);
    if (version !== undefined && version !== 1) throw notFound(`Request for unknown model: '${name}' version ${version} is not found`);
    return m;
  }

  isLive(): boolean {
    return true;
  }
  isReady(): boolean {
    return this.ready;
  }
  serverMetadata() {
    return { name: 'triton', version: '2.73.0', extensions: ['classification', 'binary_tensor_data'] };
  }
  modelMetadata(name: string, version?: number): ModelMetadata {
    const c = this.lookup(name, version).config;
    const wire = (t: DataTypeName) => (t === 'TYPE_STRING' ? 'BYTES' : t.slice(5)) as DataType;
    const shape = (dims: number[]) => (c.max_batch_size > 0 ? [-1, ...dims] : dims);
    return {
      name,
      versions: ['1'],
      platform: c.backend,
      inputs: c.input.map((i) => ({ name: i.name, datatype: wire(i.data_type), shape: shape(i.dims) })),
      outputs: c.output.map((o) => ({ name: o.name, datatype: wire(o.data_type), shape: shape(o.dims) })),
    };
  }
  isModelReady(name: string, version?: number): boolean {
    return this.models.has(name) && (version === undefined || version === 1);
  }
  modelConfig(name: string, version?: number): ModelConfig {
    return this.lookup(name, version).config;
  }
  modelStatistics(name?: string, version?: number): ModelStatistics[] {
    const names = name === undefined ? [...this.models.keys()] : [(this.lookup(name, version), name)];
    const d = { count: 0, ns: 0 };
    return names.map((n) => ({
      name: n,
      version: '1',
      last_inference: 0,
      inference_count: 0,
      execution_count: 0,
      inference_stats: { success: d, fail: d, queue: d, compute_input: d, compute_infer: d, compute_output: d, cache_hit: d, cache_miss: d },
      response_stats: {},
      batch_stats: [],
      memory_usage: [],
    }));
  }
  metricsSnapshot() {
    return [];
  }
  async repositoryIndex(readyOnly: boolean): Promise<ModelIndexEntry[]> {
    const entries: ModelIndexEntry[] = [...this.models.keys()].map((name) => ({ name, version: '1', state: 'READY' }));
    return readyOnly ? entries : [...entries, { name: 'never_loaded' }];
  }
  async loadModel(name: string, options?: LoadModelOptions): Promise<void> {
    this.loads.push({ name, options });
  }
  async unloadModel(name: string, options?: UnloadModelOptions): Promise<void> {
    this.unloads.push({ name, options });
  }

  submit(request: InferRequest, onResult: (result: InferResult) => void, options?: SubmitOptions): void {
    this.requests.push(request);
    let model: FakeModel;
    try {
      model = this.lookup(request.modelName, request.modelVersion);
    } catch (e) {
      onResult({ error: e as SwitchyardError, final: true });
      return;
    }
    model.run(request, options?.signal).then(
      (responses) => {
        const decoupled = model.config.model_transaction_policy?.decoupled === true;
        responses.forEach((outputs, i) => onResult({ response: this.response(request, outputs), final: !decoupled && i === responses.length - 1 }));
        if (decoupled || responses.length === 0) onResult({ final: true });
      },
      (e: unknown) => onResult({ error: e as SwitchyardError, final: true }),
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

  private response(request: InferRequest, outputs: InferTensor[]): InferResponse {
    return {
      id: request.id,
      modelName: request.modelName,
      modelVersion: '1',
      parameters: request.modelName === 'with_params' ? { note: 'hi', count: 3, flag: true } : {},
      outputs,
    };
  }
}
