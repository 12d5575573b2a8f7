/**
 * Test support for the router's unit tests: a whole cluster on the runtime's memory twins (one
 * MemoryDiscoveryStore "etcd", one MemoryRequestBroker "NATS", one MemoryEventStore "JetStream") with
 * real worker nodes (engine + startWorkerNode) serving the simulated LLM (`backend: "mocker"`, the tiny
 * model's tokenizer) and a JavaScript tensor model (`add_sub`).
 */
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Engine, createEngine } from '@switchyard/engine';
import { llmFixtureRepositoryFiles } from '@switchyard/onnx-builder';
import { MemoryRoutingTable, type RouteDecision, type RouteRequest } from '@switchyard/kv-router';
import { repoRoot } from '@switchyard/testing';
import {
  MemoryDiscovery,
  MemoryDiscoveryStore,
  MemoryEventPlane,
  MemoryEventStore,
  MemoryRequestBroker,
  MemoryRequestPlane,
} from '@switchyard/runtime';
import { type WorkerNode, startWorkerNode } from '../../worker/worker-node.js';

export const NS = 'test';
export const LLM = 'mock_llm';
export const TENSOR = 'add_sub';
export const BLOCK_SIZE = 16;

/** The mocker: deterministic tokens (a function of request id and position), 50× faster than real time. */
export function mockLlmConfig(options: { speedup?: number } = {}): string {
  return `name: "${LLM}"
backend: "mocker"
max_batch_size: 0
model_transaction_policy { decoupled: True }
input [
  { name: "text_input" data_type: TYPE_STRING dims: [ 1 ] },
  { name: "stream" data_type: TYPE_BOOL dims: [ 1 ] optional: true },
  { name: "sampling_parameters" data_type: TYPE_STRING dims: [ 1 ] optional: true },
  { name: "exclude_input_in_output" data_type: TYPE_BOOL dims: [ 1 ] optional: true }
]
output [ { name: "text_output" data_type: TYPE_STRING dims: [ -1 ] } ]
parameters [
  { key: "block_size" value: { string_value: "${BLOCK_SIZE}" } },
  { key: "num_gpu_blocks" value: { string_value: "64" } },
  { key: "max_num_seqs" value: { string_value: "8" } },
  { key: "max_model_len" value: { string_value: "512" } },
  { key: "speedup_ratio" value: { string_value: "${options.speedup ?? 50}" } }
]
instance_group [ { count: 1 kind: KIND_CPU } ]
`;
}

const ADD_SUB_CONFIG = `name: "${TENSOR}"
backend: "javascript"
max_batch_size: 0
input [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ 4 ] }, { name: "INPUT1" data_type: TYPE_INT32 dims: [ 4 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_INT32 dims: [ 4 ] label_filename: "labels.txt" }, { name: "OUTPUT1" data_type: TYPE_INT32 dims: [ 4 ] } ]
instance_group [ { count: 1 kind: KIND_CPU } ]
`;
/** OUTPUT0's classification labels (class index → label). */
export const ADD_SUB_LABELS = ['cat', 'dog', 'bird', 'fish'];

/** Decoupled: OUT = [1], then an error response (not final), then OUT = [3] final (test/fixtures/javascript_repository). */
export const DECOUPLED_ERROR = 'decoupled_error';
/** The fixture's own files (config.pbtxt, 1/model.mjs), copied into the temp repository. */
const DECOUPLED_ERROR_FIXTURE = join(repoRoot(), 'test', 'fixtures', 'javascript_repository', DECOUPLED_ERROR);

/**
 * A stateful model (sequence batching, one slot): OUTPUT = the running sum of INPUT since the
 * sequence's START. A request of a sequence its instance does not know fails "must specify the START flag".
 */
export const SEQUENCE = 'seq_sum';
export const SEQUENCE_IDLE_MS = 2000;
const SEQUENCE_CONFIG = `name: "${SEQUENCE}"
backend: "javascript"
max_batch_size: 0
sequence_batching {
  max_sequence_idle_microseconds: ${SEQUENCE_IDLE_MS * 1000}
  control_input [ { name: "START" control [ { kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] } ] } ]
}
input [ { name: "INPUT" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "OUTPUT" data_type: TYPE_INT32 dims: [ 1 ] } ]
instance_group [ { count: 1 kind: KIND_CPU } ]
`;
const SEQUENCE_CJS = `
class TritonModel {
  execute(requests) {
    return requests.map((r) => {
      if (r.input('START').data[0] === 1) this.sum = 0;
      this.sum += r.input('INPUT').data[0];
      return { outputs: [{ name: 'OUTPUT', data: Int32Array.of(this.sum), shape: [1] }] };
    });
  }
}
module.exports = { TritonModel };
`;

// CommonJS: the temp repository has no package.json.
const ADD_SUB_CJS = `
class TritonModel {
  execute(requests) {
    return requests.map((r) => {
      const a = r.input('INPUT0').data, b = r.input('INPUT1').data;
      return { outputs: [
        { name: 'OUTPUT0', data: a.map((x, i) => x + b[i]), shape: [a.length] },
        { name: 'OUTPUT1', data: a.map((x, i) => x - b[i]), shape: [a.length] },
      ] };
    });
  }
}
module.exports = { TritonModel };
`;

export interface RepositoryOptions {
  /** The mocker LLM; default true. */
  llm?: boolean;
  /** add_sub (with labels on OUTPUT0). */
  tensor?: boolean;
  /** decoupled_error and seq_sum. */
  extras?: boolean;
  speedup?: number;
  /** The mocker LLM's generation_config.json (JSON text); default none. */
  generationConfig?: string;
}

/** A model repository in a temp folder: the mocker LLM, the tensor model and/or the extras. */
export async function writeRepository(options: RepositoryOptions = {}): Promise<string> {
  const root = await mkdtemp(join(tmpdir(), 'switchyard-router-test-'));
  const put = async (rel: string, data: string | Uint8Array): Promise<void> => {
    await mkdir(join(root, rel, '..'), { recursive: true });
    await writeFile(join(root, rel), data);
  };
  if (options.llm !== false) {
    await put(`${LLM}/config.pbtxt`, mockLlmConfig(options.speedup !== undefined ? { speedup: options.speedup } : {}));
    for (const f of llmFixtureRepositoryFiles()) if (f.path.startsWith(`${LLM}/`) && !f.path.endsWith('config.pbtxt')) await put(f.path, f.build());
    if (options.generationConfig !== undefined) await put(`${LLM}/1/generation_config.json`, options.generationConfig);
  }
  if (options.tensor === true) {
    await put(`${TENSOR}/config.pbtxt`, ADD_SUB_CONFIG);
    await put(`${TENSOR}/1/model.js`, ADD_SUB_CJS);
    await put(`${TENSOR}/labels.txt`, ADD_SUB_LABELS.join('\n') + '\n');
  }
  if (options.extras === true) {
    for (const f of ['config.pbtxt', '1/model.mjs']) await put(`${DECOUPLED_ERROR}/${f}`, await readFile(join(DECOUPLED_ERROR_FIXTURE, f)));
    await put(`${SEQUENCE}/config.pbtxt`, SEQUENCE_CONFIG);
    await put(`${SEQUENCE}/1/model.js`, SEQUENCE_CJS);
  }
  return root;
}

export interface MockWorker {
  readonly node: WorkerNode;
  readonly engine: Engine;
  readonly discovery: MemoryDiscovery;
  readonly requestPlane: MemoryRequestPlane;
  /** Process death: request plane gone (streams end without a final marker); the lease lives on until `expireLease`. */
  crash(): void;
  close(): Promise<void>;
}

export class MockCluster {
  readonly store = new MemoryDiscoveryStore();
  readonly broker = new MemoryRequestBroker();
  readonly events = new MemoryEventStore();
  private readonly workers: MockWorker[] = [];
  private readonly repos: string[] = [];

  /** A router process's three roles. */
  routerRoles(): { discovery: MemoryDiscovery; requestPlane: MemoryRequestPlane; eventPlane: MemoryEventPlane } {
    return { discovery: this.store.connect(), requestPlane: new MemoryRequestPlane(this.broker), eventPlane: new MemoryEventPlane(this.events) };
  }

  async addWorker(options: RepositoryOptions & { kvEvents?: boolean } = {}): Promise<MockWorker> {
    const repo = await writeRepository(options);
    this.repos.push(repo);
    const engine = await createEngine({ modelRepositories: [repo] });
    const discovery = this.store.connect();
    const requestPlane = new MemoryRequestPlane(this.broker);
    const node = await startWorkerNode({ engine, discovery, requestPlane, eventPlane: new MemoryEventPlane(this.events), namespace: NS, loadIntervalMs: 20, loadHeartbeatMs: 200, ...(options.kvEvents === false ? { kvEvents: false } : {}) });
    let closed = false;
    const worker: MockWorker = {
      node,
      engine,
      discovery,
      requestPlane,
      crash: () => requestPlane.crash(),
      close: async () => {
        if (closed) return;
        closed = true;
        await node.close().catch(() => {});
        await engine.shutdown();
      },
    };
    this.workers.push(worker);
    return worker;
  }

  async close(): Promise<void> {
    await Promise.all(this.workers.map((w) => w.close()));
    await Promise.all(this.repos.map((r) => rm(r, { recursive: true, force: true })));
  }
}

/** Poll `check` every 5 ms until it returns true (or throw after `timeoutMs`). */
export async function waitFor(check: () => boolean | Promise<boolean>, timeoutMs = 5000, what = 'condition'): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

/**
 * The memory routing table with its decisions steered by a test: `failure` set → every decision is
 * refused with it (an unreachable Redis is `unavailable`, a broken script `internal`); `hold` → the
 * decision is made (reserved) at once, but its answer waits in `held` until the test calls it.
 */
export class SteeredRoutingTable extends MemoryRoutingTable {
  failure: unknown = undefined;
  hold = false;
  readonly held: Array<() => void> = [];

  override selectAndReserve(request: RouteRequest): Promise<RouteDecision> {
    if (this.failure !== undefined) return Promise.reject(this.failure);
    const answer = super.selectAndReserve(request);
    if (!this.hold) return answer;
    return new Promise((resolve) => this.held.push(() => resolve(answer)));
  }
}
