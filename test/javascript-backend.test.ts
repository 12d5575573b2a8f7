/**
 * The JavaScript backend against a real worker, with real HTTP and gRPC clients: a model.js
 * served like any other model, BLS into the same server, and the bad cases (a model that
 * throws, a model.js that does not parse, BLS to an unknown model, a hung model that must not
 * stall the others and whose unload terminates its thread). Two Triton qa suites on JavaScript
 * models: outputs answered in the `reshape` shape reach clients in the dims (L0_infer_reshape), and
 * a model sees only the custom request parameters, directly and through an ensemble (L0_parameters).
 * Fixture: test/fixtures/javascript_repository.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startWorkerProcess, type WorkerProcess } from '@switchyard/testing';
import { grpc, loadGrpcClients, streamInfer, unary, unaryError, type GrpcClient } from './lib/grpc-client.js';
import { deserializeStrings, fp32Bytes, get, int32Bytes, post, range, readFp32, serializeStrings } from './lib/tensors.js';
import { sleep } from './lib/wait-for.js';

const MODELS = ['add_sub', 'bls', 'throws', 'syntax_error', 'hang', 'reshape_identity', 'reshape_identity_nobatch', 'parameter_ensemble'];
let worker: WorkerProcess;
let client: GrpcClient;

beforeAll(async () => {
  worker = await startWorkerProcess({
    modelRepositories: ['test/fixtures/javascript_repository'],
    // syntax_error must fail to load while the rest serve: tritonserver's --exit-on-error=false
    args: ['--model-control-mode=explicit', ...MODELS.map((m) => `--load-model=${m}`), '--exit-on-error=false'],
  });
  client = loadGrpcClients(worker.grpcAddress).inference;
});
afterAll(async () => {
  client?.close();
  await worker?.stop();
});

const addSubJson = (a: number[], b: number[]) => ({
  inputs: [
    { name: 'INPUT0', shape: [4], datatype: 'FP32', data: a },
    { name: 'INPUT1', shape: [4], datatype: 'FP32', data: b },
  ],
});

const blsGrpc = (model: string, a: number[], b: number[]) => ({
  model_name: 'bls',
  inputs: [
    { name: 'MODEL_NAME', datatype: 'BYTES', shape: [1] },
    { name: 'INPUT0', datatype: 'FP32', shape: [4] },
    { name: 'INPUT1', datatype: 'FP32', shape: [4] },
  ],
  raw_input_contents: [serializeStrings([model]), fp32Bytes(a), fp32Bytes(b)],
});

describe('a JavaScript model is served like any other', () => {
  it('metadata and config report the javascript backend', async () => {
    const meta = await get(`${worker.httpUrl}/v2/models/add_sub`);
    expect(meta.json()).toMatchObject({ name: 'add_sub', versions: ['1'], platform: 'javascript' });
    const config = (await get(`${worker.httpUrl}/v2/models/add_sub/config`)).json();
    expect(config).toMatchObject({ backend: 'javascript', max_batch_size: 0 });
    expect(config.instance_group[0].count).toBe(2);
  });

  it('HTTP JSON infer', async () => {
    const res = await post(`${worker.httpUrl}/v2/models/add_sub/infer`, { id: 'h1', ...addSubJson([1, 2, 3, 4], [0.5, 0.5, 0.5, 0.5]) });
    expect(res.status).toBe(200);
    const body = res.json();
    expect(body).toMatchObject({ id: 'h1', model_name: 'add_sub', model_version: '1' });
    expect(body.outputs).toEqual([
      { name: 'OUTPUT0', datatype: 'FP32', shape: [4], data: [1.5, 2.5, 3.5, 4.5] },
      { name: 'OUTPUT1', datatype: 'FP32', shape: [4], data: [0.5, 1.5, 2.5, 3.5] },
    ]);
  });

  it('gRPC ModelInfer, concurrently over both instances', async () => {
    const call = (i: number) =>
      unary(client, 'ModelInfer', {
        model_name: 'add_sub',
        id: `g${i}`,
        inputs: [
          { name: 'INPUT0', datatype: 'FP32', shape: [4] },
          { name: 'INPUT1', datatype: 'FP32', shape: [4] },
        ],
        raw_input_contents: [fp32Bytes([i, i, i, i]), fp32Bytes([1, 2, 3, 4])],
      });
    const responses = await Promise.all([1, 2, 3, 4, 5, 6].map(call));
    responses.forEach((r, k) => {
      const i = k + 1;
      expect(r.id).toBe(`g${i}`);
      expect(readFp32(r.raw_output_contents[0])).toEqual([i + 1, i + 2, i + 3, i + 4]);
      expect(readFp32(r.raw_output_contents[1])).toEqual([i - 1, i - 2, i - 3, i - 4]);
    });
  });
});

describe('BLS', () => {
  it('calls another model of the same server (gRPC and HTTP)', async () => {
    const r = await unary(client, 'ModelInfer', blsGrpc('add_sub', [1, 2, 3, 4], [1, 1, 1, 1]));
    expect(readFp32(r.raw_output_contents[0])).toEqual([2, 3, 4, 5]);
    const h = await post(`${worker.httpUrl}/v2/models/bls/infer`, {
      inputs: [{ name: 'MODEL_NAME', shape: [1], datatype: 'BYTES', data: ['add_sub'] }, ...addSubJson([4, 4, 4, 4], [1, 2, 3, 4]).inputs],
    });
    expect(h.json().outputs[1].data).toEqual([3, 2, 1, 0]);
  });

  it('a call to an unknown model fails with Triton wording', async () => {
    const err = await unaryError(client, 'ModelInfer', blsGrpc('nosuchmodel', [1, 2, 3, 4], [1, 1, 1, 1]));
    expect(err.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(err.details).toBe("Request for unknown model: 'nosuchmodel' is not found");
    const h = await post(`${worker.httpUrl}/v2/models/bls/infer`, {
      inputs: [{ name: 'MODEL_NAME', shape: [1], datatype: 'BYTES', data: ['nosuchmodel'] }, ...addSubJson([1, 1, 1, 1], [1, 1, 1, 1]).inputs],
    });
    expect(h.status).toBe(400);
    expect(h.json()).toEqual({ error: "Request for unknown model: 'nosuchmodel' is not found" });
  });
});

describe('outputs in the reshape shape reach clients in the dims (qa/L0_infer_reshape)', () => {
  const values = range(8, (i) => i / 2);

  it('HTTP: the model answers [batch, 4, 1, 2] and [batch, 1, n]; clients get [batch, 8] and [batch, n]', async () => {
    for (const batch of [1, 2]) {
      const r = await post(`${worker.httpUrl}/v2/models/reshape_identity/infer`, {
        inputs: [
          { name: 'INPUT0', shape: [batch, 8], datatype: 'FP32', data: range(batch).flatMap(() => values) },
          { name: 'INPUT1', shape: [batch, 3], datatype: 'INT32', data: range(batch * 3) },
        ],
      });
      expect(r.status, r.body.toString()).toBe(200);
      expect(r.json().outputs).toEqual([
        { name: 'OUTPUT0', datatype: 'FP32', shape: [batch, 8], data: range(batch).flatMap(() => values) },
        { name: 'OUTPUT1', datatype: 'INT32', shape: [batch, 3], data: range(batch * 3) },
      ]);
    }
  });

  it('gRPC, and a model without batching', async () => {
    const res = await unary(client, 'ModelInfer', {
      model_name: 'reshape_identity',
      inputs: [
        { name: 'INPUT0', datatype: 'FP32', shape: [1, 8] },
        { name: 'INPUT1', datatype: 'INT32', shape: [1, 5] },
      ],
      raw_input_contents: [fp32Bytes(values), int32Bytes(range(5))],
    });
    expect(res.outputs.map((o: any) => [o.name, o.shape.map(Number)])).toEqual([
      ['OUTPUT0', [1, 8]],
      ['OUTPUT1', [1, 5]],
    ]);
    expect(readFp32(res.raw_output_contents[0])).toEqual(values);
    const flat = range(12);
    const r = await post(`${worker.httpUrl}/v2/models/reshape_identity_nobatch/infer`, { inputs: [{ name: 'INPUT0', shape: [12], datatype: 'FP32', data: flat }] });
    expect(r.json().outputs).toEqual([{ name: 'OUTPUT0', datatype: 'FP32', shape: [12], data: flat }]);
  });
});

/**
 * An HTTP request as tritonclient.http sends it when no outputs are named: binary inputs, and
 * `binary_data_output: true` among the request parameters.
 */
function tritonClientHttpBody(parameters: object, outputs?: object[]) {
  const header = Buffer.from(
    JSON.stringify({
      inputs: [{ name: 'INPUT0', shape: [1], datatype: 'FP32', parameters: { binary_data_size: 4 } }],
      ...(outputs === undefined ? {} : { outputs }),
      parameters: outputs === undefined ? { ...parameters, binary_data_output: true } : parameters,
    }),
  );
  return { body: Buffer.concat([header, fp32Bytes([1])]), headers: { 'Inference-Header-Content-Length': String(header.length) } };
}

/** The outputs of an HTTP response with binary outputs, by name: the JSON header, then each binary_data_size bytes. */
function binaryOutputs(r: { body: Buffer; headers: Headers }): Map<string, string[]> {
  const length = Number(r.headers.get('inference-header-content-length') ?? r.body.length);
  const header = JSON.parse(r.body.subarray(0, length).toString());
  const out = new Map<string, string[]>();
  let offset = length;
  for (const o of header.outputs) {
    if (o.data !== undefined) out.set(o.name, o.data);
    else {
      out.set(o.name, deserializeStrings(r.body.subarray(offset, offset + o.parameters.binary_data_size)));
      offset += o.parameters.binary_data_size;
    }
  }
  return out;
}

describe('the request parameters a model sees (qa/L0_parameters)', () => {
  const PARAMETER_LIST = [
    { key1: 'value1', key2: 'value2' },
    { key1: 1, key2: 2 },
    { key1: 123.123, key2: 321.321 },
    { key1: true, key2: 'value2' },
  ];
  const seen = (outputs: Map<string, string[]>) => Object.fromEntries((outputs.get('key') ?? []).map((k, i) => [k, outputs.get('value')?.[i]]));
  const asStrings = (p: object) => Object.fromEntries(Object.entries(p).map(([k, v]) => [k, String(v)]));

  it('HTTP: the custom parameters, not binary_data_output (as tritonclient.http sends it)', async () => {
    for (const model of ['parameter', 'parameter_ensemble']) {
      for (const parameters of PARAMETER_LIST) {
        const { body, headers } = tritonClientHttpBody(parameters);
        const r = await post(`${worker.httpUrl}/v2/models/${model}/infer`, body, headers);
        expect(r.status, r.body.toString()).toBe(200);
        expect(seen(binaryOutputs(r)), model).toEqual(asStrings(parameters));
      }
    }
  });

  it('HTTP: not the request properties (priority, timeout, sequence flags) nor per-tensor parameters either', async () => {
    const { body, headers } = tritonClientHttpBody({ priority: 1, timeout: 10_000_000, sequence_start: false, sequence_end: false, custom: 'c' }, [
      { name: 'key', parameters: { binary_data: true } },
      { name: 'value', parameters: { binary_data: false } },
    ]);
    const r = await post(`${worker.httpUrl}/v2/models/parameter/infer`, body, headers);
    expect(r.status, r.body.toString()).toBe(200);
    expect(seen(binaryOutputs(r))).toEqual({ custom: 'c' });
  });

  it('gRPC, unary and streaming: the custom parameters, not triton_enable_empty_final_response nor priority', async () => {
    const grpcParameters = [
      { key1: { string_param: 'value1' }, key2: { string_param: 'value2' } },
      { key1: { int64_param: 1 }, key2: { int64_param: 2 } },
      { key1: { double_param: 123.123 }, key2: { double_param: 321.321 } },
      { key1: { bool_param: true }, key2: { string_param: 'value2' } },
    ];
    const request = (parameters: object) => ({
      model_name: 'parameter',
      inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1] }],
      raw_input_contents: [fp32Bytes([1])],
      parameters,
    });
    const grpcSeen = (res: any) => {
      const names = res.outputs.map((o: any) => o.name);
      return seen(new Map(names.map((n: string, i: number) => [n, deserializeStrings(res.raw_output_contents[i])])));
    };
    for (const [i, parameters] of grpcParameters.entries()) {
      expect(grpcSeen(await unary(client, 'ModelInfer', request(parameters)))).toEqual(asStrings(PARAMETER_LIST[i]!));
    }
    const streamed = await streamInfer(client, [request({ ...grpcParameters[0], triton_enable_empty_final_response: { bool_param: true }, priority: { int64_param: 1 } })]);
    expect(grpcSeen(streamed.find((r) => r.infer_response?.outputs?.length > 0).infer_response)).toEqual(asStrings(PARAMETER_LIST[0]!));
  });

  it('a triton_ key is refused by both doors', async () => {
    const { body, headers } = tritonClientHttpBody({ triton_: true, key2: 'value2' });
    const r = await post(`${worker.httpUrl}/v2/models/parameter/infer`, body, headers);
    expect(r.status).toBe(400);
    expect(r.json().error).toBe("parameter keys starting with 'triton_' are reserved for Triton usage and should not be specified.");
    const err = await unaryError(client, 'ModelInfer', {
      model_name: 'parameter',
      inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1] }],
      raw_input_contents: [fp32Bytes([1])],
      parameters: { triton_: { bool_param: true } },
    });
    expect(err.code).toBe(grpc.status.INVALID_ARGUMENT);
  });
});

describe('bad models', () => {
  it('a model that throws fails its requests (HTTP 500, gRPC INTERNAL) and counts as a BACKEND failure', async () => {
    const body = { inputs: [{ name: 'IN', shape: [1], datatype: 'INT32', data: [1] }] };
    const res = await post(`${worker.httpUrl}/v2/models/throws/infer`, body);
    expect(res.status).toBe(500);
    expect(res.json().error).toBe("Failed to process the request(s) for model instance 'throws_0_0', message: Error: the model is broken on purpose");
    const err = await unaryError(client, 'ModelInfer', {
      model_name: 'throws',
      inputs: [{ name: 'IN', datatype: 'INT32', shape: [1] }],
      raw_input_contents: [int32Bytes([1])],
    });
    expect(err.code).toBe(grpc.status.INTERNAL);
    const metrics = await (await fetch(`${worker.metricsUrl}/metrics`)).text();
    expect(metrics).toContain('nv_inference_request_failure{model="throws",reason="BACKEND",version="1"} 2');
    // The model stays loaded and keeps answering (with its error).
    expect((await get(`${worker.httpUrl}/v2/models/throws/ready`)).status).toBe(200);
  });

  it('a model.js with a syntax error is UNAVAILABLE with the reason; the server keeps serving', async () => {
    const index = await post(`${worker.httpUrl}/v2/repository/index`, {});
    const row = index.json().find((r: any) => r.name === 'syntax_error');
    expect(row.state).toBe('UNAVAILABLE');
    expect(row.reason).toMatch(/^unable to load model 'syntax_error': failed to load '.*syntax_error\/1\/model\.js': SyntaxError: .* \(.*model\.js:\d+\)$/);
    const g = await unary(client, 'RepositoryIndex', { repository_name: '', ready: false });
    expect(g.models.find((m: any) => m.name === 'syntax_error').reason).toBe(row.reason);
    expect((await get(`${worker.httpUrl}/v2/models/syntax_error/ready`)).status).toBe(400);
    const res = await post(`${worker.httpUrl}/v2/models/syntax_error/infer`, { inputs: [{ name: 'IN', shape: [1], datatype: 'INT32', data: [1] }] });
    expect(res.status).toBe(404);
    expect(res.json().error).toBe("Request for unknown model: 'syntax_error' has no available versions");
    expect((await post(`${worker.httpUrl}/v2/models/add_sub/infer`, addSubJson([1, 1, 1, 1], [1, 1, 1, 1]))).status).toBe(200);
  });

  it('a hung model does not stall other models, and unloading it terminates its thread', async () => {
    const hung = post(`${worker.httpUrl}/v2/models/hang/infer`, { inputs: [{ name: 'IN', shape: [1], datatype: 'INT32', data: [1] }] });
    await sleep(100);
    // Other models, and the server itself, answer while the hang model is stuck.
    const started = Date.now();
    expect((await post(`${worker.httpUrl}/v2/models/add_sub/infer`, addSubJson([1, 1, 1, 1], [1, 1, 1, 1]))).status).toBe(200);
    expect((await get(`${worker.httpUrl}/v2/health/live`)).status).toBe(200);
    expect(Date.now() - started).toBeLessThan(2000);
    // Unload waits lifecycle_timeout_ms (3 s in its config) for the execution, then ends the thread.
    const unload = await post(`${worker.httpUrl}/v2/repository/models/hang/unload`, {});
    expect(unload.status).toBe(200);
    const res = await hung;
    expect(res.status).toBe(503);
    expect(res.json().error).toContain("JavaScript model 'hang' was unloaded before its request completed");
    expect((await get(`${worker.httpUrl}/v2/models/hang/ready`)).status).toBe(400);
    // It loads again, fresh.
    expect((await post(`${worker.httpUrl}/v2/repository/models/hang/load`, {})).status).toBe(200);
    const ok = await post(`${worker.httpUrl}/v2/models/hang/infer`, { inputs: [{ name: 'IN', shape: [1], datatype: 'INT32', data: [5] }] });
    expect(ok.json().outputs[0].data).toEqual([5]);
  });
});
