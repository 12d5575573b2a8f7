/**
 * System shared memory as tritonclient's shm examples use it: the client creates POSIX regions
 * (files under /dev/shm), registers them, and sends inputs / receives outputs through them over
 * HTTP and gRPC.
 */
import { closeSync, existsSync, ftruncateSync, mkdtempSync, openSync, readdirSync, readFileSync, readlinkSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startWorkerProcess, type WorkerProcess } from '@switchyard/testing';
import { loadGrpcClients, streamInfer, unary, unaryError, type GrpcClient } from './lib/grpc-client.js';
import { get, int32Bytes, post, range, readInt32 } from './lib/tensors.js';
import { fixtureRepository, type FixtureRepository } from './lib/fixture-repository.js';
import { waitFor } from './lib/wait-for.js';

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

/**
 * Triton's qa L0_shared_memory `TestSharedMemoryUnregister`, over HTTP and gRPC: regions
 * unregistered while a request uses them stay registered (listed, usable, their names taken)
 * until the last request using them is over, then go without another unregister. `simple` here
 * holds each request until its gate opens (test/fixtures/shared_memory_repository).
 */
describe('regions unregistered while requests use them (qa TestSharedMemoryUnregister)', () => {
  const names = ['input0_data', 'input1_data', 'output0_data', 'output1_data'];
  const keyOf = (name: string) => `/${tag}_${name}`;
  const input0 = range(16, (i) => i);
  const input1 = range(16, () => 1);
  let repo: FixtureRepository;
  let delayed: WorkerProcess;
  let grpcDelayed: GrpcClient;
  let nextId = 0;

  beforeAll(async () => {
    repo = fixtureRepository('shared_memory_repository');
    delayed = await startWorkerProcess({
      modelRepositories: [repo.path],
      args: ['--model-control-mode=explicit', '--load-model=simple', '--allow-client-shm=true'],
    });
    ({ inference: grpcDelayed } = loadGrpcClients(delayed.grpcAddress));
  });
  afterAll(async () => {
    grpcDelayed?.close();
    await delayed?.stop();
    repo?.remove();
    for (const name of names) rmSync(`/dev/shm${keyOf(name)}`, { force: true });
  });

  /** qa's _create_request_data: unregister all, then create, fill and register the four 64-byte regions. */
  async function configureServer(): Promise<void> {
    expect((await post(`${delayed.httpUrl}/v2/systemsharedmemory/unregister`, undefined)).status).toBe(200);
    writeFileSync(`/dev/shm${keyOf('input0_data')}`, int32Bytes(input0));
    writeFileSync(`/dev/shm${keyOf('input1_data')}`, int32Bytes(input1));
    writeFileSync(`/dev/shm${keyOf('output0_data')}`, Buffer.alloc(64));
    writeFileSync(`/dev/shm${keyOf('output1_data')}`, Buffer.alloc(64));
    for (const name of names) {
      const r = await post(`${delayed.httpUrl}/v2/systemsharedmemory/region/${name}/register`, { key: keyOf(name), offset: 0, byte_size: 64 });
      expect(r.status, r.body.toString()).toBe(200);
    }
  }

  /** One request through the four regions, as qa's test makes it; settles with its status and body. */
  type Outcome = { ok: boolean; detail: string };
  function inferHttp(id: string): Promise<Outcome> {
    const shm = (region: string) => ({ shared_memory_region: region, shared_memory_byte_size: 64 });
    return post(`${delayed.httpUrl}/v2/models/simple/infer`, {
      id,
      inputs: [
        { name: 'INPUT0', shape: [1, 16], datatype: 'INT32', parameters: shm('input0_data') },
        { name: 'INPUT1', shape: [1, 16], datatype: 'INT32', parameters: shm('input1_data') },
      ],
      outputs: [
        { name: 'OUTPUT0', parameters: shm('output0_data') },
        { name: 'OUTPUT1', parameters: shm('output1_data') },
      ],
    }).then((r) => ({ ok: r.status === 200, detail: r.body.toString() }));
  }
  function inferGrpc(id: string): Promise<Outcome> {
    const shm = (region: string) => ({ shared_memory_region: { string_param: region }, shared_memory_byte_size: { int64_param: 64 } });
    return unary(grpcDelayed, 'ModelInfer', {
      id,
      model_name: 'simple',
      inputs: [
        { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], parameters: shm('input0_data') },
        { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], parameters: shm('input1_data') },
      ],
      outputs: [
        { name: 'OUTPUT0', parameters: shm('output0_data') },
        { name: 'OUTPUT1', parameters: shm('output1_data') },
      ],
    }).then(
      (r) => ({ ok: true, detail: JSON.stringify(r.outputs) }),
      (e: Error) => ({ ok: false, detail: e.message }),
    );
  }

  const started = (id: string) => waitFor(async () => existsSync(join(repo.path, 'simple/started', id)), { message: `request ${id} never started` });
  // written aside and renamed into place: the model polls for the file, and must never see it created but still empty
  const openGate = (id: string, content = '') => {
    const gate = join(repo.path, 'simple/gates', id);
    writeFileSync(`${gate}.tmp`, content);
    renameSync(`${gate}.tmp`, gate);
  };

  /** qa's _test_shm_found: the status (asked over HTTP, by a second client) lists exactly the four regions. */
  async function expectFound(): Promise<void> {
    const status = (await get(`${delayed.httpUrl}/v2/systemsharedmemory/status`)).json();
    expect(status.map((r: { name: string }) => r.name).sort()).toEqual([...names].sort());
  }
  /** qa's _test_shm_not_found: each region's status is Triton's not-found error. */
  async function expectNotFound(): Promise<void> {
    for (const name of names) {
      const r = await get(`${delayed.httpUrl}/v2/systemsharedmemory/region/${name}/status`);
      expect([r.status, r.json()]).toEqual([404, { error: `Unable to find system shared memory region: '${name}'` }]);
    }
  }
  /** The worker's descriptors on the regions' objects: none once every region is gone. */
  function workerDescriptorsOnRegions(): number {
    const keys = new Set(names.map((n) => `/dev/shm${keyOf(n)}`));
    return readdirSync(`/proc/${delayed.pid}/fd`).filter((fd) => {
      try {
        return keys.has(readlinkSync(`/proc/${delayed.pid}/fd/${fd}`));
      } catch {
        return false;
      }
    }).length;
  }
  function expectOutputsWritten(): void {
    expect(readInt32(readFileSync(`/dev/shm${keyOf('output0_data')}`))).toEqual(range(16, (i) => i + 1));
    expect(readInt32(readFileSync(`/dev/shm${keyOf('output1_data')}`))).toEqual(range(16, (i) => i - 1));
  }

  for (const [protocol, infer] of [
    ['http', inferHttp],
    ['grpc', inferGrpc],
  ] as const) {
    it(`${protocol}: unregister during a single request: listed until it finishes, then gone`, async () => {
      await configureServer();
      const id = `single_${protocol}_${nextId++}`;
      const pending = infer(id);
      await started(id);
      // _test_unregister_shm_request_pass: unregister all succeeds, and nothing leaves the status yet.
      await expectFound();
      expect((await post(`${delayed.httpUrl}/v2/systemsharedmemory/unregister`, undefined)).status).toBe(200);
      await expectFound();
      // Meanwhile the names are still taken.
      const again = await post(`${delayed.httpUrl}/v2/systemsharedmemory/region/input0_data/register`, { key: keyOf('input0_data'), offset: 0, byte_size: 64 });
      expect([again.status, again.json()]).toEqual([400, { error: "shared memory region 'input0_data' already in manager" }]);
      openGate(id);
      const outcome = await pending;
      expect(outcome.ok, outcome.detail).toBe(true);
      expectOutputsWritten();
      await expectNotFound();
      expect(workerDescriptorsOnRegions()).toBe(0);
    });

    it(`${protocol}: unregister during one request, a second uses the marked regions: listed until the second finishes`, async () => {
      await configureServer();
      const first = `multi_a_${protocol}_${nextId++}`;
      const second = `multi_b_${protocol}_${nextId++}`;
      const firstDone = infer(first);
      await started(first);
      await expectFound();
      expect((await post(`${delayed.httpUrl}/v2/systemsharedmemory/unregister`, undefined)).status).toBe(200);
      await expectFound();
      const secondDone = infer(second);
      await started(second);
      openGate(first);
      const a = await firstDone;
      expect(a.ok, a.detail).toBe(true);
      // The second request is still in flight: every region is still listed.
      await expectFound();
      openGate(second);
      const b = await secondDone;
      expect(b.ok, b.detail).toBe(true);
      expectOutputsWritten();
      await expectNotFound();
      expect(workerDescriptorsOnRegions()).toBe(0);
    });

    it(`${protocol}: regions not unregistered stay after the request, and go at unregister`, async () => {
      await configureServer();
      const id = `after_${protocol}_${nextId++}`;
      const pending = infer(id);
      await started(id);
      await expectFound();
      openGate(id);
      const outcome = await pending;
      expect(outcome.ok, outcome.detail).toBe(true);
      await expectFound();
      expect((await post(`${delayed.httpUrl}/v2/systemsharedmemory/unregister`, undefined)).status).toBe(200);
      await expectNotFound();
      expect(workerDescriptorsOnRegions()).toBe(0);
    });

    it(`${protocol}: a request that fails in the model releases its regions too`, async () => {
      await configureServer();
      const id = `fail_${protocol}_${nextId++}`;
      const pending = infer(id);
      await started(id);
      expect((await post(`${delayed.httpUrl}/v2/systemsharedmemory/unregister`, undefined)).status).toBe(200);
      await expectFound();
      openGate(id, 'fail');
      const outcome = await pending;
      expect(outcome.ok).toBe(false);
      expect(outcome.detail).toContain(`request '${id}' failed by its gate`);
      await expectNotFound();
      expect(workerDescriptorsOnRegions()).toBe(0);
    });
  }

  it('ModelStreamInfer: regions unregistered during a streamed request stay until its response is out', async () => {
    await configureServer();
    const shm = (region: string) => ({ shared_memory_region: { string_param: region }, shared_memory_byte_size: { int64_param: 64 } });
    const id = `stream_${nextId++}`;
    const responses = streamInfer(grpcDelayed, [
      {
        id,
        model_name: 'simple',
        inputs: ['INPUT0', 'INPUT1'].map((name, i) => ({ name, datatype: 'INT32', shape: [1, 16], parameters: shm(names[i]!) })),
        outputs: ['OUTPUT0', 'OUTPUT1'].map((name, i) => ({ name, parameters: shm(names[i + 2]!) })),
      },
    ]);
    await started(id);
    expect((await post(`${delayed.httpUrl}/v2/systemsharedmemory/unregister`, undefined)).status).toBe(200);
    await expectFound();
    openGate(id);
    const [response] = await responses;
    expect(response.error_message).toBe('');
    expectOutputsWritten();
    await expectNotFound();
    expect(workerDescriptorsOnRegions()).toBe(0);
  });

  it('a request refused before it runs holds nothing: an unregister after it removes the regions at once', async () => {
    await configureServer();
    const r = await post(`${delayed.httpUrl}/v2/models/simple/infer`, {
      inputs: [
        { name: 'INPUT0', shape: [1, 16], datatype: 'INT32', parameters: { shared_memory_region: 'input0_data', shared_memory_byte_size: 64 } },
        { name: 'INPUT1', shape: [1, 16], datatype: 'INT32', parameters: { shared_memory_region: 'input1_data', shared_memory_byte_size: 64 } },
      ],
      outputs: [{ name: 'OUTPUT0', parameters: { shared_memory_region: 'output0_data', shared_memory_byte_size: 64, shared_memory_offset: 64 } }],
    });
    expect([r.status, r.json()]).toEqual([400, { error: "Invalid offset for shared memory region: 'output0_data'" }]);
    expect((await post(`${delayed.httpUrl}/v2/systemsharedmemory/unregister`, undefined)).status).toBe(200);
    await expectNotFound();
  });

  it('cancelled requests (gRPC cancel, HTTP client gone) release their regions once they are over', async () => {
    await configureServer();
    const shm = (region: string) => ({ shared_memory_region: { string_param: region }, shared_memory_byte_size: { int64_param: 64 } });
    const grpcId = `cancel_grpc_${nextId++}`;
    const call = (grpcDelayed.ModelInfer as (req: object, cb: (err: Error | null) => void) => { cancel(): void })(
      {
        id: grpcId,
        model_name: 'simple',
        inputs: ['INPUT0', 'INPUT1'].map((name, i) => ({ name, datatype: 'INT32', shape: [1, 16], parameters: shm(names[i]!) })),
        outputs: ['OUTPUT0', 'OUTPUT1'].map((name, i) => ({ name, parameters: shm(names[i + 2]!) })),
      },
      () => undefined,
    );
    await started(grpcId);
    const httpId = `cancel_http_${nextId++}`;
    const abort = new AbortController();
    const body = JSON.stringify({
      id: httpId,
      inputs: ['INPUT0', 'INPUT1'].map((name, i) => ({ name, shape: [1, 16], datatype: 'INT32', parameters: { shared_memory_region: names[i], shared_memory_byte_size: 64 } })),
    });
    const httpDone = fetch(`${delayed.httpUrl}/v2/models/simple/infer`, { method: 'POST', body, signal: abort.signal }).catch(() => undefined);
    await started(httpId);
    expect((await post(`${delayed.httpUrl}/v2/systemsharedmemory/unregister`, undefined)).status).toBe(200);
    call.cancel();
    abort.abort();
    await httpDone;
    openGate(grpcId);
    openGate(httpId);
    await waitFor(async () => (await get(`${delayed.httpUrl}/v2/systemsharedmemory/status`)).json().length === 0, { message: 'regions of cancelled requests never went' });
    await expectNotFound();
    expect(workerDescriptorsOnRegions()).toBe(0);
    expect((await get(`${delayed.httpUrl}/v2/health/live`)).status).toBe(200);
  });
});
