/**
 * The cluster end to end: private etcd, NATS (JetStream) and Redis, one router process and two worker
 * processes in cluster mode over test/fixtures/llm_repository (worker A serves mock_llm and tiny_llm,
 * worker B mock_llm only), driven through the router with the official `openai` SDK, KServe HTTP and
 * the Prometheus metrics port. Tensor models: add_sub (labels on OUTPUT0) and decoupled_error on worker
 * B, the stateful seq_sum on both (sequence affinity).
 *
 * The cluster is shared by the suite (test/support/cluster.ts); fault-injection suites start their own
 * with the same fixture.
 */
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import OpenAI from 'openai';
import { repoRoot } from '@switchyard/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { validates } from '@switchyard/testing/fuzz';
import { startCluster, type Cluster } from './support/cluster.js';
import { STRUCTURED_SCHEMA } from './lib/structured-output.js';
import { metricsText } from './lib/metrics.js';
import { get, post, serializeStrings, deserializeStrings } from './lib/tensors.js';
import { grpc, isFinalResponse, loadGrpcClients, streamInfer, unary, unaryError } from './lib/grpc-client.js';
import { waitFor } from './lib/wait-for.js';
import { batchedCompletionLogprobs, chatTopLogprobs, nChoicesShareThePrompt } from './lib/openai-choices.js';

let cluster: Cluster;
let openai: OpenAI;

/** One sample's value from Prometheus text (the first line starting with `series` followed by a space). */
function sample(text: string, series: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}
const metrics = (): Promise<string> => metricsText(cluster.router.metricsUrl);

/** A stateful JavaScript model: OUTPUT = running sum of INPUT since the sequence's START (one slot per instance). */
const SEQ_SUM_CONFIG = `name: "seq_sum"
backend: "javascript"
max_batch_size: 0
sequence_batching {
  control_input [ { name: "START" control [ { kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] } ] } ]
}
input [ { name: "INPUT" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "OUTPUT" data_type: TYPE_INT32 dims: [ 1 ] } ]
instance_group [ { count: 1 kind: KIND_CPU } ]
`;
const SEQ_SUM_JS = `export class TritonModel {
  execute(requests) {
    return requests.map((r) => {
      if (r.input('START').data[0] === 1) this.sum = 0;
      this.sum += r.input('INPUT').data[0];
      return { outputs: [{ name: 'OUTPUT', data: Int32Array.of(this.sum), shape: [1] }] };
    });
  }
}
`;
const javascriptFixture = (f: string): Buffer => readFileSync(join(repoRoot(), 'test', 'fixtures', 'javascript_repository', f));

// Longer than a few 16-token blocks, so a repeat is served from the prefix cache.
const PROMPT = 'Switchyard routes each request to the worker whose KV cache already holds the longest prefix of its prompt. '.repeat(4);

beforeAll(async () => {
  cluster = await startCluster({
    workers: [
      ['--model-control-mode=explicit', '--load-model=mock_llm', '--load-model=tiny_llm', '--load-model=seq_sum'],
      ['--model-control-mode=explicit', '--load-model=mock_llm', '--load-model=add_sub', '--load-model=decoupled_error', '--load-model=seq_sum', '--load-model=identity_fp32'],
    ],
    // tensor models (Triton's add_sub with OUTPUT0 labels, decoupled_error; JavaScript backend) on worker B only, seq_sum on both
    files: {
      'add_sub/config.pbtxt': javascriptFixture('add_sub/config.pbtxt').toString('utf8').replace('{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] }', '{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] label_filename: "labels.txt" }'),
      'add_sub/labels.txt': 'cat\ndog\nbird\nfish\n',
      'add_sub/1/model.js': javascriptFixture('add_sub/1/model.js'),
      'decoupled_error/config.pbtxt': javascriptFixture('decoupled_error/config.pbtxt'),
      'decoupled_error/1/model.mjs': javascriptFixture('decoupled_error/1/model.mjs'),
      'seq_sum/config.pbtxt': SEQ_SUM_CONFIG,
      'seq_sum/1/model.js': SEQ_SUM_JS,
      // ONNX Identity over FP32 [-1]: tensors larger than one NATS message
      'identity_fp32/config.pbtxt': readFileSync(join(repoRoot(), 'test', 'fixtures', 'model_repository', 'identity_fp32', 'config.pbtxt')),
      'identity_fp32/1/model.onnx': readFileSync(join(repoRoot(), 'test', 'fixtures', 'model_repository', 'identity_fp32', '1', 'model.onnx')),
    },
    waitForModels: ['mock_llm', 'tiny_llm'],
  });
  openai = new OpenAI({ baseURL: `${cluster.router.httpUrl}/v1`, apiKey: 'unused', maxRetries: 0 });
  // Both workers' mock_llm are known to the router.
  await waitFor(async () => sample(await metrics(), 'switchyard_router_workers{model="mock_llm"}') === 2, {
    timeoutMs: 20_000,
    message: 'router did not see both mock_llm workers',
  });
}, 90_000);

afterAll(async () => {
  await cluster?.stop();
});

describe('OpenAI through the router', () => {
  it('lists the LLMs of every worker once', async () => {
    const ids = (await openai.models.list()).data.map((m) => m.id).sort();
    expect(ids).toEqual(['mock_llm', 'tiny_llm']);
  });

  it('streams a chat completion with usage, and serves a repeated prompt from the prefix cache (kv mode)', async () => {
    const chat = async (): Promise<{ text: string; usage: OpenAI.CompletionUsage | undefined | null }> => {
      const stream = await openai.chat.completions.create({
        model: 'mock_llm',
        messages: [{ role: 'user', content: PROMPT }],
        max_tokens: 8,
        stream: true,
        stream_options: { include_usage: true },
      });
      let text = '';
      let usage: OpenAI.CompletionUsage | undefined | null;
      for await (const chunk of stream) {
        text += chunk.choices[0]?.delta.content ?? '';
        if (chunk.usage) usage = chunk.usage;
      }
      return { text, usage };
    };
    const first = await chat();
    expect(first.text.length).toBeGreaterThan(0);
    expect(first.usage).toMatchObject({ completion_tokens: 8 });
    expect(first.usage!.prompt_tokens).toBeGreaterThan(64);
    // The first request's KV events reach the router's index before the repeat is routed.
    await waitFor(async () => (sample(await metrics(), 'switchyard_router_kv_events_applied_total') ?? 0) > 0, {
      timeoutMs: 10_000,
      message: 'no KV events applied',
    });
    const second = await chat();
    expect(second.usage!.prompt_tokens).toBe(first.usage!.prompt_tokens);
    expect(second.usage!.prompt_tokens_details?.cached_tokens).toBeGreaterThan(0);
  });

  it('answers a non-streamed completion on the ONNX model', async () => {
    const res = await openai.completions.create({ model: 'tiny_llm', prompt: 'The quick brown fox', max_tokens: 4, temperature: 0 });
    expect(res.choices[0]!.finish_reason).toBe('length');
    expect(res.usage).toMatchObject({ completion_tokens: 4 });
  });

  it('n = 3 choices through the router: own seeds, the prompt shared from the prefix cache, streamed with indexes', async () => {
    await nChoicesShareThePrompt(openai, 'tiny_llm', 'router');
  });

  it('logprobs with alternatives cross the cluster wire (chat top_logprobs; batched completions × n)', async () => {
    await chatTopLogprobs(openai, 'tiny_llm');
    await batchedCompletionLogprobs(openai, 'tiny_llm');
  });

  it('structured output: the schema travels to the worker, which constrains sampling (parse and stream)', async () => {
    const response_format = { type: 'json_schema', json_schema: { name: 'verdict', schema: STRUCTURED_SCHEMA, strict: true } } as const;
    const request = { model: 'tiny_llm', messages: [{ role: 'user' as const, content: 'Is Paris the capital of France? Answer in JSON.' }], response_format, max_tokens: 460, temperature: 0 };
    const parsed = await openai.chat.completions.parse(request);
    expect(parsed.choices[0]!.finish_reason).toBe('stop');
    expect(validates(parsed.choices[0]!.message.parsed, STRUCTURED_SCHEMA)).toBe(true);
    const stream = await openai.chat.completions.create({ ...request, stream: true });
    let text = '';
    for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? '';
    expect(text).toBe(parsed.choices[0]!.message.content);
    // Refused at the router (unsupported keyword) and at the worker (an engine without logits), as 400s.
    const bad = { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'string', format: 'email' } } };
    await expect(openai.chat.completions.create({ ...request, response_format: bad } as never)).rejects.toMatchObject({ status: 400, param: 'response_format' });
    await expect(openai.chat.completions.create({ ...request, model: 'mock_llm', response_format: { type: 'json_object' } })).rejects.toMatchObject({ status: 400 });
  });

  it('rejects bad requests at the router in OpenAI shape', async () => {
    const unknown = await post(`${cluster.router.httpUrl}/v1/chat/completions`, { model: 'nope', messages: [{ role: 'user', content: 'hi' }] }, { 'content-type': 'application/json' });
    expect(unknown.status).toBe(404);
    expect(unknown.json().error).toMatchObject({ message: expect.stringContaining('nope') });
    await expect(openai.chat.completions.create({ model: 'nope', messages: [{ role: 'user', content: 'hi' }] })).rejects.toMatchObject({ status: 404 });

    const malformed = await post(`${cluster.router.httpUrl}/v1/chat/completions`, '{"model": "mock_llm", "messages": [', { 'content-type': 'application/json' });
    expect(malformed.status).toBe(400);
    expect(malformed.json().error.message).toEqual(expect.any(String));

    const noMessages = await post(`${cluster.router.httpUrl}/v1/chat/completions`, { model: 'mock_llm' }, { 'content-type': 'application/json' });
    expect(noMessages.status).toBe(400);
    expect(noMessages.json().error).toMatchObject({ type: expect.any(String), message: expect.stringContaining('messages') });
  });
});

describe('KServe through the router', () => {
  it('is ready, and answers model metadata from the workers\' cards', async () => {
    expect((await get(`${cluster.router.httpUrl}/v2/health/live`)).status).toBe(200);
    expect((await get(`${cluster.router.httpUrl}/v2/health/ready`)).status).toBe(200);
    const meta = await get(`${cluster.router.httpUrl}/v2/models/mock_llm`);
    expect(meta.status).toBe(200);
    expect(meta.json()).toMatchObject({ name: 'mock_llm', versions: ['1'] });
    expect(meta.json().inputs.map((i: { name: string }) => i.name)).toContain('text_input');
    // As a worker answers (Triton: 400 for an unknown model's metadata).
    const unknown = await get(`${cluster.router.httpUrl}/v2/models/nope`);
    expect(unknown.status).toBe(400);
    expect(unknown.json().error).toMatch(/^Request for unknown model: 'nope' is not found/);
  });

  it('generates through a worker', async () => {
    const res = await post(`${cluster.router.httpUrl}/v2/models/mock_llm/generate`, { text_input: 'hello there', parameters: { max_tokens: 5 } });
    expect(res.status).toBe(200);
    expect(res.json()).toMatchObject({ model_name: 'mock_llm', completion_tokens: 5, finish_reason: 'length' });
    expect(typeof res.json().text_output).toBe('string');
  });
});

describe('a tensor model through the router', () => {
  it('answers KServe HTTP infer and gRPC ModelInfer from the worker that hosts it', async () => {
    await waitFor(async () => (await get(`${cluster.router.httpUrl}/v2/models/add_sub/ready`)).status === 200, {
      timeoutMs: 20_000,
      message: 'router did not see add_sub',
    });
    const inputs = [
      { name: 'INPUT0', datatype: 'FP32', shape: [4], data: [1, 2, 3, 4] },
      { name: 'INPUT1', datatype: 'FP32', shape: [4], data: [10, 20, 30, 40] },
    ];
    const r = await post(`${cluster.router.httpUrl}/v2/models/add_sub/infer`, { id: 'tensor-1', inputs });
    expect(r.status).toBe(200);
    const body = r.json();
    expect(body).toMatchObject({ id: 'tensor-1', model_name: 'add_sub', model_version: '1' });
    const out = Object.fromEntries(body.outputs.map((o: { name: string; data: number[] }) => [o.name, o.data]));
    expect(out).toEqual({ OUTPUT0: [11, 22, 33, 44], OUTPUT1: [-9, -18, -27, -36] });
    const bad = await post(`${cluster.router.httpUrl}/v2/models/add_sub/infer`, { inputs: [inputs[0]] });
    expect(bad.status).toBe(400);

    const { inference } = loadGrpcClients(cluster.router.grpcAddress);
    try {
      const f32 = (xs: number[]) => Buffer.from(new Float32Array(xs).buffer);
      const res = await unary(inference, 'ModelInfer', {
        model_name: 'add_sub',
        inputs: [
          { name: 'INPUT0', datatype: 'FP32', shape: [4] },
          { name: 'INPUT1', datatype: 'FP32', shape: [4] },
        ],
        raw_input_contents: [f32([1, 2, 3, 4]), f32([10, 20, 30, 40])],
      });
      const idx = res.outputs.findIndex((o: { name: string }) => o.name === 'OUTPUT0');
      const raw: Buffer = res.raw_output_contents[idx];
      expect([...new Float32Array(raw.buffer.slice(raw.byteOffset, raw.byteOffset + raw.byteLength))]).toEqual([11, 22, 33, 44]);
    } finally {
      inference.close();
    }
  });
});

describe('tensors larger than one NATS message (max_payload 1 MiB) through the router', () => {
  it('gRPC ModelInfer and HTTP binary infer carry 3 MB in and out', async () => {
    await waitFor(async () => (await get(`${cluster.router.httpUrl}/v2/models/identity_fp32/ready`)).status === 200, {
      timeoutMs: 20_000,
      message: 'router did not see identity_fp32',
    });
    const n = 750_000; // 3 MB of FP32 (4 MB base64 inside the request plane)
    const values = new Float32Array(n).map((_, i) => (i % 1000) - 0.5);
    const raw = Buffer.from(values.buffer);
    const { inference } = loadGrpcClients(cluster.router.grpcAddress);
    try {
      const res = await unary(inference, 'ModelInfer', {
        model_name: 'identity_fp32',
        inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, n] }],
        raw_input_contents: [raw],
      });
      expect(res.outputs[0].shape.map(Number)).toEqual([1, n]);
      expect(Buffer.compare(res.raw_output_contents[0], raw)).toBe(0);
    } finally {
      inference.close();
    }
    // HTTP binary tensor extension
    const header = Buffer.from(JSON.stringify({ inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, n], parameters: { binary_data_size: raw.length } }], outputs: [{ name: 'OUTPUT0', parameters: { binary_data: true } }] }));
    const r = await post(`${cluster.router.httpUrl}/v2/models/identity_fp32/infer`, Buffer.concat([header, raw]), {
      'content-type': 'application/octet-stream',
      'inference-header-content-length': String(header.length),
    });
    expect(r.status, r.body.subarray(0, 200).toString()).toBe(200);
    const jsonLength = Number(r.headers.get('inference-header-content-length'));
    expect(Buffer.compare(r.body.subarray(jsonLength), raw)).toBe(0);
  });
});

describe('bad shapes through the router', () => {
  it('negative and oversized dimensions and unread raw_input_contents are refused at the router with the worker\'s words (gRPC and HTTP)', async () => {
    await waitFor(async () => (await get(`${cluster.router.httpUrl}/v2/models/identity_fp32/ready`)).status === 200, {
      timeoutMs: 20_000,
      message: 'router did not see identity_fp32',
    });
    const { inference } = loadGrpcClients(cluster.router.grpcAddress);
    try {
      const err = await unaryError(inference, 'ModelInfer', {
        model_name: 'identity_fp32',
        inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [-2, -2] }],
        raw_input_contents: [Buffer.alloc(16)],
      });
      expect(err.code).toBe(grpc.status.INVALID_ARGUMENT);
      expect(err.details).toBe("[request id: <id_unknown>] All input dimensions should be specified for input 'INPUT0' for model 'identity_fp32', got [-2,-2]");
      const extra = await unaryError(inference, 'ModelInfer', {
        model_name: 'identity_fp32',
        inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 4] }],
        raw_input_contents: [Buffer.alloc(16), Buffer.alloc(16)],
      });
      expect(extra.code).toBe(grpc.status.INVALID_ARGUMENT);
      expect(extra.details).toBe("expected 1 raw_input_contents for model 'identity_fp32' (one per input without 'contents' or shared memory), got 2");
    } finally {
      inference.close();
    }
    const r = await post(`${cluster.router.httpUrl}/v2/models/identity_fp32/infer`, { inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 2_000_000_000], data: [1] }] });
    expect(r.status).toBe(400);
    expect(r.json().error).toContain("byte size overflow for input 'INPUT0' for model 'identity_fp32': shape [1,2000000000] of FP32 takes 8000000000 bytes");
  });
});

describe('KServe parity with a worker through the router', () => {
  const infer = (model: string, body: object) => post(`${cluster.router.httpUrl}/v2/models/${model}/infer`, body);

  it('server metadata names Triton, as a worker does (HTTP and gRPC)', async () => {
    expect((await get(`${cluster.router.httpUrl}/v2`)).json()).toMatchObject({ name: 'triton', extensions: expect.arrayContaining(['classification']) });
    const { inference } = loadGrpcClients(cluster.router.grpcAddress);
    try {
      expect((await unary(inference, 'ServerMetadata', {})).name).toBe('triton');
    } finally {
      inference.close();
    }
  });

  it('classification outputs carry the worker\'s labels', async () => {
    await waitFor(async () => (await get(`${cluster.router.httpUrl}/v2/models/add_sub/ready`)).status === 200, { timeoutMs: 20_000, message: 'router did not see add_sub' });
    const r = await infer('add_sub', {
      inputs: [
        { name: 'INPUT0', datatype: 'FP32', shape: [4], data: [1, 2, 3, 4] },
        { name: 'INPUT1', datatype: 'FP32', shape: [4], data: [10, 20, 30, 40] },
      ],
      outputs: [{ name: 'OUTPUT0', parameters: { classification: 2 } }],
    });
    expect(r.status).toBe(200);
    expect(r.json().outputs[0].data).toEqual(['44.000000:3:fish', '33.000000:2:bird']);
  });

  it('a decoupled gRPC stream goes on after an error response (3 responses, the last final)', async () => {
    await waitFor(async () => (await get(`${cluster.router.httpUrl}/v2/models/decoupled_error/ready`)).status === 200, { timeoutMs: 20_000, message: 'router did not see decoupled_error' });
    const { inference } = loadGrpcClients(cluster.router.grpcAddress);
    try {
      const responses = await streamInfer(inference, [
        { model_name: 'decoupled_error', id: 'de', inputs: [{ name: 'IN', datatype: 'INT32', shape: [1] }], raw_input_contents: [Buffer.from(new Int32Array([2]).buffer)] },
      ]);
      expect(responses).toHaveLength(3);
      expect(responses.map((r) => r.error_message)).toEqual(['', expect.stringContaining('element 2 is bad'), '']);
      expect(responses.map((r) => isFinalResponse(r))).toEqual([false, false, true]);
      const out = (r: { infer_response: { raw_output_contents: Buffer[] } }) => r.infer_response.raw_output_contents[0]!.readInt32LE(0);
      expect([out(responses[0]), out(responses[2])]).toEqual([1, 3]);
    } finally {
      inference.close();
    }
  });

  it('statistics: summed over the workers; an unknown model or version fails as on a worker', async () => {
    const unknown = await get(`${cluster.router.httpUrl}/v2/models/nope/stats`);
    expect(unknown.status).toBe(400);
    expect(unknown.json()).toEqual({ error: "requested model 'nope' is not available" });
    const version = await get(`${cluster.router.httpUrl}/v2/models/add_sub/versions/9/stats`);
    expect(version.json()).toEqual({ error: "requested model version is not available for model 'add_sub'" });
    const stats = await get(`${cluster.router.httpUrl}/v2/models/add_sub/stats`);
    expect(stats.status).toBe(200);
    expect(stats.json().model_stats).toEqual([expect.objectContaining({ name: 'add_sub', version: '1', inference_count: expect.any(Number) })]);
    expect(stats.json().model_stats[0].inference_count).toBeGreaterThanOrEqual(2);
  });

  it('every request of a sequence reaches the instance that got its START (integer and string ids)', async () => {
    await waitFor(async () => sample(await metrics(), 'switchyard_router_workers{model="seq_sum"}') === 2, { timeoutMs: 20_000, message: 'router did not see both seq_sum workers' });
    const step = async (id: number | string, value: number, flags: object) => {
      const r = await infer('seq_sum', { parameters: { sequence_id: id, ...flags }, inputs: [{ name: 'INPUT', datatype: 'INT32', shape: [1], data: [value] }] });
      expect(r.json().error, `sequence ${id}`).toBeUndefined();
      return r.json().outputs[0].data[0];
    };
    for (const id of [1, 2, 3, 4, 5, 'a', 'b', 'c', 'd']) {
      expect(await step(id, 1, { sequence_start: true })).toBe(1);
      expect(await step(id, 2, {})).toBe(3);
      expect(await step(id, 3, { sequence_end: true })).toBe(6);
    }
  });
});

describe('KServe gRPC through the router', () => {
  it('answers ServerLive, ModelMetadata and streams ModelStreamInfer from a worker', async () => {
    const { inference } = loadGrpcClients(cluster.router.grpcAddress);
    try {
      expect((await unary(inference, 'ServerLive', {})).live).toBe(true);
      const meta = await unary(inference, 'ModelMetadata', { name: 'mock_llm' });
      expect(meta.name).toBe('mock_llm');
      expect(meta.inputs.map((i: { name: string }) => i.name)).toContain('text_input');
      const responses = await streamInfer(inference, [
        {
          model_name: 'mock_llm',
          id: 'via-router',
          inputs: [
            { name: 'text_input', datatype: 'BYTES', shape: [1] },
            { name: 'stream', datatype: 'BOOL', shape: [1] },
          ],
          parameters: { max_tokens: { int64_param: 5 } },
          raw_input_contents: [serializeStrings([PROMPT]), Buffer.from([1])],
        },
      ]);
      expect(responses.map((r) => r.error_message)).toEqual(responses.map(() => ''));
      expect(isFinalResponse(responses.at(-1))).toBe(true);
      const last = responses.at(-1).infer_response;
      expect(last.id).toBe('via-router');
      expect(Number(last.parameters.completion_tokens.int64_param)).toBe(5);
      const text = responses.map((r) => deserializeStrings(r.infer_response.raw_output_contents[0])[0]).join('');
      expect(text.length).toBeGreaterThan(0);
      const missing = await streamInfer(inference, [{ model_name: 'no_such_model', id: 'x', inputs: [] }]);
      expect(missing[0].error_message).toMatch(/no_such_model/);
    } finally {
      inference.close();
    }
  });
});

describe('router metrics', () => {
  it('serves the router families with values that match the traffic', async () => {
    // Workers report load (with their prefix-cache counters) when it changes, at most every interval.
    const hitRate = /^switchyard_router_worker_prefix_cache_hit_rate\{model="mock_llm",worker="[0-9a-f]+"\} (0\.\d*[1-9]\d*|1)$/m;
    await waitFor(async () => hitRate.test(await metrics()), { timeoutMs: 10_000, message: 'no worker reported prefix-cache hits' });
    const text = await metrics();
    expect(sample(text, 'switchyard_router_requests_total{endpoint="generate",model="mock_llm"}')).toBeGreaterThanOrEqual(2);
    expect(sample(text, 'switchyard_router_requests_total{endpoint="infer",model="mock_llm"}')).toBeGreaterThanOrEqual(1);
    expect(sample(text, 'switchyard_router_workers{model="mock_llm"}')).toBe(2);
    expect(sample(text, 'switchyard_router_workers{model="tiny_llm"}')).toBe(1);
    expect(sample(text, 'switchyard_router_approximate_mode{model="mock_llm"}')).toBe(0);
    expect(sample(text, 'switchyard_router_kv_events_applied_total')).toBeGreaterThan(0);
    expect(sample(text, 'switchyard_router_kv_event_gaps_total')).toBe(0);
    // the workers stream their responses back over call-home connections (the router's default)
    expect(sample(text, 'switchyard_router_call_home_connections')).toBe(2);
    expect(sample(text, 'switchyard_router_call_home_frames_total')).toBeGreaterThan(0);
    expect(sample(text, 'switchyard_router_call_home_requests_total')).toBeGreaterThan(0);
    expect(sample(text, 'switchyard_router_time_to_first_token_seconds_count')).toBeGreaterThanOrEqual(2);
    expect(text).toContain('# TYPE switchyard_router_migrations_total counter');
    const decisions = text.split('\n').filter((l) => l.startsWith('switchyard_router_routing_decisions_total{mode="kv",model="mock_llm"'));
    expect(decisions.length).toBeGreaterThanOrEqual(1);
    // The LLM families describe the cluster's endpoints.
    expect(text).toMatch(/^vllm:generation_tokens_total\{model="mock_llm"\} \d+/m);
  });
});

describe('router replicas', () => {
  it('a second router serves the same cluster, and finishes its in-flight stream when it drains on SIGTERM', async () => {
    const replica = await cluster.addRouter();
    await cluster.waitForModels(['mock_llm', 'tiny_llm'], replica);
    const client = new OpenAI({ baseURL: `${replica.httpUrl}/v1`, apiKey: 'unused', maxRetries: 0 });
    const stream = await client.chat.completions.create({
      model: 'mock_llm',
      messages: [{ role: 'user', content: 'Count slowly.' }],
      max_tokens: 300,
      stream: true,
      stream_options: { include_usage: true },
    });
    let stopped: Promise<{ code: number | null; signal: NodeJS.Signals | null }> | undefined;
    let usage: OpenAI.CompletionUsage | undefined | null;
    let finish: string | null | undefined;
    for await (const chunk of stream) {
      stopped ??= replica.stop('SIGTERM'); // after the first chunk: the stream is in flight
      finish ??= chunk.choices[0]?.finish_reason;
      if (chunk.usage) usage = chunk.usage;
    }
    expect(finish).toBe('length');
    expect(usage?.completion_tokens).toBe(300);
    expect(await stopped).toEqual({ code: 0, signal: null });
    expect(replica.logs().map((l) => l['msg'])).toContain('router stopped');
    // The first router is unaffected.
    expect((await get(`${cluster.router.httpUrl}/v2/health/ready`)).status).toBe(200);
  });
});

describe('router command line', () => {
  const run = (...args: string[]) => spawnSync(process.execPath, [join(repoRoot(), 'bin/switchyard.mjs'), ...args], { encoding: 'utf8', timeout: 20_000 });

  it('is listed by switchyard, prints its flags with --help and exits 2 on bad usage', () => {
    expect(run('--help').stdout).toMatch(/^ {2}router +the cluster front door/m);
    const help = run('router', '--help');
    expect(help.status).toBe(0);
    expect(help.stdout).toContain('--router-mode=kv|round-robin|random|least-loaded');
    const missing = run('router', '--etcd', cluster.etcd.url);
    expect(missing.status).toBe(2);
    expect(missing.stderr).toMatch(/^switchyard router: --nats, --redis are required/);
    const bad = run('router', '--etcd', cluster.etcd.url, '--nats', cluster.nats.url, '--redis', cluster.redis.url, '--router-mode=fastest');
    expect(bad.status).toBe(2);
    expect(bad.stderr).toContain("flag '--router-mode' must be one of kv, round-robin, random, least-loaded; got 'fastest'");
  });

  it('exits 1 when it cannot reach etcd', () => {
    const r = run('router', '--etcd=http://127.0.0.1:1', '--nats', cluster.nats.url, '--redis', cluster.redis.url, '--http-port=0', '--grpc-port=0', '--metrics-port=0');
    expect(r.status).toBe(1);
    expect(r.stdout).toContain('router failed to start');
  });
});
