/**
 * Request tracing (`--trace-config`) against real worker processes, driven like tritonclient and
 * Triton's qa/L0_trace: HTTP and gRPC inference (unary and streaming), W3C `traceparent`, the
 * trace settings endpoints over both protocols, Triton's JSON trace file, and a dead collector.
 *
 * No OpenTelemetry collector is packaged for this machine (Debian has none), so this suite serves
 * the OTLP/HTTP endpoint itself: a node:http server taking `POST /v1/traces` with OTLP JSON, as a
 * collector's otlp receiver does, and keeping every request it got.
 */
import http from 'node:http';
import { mkdtempSync, readFileSync, rmSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawnSync } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BATCH_DIM, buildAddConstantModel, buildSimpleModel } from '@switchyard/onnx-builder';
import { repoRoot, startWorkerProcess, type WorkerProcess } from '@switchyard/testing';
import { reusePortSupported } from '@switchyard/server';
import { fixtureRepository, type FixtureRepository } from './lib/fixture-repository.js';
import { grpc, loadGrpcClients, streamInfer, unary, unaryError, type GrpcClient } from './lib/grpc-client.js';
import { get, int32Bytes, post, range } from './lib/tensors.js';
import { waitFor } from './lib/wait-for.js';

const SIMPLE_REPO = 'test/fixtures/model_repository';
const TRACEPARENT = '00-0af7651916cd43dd8448eb211c12666c-b7ad6b7169242424-01';
const simpleBody = { inputs: ['INPUT0', 'INPUT1'].map((name) => ({ name, shape: [1, 16], datatype: 'INT32', data: range(16) })) };
const simpleGrpc = (id = '') => ({
  model_name: 'simple',
  id,
  inputs: ['INPUT0', 'INPUT1'].map((name) => ({ name, datatype: 'INT32', shape: [1, 16] })),
  raw_input_contents: [int32Bytes(range(16)), int32Bytes(range(16))],
});

const ROOT_HTTP = ['HTTP_RECV_START', 'HTTP_RECV_END', 'INFER_RESPONSE_COMPLETE', 'HTTP_SEND_START', 'HTTP_SEND_END'];
const ROOT_GRPC = ['GRPC_WAITREAD_START', 'GRPC_WAITREAD_END', 'INFER_RESPONSE_COMPLETE', 'GRPC_SEND_START', 'GRPC_SEND_END'];
const REQUEST_EVENTS = ['REQUEST_START', 'QUEUE_START', 'REQUEST_END'];
const COMPUTE_EVENTS = ['COMPUTE_START', 'COMPUTE_INPUT_END', 'COMPUTE_OUTPUT_START', 'COMPUTE_END'];

interface Span {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  startTimeUnixNano: string;
  endTimeUnixNano: string;
  attributes: Array<{ key: string; value: Record<string, string> }>;
  events: Array<{ name: string; timeUnixNano: string }>;
}

/** The OTLP/HTTP receiver: every export request's JSON body, in arrival order. */
class OtlpReceiver {
  readonly bodies: any[] = [];
  readonly contentTypes: string[] = [];
  #server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (req.method === 'POST' && req.url === '/v1/traces') {
        this.contentTypes.push(String(req.headers['content-type']));
        this.bodies.push(JSON.parse(Buffer.concat(chunks).toString('utf8')));
        res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
      } else res.writeHead(404).end();
    });
  });
  port = 0;

  async start(): Promise<void> {
    await new Promise<void>((r) => this.#server.listen(0, '127.0.0.1', r));
    this.port = (this.#server.address() as { port: number }).port;
  }

  spans(): Span[] {
    return this.bodies.flatMap((b) => b.resourceSpans.flatMap((rs: any) => rs.scopeSpans.flatMap((ss: any) => ss.spans)));
  }

  /** The spans of one trace: the one whose root span is the `n`-th InferRequest received. */
  traces(): Span[][] {
    const all = this.spans();
    const roots = all.filter((s) => s.name === 'InferRequest');
    return roots.map((root) => {
      const members = new Set([root.spanId]);
      let grew = true;
      while (grew) {
        grew = false;
        for (const s of all) {
          if (s.traceId === root.traceId && s.parentSpanId !== undefined && members.has(s.parentSpanId) && !members.has(s.spanId)) {
            members.add(s.spanId);
            grew = true;
          }
        }
      }
      return all.filter((s) => members.has(s.spanId));
    });
  }

  clear(): void {
    this.bodies.length = 0;
  }

  close(): Promise<void> {
    return new Promise((r) => this.#server.close(() => r()));
  }
}

const names = (span: Span) => span.events.map((e) => e.name);
const attr = (span: Span, key: string) => span.attributes.find((a) => a.key === key)?.value;
const child = (spans: Span[], parent: Span, name: string) => spans.filter((s) => s.parentSpanId === parent.spanId && s.name === name);

/** Triton's checks (qa/L0_trace/opentelemetry_unittest.py): 3 spans nested InferRequest → simple → compute, each with its events. */
function expectSimpleTrace(spans: Span[], rootEvents: string[], traceparent?: string): void {
  expect(spans).toHaveLength(3);
  const root = spans.find((s) => s.name === 'InferRequest')!;
  expect(names(root)).toEqual(rootEvents);
  const [model] = child(spans, root, 'simple');
  expect(model).toBeDefined();
  expect(names(model!)).toEqual(REQUEST_EVENTS);
  expect(attr(model!, 'triton.model_name')).toEqual({ stringValue: 'simple' });
  expect(attr(model!, 'triton.model_version')).toEqual({ intValue: '1' });
  expect(attr(model!, 'triton.trace_parent_id')).toEqual({ intValue: '0' });
  const [compute] = child(spans, model!, 'compute');
  expect(names(compute!)).toEqual(COMPUTE_EVENTS);
  for (const s of spans) {
    expect(s.kind).toBe(2);
    expect(s.traceId).toBe(root.traceId);
    expect(BigInt(s.endTimeUnixNano) >= BigInt(s.startTimeUnixNano)).toBe(true);
    // wall-clock Unix time, not a monotonic clock
    expect(Math.abs(Number(BigInt(s.startTimeUnixNano) / 1_000_000n) - Date.now())).toBeLessThan(120_000);
  }
  if (traceparent === undefined) {
    expect(root.parentSpanId ?? '').toBe('');
    expect(root.traceId).toMatch(/^[0-9a-f]{32}$/);
  } else {
    const [, traceId, spanId] = traceparent.split('-');
    expect(root.traceId).toBe(traceId);
    expect(root.parentSpanId).toBe(spanId);
  }
}

describe('opentelemetry mode', () => {
  let receiver: OtlpReceiver;
  let repo: FixtureRepository;
  let worker: WorkerProcess;
  let client: GrpcClient;

  beforeAll(async () => {
    receiver = new OtlpReceiver();
    await receiver.start();
    repo = fixtureRepository('ensemble_repository', {
      files: {
        'add_one/1/model.onnx': buildAddConstantModel(1),
        'add_two/1/model.onnx': buildAddConstantModel(2),
        'sum_diff/1/model.onnx': buildSimpleModel({ elemType: 'FLOAT', dims: [BATCH_DIM, 4], graphName: 'sum_diff' }),
      },
    });
    worker = await startWorkerProcess({
      modelRepositories: [SIMPLE_REPO, repo.path],
      args: [
        '--model-control-mode=explicit',
        '--load-model=simple',
        '--load-model=fan',
        '--trace-config=level=TIMESTAMPS',
        '--trace-config=rate=1',
        '--trace-config=count=-1',
        '--trace-config=mode=opentelemetry',
        '--trace-config=opentelemetry,resource=test.key=test.value',
        '--trace-config=opentelemetry,resource=service.name=test_triton',
        // a scheme-less URL, as qa/L0_trace passes it
        `--trace-config=opentelemetry,url=127.0.0.1:${receiver.port}/v1/traces`,
        '--trace-config=opentelemetry,bsp_schedule_delay=20',
      ],
    });
    client = loadGrpcClients(worker.grpcAddress).inference;
  });
  afterAll(async () => {
    client?.close();
    await worker?.stop();
    repo?.remove();
    await receiver?.close();
  });

  let lastBodies: any[] = [];
  const oneTrace = async (): Promise<Span[]> => {
    await waitFor(async () => receiver.traces().length >= 1 && receiver.traces()[0]!.length >= 3, { message: 'no trace exported' });
    // the root span ends last; give the batch a moment to carry every span
    await new Promise((r) => setTimeout(r, 150));
    const traces = receiver.traces();
    expect(traces).toHaveLength(1);
    lastBodies = [...receiver.bodies];
    receiver.clear();
    return traces[0]!;
  };

  it('exports Triton-shaped spans for an HTTP request, with the resource attributes', async () => {
    receiver.clear();
    expect((await post(worker.httpUrl + '/v2/models/simple/infer', simpleBody)).status).toBe(200);
    expectSimpleTrace(await oneTrace(), ROOT_HTTP);
    expect(receiver.contentTypes.every((t) => t === 'application/json')).toBe(true);
    const resource = lastBodies[0].resourceSpans[0].resource.attributes;
    expect(resource).toContainEqual({ key: 'service.name', value: { stringValue: 'test_triton' } });
    expect(resource).toContainEqual({ key: 'test.key', value: { stringValue: 'test.value' } });
  });

  it('continues the client trace of an HTTP traceparent header', async () => {
    receiver.clear();
    expect((await post(worker.httpUrl + '/v2/models/simple/infer', simpleBody, { traceparent: TRACEPARENT })).status).toBe(200);
    expectSimpleTrace(await oneTrace(), ROOT_HTTP, TRACEPARENT);
  });

  it('ignores a malformed traceparent (a new trace starts)', async () => {
    receiver.clear();
    const bad = '00-00000000000000000000000000000000-b7ad6b7169242424-01';
    expect((await post(worker.httpUrl + '/v2/models/simple/infer', simpleBody, { traceparent: bad })).status).toBe(200);
    expectSimpleTrace(await oneTrace(), ROOT_HTTP);
  });

  it('traces gRPC ModelInfer, with the traceparent from the call metadata', async () => {
    receiver.clear();
    await unary(client, 'ModelInfer', simpleGrpc());
    expectSimpleTrace(await oneTrace(), ROOT_GRPC);
    const md = new grpc.Metadata();
    md.set('traceparent', TRACEPARENT);
    await new Promise((resolve, reject) => client.ModelInfer(simpleGrpc(), md, (err: Error | null, res: unknown) => (err ? reject(err) : resolve(res))));
    expectSimpleTrace(await oneTrace(), ROOT_GRPC, TRACEPARENT);
  });

  it('traces each request of a ModelStreamInfer stream', async () => {
    receiver.clear();
    const responses = await streamInfer(client, [simpleGrpc('s1')]);
    expect(responses[0].error_message).toBe('');
    expectSimpleTrace(await oneTrace(), ROOT_GRPC);
  });

  it('nests an ensemble: its steps under its span, each with its compute span', async () => {
    receiver.clear();
    const r = await post(worker.httpUrl + '/v2/models/fan/infer', { inputs: [{ name: 'IN', shape: [1, 4], datatype: 'FP32', data: [1, 2, 3, 4] }] });
    expect(r.status).toBe(200);
    await waitFor(async () => receiver.spans().length >= 8, { message: 'ensemble trace not exported' });
    await new Promise((res) => setTimeout(res, 150));
    const spans = receiver.traces()[0]!;
    expect(spans).toHaveLength(8);
    const root = spans.find((s) => s.name === 'InferRequest')!;
    const [fan] = child(spans, root, 'fan');
    expect(names(fan!)).toEqual(REQUEST_EVENTS);
    expect(child(spans, fan!, 'compute')).toHaveLength(0);
    const steps = spans.filter((s) => s.parentSpanId === fan!.spanId).map((s) => s.name).sort();
    expect(steps).toEqual(['add_one', 'add_two', 'sum_diff']);
    const fanId = attr(fan!, 'triton.trace_id');
    for (const step of spans.filter((s) => s.parentSpanId === fan!.spanId)) {
      expect(attr(step, 'triton.trace_parent_id')).toEqual(fanId);
      expect(child(spans, step, 'compute')).toHaveLength(1);
    }
    receiver.clear();
  });

  it('reports opentelemetry settings on both protocols, without trace_file and log_frequency', async () => {
    const body = (await get(worker.httpUrl + '/v2/models/simple/trace/setting')).json();
    expect(body).toEqual({
      trace_level: ['TIMESTAMPS'],
      trace_rate: '1',
      trace_count: '-1',
      trace_mode: 'opentelemetry',
      url: `127.0.0.1:${receiver.port}/v1/traces`,
      bsp_max_queue_size: '2048',
      bsp_schedule_delay: '20',
      bsp_max_export_batch_size: '512',
    });
    const res = await unary(client, 'TraceSetting', { model_name: 'simple' });
    expect(res.settings.trace_mode).toEqual({ value: ['opentelemetry'] });
    expect(res.settings.trace_file).toBeUndefined();
  });

  it('rate 0 traces only requests that bring a trace context (Triton 24.01+)', async () => {
    const set = await post(worker.httpUrl + '/v2/trace/setting', { trace_rate: '0' });
    expect(set.status).toBe(200);
    receiver.clear();
    for (let i = 0; i < 3; i++) expect((await post(worker.httpUrl + '/v2/models/simple/infer', simpleBody)).status).toBe(200);
    expect((await post(worker.httpUrl + '/v2/models/simple/infer', simpleBody, { traceparent: TRACEPARENT })).status).toBe(200);
    expectSimpleTrace(await oneTrace(), ROOT_HTTP, TRACEPARENT);
    expect((await post(worker.httpUrl + '/v2/trace/setting', { trace_rate: null })).json().trace_rate).toBe('1');
  });
});

describe('opentelemetry mode with a dead collector', () => {
  it('keeps serving with bounded memory: full queue drops spans, failed exports are counted', async () => {
    const dead = http.createServer();
    await new Promise<void>((r) => dead.listen(0, '127.0.0.1', r));
    const port = (dead.address() as { port: number }).port;
    await new Promise<void>((r) => dead.close(() => r())); // nothing listens there now
    const worker = await startWorkerProcess({
      modelRepositories: [SIMPLE_REPO],
      args: [
        '--model-control-mode=explicit',
        '--load-model=simple',
        '--trace-config=mode=opentelemetry',
        '--trace-config=level=TIMESTAMPS',
        '--trace-config=rate=1',
        `--trace-config=opentelemetry,url=http://127.0.0.1:${port}/v1/traces`,
        '--trace-config=opentelemetry,bsp_max_queue_size=4',
        '--trace-config=opentelemetry,bsp_max_export_batch_size=2',
        '--trace-config=opentelemetry,bsp_schedule_delay=10',
      ],
    });
    try {
      const results = await Promise.all(Array.from({ length: 20 }, () => post(worker.httpUrl + '/v2/models/simple/infer', simpleBody)));
      expect(results.every((r) => r.status === 200)).toBe(true);
      await waitFor(async () => worker.output().includes('dropping span') || worker.output().includes('OTLP export failed'), { message: 'no drop was logged' });
      expect((await post(worker.httpUrl + '/v2/models/simple/infer', simpleBody)).status).toBe(200);
      const metrics = (await get(worker.metricsUrl + '/metrics')).body.toString();
      const dropped = Number(/switchyard_worker_trace_spans_total\{outcome="dropped"\} (\d+)/.exec(metrics)?.[1]);
      expect(dropped).toBeGreaterThan(0);
      expect(Number(/switchyard_worker_trace_spans_queued (\d+)/.exec(metrics)?.[1])).toBeLessThanOrEqual(4);
      const exit = await worker.stop();
      expect(exit.code).toBe(0);
      const summary = worker.logs().find((l) => l.msg === 'trace spans exported');
      expect(summary).toMatchObject({ exported: 0, queued: 0 });
      // 21 traces of 3 spans each: none reached a collector, all were counted as dropped
      expect(summary!.dropped).toBe(63);
    } finally {
      await worker.stop().catch(() => {});
    }
  });
});

/** A trace file's entries; undefined before its first trace is written (it is created empty just before). */
function readTraceFile(file: string): any[] | undefined {
  try {
    return JSON.parse(readFileSync(file, 'utf8')) as any[];
  } catch {
    return undefined;
  }
}

describe('triton mode', () => {
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'switchyard-trace-'));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  // through front threads too: a traced model's requests go to the main thread, which traces them as ever
  it.each(reusePortSupported() ? [0, 2] : [0])("writes Triton's JSON trace file for HTTP infer, gRPC and HTTP generate requests (front threads: %i)", async (threads) => {
    const file = join(dir, `trace-${threads}.json`);
    const worker = await startWorkerProcess({
      modelRepositories: [SIMPLE_REPO],
      args: [
        '--model-control-mode=explicit',
        '--load-model=simple',
        '--load-model=simple_nobatch',
        `--trace-config=triton,file=${file}`,
        '--trace-config=level=TIMESTAMPS',
        '--trace-config=rate=1',
        ...(threads > 0 ? [`--http-thread-count=${threads}`, `--grpc-infer-thread-count=${threads}`] : []),
      ],
    });
    const client = loadGrpcClients(worker.grpcAddress).inference;
    try {
      expect((await post(worker.httpUrl + '/v2/models/simple/infer', { id: 'http-1', ...simpleBody })).status).toBe(200);
      await unary(client, 'ModelInfer', simpleGrpc('grpc-1'));
      await waitFor(async () => (readTraceFile(file) ?? []).some((e: any) => e.timestamps?.[0]?.name === 'GRPC_SEND_END'));
      expect((await post(worker.httpUrl + '/v2/models/simple_nobatch/generate', { INPUT0: range(16), INPUT1: range(16) })).status).toBe(200);
      await waitFor(async () => (readTraceFile(file) ?? []).some((e: any) => e.id === 3 && e.timestamps?.[0]?.name === 'HTTP_SEND_END'));
      const entries = JSON.parse(readFileSync(file, 'utf8')) as any[];
      const byId = new Map<number, any[]>();
      for (const e of entries) byId.set(e.id, [...(byId.get(e.id) ?? []), e]);
      expect([...byId.keys()]).toEqual([1, 2, 3]);
      const stamps = (id: number) => byId.get(id)!.filter((e) => e.timestamps !== undefined).map((e) => e.timestamps[0].name);
      expect(byId.get(1)!.find((e) => e.model_name !== undefined)).toEqual({ id: 1, model_name: 'simple', model_version: 1, request_id: 'http-1' });
      expect(stamps(1)).toEqual(['HTTP_RECV_START', 'HTTP_RECV_END', 'REQUEST_START', 'QUEUE_START', ...COMPUTE_EVENTS, 'REQUEST_END', 'INFER_RESPONSE_COMPLETE', 'HTTP_SEND_START', 'HTTP_SEND_END']);
      expect(stamps(3)).toEqual(stamps(1));
      expect(byId.get(3)!.find((e) => e.model_name !== undefined)).toEqual({ id: 3, model_name: 'simple_nobatch', model_version: 1 });
      expect(stamps(2)).toEqual(['GRPC_WAITREAD_START', 'GRPC_WAITREAD_END', 'REQUEST_START', 'QUEUE_START', ...COMPUTE_EVENTS, 'REQUEST_END', 'INFER_RESPONSE_COMPLETE', 'GRPC_SEND_START', 'GRPC_SEND_END']);
      // steady-clock nanoseconds, in order
      const ns = byId.get(1)!.filter((e) => e.timestamps !== undefined).map((e) => e.timestamps[0].ns as number);
      expect(ns.every((v, i) => i === 0 || v >= ns[i - 1]!)).toBe(true);
      for (const e of entries) expect(Object.keys(e)[0]).toBe('id');
    } finally {
      client.close();
      await worker.stop();
    }
  });

  it('TENSORS level records the inputs entering the queue and the outputs of the backend', async () => {
    const file = join(dir, 'tensors.json');
    const worker = await startWorkerProcess({
      modelRepositories: [SIMPLE_REPO],
      args: ['--model-control-mode=explicit', '--load-model=simple', `--trace-file=${file}`, '--trace-level=TENSORS', '--trace-rate=1'],
    });
    try {
      expect(worker.output()).toContain("'--trace-file' has been deprecated");
      expect((await post(worker.httpUrl + '/v2/models/simple/infer', simpleBody)).status).toBe(200);
      await waitFor(async () => (readTraceFile(file)?.length ?? 0) >= 4);
      const entries = readTraceFile(file)!;
      expect(entries.filter((e) => e.timestamps !== undefined)).toEqual([]);
      expect(entries.map((e) => e.activity)).toEqual(['TENSOR_QUEUE_INPUT', 'TENSOR_QUEUE_INPUT', 'TENSOR_BACKEND_OUTPUT', 'TENSOR_BACKEND_OUTPUT']);
      expect(entries[0].tensor).toEqual({ name: 'INPUT0', data: range(16).join(','), shape: '1,16', dtype: 'INT32' });
      expect(entries[2].tensor).toEqual({ name: 'OUTPUT0', data: range(16).map((v) => 2 * v).join(','), shape: '1,16', dtype: 'INT32' });
    } finally {
      await worker.stop();
    }
  });

  it('log_frequency and trace_count write indexed files <file>.<n> (L0_trace)', async () => {
    const file = join(dir, 'indexed.json');
    const worker = await startWorkerProcess({
      modelRepositories: [SIMPLE_REPO],
      args: ['--model-control-mode=explicit', '--load-model=simple', `--trace-config=triton,file=${file}`, '--trace-config=triton,log-frequency=2', '--trace-config=level=TIMESTAMPS', '--trace-config=rate=1'],
    });
    try {
      for (let i = 0; i < 5; i++) expect((await post(worker.httpUrl + '/v2/models/simple/infer', simpleBody)).status).toBe(200);
      const traces = (f: string) => new Set((JSON.parse(readFileSync(f, 'utf8')) as any[]).map((e) => e.id)).size;
      await waitFor(async () => readTraceFile(`${file}.2`) !== undefined);
      expect([traces(`${file}.0`), traces(`${file}.1`), traces(`${file}.2`)]).toEqual([2, 2, 1]);
      expect(existsSync(file)).toBe(false);
      // a count of 3 (log frequency back to 0): those 3 traces go to the next indexed file, then tracing stops
      const set = await post(worker.httpUrl + '/v2/trace/setting', { log_frequency: '0', trace_count: '3' });
      expect(set.json()).toMatchObject({ trace_count: '3', log_frequency: '0' });
      for (let i = 0; i < 5; i++) expect((await post(worker.httpUrl + '/v2/models/simple/infer', simpleBody)).status).toBe(200);
      expect((await get(worker.httpUrl + '/v2/models/simple/trace/setting')).json().trace_count).toBe('0');
      await waitFor(async () => readTraceFile(`${file}.3`) !== undefined);
      expect(traces(`${file}.3`)).toBe(3);
    } finally {
      await worker.stop();
    }
  });

  it('refuses to start with a trace file it cannot write', () => {
    const bin = join(repoRoot(), 'bin', 'switchyard.mjs');
    const r = spawnSync(process.execPath, [bin, 'worker', `--model-repository=${join(repoRoot(), SIMPLE_REPO)}`, '--model-control-mode=explicit', '--http-port=0', '--grpc-port=0', '--metrics-port=0', `--trace-config=triton,file=${join(dir, 'no/such/dir/t.json')}`, '--trace-config=level=TIMESTAMPS'], { encoding: 'utf8', timeout: 30_000 });
    expect(r.status).toBe(1);
    expect(r.stdout + r.stderr).toContain(`cannot write trace file '${join(dir, 'no/such/dir/t.json')}': folder '${join(dir, 'no/such/dir')}' does not exist`);
  });

  it('refuses malformed --trace-config values with exit 2', () => {
    const bin = join(repoRoot(), 'bin', 'switchyard.mjs');
    const run = (arg: string) => spawnSync(process.execPath, [bin, 'worker', '--model-repository=/x', arg], { encoding: 'utf8' });
    const mode = run('--trace-config=mode=zipkin');
    expect(mode.status).toBe(2);
    expect(mode.stderr).toContain('invalid value for trace mode option: zipkin. Available options are "triton" and "opentelemetry"');
    const format = run('--trace-config=level');
    expect(format.status).toBe(2);
    expect(format.stderr).toContain("--trace-config option format is '<trace mode>,<setting>=<value>'. Got level");
  });
});

describe('trace settings endpoints (triton mode)', () => {
  let worker: WorkerProcess;
  let client: GrpcClient;
  let dir: string;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'switchyard-trace-'));
    worker = await startWorkerProcess({
      modelRepositories: [SIMPLE_REPO],
      args: ['--model-control-mode=explicit', '--load-model=simple', '--load-model=simple_nobatch', `--trace-config=triton,file=${join(dir, 'global.json')}`, '--trace-config=level=TIMESTAMPS', '--trace-config=rate=6'],
    });
    client = loadGrpcClients(worker.grpcAddress).inference;
  });
  afterAll(async () => {
    client?.close();
    await worker?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('GET reports the start-up settings, globally and per model', async () => {
    const expected = { trace_level: ['TIMESTAMPS'], trace_rate: '6', trace_count: '-1', log_frequency: '0', trace_file: join(dir, 'global.json'), trace_mode: 'triton' };
    const global = await get(worker.httpUrl + '/v2/trace/setting');
    expect(global.status).toBe(200);
    expect(global.body.toString()).toBe(JSON.stringify(expected));
    expect((await get(worker.httpUrl + '/v2/models/simple/trace/setting')).json()).toEqual(expected);
    const unknown = await get(worker.httpUrl + '/v2/models/nope/trace/setting');
    expect(unknown.status).toBe(400);
    expect(unknown.json()).toEqual({ error: 'Request for unknown model : nope' });
  });

  it('POST updates a model over the global setting, null clears back to it (L0_trace)', async () => {
    const fileErr = await post(worker.httpUrl + '/v2/models/simple/trace/setting', { trace_file: 'other.json' });
    expect(fileErr.status).toBe(501);
    expect(fileErr.json()).toEqual({ error: 'trace file location can not be updated through network protocol' });
    const upd = await post(worker.httpUrl + '/v2/models/simple/trace/setting', { log_frequency: '2', trace_rate: '1' });
    expect(upd.json()).toMatchObject({ trace_level: ['TIMESTAMPS'], trace_rate: '1', log_frequency: '2' });
    // the other model still follows the global setting
    expect((await get(worker.httpUrl + '/v2/models/simple_nobatch/trace/setting')).json()).toMatchObject({ trace_rate: '6', log_frequency: '0' });
    const off = await post(worker.httpUrl + '/v2/models/simple/trace/setting', { trace_level: ['OFF'] });
    expect(off.json().trace_level).toEqual(['OFF']);
    const cleared = await post(worker.httpUrl + '/v2/models/simple/trace/setting', { trace_level: null, trace_rate: null, log_frequency: null });
    expect(cleared.json()).toMatchObject({ trace_level: ['TIMESTAMPS'], trace_rate: '6', log_frequency: '0' });
    const range = await post(worker.httpUrl + '/v2/models/simple/trace/setting', { trace_count: '10000000000' });
    expect(range.status).toBe(400);
    const invalid = await post(worker.httpUrl + '/v2/trace/setting', { trace_rate: '0' });
    expect(invalid.status).toBe(400);
    expect(invalid.json()).toEqual({ error: 'Attempting to set invalid trace setting :sample rate must be non-zero' });
  });

  it('gRPC TraceSetting reads and updates the same settings', async () => {
    const res = await unary(client, 'TraceSetting', { model_name: 'simple_nobatch', settings: { trace_count: { value: ['5'] } } });
    expect(res.settings).toMatchObject({ trace_level: { value: ['TIMESTAMPS'] }, trace_rate: { value: ['6'] }, trace_count: { value: ['5'] }, trace_mode: { value: ['triton'] } });
    expect((await get(worker.httpUrl + '/v2/models/simple_nobatch/trace/setting')).json().trace_count).toBe('5');
    const cleared = await unary(client, 'TraceSetting', { model_name: 'simple_nobatch', settings: { trace_count: { value: [] } } });
    expect(cleared.settings.trace_count).toEqual({ value: ['-1'] });
    const err = await unaryError(client, 'TraceSetting', { model_name: 'nope' });
    expect(err.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(err.details).toBe('Request for unknown model : nope');
  });
});
