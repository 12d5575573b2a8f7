import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { status, type ServiceError } from '@grpc/grpc-js';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { capacityExhausted, deadlineExceeded, SwitchyardError } from '@switchyard/common';
import { ServerSettings } from '../settings.js';
import { SharedMemoryManager } from '../shared-memory.js';
import { FakeEngine } from '../test-support/fake-engine.js';
import { createGrpcServer, type GrpcFrontDoor } from './grpc-server.js';
import { grpcStatusFor } from './grpc-status.js';
import { createTestClient, type TestClient } from './grpc-test-client.js';

const int32Bytes = (...v: number[]): Buffer => Buffer.from(Int32Array.from(v).buffer);
const readInt32 = (b: Uint8Array): number[] => Array.from(new Int32Array(Uint8Array.from(b).buffer));

async function expectStatus(p: Promise<unknown>, code: status, details: string): Promise<void> {
  const err = (await p.then(
    () => undefined,
    (e: unknown) => e,
  )) as ServiceError | undefined;
  expect(err, `expected ${status[code]}: ${details}`).toBeDefined();
  expect(status[err?.code ?? status.OK]).toBe(status[code]);
  expect(err?.details).toBe(details);
}

describe('grpc status mapping', () => {
  it('maps every error code', () => {
    expect(grpcStatusFor('invalid_argument')).toBe(status.INVALID_ARGUMENT);
    expect(grpcStatusFor('not_found')).toBe(status.NOT_FOUND);
    expect(grpcStatusFor('unavailable')).toBe(status.UNAVAILABLE);
    expect(grpcStatusFor('capacity_exhausted')).toBe(status.UNAVAILABLE);
    expect(grpcStatusFor('deadline_exceeded')).toBe(status.UNAVAILABLE);
    expect(grpcStatusFor('unsupported')).toBe(status.UNIMPLEMENTED);
    expect(grpcStatusFor('already_exists')).toBe(status.ALREADY_EXISTS);
    expect(grpcStatusFor('cancelled')).toBe(status.CANCELLED);
    expect(grpcStatusFor('internal')).toBe(status.INTERNAL);
    expect(grpcStatusFor('unknown')).toBe(status.UNKNOWN);
  });
});

describe('gRPC front door', () => {
  const engine = new FakeEngine();
  const shmDir = fs.mkdtempSync(path.join(os.tmpdir(), 'sy-grpc-shm-'));
  const shm = new SharedMemoryManager({ enabled: true, shmDir });
  const settings = new ServerSettings();
  let door: GrpcFrontDoor;
  let client: TestClient;

  beforeAll(async () => {
    door = createGrpcServer({ engine, shm, settings, port: 0, host: '127.0.0.1', shutdownTimeoutMs: 1000 });
    client = createTestClient(await door.listen());
  });
  afterAll(async () => {
    client.close();
    await door.close();
    shm.close();
    fs.rmSync(shmDir, { recursive: true, force: true });
  });
  afterEach(() => {
    engine.ready = true;
  });

  describe('health and metadata', () => {
    it('answers liveness, readiness and the health service', async () => {
      expect(await client.call('ServerLive')).toEqual({ live: true });
      expect(await client.call('ServerReady')).toEqual({ ready: true });
      expect(await client.health()).toEqual({ status: 'SERVING' });
      engine.ready = false;
      expect(await client.call('ServerReady')).toEqual({ ready: false });
      expect(await client.health()).toEqual({ status: 'NOT_SERVING' });
    });

    it('answers ModelReady with OK and ready=false for unknown models', async () => {
      expect(await client.call('ModelReady', { name: 'simple' })).toEqual({ ready: true });
      expect(await client.call('ModelReady', { name: 'simple', version: '1' })).toEqual({ ready: true });
      expect(await client.call('ModelReady', { name: 'nope' })).toEqual({ ready: false });
      await expectStatus(
        client.call('ModelReady', { name: 'simple', version: 'one' }),
        status.INVALID_ARGUMENT,
        "failed to get model version from specified version string 'one' (details: stol), version should be an integral value > 0",
      );
    });

    it('serves server and model metadata', async () => {
      expect(await client.call('ServerMetadata')).toEqual({ name: 'triton', version: '2.73.0', extensions: ['classification', 'binary_tensor_data'] });
      expect(await client.call('ModelMetadata', { name: 'simple' })).toEqual({
        name: 'simple',
        versions: ['1'],
        platform: 'fake',
        inputs: [
          { name: 'INPUT0', datatype: 'INT32', shape: ['-1', '16'] },
          { name: 'INPUT1', datatype: 'INT32', shape: ['-1', '16'] },
        ],
        outputs: [
          { name: 'OUTPUT0', datatype: 'INT32', shape: ['-1', '16'] },
          { name: 'OUTPUT1', datatype: 'INT32', shape: ['-1', '16'] },
        ],
      });
      await expectStatus(client.call('ModelMetadata', { name: 'nope' }), status.INVALID_ARGUMENT, "Request for unknown model: 'nope' is not found");
    });

    it('serves the model config as the proto message', async () => {
      const res = await client.call<{ config: Record<string, unknown> }>('ModelConfig', { name: 'repeat' });
      expect(res.config['name']).toBe('repeat');
      expect(res.config['max_batch_size']).toBe(8);
      expect(res.config['version_policy']).toEqual({ latest: { num_versions: 1 }, policy_choice: 'latest' });
      expect(res.config['model_transaction_policy']).toEqual({ decoupled: true });
      const input = (res.config['input'] as Record<string, unknown>[])[0];
      expect(input?.['data_type']).toBe('TYPE_INT32');
      expect(input?.['dims']).toEqual(['-1']);
    });

    it('serves statistics', async () => {
      const res = await client.call<{ model_stats: Record<string, unknown>[] }>('ModelStatistics', { name: 'simple', version: '1' });
      expect(res.model_stats[0]?.['name']).toBe('simple');
      expect(res.model_stats[0]?.['inference_count']).toBe('3');
      expect(res.model_stats[0]?.['last_inference']).toBe('1700000000000');
      expect(engine.calls.at(-1)).toEqual({ method: 'modelStatistics', args: ['simple', 1] });
      await client.call('ModelStatistics', {});
      expect(engine.calls.at(-1)).toEqual({ method: 'modelStatistics', args: [undefined, undefined] });
    });
  });

  describe('repository', () => {
    it('lists the index', async () => {
      const ready = (name: string) => ({ name, version: '1', state: 'READY', reason: '' });
      const res = await client.call('RepositoryIndex', { ready: false });
      expect(res).toEqual({ models: [...[...engine.models.keys()].map(ready), { name: 'never_loaded', version: '', state: '', reason: '' }] });
      expect(engine.calls.at(-1)).toEqual({ method: 'repositoryIndex', args: [false] });
      expect(await client.call('RepositoryIndex', { ready: true })).toEqual({ models: [...engine.models.keys()].map(ready) });
      expect(engine.calls.at(-1)).toEqual({ method: 'repositoryIndex', args: [true] });
      await expectStatus(client.call('RepositoryIndex', { repository_name: 'r' }), status.UNIMPLEMENTED, "'repository_name' specification is not supported");
    });

    it('loads with config and file overrides', async () => {
      await client.call('RepositoryModelLoad', {
        model_name: 'm',
        parameters: { config: { string_param: '{"max_batch_size":16}' }, 'file:1/model.onnx': { bytes_param: Buffer.from([1, 2, 3]) } },
      });
      const [name, options] = engine.calls.at(-1)?.args as [string, { config: string; files: Map<string, Uint8Array> }];
      expect(name).toBe('m');
      expect(options.config).toBe('{"max_batch_size":16}');
      expect(Array.from(options.files.get('1/model.onnx') ?? [])).toEqual([1, 2, 3]);
      await expectStatus(
        client.call('RepositoryModelLoad', { model_name: 'm', parameters: { other: { bool_param: true } } }),
        status.INVALID_ARGUMENT,
        "unrecognized load parameter 'other'.",
      );
      await expectStatus(
        client.call('RepositoryModelLoad', { model_name: 'm', parameters: { config: { bytes_param: Buffer.from('{}') } } }),
        status.INVALID_ARGUMENT,
        "invalid value type for load parameter 'config', expected string_param.",
      );
    });

    it('unloads with unload_dependents', async () => {
      await client.call('RepositoryModelUnload', { model_name: 'm', parameters: { unload_dependents: { bool_param: true } } });
      expect(engine.calls.at(-1)).toEqual({ method: 'unloadModel', args: ['m', { unloadDependents: true }] });
      await client.call('RepositoryModelUnload', { model_name: 'm' });
      expect(engine.calls.at(-1)).toEqual({ method: 'unloadModel', args: ['m', { unloadDependents: false }] });
    });
  });

  describe('ModelInfer', () => {
    const simpleRequest = (extra: object = {}): object => ({
      model_name: 'simple',
      id: 'r1',
      inputs: [
        { name: 'INPUT0', datatype: 'INT32', shape: [1, 3] },
        { name: 'INPUT1', datatype: 'INT32', shape: [1, 3] },
      ],
      raw_input_contents: [int32Bytes(1, 2, 3), int32Bytes(10, 20, 30)],
      ...extra,
    });

    it('infers with raw_input_contents and answers raw_output_contents aligned by index', async () => {
      const res = await client.call<Record<string, unknown>>('ModelInfer', simpleRequest());
      expect(res['id']).toBe('r1');
      expect(res['model_name']).toBe('simple');
      expect(res['model_version']).toBe('1');
      expect(res['outputs']).toEqual([
        { name: 'OUTPUT0', datatype: 'INT32', shape: ['1', '3'], parameters: {}, contents: null },
        { name: 'OUTPUT1', datatype: 'INT32', shape: ['1', '3'], parameters: {}, contents: null },
      ]);
      const raw = res['raw_output_contents'] as Buffer[];
      expect(readInt32(raw[0] ?? Buffer.alloc(0))).toEqual([11, 22, 33]);
      expect(readInt32(raw[1] ?? Buffer.alloc(0))).toEqual([-9, -18, -27]);
    });

    it('accepts typed contents', async () => {
      const res = await client.call<Record<string, unknown>>('ModelInfer', {
        model_name: 'simple',
        inputs: [
          { name: 'INPUT0', datatype: 'INT32', shape: [2], contents: { int_contents: [5, 6] } },
          { name: 'INPUT1', datatype: 'INT32', shape: [2], contents: { int_contents: [1, 1] } },
        ],
      });
      expect(res['id']).toBe('');
      expect(readInt32((res['raw_output_contents'] as Buffer[])[0] ?? Buffer.alloc(0))).toEqual([6, 7]);
    });

    it('applies classification to requested outputs', async () => {
      const res = await client.call<Record<string, unknown>>(
        'ModelInfer',
        simpleRequest({ outputs: [{ name: 'OUTPUT0', parameters: { classification: { int64_param: 2 } } }, { name: 'OUTPUT1' }] }),
      );
      const outputs = res['outputs'] as Record<string, unknown>[];
      expect(outputs[0]?.['datatype']).toBe('BYTES');
      expect(outputs[0]?.['shape']).toEqual(['1', '2']);
      const raw = (res['raw_output_contents'] as Buffer[])[0] ?? Buffer.alloc(0);
      expect(raw.subarray(4, 8).toString()).toBe('33:2');
      expect(outputs[1]?.['datatype']).toBe('INT32');
    });

    it('renders errors as gRPC statuses', async () => {
      await expectStatus(
        client.call('ModelInfer', simpleRequest({ model_version: 'x' })),
        status.INVALID_ARGUMENT,
        "failed to get model version from specified version string 'x' (details: stol), version should be an integral value > 0",
      );
      await expectStatus(client.call('ModelInfer', simpleRequest({ model_name: 'nope' })), status.INVALID_ARGUMENT, "Request for unknown model: 'nope' is not found");
      await expectStatus(
        client.call('ModelInfer', { model_name: 'repeat', inputs: [] }),
        status.UNIMPLEMENTED,
        "ModelInfer RPC doesn't support models with decoupled transaction policy",
      );
      await expectStatus(
        client.call('ModelInfer', simpleRequest({ raw_input_contents: [int32Bytes(1, 2, 3)] })),
        status.INVALID_ARGUMENT,
        "unable to find data for input tensor 'INPUT1' for model 'simple' in request.",
      );
      await expectStatus(client.call('ModelInfer', { model_name: 'fail' }), status.INTERNAL, 'backend failed');
      engine.failWith = capacityExhausted('Exceeds maximum queue size');
      await expectStatus(client.call('ModelInfer', { model_name: 'fail' }), status.UNAVAILABLE, 'Exceeds maximum queue size');
      engine.failWith = deadlineExceeded('Request timeout expired');
      await expectStatus(client.call('ModelInfer', { model_name: 'fail' }), status.UNAVAILABLE, 'Request timeout expired');
      engine.failWith = new SwitchyardError('unsupported', 'nope');
      await expectStatus(client.call('ModelInfer', { model_name: 'fail' }), status.UNIMPLEMENTED, 'nope');
    });

    it('carries messages larger than 4 MiB both ways', async () => {
      const big = Buffer.alloc(5 * 1024 * 1024 + 3);
      for (let i = 0; i < big.length; i += 4096) big[i] = i % 251;
      const res = await client.call<Record<string, unknown>>('ModelInfer', {
        model_name: 'identity',
        inputs: [{ name: 'BLOB', datatype: 'UINT8', shape: [big.length] }],
        raw_input_contents: [big],
      });
      const out = (res['raw_output_contents'] as Buffer[])[0];
      expect(out?.length).toBe(big.length);
      expect(out?.equals(big)).toBe(true);
    });

    it('aborts the engine request when the client cancels', async () => {
      const call = client.start('ModelInfer', { model_name: 'slow', id: 'to-cancel', inputs: [] });
      await waitFor(() => engine.signals.has('to-cancel'));
      const signal = engine.signals.get('to-cancel');
      call.cancel();
      await expectStatus(call.result, status.CANCELLED, 'Cancelled on client');
      await waitFor(() => signal?.aborted === true);
      expect(signal?.aborted).toBe(true);
    });
  });

  describe('shared memory', () => {
    it('registers, reports, serves inference and unregisters system regions', async () => {
      fs.writeFileSync(path.join(shmDir, 'in_region'), Buffer.concat([Buffer.alloc(8), int32Bytes(1, 2), int32Bytes(3, 4)]));
      fs.writeFileSync(path.join(shmDir, 'out_region'), Buffer.alloc(16));
      await client.call('SystemSharedMemoryRegister', { name: 'in', key: '/in_region', offset: 8, byte_size: 16 });
      await client.call('SystemSharedMemoryRegister', { name: 'out', key: '/out_region', byte_size: 16 });
      await expectStatus(
        client.call('SystemSharedMemoryRegister', { name: 'in', key: '/in_region', byte_size: 4 }),
        status.ALREADY_EXISTS,
        "shared memory region 'in' already in manager",
      );
      expect(await client.call('SystemSharedMemoryStatus', { name: 'in' })).toEqual({
        regions: { in: { name: 'in', key: '/in_region', offset: '8', byte_size: '16' } },
      });
      const shmParams = (region: string, size: number, offset = 0): object => ({
        shared_memory_region: { string_param: region },
        shared_memory_byte_size: { int64_param: size },
        shared_memory_offset: { int64_param: offset },
      });
      const res = await client.call<Record<string, unknown>>('ModelInfer', {
        model_name: 'simple',
        inputs: [
          { name: 'INPUT0', datatype: 'INT32', shape: [2], parameters: shmParams('in', 8, 0) },
          { name: 'INPUT1', datatype: 'INT32', shape: [2], parameters: shmParams('in', 8, 8) },
        ],
        outputs: [{ name: 'OUTPUT0', parameters: shmParams('out', 8) }, { name: 'OUTPUT1' }],
      });
      const raw = res['raw_output_contents'] as Buffer[];
      expect(raw[0]?.length).toBe(0);
      expect(readInt32(raw[1] ?? Buffer.alloc(0))).toEqual([-2, -2]);
      expect(readInt32(fs.readFileSync(path.join(shmDir, 'out_region')).subarray(0, 8))).toEqual([4, 6]);
      await expectStatus(
        client.call('ModelInfer', { model_name: 'simple', inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [2], parameters: shmParams('ghost', 8) }] }),
        status.NOT_FOUND,
        "Unable to find shared memory region: 'ghost'",
      );
      await client.call('SystemSharedMemoryUnregister', { name: 'in' });
      await client.call('SystemSharedMemoryUnregister', {});
      expect(await client.call('SystemSharedMemoryStatus', {})).toEqual({ regions: {} });
    });

    it('answers CUDA shared memory as a server without GPUs', async () => {
      await expectStatus(
        client.call('CudaSharedMemoryRegister', { name: 'c', raw_handle: Buffer.alloc(64), device_id: 0, byte_size: 4 }),
        status.INVALID_ARGUMENT,
        "failed to register CUDA shared memory region: 'c', GPUs not supported",
      );
      expect(await client.call('CudaSharedMemoryStatus', {})).toEqual({ regions: {} });
      await expectStatus(client.call('CudaSharedMemoryStatus', { name: 'c' }), status.NOT_FOUND, "Unable to find cuda shared memory region: 'c'");
      expect(await client.call('CudaSharedMemoryUnregister', {})).toEqual({});
      expect(await client.call('CudaSharedMemoryUnregister', { name: 'c' })).toEqual({});
    });
  });

  describe('trace and log settings', () => {
    it('reads and updates trace settings', async () => {
      const res = await client.call<{ settings: Record<string, { value: string[] }> }>('TraceSetting', {});
      expect(res.settings['trace_level']).toEqual({ value: ['OFF'] });
      expect(res.settings['trace_rate']).toEqual({ value: ['1000'] });
      // Triton refuses a setting that would trace without a trace file (TraceSetting::Valid).
      await expectStatus(
        client.call('TraceSetting', { model_name: 'simple', settings: { trace_level: { value: ['TIMESTAMPS'] } } }),
        status.INVALID_ARGUMENT,
        'Attempting to set invalid trace setting :trace file name is not given',
      );
      const updated = await client.call<{ settings: Record<string, { value: string[] }> }>('TraceSetting', {
        model_name: 'simple',
        settings: { trace_level: { value: ['OFF'] }, trace_rate: { value: ['5'] } },
      });
      expect(updated.settings['trace_level']).toEqual({ value: ['OFF'] });
      expect(updated.settings['trace_rate']).toEqual({ value: ['5'] });
      await expectStatus(client.call('TraceSetting', { model_name: 'nope' }), status.INVALID_ARGUMENT, 'Request for unknown model : nope');
      await expectStatus(
        client.call('TraceSetting', { settings: { trace_file: { value: ['x'] } } }),
        status.UNIMPLEMENTED,
        'trace file location can not be updated through network protocol',
      );
    });

    it('reads and updates log settings', async () => {
      expect(await client.call('LogSettings', {})).toEqual({
        settings: {
          log_file: { string_param: '', parameter_choice: 'string_param' },
          log_info: { bool_param: true, parameter_choice: 'bool_param' },
          log_warning: { bool_param: true, parameter_choice: 'bool_param' },
          log_error: { bool_param: true, parameter_choice: 'bool_param' },
          log_verbose_level: { uint32_param: 0, parameter_choice: 'uint32_param' },
          log_format: { string_param: 'default', parameter_choice: 'string_param' },
        },
      });
      const res = await client.call<{ settings: Record<string, Record<string, unknown>> }>('LogSettings', {
        settings: { log_verbose_level: { uint32_param: 2 }, log_info: { bool_param: false } },
      });
      expect(res.settings['log_verbose_level']?.['uint32_param']).toBe(2);
      expect(res.settings['log_info']?.['bool_param']).toBe(false);
      await expectStatus(client.call('LogSettings', { settings: { log_info: { uint32_param: 1 } } }), status.INVALID_ARGUMENT, "expect boolean for 'log_info'");
      await expectStatus(
        client.call('LogSettings', { settings: { log_file: { string_param: 'x' } } }),
        status.UNIMPLEMENTED,
        'log file location can not be updated through network protocol',
      );
    });
  });
});

async function waitFor(cond: () => boolean, timeoutMs = 2000): Promise<void> {
  const start = Date.now();
  while (!cond()) {
    if (Date.now() - start > timeoutMs) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 5));
  }
}

describe('gRPC front door with client shared memory disabled', () => {
  it('refuses registration and shm inference with Triton message', async () => {
    const shm = new SharedMemoryManager({ enabled: false });
    const door = createGrpcServer({ engine: new FakeEngine(), shm, settings: new ServerSettings(), port: 0, host: '127.0.0.1' });
    const client = createTestClient(await door.listen());
    const message = "Client shared memory is disabled. Start the server with '--allow-client-shm=true' to enable.";
    try {
      await expectStatus(client.call('SystemSharedMemoryRegister', { name: 'r', key: '/k', byte_size: 4 }), status.UNIMPLEMENTED, message);
      await expectStatus(
        client.call('ModelInfer', {
          model_name: 'simple',
          inputs: [
            {
              name: 'INPUT0',
              datatype: 'INT32',
              shape: [1],
              parameters: { shared_memory_region: { string_param: 'r' }, shared_memory_byte_size: { int64_param: 4 } },
            },
          ],
        }),
        status.UNIMPLEMENTED,
        message,
      );
      expect(await client.call('SystemSharedMemoryStatus', {})).toEqual({ regions: {} });
    } finally {
      client.close();
      await door.close();
    }
  });
});

describe('--grpc-max-connection-age', () => {
  it('sends GOAWAY to a connection older than the age; none without it', async () => {
    const { connect } = await import('node:http2');
    const goawayWithin = async (options: { maxConnectionAgeMs?: number }, ms: number): Promise<boolean> => {
      const server = createGrpcServer({ engine: new FakeEngine(), shm: new SharedMemoryManager({ enabled: false }), settings: new ServerSettings(), port: 0, host: '127.0.0.1', ...options });
      const port = await server.listen();
      const session = connect(`http://127.0.0.1:${port}`);
      try {
        return await new Promise<boolean>((resolve) => {
          session.once('goaway', () => resolve(true));
          setTimeout(() => resolve(false), ms);
        });
      } finally {
        session.destroy();
        await server.close();
      }
    };
    expect(await goawayWithin({ maxConnectionAgeMs: 100 }, 3000)).toBe(true);
    expect(await goawayWithin({}, 500)).toBe(false);
  });
});
