/**
 * inference.GRPCInferenceService and grpc.health.v1.Health against a real worker process, with a
 * grpc-js client built from proto/: every RPC family, raw and typed contents, streaming, errors.
 * Where Node.js shares a port between threads (22.12 on), all of it runs twice: on the event loop,
 * and through gRPC front threads (`--grpc-infer-thread-count=2`).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startWorkerProcess, type WorkerProcess } from '@switchyard/testing';
import { reusePortSupported } from '@switchyard/server';
import { grpc, loadGrpcClients, streamInfer, unary, unaryError, type GrpcClient } from './lib/grpc-client.js';
import { fixtureRepository, type FixtureRepository } from './lib/fixture-repository.js';
import { fp32Bytes, int32Bytes, range, readFp32, readInt32, serializeStrings, deserializeStrings } from './lib/tensors.js';

const MODELS = ['simple', 'identity_fp32', 'identity_bytes', 'identity_uint64', 'simple_string'];
let worker: WorkerProcess;
let client: GrpcClient;
let health: GrpcClient;
let repo: FixtureRepository;


const simpleRaw = (a: number[], b: number[], id = '') => ({
  model_name: 'simple',
  id,
  inputs: [
    { name: 'INPUT0', datatype: 'INT32', shape: [1, 16] },
    { name: 'INPUT1', datatype: 'INT32', shape: [1, 16] },
  ],
  outputs: [{ name: 'OUTPUT0' }, { name: 'OUTPUT1' }],
  raw_input_contents: [int32Bytes(a), int32Bytes(b)],
});

describe.each(reusePortSupported() ? [0, 2] : [0])('--grpc-infer-thread-count=%i', (threads) => {
  beforeAll(async () => {
    repo = fixtureRepository('model_repository', { overlay: { simple_string: 'examples/model_repository/simple_string' } });
    worker = await startWorkerProcess({
      modelRepositories: [repo.path],
      args: ['--model-control-mode=explicit', ...MODELS.map((m) => `--load-model=${m}`), ...(threads > 0 ? [`--grpc-infer-thread-count=${threads}`] : [])],
    });
    ({ inference: client, health } = loadGrpcClients(worker.grpcAddress));
  });
  afterAll(async () => {
    client?.close();
    health?.close();
    await worker?.stop();
    repo?.remove();
  });

  describe('BYTES element counts (qa L0_input_validation test_input_string_shape_validation)', () => {
    // Both inputs carry the wrong number of strings for their shape [1, 16]; Triton names INPUT1.
    const strings = (n: number) => serializeStrings(range(n).map(String));
    const request = (n: number) => ({
      model_name: 'simple_string',
      inputs: ['INPUT0', 'INPUT1'].map((name) => ({ name, datatype: 'BYTES', shape: [1, 16] })),
      raw_input_contents: [strings(n), strings(n)],
    });

    it('too few and too many strings name the input Triton names', async () => {
      let err = await unaryError(client, 'ModelInfer', request(14));
      expect(err.code).toBe(grpc.status.INVALID_ARGUMENT);
      expect(err.details).toContain("expected 16 string elements for inference input 'INPUT1' for model 'simple_string', got 14");
      err = await unaryError(client, 'ModelInfer', request(18));
      expect(err.details).toContain("unexpected number of string elements 17 for inference input 'INPUT1' for model 'simple_string', expecting 16");
      const ok = await unary(client, 'ModelInfer', request(16));
      expect(deserializeStrings(ok.raw_output_contents[0])).toEqual(range(16, (i) => 2 * i).map(String));
    });
  });

  describe('server and model RPCs', () => {
    it('live, ready, metadata, health', async () => {
      expect(await unary(client, 'ServerLive', {})).toEqual({ live: true });
      expect(await unary(client, 'ServerReady', {})).toEqual({ ready: true });
      const meta = await unary(client, 'ServerMetadata', {});
      expect(meta.name).toBe('triton');
      expect(meta.extensions).toContain('binary_tensor_data');
      const h = await unary(health, 'Check', { service: '' });
      expect(h.status).toBe('SERVING');
    });

    it('model metadata, ready, config, statistics', async () => {
      const m = await unary(client, 'ModelMetadata', { name: 'simple', version: '' });
      expect(m).toMatchObject({ name: 'simple', versions: ['1'], platform: 'onnxruntime_onnx' });
      expect(m.inputs[0]).toEqual({ name: 'INPUT0', datatype: 'INT32', shape: [-1, 16] });
      expect((await unary(client, 'ModelReady', { name: 'simple', version: '1' })).ready).toBe(true);
      expect((await unary(client, 'ModelReady', { name: 'nosuchmodel', version: '' })).ready).toBe(false);
      const cfg = await unary(client, 'ModelConfig', { name: 'simple', version: '' });
      expect(cfg.config.name).toBe('simple');
      expect(cfg.config.max_batch_size).toBe(8);
      expect(cfg.config.input[0].data_type).toBe('TYPE_INT32');
      const stats = await unary(client, 'ModelStatistics', { name: 'simple', version: '' });
      expect(stats.model_stats[0].name).toBe('simple');
    });

    it('lookup errors carry Triton status codes and messages', async () => {
      let err = await unaryError(client, 'ModelMetadata', { name: 'nosuchmodel', version: '' });
      expect(err.code).toBe(grpc.status.INVALID_ARGUMENT);
      expect(err.details).toMatch(/^Request for unknown model: 'nosuchmodel' is not found/);
      err = await unaryError(client, 'ModelMetadata', { name: 'simple', version: '7' });
      expect(err.code).toBe(grpc.status.NOT_FOUND);
    });
  });

  describe('ModelInfer', () => {
    it('raw_input_contents in, raw_output_contents out, aligned with outputs', async () => {
      const a = range(16, (i) => i * 2);
      const b = range(16, () => 3);
      const res = await unary(client, 'ModelInfer', simpleRaw(a, b, 'g1'));
      expect(res.id).toBe('g1');
      expect(res.model_version).toBe('1');
      expect(res.outputs.map((o: any) => o.name)).toEqual(['OUTPUT0', 'OUTPUT1']);
      expect(res.outputs[0].shape).toEqual([1, 16]);
      expect(res.raw_output_contents).toHaveLength(2);
      expect(readInt32(res.raw_output_contents[0])).toEqual(a.map((x) => x + 3));
      expect(readInt32(res.raw_output_contents[1])).toEqual(a.map((x) => x - 3));
    });

    it('typed contents for INT32, FP32, BYTES and UINT64', async () => {
      let res = await unary(client, 'ModelInfer', {
        model_name: 'simple',
        inputs: [
          { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], contents: { int_contents: range(16) } },
          { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], contents: { int_contents: range(16) } },
        ],
      });
      expect(readInt32(res.raw_output_contents[0])).toEqual(range(16, (i) => 2 * i));
      res = await unary(client, 'ModelInfer', { model_name: 'identity_fp32', inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 2], contents: { fp32_contents: [0.5, -1] } }] });
      expect(readFp32(res.raw_output_contents[0])).toEqual([0.5, -1]);
      res = await unary(client, 'ModelInfer', { model_name: 'identity_bytes', inputs: [{ name: 'INPUT0', datatype: 'BYTES', shape: [1, 2], contents: { bytes_contents: [Buffer.from('ab'), Buffer.from('')] } }] });
      expect(deserializeStrings(res.raw_output_contents[0])).toEqual(['ab', '']);
      res = await unary(client, 'ModelInfer', { model_name: 'identity_uint64', inputs: [{ name: 'INPUT0', datatype: 'UINT64', shape: [1, 2], contents: { uint64_contents: [1, 2 ** 40] } }] });
      const view = new BigUint64Array(Uint8Array.from(res.raw_output_contents[0]).buffer);
      expect(Array.from(view)).toEqual([1n, 2n ** 40n]);
    });

    it('large tensors pass the default 4 MiB gRPC limit', async () => {
      const n = 2 * 1024 * 1024; // 8 MiB of FP32
      const values = new Float32Array(n).map((_, i) => i % 97);
      const res = await unary(client, 'ModelInfer', { model_name: 'identity_fp32', inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, n] }], raw_input_contents: [Buffer.from(values.buffer)] });
      expect(res.raw_output_contents[0].length).toBe(n * 4);
      expect(new Float32Array(Uint8Array.from(res.raw_output_contents[0]).buffer)[96]).toBe(96);
    });

    it('bad requests are INVALID_ARGUMENT with Triton messages', async () => {
      let err = await unaryError(client, 'ModelInfer', { ...simpleRaw(range(16), range(16)), raw_input_contents: [int32Bytes(range(16))] });
      expect(err.code).toBe(grpc.status.INVALID_ARGUMENT);
      err = await unaryError(client, 'ModelInfer', {
        model_name: 'simple',
        inputs: [
          { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], contents: { fp32_contents: range(16) } },
          { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], contents: { int_contents: range(16) } },
        ],
      });
      expect(err.code).toBe(grpc.status.INVALID_ARGUMENT);
      err = await unaryError(client, 'ModelInfer', { model_name: 'simple', inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1, 16] }, { name: 'INPUT1', datatype: 'INT32', shape: [1, 16] }] });
      expect(err.details).toContain("unable to find data for input tensor 'INPUT0' for model 'simple' in request.");
      err = await unaryError(client, 'ModelInfer', { model_name: 'nosuchmodel', inputs: [] });
      expect(err.details).toMatch(/Request for unknown model/);
    });

    it('raw_input_contents must hold one entry per input that reads one: more or fewer is INVALID_ARGUMENT, unary and streamed', async () => {
      const extra = { ...simpleRaw(range(16), range(16), 'x'), raw_input_contents: [int32Bytes(range(16)), int32Bytes(range(16)), int32Bytes(range(16))] };
      const message = "expected 2 raw_input_contents for model 'simple' (one per input without 'contents' or shared memory), got 3";
      let err = await unaryError(client, 'ModelInfer', extra);
      expect(err.code).toBe(grpc.status.INVALID_ARGUMENT);
      expect(err.details).toBe(message);
      err = await unaryError(client, 'ModelInfer', { ...simpleRaw(range(16), range(16)), raw_input_contents: [int32Bytes(range(16))] });
      expect(err.code).toBe(grpc.status.INVALID_ARGUMENT);
      expect(err.details).toBe("unable to find data for input tensor 'INPUT1' for model 'simple' in request.");
      const [streamed] = await streamInfer(client, [extra]);
      expect(streamed.error_message).toBe(message);
      const ok = await unary(client, 'ModelInfer', simpleRaw(range(16), range(16)));
      expect(readInt32(ok.raw_output_contents[0])).toEqual(range(16).map((v) => 2 * v));
    });

    it('negative and oversized dimensions are INVALID_ARGUMENT before any backend sees them', async () => {
      // [-2,-2] holds "4 elements" by a naive product: the data below would pass a count check and reach ONNX Runtime.
      let err = await unaryError(client, 'ModelInfer', { model_name: 'identity_bytes', inputs: [{ name: 'INPUT0', datatype: 'BYTES', shape: [-2, -2] }], raw_input_contents: [serializeStrings(['a', 'b', 'c', 'd'])] });
      expect(err.code).toBe(grpc.status.INVALID_ARGUMENT);
      expect(err.details).toBe("[request id: <id_unknown>] All input dimensions should be specified for input 'INPUT0' for model 'identity_bytes', got [-2,-2]");
      err = await unaryError(client, 'ModelInfer', { model_name: 'identity_fp32', id: 'n', inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [-2, -2] }], raw_input_contents: [fp32Bytes(range(4))] });
      expect(err.code).toBe(grpc.status.INVALID_ARGUMENT);
      expect(err.details).toBe("[request id: n] All input dimensions should be specified for input 'INPUT0' for model 'identity_fp32', got [-2,-2]");
      err = await unaryError(client, 'ModelInfer', { model_name: 'identity_fp32', inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 2_000_000_000], contents: { fp32_contents: [1] } }] });
      expect(err.code).toBe(grpc.status.INVALID_ARGUMENT);
      expect(err.details).toContain("byte size overflow for input 'INPUT0' for model 'identity_fp32'");
      err = await unaryError(client, 'ModelInfer', { model_name: 'identity_fp32', inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: ['16', '1152921504606846978'] }], raw_input_contents: [fp32Bytes([1])] });
      expect(err.code).toBe(grpc.status.INVALID_ARGUMENT);
      expect(err.details).toContain('causes total element count to exceed maximum size of 9223372036854775807');
      const ok = await unary(client, 'ModelInfer', { model_name: 'identity_fp32', inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 2] }], raw_input_contents: [fp32Bytes([1, 2])] });
      expect(readFp32(ok.raw_output_contents[0])).toEqual([1, 2]);
    });
  });

  describe('ModelStreamInfer', () => {
    it('one response per request, in order, each marked final; errors do not end the stream', async () => {
      const requests = [
        simpleRaw(range(16), range(16), 's1'),
        { model_name: 'nosuchmodel', id: 's2' },
        simpleRaw(range(16, () => 5), range(16), 's3'),
        simpleRaw(range(16), range(16, () => 1), 's4'),
      ];
      const responses = await streamInfer(client, requests, 4);
      expect(responses.map((r) => r.infer_response?.id)).toEqual(['s1', 's2', 's3', 's4']);
      expect(responses[1].error_message).toMatch(/Request for unknown model/);
      expect(responses[0].error_message).toBe('');
      expect(responses[0].infer_response.parameters.triton_final_response.bool_param).toBe(true);
      expect(readInt32(responses[2].infer_response.raw_output_contents[0])).toEqual(range(16, (i) => 5 + i));
    });
  });

  describe('repository and settings RPCs', () => {
    it('index, unload and load', async () => {
      const idx = await unary(client, 'RepositoryIndex', { repository_name: '', ready: true });
      expect(idx.models.map((m: any) => m.name)).toEqual(expect.arrayContaining(MODELS));
      await unary(client, 'RepositoryModelUnload', { model_name: 'identity_fp32', parameters: { unload_dependents: { bool_param: false } } });
      expect((await unary(client, 'ModelReady', { name: 'identity_fp32', version: '' })).ready).toBe(false);
      await unary(client, 'RepositoryModelLoad', { model_name: 'identity_fp32' });
      expect((await unary(client, 'ModelReady', { name: 'identity_fp32', version: '' })).ready).toBe(true);
    });

    it('shared memory refused without --allow-client-shm; CUDA as a GPU-less server', async () => {
      const err = await unaryError(client, 'SystemSharedMemoryRegister', { name: 'r', key: '/r', offset: 0, byte_size: 64 });
      expect(err.code).toBe(grpc.status.UNIMPLEMENTED);
      const status = await unary(client, 'CudaSharedMemoryStatus', { name: '' });
      expect(status.regions).toEqual({});
    });

    it('log settings', async () => {
      const res = await unary(client, 'LogSettings', { settings: {} });
      expect(res.settings.log_verbose_level.uint32_param).toBe(0);
    });
  });

  describe('shutdown', () => {
    it('SIGTERM with streams open: each ends with UNAVAILABLE, and the worker exits at once', async () => {
      const own = await startWorkerProcess({
        modelRepositories: [repo.path],
        args: ['--model-control-mode=explicit', '--load-model=simple', ...(threads > 0 ? [`--grpc-infer-thread-count=${threads}`] : [])],
      });
      const { inference } = loadGrpcClients(own.grpcAddress);
      try {
        const open = () => {
          const call = inference.ModelStreamInfer();
          const got: any[] = [];
          call.on('data', (r: any) => got.push(r));
          const ended = new Promise<{ code: number; details: string }>((resolve) => {
            call.on('error', (e: grpc.ServiceError) => resolve({ code: e.code, details: e.details }));
            call.on('end', () => resolve({ code: grpc.status.OK, details: '' }));
          });
          return { call, got, ended };
        };
        // two streams, each answered once and left open (the client never half-closes)
        const streams = [open(), open()];
        streams.forEach((st, i) => st.call.write(simpleRaw(range(16), range(16, () => 1), `before-${i}`)));
        await expect.poll(() => streams.map((st) => st.got.length)).toEqual([1, 1]);
        const started = Date.now();
        const stopped = own.stop('SIGTERM');
        const shuttingDown = { code: grpc.status.UNAVAILABLE, details: 'the server is shutting down' };
        expect(await Promise.all(streams.map((st) => st.ended))).toEqual([shuttingDown, shuttingDown]);
        expect(streams.map((st) => st.got[0].infer_response.id)).toEqual(['before-0', 'before-1']);
        expect(await stopped).toEqual({ code: 0, signal: null });
        // the drain did not wait for the exit timeout (30 s): nothing was in flight
        expect(Date.now() - started).toBeLessThan(15_000);
      } finally {
        inference.close();
        await own.stop();
      }
    });
  });
});
