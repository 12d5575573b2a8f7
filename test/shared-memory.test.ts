/**
 * System shared memory as tritonclient's shm examples use it: the client creates POSIX regions
 * (files under /dev/shm), registers them, and sends inputs / receives outputs through them over
 * HTTP and gRPC.
 */
import { closeSync, ftruncateSync, mkdtempSync, openSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startWorkerProcess, type WorkerProcess } from '@switchyard/testing';
import { loadGrpcClients, unary, unaryError, type GrpcClient } from './lib/grpc-client.js';
import { get, int32Bytes, post, range, readInt32 } from './lib/tensors.js';

const tag = `sy_${process.pid}`;
const inKey = `/${tag}_in`;
const outKey = `/${tag}_out`;
let worker: WorkerProcess;
let client: GrpcClient;

beforeAll(async () => {
  // Inputs: INPUT0 at 0, INPUT1 at 64. Outputs: OUTPUT0 at 0, OUTPUT1 at 64.
  writeFileSync(`/dev/shm${inKey}`, Buffer.concat([int32Bytes(range(16, (i) => i * 10)), int32Bytes(range(16, () => 2))]));
  const fd = openSync(`/dev/shm${outKey}`, 'w');
  writeFileSync(fd, Buffer.alloc(128));
  closeSync(fd);
  worker = await startWorkerProcess({
    modelRepositories: ['test/fixtures/model_repository'],
    args: ['--model-control-mode=explicit', '--load-model=simple', '--allow-client-shm=true'],
  });
  ({ inference: client } = loadGrpcClients(worker.grpcAddress));
});
afterAll(async () => {
  client?.close();
  await worker?.stop();
  rmSync(`/dev/shm${inKey}`, { force: true });
  rmSync(`/dev/shm${outKey}`, { force: true });
});

const expected0 = range(16, (i) => i * 10 + 2);
const expected1 = range(16, (i) => i * 10 - 2);

describe('system shared memory over HTTP', () => {
  it('register, status, infer through regions, unregister', async () => {
    expect((await post(`${worker.httpUrl}/v2/systemsharedmemory/region/in/register`, { key: inKey, offset: 0, byte_size: 128 })).status).toBe(200);
    expect((await post(`${worker.httpUrl}/v2/systemsharedmemory/region/out/register`, { key: outKey, offset: 0, byte_size: 128 })).status).toBe(200);
    const dup = await post(`${worker.httpUrl}/v2/systemsharedmemory/region/in/register`, { key: inKey, offset: 0, byte_size: 128 });
    expect(dup.status).toBe(400);
    expect(dup.json().error).toContain("shared memory region 'in' already in manager");
    const status = (await get(`${worker.httpUrl}/v2/systemsharedmemory/status`)).json();
    expect(status).toEqual(expect.arrayContaining([{ name: 'in', key: inKey, offset: 0, byte_size: 128 }]));

    const r = await post(`${worker.httpUrl}/v2/models/simple/infer`, {
      inputs: [
        { name: 'INPUT0', shape: [1, 16], datatype: 'INT32', parameters: { shared_memory_region: 'in', shared_memory_byte_size: 64, shared_memory_offset: 0 } },
        { name: 'INPUT1', shape: [1, 16], datatype: 'INT32', parameters: { shared_memory_region: 'in', shared_memory_byte_size: 64, shared_memory_offset: 64 } },
      ],
      outputs: [
        { name: 'OUTPUT0', parameters: { shared_memory_region: 'out', shared_memory_byte_size: 64, shared_memory_offset: 0 } },
        { name: 'OUTPUT1', parameters: { shared_memory_region: 'out', shared_memory_byte_size: 64, shared_memory_offset: 64 } },
      ],
    });
    expect(r.status, r.body.toString()).toBe(200);
    const body = r.json();
    expect(body.outputs[0]).toEqual({ name: 'OUTPUT0', datatype: 'INT32', shape: [1, 16] });
    const out = readFileSync(`/dev/shm${outKey}`);
    expect(readInt32(out.subarray(0, 64))).toEqual(expected0);
    expect(readInt32(out.subarray(64, 128))).toEqual(expected1);

    const missing = await post(`${worker.httpUrl}/v2/models/simple/infer`, {
      inputs: ['INPUT0', 'INPUT1'].map((name) => ({ name, shape: [1, 16], datatype: 'INT32', parameters: { shared_memory_region: 'nope', shared_memory_byte_size: 64 } })),
    });
    expect(missing.status).toBeGreaterThanOrEqual(400);
    expect(missing.json().error).toContain("Unable to find shared memory region: 'nope'");

    expect((await post(`${worker.httpUrl}/v2/systemsharedmemory/region/in/unregister`, undefined)).status).toBe(200);
    expect((await get(`${worker.httpUrl}/v2/systemsharedmemory/region/in/status`)).status).toBe(404);
    expect((await post(`${worker.httpUrl}/v2/systemsharedmemory/unregister`, undefined)).status).toBe(200);
    expect((await get(`${worker.httpUrl}/v2/systemsharedmemory/status`)).json()).toEqual([]);
  });

  it('an output offset + byte size past 2^64-1 is Triton\'s integer overflow 400 (qa L0_shared_memory test_infer_integer_overflow)', async () => {
    expect((await post(`${worker.httpUrl}/v2/systemsharedmemory/region/in/register`, { key: inKey, offset: 0, byte_size: 128 })).status).toBe(200);
    expect((await post(`${worker.httpUrl}/v2/systemsharedmemory/region/out/register`, { key: outKey, offset: 0, byte_size: 128 })).status).toBe(200);
    try {
      // The JSON tritonclient writes: a uint64 literal no JavaScript number holds exactly.
      const body = (byteSize: string, offset: number) =>
        JSON.stringify({
          inputs: [
            { name: 'INPUT0', shape: [1, 16], datatype: 'INT32', parameters: { shared_memory_region: 'in', shared_memory_byte_size: 64, shared_memory_offset: 0 } },
            { name: 'INPUT1', shape: [1, 16], datatype: 'INT32', parameters: { shared_memory_region: 'in', shared_memory_byte_size: 64, shared_memory_offset: 64 } },
          ],
          outputs: [
            { name: 'OUTPUT0', parameters: { shared_memory_region: 'out', shared_memory_byte_size: 0, shared_memory_offset: offset } },
            { name: 'OUTPUT1', parameters: { shared_memory_region: 'out', shared_memory_byte_size: 64, shared_memory_offset: 64 } },
          ],
        }).replace('"shared_memory_byte_size":0', `"shared_memory_byte_size":${byteSize}`);
      let r = await post(`${worker.httpUrl}/v2/models/simple/infer`, body('18446744073709551584', 32));
      expect([r.status, r.json().error]).toEqual([
        400,
        "Integer overflow detected: byte_size (18446744073709551584) + offset (32) exceeds maximum value (18446744073709551615) for region 'out'",
      ]);
      // One byte less overflows nothing: it is out of the region's bounds.
      r = await post(`${worker.httpUrl}/v2/models/simple/infer`, body('18446744073709551583', 32));
      expect([r.status, r.json().error]).toEqual([400, "Invalid offset + byte size for shared memory region: 'out'"]);
      // Past uint64 it is not an unsigned integer at all.
      r = await post(`${worker.httpUrl}/v2/models/simple/infer`, body('18446744073709551616', 32));
      expect(r.json().error).toBe("Unable to parse 'shared_memory_byte_size': attempt to access JSON non-unsigned-integer as unsigned-integer");
      expect((await post(`${worker.httpUrl}/v2/models/simple/infer`, body('64', 0))).status).toBe(200);
    } finally {
      await post(`${worker.httpUrl}/v2/systemsharedmemory/unregister`, undefined);
    }
  });

  it('a shared_memory_byte_size past the 4 GiB tensor bound is a 400 before anything is read', async () => {
    // A sparse 4.5 GiB region (tmpfs allocates nothing until written).
    const bigKey = `/${tag}_big`;
    const size = 4.5 * 2 ** 30;
    const fd = openSync(`/dev/shm${bigKey}`, 'w');
    try {
      ftruncateSync(fd, size);
      expect((await post(`${worker.httpUrl}/v2/systemsharedmemory/region/big/register`, { key: bigKey, offset: 0, byte_size: size })).status).toBe(200);
      const r = await post(`${worker.httpUrl}/v2/models/simple/infer`, {
        inputs: ['INPUT0', 'INPUT1'].map((name) => ({ name, shape: [1, 16], datatype: 'INT32', parameters: { shared_memory_region: 'big', shared_memory_byte_size: size } })),
      });
      expect(r.status).toBe(400);
      expect(r.json().error).toMatch(
        new RegExp(`^\\[request id: <id_unknown>\\] byte size overflow for input 'INPUT0' for model 'simple': shared_memory_byte_size ${size}, more than the maximum of \\d+$`),
      );
    } finally {
      closeSync(fd);
      await post(`${worker.httpUrl}/v2/systemsharedmemory/region/big/unregister`, undefined);
      rmSync(`/dev/shm${bigKey}`, { force: true });
    }
  });

  it('CUDA shared memory answers as a server without GPUs', async () => {
    expect((await get(`${worker.httpUrl}/v2/cudasharedmemory/status`)).json()).toEqual([]);
    expect((await post(`${worker.httpUrl}/v2/cudasharedmemory/unregister`, undefined)).status).toBe(200);
    const r = await post(`${worker.httpUrl}/v2/cudasharedmemory/region/g/register`, { raw_handle: { b64: 'AAAA' }, device_id: 0, byte_size: 64 });
    expect(r.status).toBe(400);
    expect(r.json().error).toContain('GPUs not supported');
  });
});

describe('system shared memory over gRPC', () => {
  it('register, infer through regions with empty raw_output_contents entries, unregister', async () => {
    writeFileSync(`/dev/shm${outKey}`, Buffer.alloc(128));
    await unary(client, 'SystemSharedMemoryRegister', { name: 'gin', key: inKey, offset: 0, byte_size: 128 });
    await unary(client, 'SystemSharedMemoryRegister', { name: 'gout', key: outKey, offset: 0, byte_size: 128 });
    const status = await unary(client, 'SystemSharedMemoryStatus', { name: '' });
    expect(status.regions.gin).toMatchObject({ name: 'gin', key: inKey, byte_size: 128 });
    const shm = (region: string, offset: number) => ({
      shared_memory_region: { string_param: region },
      shared_memory_byte_size: { int64_param: 64 },
      shared_memory_offset: { int64_param: offset },
    });
    const res = await unary(client, 'ModelInfer', {
      model_name: 'simple',
      inputs: [
        { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], parameters: shm('gin', 0) },
        { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], parameters: shm('gin', 64) },
      ],
      outputs: [
        { name: 'OUTPUT0', parameters: shm('gout', 0) },
        { name: 'OUTPUT1', parameters: shm('gout', 64) },
      ],
    });
    expect(res.raw_output_contents.map((b: Buffer) => b.length)).toEqual([0, 0]);
    const out = readFileSync(`/dev/shm${outKey}`);
    expect(readInt32(out.subarray(0, 64))).toEqual(expected0);
    expect(readInt32(out.subarray(64, 128))).toEqual(expected1);
    await unary(client, 'SystemSharedMemoryUnregister', { name: '' });
    const err = await unaryError(client, 'SystemSharedMemoryStatus', { name: 'gin' });
    expect(err.details).toContain("Unable to find system shared memory region: 'gin'");
  });
});

describe('system shared memory refuses what could escape /dev/shm or overflow', () => {
  it('a symlink planted in /dev/shm is not followed: the file it points to is neither read nor written', async () => {
    const outside = mkdtempSync(join(tmpdir(), 'sy-shm-'));
    const secret = join(outside, 'secret');
    writeFileSync(secret, Buffer.alloc(128, 7));
    const link = `/${tag}_link`;
    symlinkSync(secret, `/dev/shm${link}`);
    try {
      for (const key of [link, `/${tag}_link/`, `/../${outside.slice(1)}/secret`, '/..']) {
        const r = await post(`${worker.httpUrl}/v2/systemsharedmemory/region/evil/register`, { key, offset: 0, byte_size: 128 });
        expect([r.status, r.json()], key).toEqual([500, { error: `Unable to open shared memory region: '${key}'` }]);
      }
      const err = await unaryError(client, 'SystemSharedMemoryRegister', { name: 'evil', key: link, offset: 0, byte_size: 128 });
      expect([err.code, err.details]).toEqual([13, `Unable to open shared memory region: '${link}'`]);
      expect((await get(`${worker.httpUrl}/v2/systemsharedmemory/status`)).json()).toEqual([]);
      expect(readFileSync(secret)).toEqual(Buffer.alloc(128, 7));
    } finally {
      rmSync(`/dev/shm${link}`, { force: true });
      rmSync(outside, { recursive: true, force: true });
    }
  });

  it('a tensor read above 2 GiB from a registered region is a 400, and the worker keeps serving', async () => {
    // A sparse 3 GiB object: registering it is allowed, reading a 3 GiB tensor from it is not.
    const bigKey = `/${tag}_big`;
    const fd = openSync(`/dev/shm${bigKey}`, 'w');
    ftruncateSync(fd, 3 * 2 ** 30);
    closeSync(fd);
    try {
      expect((await post(`${worker.httpUrl}/v2/systemsharedmemory/region/big/register`, { key: bigKey, offset: 0, byte_size: 3 * 2 ** 30 })).status).toBe(200);
      const tooBig = 3 * 2 ** 30;
      const infer = (datatype: string, shape: number[]) =>
        post(`${worker.httpUrl}/v2/models/simple/infer`, {
          inputs: ['INPUT0', 'INPUT1'].map((name) => ({ name, shape, datatype, parameters: { shared_memory_region: 'big', shared_memory_byte_size: tooBig } })),
        });
      // A fixed-size input must fit its shape exactly (Triton's check), before anything is read.
      const mismatch = await infer('INT32', [1, 16]);
      expect([mismatch.status, mismatch.json()]).toEqual([400, { error: `unexpected total byte size ${tooBig} for input 'INPUT0', expecting 64` }]);
      // A shape that does claim 3 GiB, or BYTES, meets the 2 GiB cap.
      const capped = { error: `shared memory region 'big': a tensor of ${tooBig} bytes exceeds the largest this server reads from shared memory (2147483647 bytes)` };
      for (const [datatype, shape] of [['INT32', [1, tooBig / 4]], ['BYTES', [1, 1]]] as const) {
        const r = await infer(datatype, [...shape]);
        expect([r.status, r.json()], datatype).toEqual([400, capped]);
      }
      const shm = { shared_memory_region: { string_param: 'big' }, shared_memory_byte_size: { int64_param: tooBig } };
      const err = await unaryError(client, 'ModelInfer', {
        model_name: 'simple',
        inputs: ['INPUT0', 'INPUT1'].map((name) => ({ name, datatype: 'INT32', shape: [1, tooBig / 4], parameters: shm })),
      });
      expect([err.code, err.details]).toEqual([3, capped.error]);
      expect((await get(`${worker.httpUrl}/v2/health/live`)).status).toBe(200);
    } finally {
      await post(`${worker.httpUrl}/v2/systemsharedmemory/region/big/unregister`, undefined);
      rmSync(`/dev/shm${bigKey}`, { force: true });
    }
  });
});
