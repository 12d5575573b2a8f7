/**
 * tritonserver's command line, run against real worker processes with the flag lines qa test.sh
 * files pass: inert flags accepted and noted, --id, --exit-on-error and --strict-readiness (qa
 * L0_lifecycle), --log-file, header forwarding over HTTP and gRPC, gRPC infer response
 * compression, --metrics-config / --allow-cpu-metrics, and absurd values refused with exit 2.
 */
import { spawn, spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import http2 from 'node:http2';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gunzipSync, inflateSync } from 'node:zlib';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EPHEMERAL_PORT_ARGS, repoRoot, startWorkerProcess, type WorkerProcess } from '@switchyard/testing';
import { loadGrpcClients, unary, type GrpcClient } from './lib/grpc-client.js';
import { deserializeStrings, get, post } from './lib/tensors.js';
import { waitFor } from './lib/wait-for.js';

const BIN = join(repoRoot(), 'bin', 'switchyard.mjs');

/** A JavaScript model answering with its request's parameters, as one JSON string. */
const ECHO_CONFIG = `name: "echo"
backend: "javascript"
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "PARAMETERS" data_type: TYPE_STRING dims: [ 1 ] } ]
instance_group [ { count: 1 kind: KIND_CPU } ]
`;
const ECHO_MODEL = `export class TritonModel {
  initialize(args) { this.pb = args.pb; }
  execute(requests) {
    const { Response, Tensor } = this.pb;
    return requests.map((r) => new Response({ outputs: [new Tensor('PARAMETERS', [Buffer.from(JSON.stringify(r.parameters))], [1], 'BYTES')] }));
  }
}
`;

let root: string;
/** echo only. */
let goodRepo: string;
/** echo and a model without versions (tritonserver: fails to load; a strict server is not ready). */
let brokenRepo: string;

beforeAll(() => {
  root = mkdtempSync(join(tmpdir(), 'switchyard-flags-'));
  goodRepo = join(root, 'good');
  mkdirSync(join(goodRepo, 'echo', '1'), { recursive: true });
  writeFileSync(join(goodRepo, 'echo', 'config.pbtxt'), ECHO_CONFIG);
  writeFileSync(join(goodRepo, 'echo', '1', 'model.js'), ECHO_MODEL);
  brokenRepo = join(root, 'broken');
  cpSync(goodRepo, brokenRepo, { recursive: true });
  mkdirSync(join(brokenRepo, 'no_version'));
  writeFileSync(join(brokenRepo, 'no_version', 'config.pbtxt'), ECHO_CONFIG.replace('"echo"', '"no_version"'));
});
afterAll(() => rmSync(root, { recursive: true, force: true }));

const echoBody = { inputs: [{ name: 'INPUT0', shape: [4], datatype: 'FP32', data: [1, 2, 3, 4] }], parameters: { body: 1 } };
const echoParameters = (res: { json(): any }): Record<string, unknown> => JSON.parse(res.json().outputs[0].data[0] as string);

function run(args: string[]): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [BIN, 'worker', ...args], { encoding: 'utf8', timeout: 60_000 });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

describe('a qa test.sh command line', () => {
  let worker: WorkerProcess;
  beforeAll(async () => {
    worker = await startWorkerProcess({
      modelRepositories: [goodRepo],
      args: [
        '--backend-directory=/opt/tritonserver/backends',
        '--repoagent-directory=/opt/tritonserver/repoagents',
        '--log-verbose=1',
        '--exit-timeout-secs=5',
        '--strict-model-config=false',
        '--pinned-memory-pool-byte-size=0',
        '--cuda-memory-pool-byte-size=0:0',
        '--min-supported-compute-capability=6.0',
        '--backend-config=tensorflow,version=2',
        '--backend-config=onnxruntime,enable_mem_arena=0',
        '--model-load-thread-count=1',
        '--id=inference:0',
      ],
    });
  });
  afterAll(async () => {
    await worker?.stop();
  });

  it('serves, with --id as the server name, and notes each flag that has no effect', async () => {
    expect((await get(`${worker.httpUrl}/v2`)).json()).toMatchObject({ name: 'inference:0', version: expect.any(String) });
    const grpcClient = loadGrpcClients(worker.grpcAddress).inference;
    expect(await unary(grpcClient, 'ServerMetadata', {})).toMatchObject({ name: 'inference:0' });
    grpcClient.close();
    const r = await post(`${worker.httpUrl}/v2/models/echo/infer`, echoBody);
    expect(r.status).toBe(200);
    const notes = worker.logs().filter((l) => typeof l['flag'] === 'string').map((l) => l['flag']);
    // --min-supported-compute-capability is live (it filters the GPUs instance groups may use), so no note
    expect(notes).toEqual(['--backend-directory', '--repoagent-directory', '--pinned-memory-pool-byte-size', '--cuda-memory-pool-byte-size']);
    const ignored = worker.logs().filter((l) => typeof l['msg'] === 'string' && (l['msg'] as string).startsWith("backend setting '"));
    expect(ignored.map((l) => l['setting'])).toEqual(['enable_mem_arena']);
    expect(worker.logs().some((l) => l['msg'] === 'backend settings for backends this server does not have: no effect')).toBe(true);
  });
});

describe('--exit-on-error and --strict-readiness (qa L0_lifecycle)', () => {
  it('exits 1 with "failed to load all models" when a model fails at start-up (the default)', () => {
    const r = run([`--model-repository=${brokenRepo}`, ...EPHEMERAL_PORT_ARGS]);
    expect(r.status).toBe(1);
    expect(r.stdout).toContain('failed to load all models');
    expect(r.stdout).toContain('"model":"no_version"');
  });

  it('--exit-on-error=false serves the rest; a strict server is live but not ready, over HTTP and gRPC', async () => {
    const worker = await startWorkerProcess({ modelRepositories: [brokenRepo], args: ['--exit-on-error=false'] });
    const client = loadGrpcClients(worker.grpcAddress).inference;
    try {
      expect((await get(`${worker.httpUrl}/v2/health/live`)).status).toBe(200);
      expect((await get(`${worker.httpUrl}/v2/health/ready`)).status).toBe(400);
      expect(await unary(client, 'ServerLive', {})).toEqual({ live: true });
      expect(await unary(client, 'ServerReady', {})).toEqual({ ready: false });
      expect((await post(`${worker.httpUrl}/v2/models/echo/infer`, echoBody)).status).toBe(200);
    } finally {
      client.close();
      await worker.stop();
    }
  });

  it('a repository that is not there: exit 1, or with --exit-on-error=false up but neither live nor ready, metadata answered (test_parse_error_noexit)', async () => {
    const r = run(['--model-repository=/tmp/xyzx-switchyard-absent', ...EPHEMERAL_PORT_ARGS]);
    expect(r.status).toBe(1);
    expect(r.stdout).toContain("repository path is not a valid directory: '/tmp/xyzx-switchyard-absent'");
    const worker = await startWorkerProcess({ modelRepositories: ['/tmp/xyzx-switchyard-absent', goodRepo], args: ['--strict-readiness=true', '--exit-on-error=false'] });
    const client = loadGrpcClients(worker.grpcAddress).inference;
    try {
      expect((await get(`${worker.httpUrl}/v2/health/live`)).status).toBe(400);
      expect((await get(`${worker.httpUrl}/v2/health/ready`)).status).toBe(400);
      expect(await unary(client, 'ServerLive', {})).toEqual({ live: false });
      expect(await unary(client, 'ServerReady', {})).toEqual({ ready: false });
      expect((await get(`${worker.httpUrl}/v2`)).json()).toMatchObject({ name: 'triton' });
      expect(await unary(client, 'ServerMetadata', {})).toMatchObject({ name: 'triton' });
    } finally {
      client.close();
      await worker.stop();
    }
  });

  it('--strict-readiness=false: ready while up, even with a model that did not load', async () => {
    const worker = await startWorkerProcess({ modelRepositories: [brokenRepo], args: ['--strict-readiness=false', '--exit-on-error=false'] });
    const client = loadGrpcClients(worker.grpcAddress).inference;
    try {
      expect((await get(`${worker.httpUrl}/v2/health/ready`)).status).toBe(200);
      expect(await unary(client, 'ServerReady', {})).toEqual({ ready: true });
      expect((await get(`${worker.httpUrl}/v2/models/no_version/ready`)).status).toBe(400);
    } finally {
      client.close();
      await worker.stop();
    }
  });
});

describe('--log-file', () => {
  it('writes the logs to the file, not stdout, from start to stop', async () => {
    const file = join(root, 'server.log');
    const child = spawn(process.execPath, [BIN, 'worker', `--model-repository=${goodRepo}`, ...EPHEMERAL_PORT_ARGS, `--log-file=${file}`], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    try {
      let started: Record<string, any> | undefined;
      await waitFor(
        async () => {
          const lines = existsSync(file) ? readFileSync(file, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l) as Record<string, any>) : [];
          started = lines.find((l) => l['msg'] === 'worker started');
          return started !== undefined;
        },
        { timeoutMs: 30_000, message: 'no "worker started" in the log file' },
      );
      expect((await get(`http://127.0.0.1:${started!['ports'].http}/v2/health/ready`)).status).toBe(200);
    } finally {
      child.kill('SIGTERM');
    }
    expect(await exited).toBe(0);
    expect(readFileSync(file, 'utf8')).toContain('"msg":"worker stopped"');
    expect(stdout).toBe('');
  });

  it('refuses a symbolic link: exit 1 with the path and the reason, the link target untouched', () => {
    const target = join(root, 'elsewhere');
    writeFileSync(target, 'untouched');
    symlinkSync(target, join(root, 'link.log'));
    const r = run([`--model-repository=${goodRepo}`, ...EPHEMERAL_PORT_ARGS, `--log-file=${join(root, 'link.log')}`]);
    expect(r.status).toBe(1);
    expect(r.stderr).toBe(`switchyard worker: cannot open log file '${join(root, 'link.log')}': it is a symbolic link\n`);
    expect(readFileSync(target, 'utf8')).toBe('untouched');
  });
});

describe('header forwarding, gRPC response compression, metrics settings', () => {
  let worker: WorkerProcess;
  let client: GrpcClient;
  beforeAll(async () => {
    worker = await startWorkerProcess({
      modelRepositories: [goodRepo],
      args: [
        '--http-header-forward-pattern=^x-my-',
        '--grpc-header-forward-pattern=trace',
        '--grpc-infer-response-compression-level=high',
        '--metrics-config=counter_latencies=false',
        '--metrics-interval-ms=100',
        '--allow-cpu-metrics=false',
        // an interceptor in grpc-js's call chain: the call's metadata must still be the one that was read
        '--grpc-restricted-protocol=model-repository:k=v',
      ],
    });
    client = loadGrpcClients(worker.grpcAddress).inference;
  });
  afterAll(async () => {
    client?.close();
    await worker?.stop();
  });

  it('HTTP: matching headers reach the model as string parameters, names as sent; others and control names do not', async () => {
    const r = await post(`${worker.httpUrl}/v2/models/echo/infer`, echoBody, { 'X-My-Header': 'hello', 'x-my-n': '42', 'x-other': 'no', priority: '5', 'X-MY-sequence_id': 'kept' });
    expect(r.status).toBe(200);
    expect(echoParameters(r)).toEqual({ body: 1, 'X-My-Header': 'hello', 'x-my-n': '42', 'X-MY-sequence_id': 'kept' });
  });

  it('gRPC: matching metadata reaches the model, and the response arrives intact (deflate for level high)', async () => {
    const metadata = new grpc.Metadata();
    metadata.set('x-trace-id', 'abc');
    metadata.set('x-other', 'no');
    const response = await new Promise<any>((resolve, reject) =>
      client.ModelInfer(
        { model_name: 'echo', inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [4], contents: { fp32_contents: [1, 2, 3, 4] } }] },
        metadata,
        (err: Error | null, res: any) => (err ? reject(err) : resolve(res)),
      ),
    );
    expect(JSON.parse(deserializeStrings(response.raw_output_contents[0])[0]!)).toEqual({ 'x-trace-id': 'abc' });
  });

  it('gRPC ModelStreamInfer: compressed responses and forwarded metadata reach a stock client intact', async () => {
    const metadata = new grpc.Metadata();
    metadata.set('x-trace', 'stream-1');
    const call = client.ModelStreamInfer(metadata);
    const responses: any[] = [];
    const done = new Promise<void>((resolve, reject) => {
      call.on('data', (r: any) => responses.push(r));
      call.on('end', resolve);
      call.on('error', reject);
    });
    for (let i = 0; i < 3; i++) call.write({ model_name: 'echo', id: `r${i}`, inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [4], contents: { fp32_contents: [i, i, i, i] } }] });
    call.end();
    await done;
    expect(responses.map((r) => [r.error_message, r.infer_response.id])).toEqual([
      ['', 'r0'],
      ['', 'r1'],
      ['', 'r2'],
    ]);
    for (const r of responses) expect(JSON.parse(deserializeStrings(r.infer_response.raw_output_contents[0])[0]!)).toEqual({ 'x-trace': 'stream-1' });
  });

  it('gRPC compression on the wire: deflate when the client accepts it, none when it does not', async () => {
    const def = protoLoader.loadSync(['grpc_service.proto'], { includeDirs: [join(repoRoot(), 'proto')], keepCase: true, longs: Number, enums: String, defaults: true, oneofs: true });
    const method = (def['inference.GRPCInferenceService'] as any).ModelInfer;
    const request: Buffer = method.requestSerialize({ model_name: 'echo', inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [4], contents: { fp32_contents: [1, 2, 3, 4] } }] });
    const call = async (accept: string): Promise<{ encoding: unknown; flag: number; parameters: unknown }> => {
      const session = http2.connect(`http://${worker.grpcAddress}`);
      try {
        const stream = session.request({ ':method': 'POST', ':path': '/inference.GRPCInferenceService/ModelInfer', 'content-type': 'application/grpc', te: 'trailers', 'grpc-accept-encoding': accept });
        const frame = Buffer.alloc(5 + request.length);
        frame.writeUInt32BE(request.length, 1);
        request.copy(frame, 5);
        stream.end(frame);
        let headers: http2.IncomingHttpHeaders = {};
        const chunks: Buffer[] = [];
        stream.on('response', (h) => (headers = h));
        stream.on('data', (c: Buffer) => chunks.push(c));
        await new Promise((resolve) => stream.on('end', resolve));
        const body = Buffer.concat(chunks);
        const payload = body.subarray(5, 5 + body.readUInt32BE(1));
        const raw = body[0] === 1 ? (headers['grpc-encoding'] === 'gzip' ? gunzipSync(payload) : inflateSync(payload)) : payload;
        const decoded = method.responseDeserialize(raw);
        return { encoding: headers['grpc-encoding'], flag: body[0]!, parameters: JSON.parse(deserializeStrings(decoded.raw_output_contents[0])[0]!) };
      } finally {
        session.close();
      }
    };
    expect(await call('identity,deflate,gzip')).toEqual({ encoding: 'deflate', flag: 1, parameters: {} });
    expect(await call('identity,gzip')).toEqual({ encoding: 'gzip', flag: 1, parameters: {} });
    expect(await call('identity')).toEqual({ encoding: 'identity', flag: 0, parameters: {} });
  });

  it('--metrics-config counter_latencies=false and --allow-cpu-metrics=false shape /metrics', async () => {
    expect((await post(`${worker.httpUrl}/v2/models/echo/infer`, echoBody)).status).toBe(200);
    const text = await (await fetch(`${worker.metricsUrl}/metrics`)).text();
    expect(text).toMatch(/nv_inference_request_success\{model="echo",version="1"\} \d+/);
    expect(text).not.toContain('_duration_us');
    expect(text).not.toContain('nv_cpu_');
  });
});

describe('absurd values', () => {
  // each flag's reasons are unit-tested (apps/worker/src/options.test.ts); here, what a user sees
  it('exit 2 with the reason and the help on stderr', () => {
    const r = run([`--model-repository=${goodRepo}`, '--model-load-thread-count=100000']);
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(/^switchyard worker: flag '--model-load-thread-count' must be an integer <= 256, got '100000'\n\nusage: switchyard worker/);
    expect(r.stdout).toBe('');
  });
});
