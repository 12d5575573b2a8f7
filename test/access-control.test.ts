/**
 * Access control on a real worker process, driven by the clients users have: raw HTTP (curl's view),
 * grpc-js built from proto/ with call metadata (as tritonclient.grpc sends `headers=`), and the
 * official `openai` SDK. The worker restricts the model repository and shared memory over HTTP
 * (Triton's `--http-restricted-api`), the model repository and inference over gRPC
 * (`--grpc-restricted-protocol`), and the OpenAI routes with `--openai-api-key`; every other group
 * stays open.
 */
import { request } from 'node:http';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { llmFixtureRepositoryFiles } from '@switchyard/onnx-builder';
import { startWorkerProcess, type WorkerProcess } from '@switchyard/testing';
import { fixtureRepository, type FixtureRepository } from './lib/fixture-repository.js';
import { grpc, loadGrpcClients, type GrpcClient } from './lib/grpc-client.js';
import { get, int32Bytes, post, range, readInt32 } from './lib/tensors.js';
import { waitFor } from './lib/wait-for.js';

const ADMIN = { 'admin-key': 'adm1n-s3cret' };
const API_KEY = 'sk-switchyard-test';
let repo: FixtureRepository;
let worker: WorkerProcess;
let client: GrpcClient;

beforeAll(async () => {
  const files = llmFixtureRepositoryFiles().filter((f) => f.path.startsWith('mock_llm/'));
  repo = fixtureRepository('llm_repository', { files: Object.fromEntries(files.map((f) => [f.path, f.build()])) });
  worker = await startWorkerProcess({
    modelRepositories: ['test/fixtures/model_repository', repo.path],
    args: [
      '--model-control-mode=explicit',
      '--load-model=simple',
      '--load-model=mock_llm',
      '--allow-client-shm=true',
      '--http-restricted-api=model-repository,shared-memory:Admin-Key=adm1n-s3cret',
      '--grpc-restricted-protocol=model-repository:admin-key=adm1n-s3cret',
      '--grpc-restricted-protocol=inference:infer-key=1nfer',
      `--openai-api-key=${API_KEY}`,
    ],
  });
  client = loadGrpcClients(worker.grpcAddress).inference;
});
afterAll(async () => {
  client?.close();
  await worker?.stop();
  repo?.remove();
});

const simpleInputs = [
  { name: 'INPUT0', shape: [1, 16], datatype: 'INT32', data: range(16) },
  { name: 'INPUT1', shape: [1, 16], datatype: 'INT32', data: range(16, () => 1) },
];

describe('--http-restricted-api over HTTP', () => {
  it("answers Triton's 403 without the header or with a wrong value, before the method or the body is looked at", async () => {
    const refused = [403, { error: "This API is restricted, expecting header 'Admin-Key'" }];
    const load = `${worker.httpUrl}/v2/repository/models/simple/load`;
    for (const headers of <Record<string, string>[]>[{}, { 'admin-key': 'wrong' }, { 'admin-key': 'ADM1N-S3CRET' }, { 'admin-key': 'adm1n-s3cret2' }, { 'Infer-Key': 'adm1n-s3cret' }]) {
      const r = await post(load, undefined, headers);
      expect([r.status, r.json()], JSON.stringify(headers)).toEqual(refused);
    }
    // The wrong method on a restricted route is refused as restricted first, as Triton does.
    const index = await get(`${worker.httpUrl}/v2/repository/index`);
    expect([index.status, index.json()]).toEqual(refused);
    const shm = await post(`${worker.httpUrl}/v2/systemsharedmemory/region/r/register`, { key: '/anything', byte_size: 8 });
    expect([shm.status, shm.json()]).toEqual(refused);
    expect((await get(`${worker.httpUrl}/v2/systemsharedmemory/status`)).status).toBe(403);
  });

  it('refuses an upload announced with Expect: 100-continue before the client sends the body', async () => {
    const url = new URL(`${worker.httpUrl}/v2/repository/models/simple/load`);
    const answer = await new Promise<{ status: number; body: string; continued: boolean }>((resolve, reject) => {
      let continued = false;
      const req = request({ host: url.hostname, port: url.port, path: url.pathname, method: 'POST', headers: { expect: '100-continue', 'content-length': 10_000_000 } });
      req.on('continue', () => {
        continued = true;
        req.destroy();
      });
      req.on('response', (res) => {
        let body = '';
        res.on('data', (c: Buffer) => (body += c.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body, continued }));
      });
      req.on('error', reject);
      req.flushHeaders();
    });
    expect(answer).toEqual({ status: 403, body: JSON.stringify({ error: "This API is restricted, expecting header 'Admin-Key'" }), continued: false });
  });

  it('serves the restricted groups with the header (any case of its name) and leaves the others open', async () => {
    const index = await post(`${worker.httpUrl}/v2/repository/index`, undefined, { 'ADMIN-KEY': 'adm1n-s3cret' });
    expect(index.status).toBe(200);
    expect(index.json()).toEqual(expect.arrayContaining([expect.objectContaining({ name: 'simple', state: 'READY' })]));
    expect((await post(`${worker.httpUrl}/v2/repository/models/simple/load`, undefined, ADMIN)).status).toBe(200);
    expect((await fetch(`${worker.httpUrl}/v2/systemsharedmemory/status`, { headers: ADMIN })).status).toBe(200);
    expect((await get(`${worker.httpUrl}/v2/health/ready`)).status).toBe(200);
    expect((await get(`${worker.httpUrl}/v2/models/simple`)).status).toBe(200);
    expect((await get(`${worker.httpUrl}/v2/models/simple/config`)).status).toBe(200);
    expect((await get(`${worker.httpUrl}/v2/models/simple/stats`)).status).toBe(200);
    const infer = await post(`${worker.httpUrl}/v2/models/simple/infer`, { inputs: simpleInputs });
    expect(infer.status).toBe(200);
    expect(infer.json().outputs[0].data).toEqual(range(16, (i) => i + 1));
  });
});

/** A unary call with metadata; resolves with the response or the error. */
function call(method: string, request: object, metadata: Record<string, string> = {}): Promise<{ err: grpc.ServiceError | null; res: any }> {
  const md = new grpc.Metadata();
  for (const [k, v] of Object.entries(metadata)) md.set(k, v);
  return new Promise((resolve) => client[method](request, md, (err: grpc.ServiceError | null, res: any) => resolve({ err, res })));
}

const grpcInfer = {
  model_name: 'simple',
  inputs: [
    { name: 'INPUT0', datatype: 'INT32', shape: [1, 16] },
    { name: 'INPUT1', datatype: 'INT32', shape: [1, 16] },
  ],
  raw_input_contents: [int32Bytes(range(16)), int32Bytes(range(16, () => 1))],
};

describe('--grpc-restricted-protocol over gRPC', () => {
  it("answers UNAVAILABLE with Triton's message without the metadata or with a wrong value", async () => {
    for (const md of <Record<string, string>[]>[{}, { 'admin-key': 'adm1n-s3cret' }, { 'triton-grpc-protocol-admin-key': 'nope' }]) {
      const { err } = await call('RepositoryIndex', {}, md);
      expect([err?.code, err?.details], JSON.stringify(md)).toEqual([grpc.status.UNAVAILABLE, "This protocol is restricted, expecting header 'triton-grpc-protocol-admin-key'"]);
    }
    const { err } = await call('ModelInfer', grpcInfer);
    expect([err?.code, err?.details]).toEqual([grpc.status.UNAVAILABLE, "This protocol is restricted, expecting header 'triton-grpc-protocol-infer-key'"]);
  });

  it('refuses a ModelStreamInfer stream without the metadata before reading any request', async () => {
    const stream = client.ModelStreamInfer(new grpc.Metadata());
    const responses: unknown[] = [];
    const ended = new Promise<grpc.ServiceError>((resolve) => {
      stream.on('data', (r: unknown) => responses.push(r));
      stream.on('error', resolve);
    });
    stream.write(grpcInfer);
    const err = await ended;
    expect([err.code, err.details, responses]).toEqual([grpc.status.UNAVAILABLE, "This protocol is restricted, expecting header 'triton-grpc-protocol-infer-key'", []]);
  });

  it('serves with the metadata; open groups need none', async () => {
    const index = await call('RepositoryIndex', {}, { 'triton-grpc-protocol-admin-key': 'adm1n-s3cret' });
    expect(index.err).toBeNull();
    expect(index.res.models.map((m: { name: string }) => m.name)).toContain('simple');
    const infer = await call('ModelInfer', grpcInfer, { 'triton-grpc-protocol-infer-key': '1nfer' });
    expect(infer.err).toBeNull();
    expect(readInt32(infer.res.raw_output_contents[0])).toEqual(range(16, (i) => i + 1));

    const md = new grpc.Metadata();
    md.set('triton-grpc-protocol-infer-key', '1nfer');
    const ok = client.ModelStreamInfer(md);
    const got = new Promise<any[]>((resolve, reject) => {
      const rs: any[] = [];
      ok.on('data', (r: any) => rs.push(r));
      ok.on('end', () => resolve(rs));
      ok.on('error', reject);
    });
    ok.write(grpcInfer);
    ok.end();
    const responses = await got;
    expect(responses).toHaveLength(1);
    expect(responses[0].error_message).toBe('');

    for (const method of ['ServerLive', 'ServerReady', 'ServerMetadata']) expect((await call(method, {})).err, method).toBeNull();
    expect((await call('ModelConfig', { name: 'simple' })).err).toBeNull();
    expect((await call('SystemSharedMemoryStatus', {})).err).toBeNull();
  });
});

describe('--openai-api-key with the openai SDK and raw HTTP', () => {
  it('the SDK works with the key', async () => {
    const openai = new OpenAI({ baseURL: `${worker.httpUrl}/v1`, apiKey: API_KEY, maxRetries: 0 });
    const models = await openai.models.list();
    expect(models.data.map((m) => m.id)).toContain('mock_llm');
    const chat = await openai.chat.completions.create({ model: 'mock_llm', messages: [{ role: 'user', content: 'Hi!' }], max_tokens: 4 });
    expect(chat.choices[0]?.finish_reason).toBe('length');
  });

  it('the SDK fails with a clear AuthenticationError with a wrong key', async () => {
    const openai = new OpenAI({ baseURL: `${worker.httpUrl}/v1`, apiKey: 'sk-wrong', maxRetries: 0 });
    const err = await openai.chat.completions.create({ model: 'mock_llm', messages: [{ role: 'user', content: 'Hi!' }], max_tokens: 4 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.AuthenticationError);
    expect(err).toMatchObject({ status: 401, code: 'invalid_api_key', type: 'invalid_request_error', message: '401 Incorrect API key provided.' });
    await expect(openai.models.list()).rejects.toBeInstanceOf(OpenAI.AuthenticationError);
  });

  it("answers 401 with OpenAI's error body and WWW-Authenticate when the key is missing, on every /v1 path", async () => {
    for (const path of ['/v1/chat/completions', '/v1/completions', '/v1/nope']) {
      const r = await post(`${worker.httpUrl}${path}`, { model: 'mock_llm', prompt: 'x' }, { 'content-type': 'application/json' });
      expect([r.status, r.headers.get('www-authenticate'), r.json()], path).toEqual([
        401,
        'Bearer',
        {
          error: {
            message: "You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).",
            type: 'invalid_request_error',
            param: null,
            code: 'invalid_api_key',
          },
        },
      ]);
    }
    expect((await get(`${worker.httpUrl}/v1/models`)).status).toBe(401);
    // The KServe routes do not take the OpenAI key: they follow --http-restricted-api alone.
    expect((await post(`${worker.httpUrl}/v2/models/simple/infer`, { inputs: simpleInputs })).status).toBe(200);
  });
});

describe('start-up warning', () => {
  const warning = (w: WorkerProcess) => w.logs().find((l) => typeof l.msg === 'string' && l.msg.startsWith('the model repository API (load, unload, file upload) is open to every client'));

  it('a worker whose model repository API is open to any client says so; a restricted one does not', async () => {
    expect(warning(worker)).toBeUndefined();
    const open = await startWorkerProcess({ modelRepositories: ['test/fixtures/model_repository'], args: ['--model-control-mode=explicit', '--grpc-restricted-protocol=model-repository:k=v'] });
    try {
      // The warning follows the 'worker started' line the harness waits for: it may still be in flight.
      await waitFor(async () => warning(open) !== undefined, { timeoutMs: 10_000, message: 'no start-up warning' });
      expect(warning(open)).toMatchObject({ doors: ['http'], controlMode: 'explicit' });
    } finally {
      await open.stop();
    }
  });
});
