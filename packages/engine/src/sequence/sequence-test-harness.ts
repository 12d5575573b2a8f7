/**
 * Test harness for the sequence batcher's unit tests (not exported from the package): a fake
 * backend instance whose executions finish when the test says so and whose outputs are computed
 * from the inputs it received (controls and states included), jobs built from a few parameters,
 * and a scheduler wired to the real execute path on a manual clock.
 */
import { silentLogger } from '@switchyard/common';
import type { InferTensor, Parameters } from '@switchyard/kserve';
import { normalizeModelConfig, parseModelConfigText, type ModelConfig } from '@switchyard/model-config';
import type { BackendInstance, ExecutionOutcome } from '../backend.js';
import { executeBatch } from '../batch-executor.js';
import { InferenceJob } from '../inference-job.js';
import { ManualClock } from '../queue/queue-clock.js';
import type { NormalizedRequest } from '../normalized-request.js';
import { SequenceBatchScheduler } from './sequence-batch-scheduler.js';
import { ModelStatsCollector } from '../statistics.js';
import type { InferResult } from '../types.js';

export const int32 = (v: number): Uint8Array => new Uint8Array(Int32Array.of(v).buffer);

/** Every element of input `name` of `request` as numbers (BigInt for 64-bit), or undefined when absent. */
export function inputValues(request: NormalizedRequest, name: string): (number | bigint | boolean | string)[] | undefined {
  const input = request.inputs.find((i) => i.name === name);
  if (input === undefined) return undefined;
  const d = Uint8Array.from(input.data);
  switch (input.datatype) {
    case 'INT32':
      return Array.from(new Int32Array(d.buffer));
    case 'FP32':
      return Array.from(new Float32Array(d.buffer));
    case 'BOOL':
      return Array.from(d, (b) => b !== 0);
    case 'UINT64':
      return Array.from(new BigUint64Array(d.buffer));
    case 'UINT32':
      return Array.from(new Uint32Array(d.buffer));
    case 'BYTES': {
      const out: string[] = [];
      const view = new DataView(d.buffer);
      for (let o = 0; o < d.length; ) {
        const n = view.getUint32(o, true);
        out.push(Buffer.from(d.subarray(o + 4, o + 4 + n)).toString('utf8'));
        o += 4 + n;
      }
      return out;
    }
    default:
      throw new Error(`no reader for ${input.datatype}`);
  }
}

/**
 * A backend instance for tests. `compute` gives each request's outputs (it sees the control and
 * state inputs the batcher added). Executions wait for `finish()` unless `auto` is set.
 */
export class FakeInstance implements BackendInstance {
  readonly batches: NormalizedRequest[][] = [];
  private readonly waiting: (() => void)[] = [];
  auto = false;

  constructor(
    readonly name: string,
    private readonly compute: (request: NormalizedRequest) => InferTensor[] = accumulate,
  ) {}

  execute(requests: readonly NormalizedRequest[]): Promise<ExecutionOutcome> {
    this.batches.push([...requests]);
    return new Promise((resolve) => {
      const done = (): void => {
        const t = process.hrtime.bigint();
        resolve({
          results: requests.map((r) => ({ outputs: this.compute(r).filter((o) => r.requestedOutputs.includes(o.name)) })),
          timing: { computeStartNs: t, computeInputEndNs: t, computeOutputStartNs: t, computeEndNs: t },
        });
      };
      if (this.auto) done();
      else this.waiting.push(done);
    });
  }

  /** Complete the oldest waiting execution. */
  finish(): void {
    this.waiting.shift()?.();
  }

  get waitingCount(): number {
    return this.waiting.length;
  }

  async release(): Promise<void> {}
}

/** OUTPUT = INPUT (+ ACC_IN when the model has that state); ACC_OUT = OUTPUT. */
export function accumulate(request: NormalizedRequest): InferTensor[] {
  const input = (inputValues(request, 'INPUT')?.[0] as number | undefined) ?? 0;
  const acc = (inputValues(request, 'ACC_IN')?.[0] as number | undefined) ?? 0;
  const value = int32(input + acc);
  return [
    { name: 'OUTPUT', datatype: 'INT32', shape: [1, 1], data: value, parameters: {} },
    { name: 'ACC_OUT', datatype: 'INT32', shape: [1, 1], data: value, parameters: {} },
  ];
}

export const flush = (): Promise<void> => new Promise((r) => setImmediate(r));

export function sequenceConfig(body: string, maxBatchSize = 4): ModelConfig {
  const text = `name: "seq"\nbackend: "onnxruntime"\nmax_batch_size: ${maxBatchSize}\ninput [{ name: "INPUT" data_type: TYPE_INT32 dims: [1] }]\noutput [{ name: "OUTPUT" data_type: TYPE_INT32 dims: [1] }]\n${body}`;
  return normalizeModelConfig(parseModelConfigText(text), { modelName: 'seq' });
}

/** START/END/READY int32 [0,1] and a UINT64 CORRID. */
export const ALL_CONTROLS = `control_input [
  { name: "START" control [{ kind: CONTROL_SEQUENCE_START int32_false_true: [0, 1] }] },
  { name: "END" control [{ kind: CONTROL_SEQUENCE_END int32_false_true: [0, 1] }] },
  { name: "READY" control [{ kind: CONTROL_SEQUENCE_READY int32_false_true: [0, 1] }] },
  { name: "CORRID" control [{ kind: CONTROL_SEQUENCE_CORRID data_type: TYPE_UINT64 }] }
]`;

export interface Harness {
  scheduler: SequenceBatchScheduler;
  instances: FakeInstance[];
  clock: ManualClock;
  stats: ModelStatsCollector;
  results: Map<string, InferResult>;
  /** Submit a request with id `id`, INPUT `value` and the given sequence parameters. */
  send(id: string, parameters: Parameters, value?: number, batchSize?: number): InferenceJob;
  /** OUTPUT of a finished request, or its error message. */
  output(id: string): number | string | undefined;
}

export function harness(config: ModelConfig, instanceCount = 1, modelPath?: string): Harness {
  const clock = new ManualClock(0);
  const stats = new ModelStatsCollector('seq', 1);
  const instances = Array.from({ length: instanceCount }, (_, i) => new FakeInstance(`seq_${i}`));
  const scheduler = new SequenceBatchScheduler(
    config,
    { instances, run: (instance, jobs) => executeBatch(instance, jobs, stats), logger: silentLogger, modelPath },
    { clock },
  );
  const results = new Map<string, InferResult>();
  return {
    scheduler,
    instances,
    clock,
    stats,
    results,
    send(id, parameters, value = 1, batchSize = 1) {
      const request: NormalizedRequest = {
        request: { id, modelName: 'seq', modelVersion: undefined, parameters, inputs: [], outputs: [] },
        batchSize,
        inputs: [{ name: 'INPUT', datatype: 'INT32', shape: [batchSize, 1], originalShape: [batchSize, 1], data: int32(value) }],
        requestedOutputs: ['OUTPUT'],
      };
      const job = new InferenceJob(request, 1, stats, process.hrtime.bigint(), (r) => results.set(id, r));
      scheduler.enqueue(job);
      return job;
    },
    output(id) {
      const r = results.get(id);
      if (r === undefined) return undefined;
      if (r.error !== undefined) return r.error.message;
      const out = r.response?.outputs.find((o) => o.name === 'OUTPUT');
      return out === undefined ? undefined : new Int32Array(Uint8Array.from(out.data).buffer)[0];
    },
  };
}
