/**
 * KServe through the router when a worker dies (kill -9), on a whole local cluster
 * (test/support/cluster.ts: private etcd, NATS with JetStream, Redis; one router and two worker
 * processes), driven over KServe HTTP and gRPC (a grpc-js client built from Triton's protos). One
 * cluster for the file; every step kills a worker and starts with a new one in its place.
 *
 * 1. a tensor request in flight on the killed worker (HTTP infer, gRPC ModelInfer) succeeds through
 *    the other worker, in seconds (its call-home connection closes, or a stall probe finds it dead),
 *    not after the ~9.5 s lease expiry;
 * 2. an LLM generation cut by the kill (HTTP generate, generate_stream, gRPC ModelStreamInfer)
 *    continues on the other worker with the tokens so far: one uninterrupted stream of the requested
 *    length whose text is exactly the undisturbed run's;
 * 3. a request in the middle of a sequence whose worker was killed fails 503 (HTTP) / UNAVAILABLE
 *    (gRPC) quickly with a clear message, and so does the sequence's next request; a restarted
 *    sequence works.
 *
 * The tensor models are JavaScript models that sleep (so a request is in flight when the worker is
 * killed) and leave a marker file `running-<pid>` in their folder when they start executing, which
 * tells the test which worker process to kill. mock_llm runs slowly (speedup_ratio 2) as in
 * test/cluster-faults.test.ts, and its tokens are a function of (request id, position): the router
 * logs the request id when it migrates, from which the test computes the undisturbed text.
 */
import { readdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { Tokenizer } from '@switchyard/llm';
import { type WorkerProcess } from '@switchyard/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startCluster, type Cluster } from './support/cluster.js';
import { type GrpcClient, grpc, isFinalResponse, loadGrpcClients, unary } from './lib/grpc-client.js';
import { metricsText, total } from './lib/metrics.js';
import { SLOW_MOCK_CONFIG, mockerText } from './lib/mock-llm.js';
import { deserializeStrings, post, serializeStrings } from './lib/tensors.js';
import { waitFor } from './lib/wait-for.js';

/** How long each tensor request runs on a worker. */
const DELAY_MS = 1500;
/** Far below the lease expiry (~9.5 s after a kill -9), with room for a loaded CI machine. */
const BOUND_MS = 8000;

const SLOW_ADD_CONFIG = `name: "slow_add"
backend: "javascript"
max_batch_size: 0
input [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ 4 ] }, { name: "INPUT1" data_type: TYPE_INT32 dims: [ 4 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_INT32 dims: [ 4 ] } ]
instance_group [ { count: 1 kind: KIND_CPU } ]
`;
const SLOW_SEQ_CONFIG = `name: "slow_seq"
backend: "javascript"
max_batch_size: 0
sequence_batching {
  max_sequence_idle_microseconds: 60000000
  control_input [ { name: "START" control [ { kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] } ] } ]
}
input [ { name: "INPUT" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "OUTPUT" data_type: TYPE_INT32 dims: [ 1 ] } ]
instance_group [ { count: 1 kind: KIND_CPU } ]
`;
/** Both models: a marker when an execution starts, then DELAY_MS of sleep. */
const model = (body: string): string => `import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
export class TritonModel {
  initialize(args) {
    this.dir = args.model_repository;
  }
  async execute(requests) {
    writeFileSync(join(this.dir, 'running-' + process.pid), '');
    await new Promise((r) => setTimeout(r, ${DELAY_MS}));
    return requests.map((r) => {
${body}
    });
  }
}
`;
const SLOW_ADD_JS = model(`      const a = r.input('INPUT0').data, b = r.input('INPUT1').data;
      return { outputs: [{ name: 'OUTPUT0', data: a.map((x, i) => x + b[i]), shape: [4] }] };`);
const SLOW_SEQ_JS = model(`      if (r.input('START').data[0] === 1) this.sum = 0;
      this.sum += r.input('INPUT').data[0];
      return { outputs: [{ name: 'OUTPUT', data: Int32Array.of(this.sum), shape: [1] }] };`);

const WORKER_ARGS = ['--model-control-mode=explicit', '--load-model=mock_llm', '--load-model=slow_add', '--load-model=slow_seq'];
const PROMPT = 'A worker dies in the middle of a KServe request; the router carries the request on elsewhere. '.repeat(2);
const MAX_TOKENS = 120;

let cluster: Cluster;
let tokenizer: Tokenizer;
let inference: GrpcClient;

const routerMetrics = (): Promise<string> => metricsText(cluster.router.metricsUrl);

/** Kill -9 `victim` (twoWorkers() replaces it); resolves with the time of death. */
async function kill(victim: WorkerProcess): Promise<number> {
  cluster.workers.splice(cluster.workers.indexOf(victim), 1);
  await victim.stop('SIGKILL');
  return Date.now();
}
/** Start workers until two run, and wait until the router routes every model to both. */
async function twoWorkers(): Promise<void> {
  while (cluster.workers.length < 2) await cluster.addWorker(WORKER_ARGS);
  await waitFor(
    async () => {
      const text = await routerMetrics();
      return ['mock_llm', 'slow_add', 'slow_seq'].every((m) => total(text, 'switchyard_router_workers', `model="${m}"`) === 2);
    },
    { timeoutMs: 60_000, message: 'the router did not see two workers' },
  );
}

/** The worker process that started executing `model` since the markers were cleared. */
function clearMarkers(model: string): void {
  for (const f of readdirSync(join(cluster.repo.path, model))) if (f.startsWith('running-')) rmSync(join(cluster.repo.path, model, f));
}
async function runningOn(model: string): Promise<WorkerProcess> {
  let worker: WorkerProcess | undefined;
  await waitFor(
    async () => {
      const pids = readdirSync(join(cluster.repo.path, model)).filter((f) => f.startsWith('running-')).map((f) => Number(f.slice('running-'.length)));
      worker = cluster.workers.find((w) => pids.includes(w.pid));
      return worker !== undefined;
    },
    { timeoutMs: 20_000, message: `no worker started executing ${model}` },
  );
  return worker!;
}
/** The worker process generating (vllm:num_requests_running > 0). */
async function generatingWorker(): Promise<WorkerProcess> {
  let worker: WorkerProcess | undefined;
  await waitFor(
    async () => {
      for (const w of cluster.workers) if (total(await metricsText(w.metricsUrl), 'vllm:num_requests_running') > 0) worker = w;
      return worker !== undefined;
    },
    { timeoutMs: 20_000, intervalMs: 20, message: 'no worker is generating' },
  );
  return worker!;
}

/** The request id of the router's latest migration whose id starts with `prefix`. */
function migratedRequestId(prefix: string): string {
  const logs = cluster.router.logs().filter((l) => l.msg === 'router: migrating request to another worker' && String(l.requestId).startsWith(prefix));
  expect(logs.length).toBeGreaterThan(0);
  return String(logs.at(-1)!.requestId);
}

const int32 = (xs: number[]): Buffer => Buffer.from(new Int32Array(xs).buffer);
const addInputs = [
  { name: 'INPUT0', datatype: 'INT32', shape: [4], data: [1, 2, 3, 4] },
  { name: 'INPUT1', datatype: 'INT32', shape: [4], data: [10, 20, 30, 40] },
];

beforeAll(async () => {
  cluster = await startCluster({
    workers: [WORKER_ARGS, WORKER_ARGS],
    files: {
      'mock_llm/config.pbtxt': SLOW_MOCK_CONFIG,
      'slow_add/config.pbtxt': SLOW_ADD_CONFIG,
      'slow_add/1/model.mjs': SLOW_ADD_JS,
      'slow_seq/config.pbtxt': SLOW_SEQ_CONFIG,
      'slow_seq/1/model.mjs': SLOW_SEQ_JS,
    },
    waitForModels: ['mock_llm'],
  });
  tokenizer = await Tokenizer.fromModelFolder(join(cluster.repo.path, 'mock_llm', '1'));
  inference = loadGrpcClients(cluster.router.grpcAddress).inference;
  await twoWorkers();
}, 120_000);

afterAll(async () => {
  inference?.close();
  await cluster?.stop();
});

describe('KServe through the router survives a worker killed mid-request', () => {
  it('a tensor request in flight on the killed worker succeeds through the other one (HTTP infer, gRPC ModelInfer)', async () => {
    for (const via of ['http', 'grpc'] as const) {
      await twoWorkers();
      clearMarkers('slow_add');
      const t0 = Date.now();
      const pending =
        via === 'http'
          ? post(`${cluster.router.httpUrl}/v2/models/slow_add/infer`, { id: 'slow-1', inputs: addInputs }).then((r) => {
              expect(r.status, r.body.toString()).toBe(200);
              expect(r.json()).toMatchObject({ id: 'slow-1', model_name: 'slow_add' });
              return r.json().outputs[0].data as number[];
            })
          : unary(inference, 'ModelInfer', {
              model_name: 'slow_add',
              id: 'slow-2',
              inputs: [
                { name: 'INPUT0', datatype: 'INT32', shape: [4] },
                { name: 'INPUT1', datatype: 'INT32', shape: [4] },
              ],
              raw_input_contents: [int32([1, 2, 3, 4]), int32([10, 20, 30, 40])],
            }).then((res) => {
              expect(res.id).toBe('slow-2');
              const raw: Buffer = res.raw_output_contents[0];
              return [...new Int32Array(raw.buffer.slice(raw.byteOffset, raw.byteOffset + raw.byteLength))];
            });
      const victim = await runningOn('slow_add');
      const killedAt = await kill(victim);
      expect(await pending).toEqual([11, 22, 33, 44]);
      const recovered = Date.now() - killedAt;
      console.log(`${via} infer: answered ${recovered} ms after the kill (${Date.now() - t0} ms in all)`);
      expect(recovered).toBeLessThan(BOUND_MS);
    }
    // (what told the router: the worker's call-home connection closing, or a stall probe when the
    // request had gone over NATS; packages/cluster's cluster-engine-faults tests cover the probe)
  }, 120_000);

  it('HTTP generate and generate_stream: the generation continues on the other worker, every token once', async () => {
    for (const stream of [false, true]) {
      await twoWorkers();
      // (a non-streamed answer's headers come with the whole text: do not wait for them before the kill)
      const response = fetch(`${cluster.router.httpUrl}/v2/models/mock_llm/${stream ? 'generate_stream' : 'generate'}`, {
        method: 'POST',
        body: JSON.stringify({ text_input: PROMPT, parameters: { stream, max_tokens: MAX_TOKENS, temperature: 0, ignore_eos: true } }),
      });
      let killedAt = 0;
      let victim: WorkerProcess | undefined;
      const events: Record<string, unknown>[] = [];
      if (!stream) {
        victim = await generatingWorker();
        killedAt = await kill(victim);
        const res = await response;
        events.push((await res.json()) as Record<string, unknown>);
        expect(res.status, JSON.stringify(events[0])).toBe(200);
      } else {
        const res = await response;
        expect(res.status).toBe(200);
        const decoder = new TextDecoder();
        let buffered = '';
        for await (const chunk of res.body!) {
          buffered += decoder.decode(chunk as Uint8Array, { stream: true });
          for (let i = buffered.indexOf('\n\n'); i >= 0; i = buffered.indexOf('\n\n')) {
            const line = buffered.slice(0, i);
            buffered = buffered.slice(i + 2);
            if (line.startsWith('data: ')) events.push(JSON.parse(line.slice(6)) as Record<string, unknown>);
          }
          if (victim === undefined && events.length >= 10) {
            victim = await generatingWorker();
            killedAt = await kill(victim);
          }
        }
      }
      const recovered = Date.now() - killedAt;
      expect(victim).toBeDefined();
      expect(events.filter((e) => e['error'] !== undefined)).toEqual([]);
      const last = events.at(-1)!;
      expect(last).toMatchObject({ model_name: 'mock_llm', finish_reason: 'length', completion_tokens: MAX_TOKENS });
      const expected = mockerText(tokenizer, migratedRequestId('kserve-'), last['prompt_tokens'] as number, MAX_TOKENS);
      if (stream) expect(events.map((e) => e['text_output']).join('')).toBe(expected);
      else expect(last['text_output']).toBe(PROMPT + expected);
      console.log(`${stream ? 'generate_stream' : 'generate'}: finished ${recovered} ms after the kill`);
      expect(recovered).toBeLessThan(BOUND_MS + 15_000); // the rest of the generation runs after the migration
    }
  }, 150_000);

  it('gRPC ModelStreamInfer: the stream continues on the other worker, every token once', async () => {
    await twoWorkers();
    const call = inference.ModelStreamInfer();
    const responses: any[] = [];
    let victim: WorkerProcess | undefined;
    const done = new Promise<void>((resolve, reject) => {
      call.on('data', (r: any) => {
        responses.push(r);
        if (victim === undefined && responses.length === 10) {
          void generatingWorker().then((w) => {
            victim = w;
            return kill(w);
          });
        }
        if (isFinalResponse(r)) call.end();
      });
      call.on('end', resolve);
      call.on('error', reject);
    });
    call.write({
      model_name: 'mock_llm',
      id: 'grpc-stream',
      inputs: [
        { name: 'text_input', datatype: 'BYTES', shape: [1] },
        { name: 'stream', datatype: 'BOOL', shape: [1] },
      ],
      parameters: { max_tokens: { int64_param: MAX_TOKENS }, ignore_eos: { bool_param: true } },
      raw_input_contents: [serializeStrings([PROMPT]), Buffer.from([1])],
    });
    await done;
    expect(victim).toBeDefined();
    expect(responses.map((r) => r.error_message)).toEqual(responses.map(() => ''));
    const last = responses.at(-1).infer_response;
    expect(last.id).toBe('grpc-stream');
    expect(Number(last.parameters.completion_tokens.int64_param)).toBe(MAX_TOKENS);
    expect(last.parameters.finish_reason.string_param).toBe('length');
    const text = responses.map((r) => deserializeStrings(r.infer_response.raw_output_contents[0])[0]).join('');
    expect(text).toBe(mockerText(tokenizer, migratedRequestId('grpc-stream-'), Number(last.parameters.prompt_tokens.int64_param), MAX_TOKENS));
  }, 120_000);

  it('a request in the middle of a sequence whose worker was killed fails 503 / UNAVAILABLE quickly, as does the next one', async () => {
    await twoWorkers();
    const step = (id: string, value: number, flags: object = {}) =>
      post(`${cluster.router.httpUrl}/v2/models/slow_seq/infer`, { parameters: { sequence_id: id, ...flags }, inputs: [{ name: 'INPUT', datatype: 'INT32', shape: [1], data: [value] }] });
    const ok = await step('lost', 1, { sequence_start: true });
    expect(ok.status, ok.body.toString()).toBe(200);
    expect(ok.json().outputs[0].data).toEqual([1]);
    clearMarkers('slow_seq');
    const pending = step('lost', 2);
    const victim = await runningOn('slow_seq');
    const killedAt = await kill(victim);
    const lost = await pending;
    const failedAfter = Date.now() - killedAt;
    console.log(`sequence: failed ${failedAfter} ms after the kill`);
    expect(failedAfter).toBeLessThan(BOUND_MS);
    expect(lost.status).toBe(503);
    expect(lost.json().error).toMatch(
      /^inference request for sequence lost to model 'slow_seq' failed: the worker holding the sequence \(instance \w+\) failed during the request; the sequence's state is lost, start it again with the START flag$/,
    );
    // the next request of the sequence, over gRPC: UNAVAILABLE at once (the dead worker is still in discovery)
    const t1 = Date.now();
    const err = await new Promise<grpc.ServiceError>((resolve, reject) =>
      inference.ModelInfer(
        {
          model_name: 'slow_seq',
          parameters: { sequence_id: { string_param: 'lost' } },
          inputs: [{ name: 'INPUT', datatype: 'INT32', shape: [1] }],
          raw_input_contents: [int32([3])],
        },
        (e: grpc.ServiceError | null) => (e ? resolve(e) : reject(new Error('the request succeeded'))),
      ),
    );
    expect(Date.now() - t1).toBeLessThan(BOUND_MS);
    expect(err.code).toBe(grpc.status.UNAVAILABLE);
    expect(err.details).toMatch(
      /^inference request for sequence lost to model 'slow_seq' failed: the worker holding the sequence \(instance \w+\) is unreachable; its state cannot move to another worker: retry later, or start the sequence again with the START flag$/,
    );
    // restarting the sequence works (on the surviving worker)
    const again = await step('lost', 5, { sequence_start: true });
    expect(again.status, again.body.toString()).toBe(200);
    expect(again.json().outputs[0].data).toEqual([5]);
    expect((await step('lost', 6, { sequence_end: true })).json().outputs[0].data).toEqual([11]);
  }, 120_000);
});
