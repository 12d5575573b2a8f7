/**
 * A scriptable in-memory `InferenceEngine` for the front-door tests (not exported from the
 * package). Models:
 * - `simple` (v1): INT32 INPUT0/INPUT1 → OUTPUT0 = a+b, OUTPUT1 = a−b. A request parameter
 *   `delay_ms` delays the answer (for ordering tests).
 * - `identity` (v1): every input echoed as an output of the same name.
 * - `repeat` (v1, decoupled): INT32 IN [n] → one response per element (OUT = element), then a
 *   final result without a response.
 * - `fail` (v1): every request fails with `failWith` (default: internal "backend failed").
 * - `slow` (v1): never answers until aborted, then fails with cancelled.
 * Everything the engine is asked is recorded in `calls`.
 */
import { cancelled, internal, invalidArgument, type SwitchyardError } from '@switchyard/common';
import type {
  InferenceEngine,
  InferResult,
  LoadModelOptions,
  ModelIndexEntry,
  ModelMetadata,
  ModelMetricsSnapshot,
  ModelStatistics,
  ServerMetadata,
  SubmitOptions,
  UnloadModelOptions,
} from '@switchyard/engine';
import { bytesOf, typedView, type InferRequest, type InferResponse, type InferTensor } from '@switchyard/kserve';
import type { ModelConfig } from '@switchyard/model-config';

const MODELS = ['simple', 'identity', 'repeat', 'fail', 'slow'] as const;

function config(name: string, decoupled: boolean): ModelConfig {
  return {
    name,
    platform: '',
    backend: 'fake',
    runtime: '',
    version_policy: { latest: { num_versions: 1 } },
    max_batch_size: 8,
    input: [
      {
        name: 'INPUT0',
        data_type: 'TYPE_INT32',
        format: 'FORMAT_NONE',
        dims: [16],
        is_shape_tensor: false,
        allow_ragged_batch: false,
        optional: false,
        is_non_linear_format_io: false,
      },
    ],
    output: [],
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

function int32(t: InferTensor | undefined): Int32Array {
  return t === undefined ? new Int32Array(0) : (typedView('INT32', t.data) as Int32Array);
}

export class FakeEngine implements InferenceEngine {
  ready = true;
  failWith: SwitchyardError = internal('backend failed');
  snapshot: ModelMetricsSnapshot[] = [];
  readonly calls: { method: string; args: unknown[] }[] = [];
  /** Signals of requests currently inside the engine, by request id. */
  readonly signals = new Map<string, AbortSignal | undefined>();

  isLive(): boolean {
    return true;
  }
  isReady(): boolean {
    return this.ready;
  }
  serverMetadata(): ServerMetadata {
    return { name: 'triton', version: '2.73.0', extensions: ['classification', 'sequence'] };
  }
  #lookup(name: string, version?: number): void {
    if (!(MODELS as readonly string[]).includes(name)) throw invalidArgument(`Request for unknown model: '${name}' is not found`);
    if (version !== undefined && version !== 1) throw invalidArgument(`Request for unknown model: '${name}' version ${version} is not found`);
  }
  modelMetadata(name: string, version?: number): ModelMetadata {
    this.#lookup(name, version);
    return { name, versions: ['1'], platform: 'fake', inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [-1, 16] }], outputs: [] };
  }
  isModelReady(name: string, version?: number): boolean {
    try {
      this.#lookup(name, version);
      return true;
    } catch {
      return false;
    }
  }
  modelConfig(name: string, version?: number): ModelConfig {
    this.#lookup(name, version);
    return config(name, name === 'repeat');
  }
  modelStatistics(name?: string, version?: number): ModelStatistics[] {
    this.calls.push({ method: 'modelStatistics', args: [name, version] });
    if (name !== undefined) this.#lookup(name, version);
    return [fakeStatistics(name ?? 'simple', '1', { inference_count: 3, last_inference: 1_700_000_000_000 })];
  }
  metricsSnapshot(): ModelMetricsSnapshot[] {
    return this.snapshot;
  }
  async repositoryIndex(readyOnly: boolean): Promise<ModelIndexEntry[]> {
    this.calls.push({ method: 'repositoryIndex', args: [readyOnly] });
    return [{ name: 'simple', version: '1', state: 'READY' }, { name: 'never_loaded' }];
  }
  async loadModel(name: string, options?: LoadModelOptions): Promise<void> {
    this.calls.push({ method: 'loadModel', args: [name, options] });
  }
  async unloadModel(name: string, options?: UnloadModelOptions): Promise<void> {
    this.calls.push({ method: 'unloadModel', args: [name, options] });
  }

  submit(request: InferRequest, onResult: (result: InferResult) => void, options?: SubmitOptions): void {
    this.calls.push({ method: 'submit', args: [request] });
    this.signals.set(request.id, options?.signal);
    const done = (result: InferResult): void => {
      if (result.final) this.signals.delete(request.id);
      onResult(result);
    };
    const respond = (outputs: InferTensor[]): InferResponse => ({
      id: request.id,
      modelName: request.modelName,
      modelVersion: '1',
      parameters: {},
      outputs,
    });
    switch (request.modelName) {
      case 'simple': {
        const a = int32(request.inputs[0]);
        const b = int32(request.inputs[1]);
        const sum = a.map((v, i) => v + (b[i] ?? 0));
        const diff = a.map((v, i) => v - (b[i] ?? 0));
        const shape = request.inputs[0]?.shape ?? [];
        const answer = (): void =>
          done({
            response: respond([
              { name: 'OUTPUT0', datatype: 'INT32', shape, data: bytesOf(sum), parameters: {} },
              { name: 'OUTPUT1', datatype: 'INT32', shape, data: bytesOf(diff), parameters: {} },
            ]),
            final: true,
          });
        const delay = Number(request.parameters['delay_ms'] ?? 0);
        if (delay > 0) setTimeout(answer, delay);
        else answer();
        return;
      }
      case 'identity':
        done({ response: respond(request.inputs.map((t) => ({ ...t, parameters: {} }))), final: true });
        return;
      case 'repeat': {
        const values = Array.from(int32(request.inputs[0]));
        let i = 0;
        const next = (): void => {
          const v = values[i++];
          if (v === undefined) {
            done({ final: true });
            return;
          }
          done({ response: respond([{ name: 'OUT', datatype: 'INT32', shape: [1], data: bytesOf(Int32Array.of(v)), parameters: {} }]), final: false });
          setTimeout(next, 1);
        };
        setTimeout(next, 1);
        return;
      }
      case 'fail':
        done({ error: this.failWith, final: true });
        return;
      case 'slow': {
        const signal = options?.signal;
        const abort = (): void => done({ error: cancelled('Request was cancelled'), final: true });
        if (signal?.aborted === true) abort();
        else signal?.addEventListener('abort', abort, { once: true });
        return;
      }
      default:
        done({ error: invalidArgument(`Request for unknown model: '${request.modelName}' is not found`), final: true });
    }
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
