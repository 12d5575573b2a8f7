import * as fs from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ServerSettings } from '../settings.js';
import { SharedMemoryManager } from '../shared-memory.js';
import { FakeEngine } from '../test-support/fake-engine.js';
import { type HttpFrontDoor, createHttpServer } from './http-server.js';
import { rawRequest } from './http-test-client.js';

describe('HTTP front door: system shared memory through /dev/shm', () => {
  const key = `/switchyard_http_test_${process.pid}`;
  const file = `/dev/shm${key}`;
  const shm = new SharedMemoryManager({ enabled: true });
  let door: HttpFrontDoor;
  let port: number;
  const post = (path: string, body?: string) => rawRequest(port, 'POST', path, { body });
  const get = (path: string) => rawRequest(port, 'GET', path);

  beforeAll(async () => {
    // 64 bytes of INPUT0 (0..15), 64 of INPUT1 (all 1), then 128 for the two outputs.
    const data = Buffer.alloc(256);
    for (let i = 0; i < 16; i++) {
      data.writeInt32LE(i, i * 4);
      data.writeInt32LE(1, 64 + i * 4);
    }
    fs.writeFileSync(file, data);
    door = createHttpServer({ engine: new FakeEngine(), shm, settings: new ServerSettings(), port: 0, host: '127.0.0.1', maxInputSize: 1 << 20 });
    port = await door.listen();
  });
  afterAll(async () => {
    await door.close();
    shm.close();
    fs.rmSync(file, { force: true });
  });

  it('registers, infers from and into regions, reports status, unregisters', async () => {
    expect((await post('/v2/systemsharedmemory/region/in/register', JSON.stringify({ key, offset: 0, byte_size: 128 }))).status).toBe(200);
    expect((await post('/v2/systemsharedmemory/region/out/register', JSON.stringify({ key, offset: 128, byte_size: 128 }))).status).toBe(200);
    const dup = await post('/v2/systemsharedmemory/region/in/register', JSON.stringify({ key, byte_size: 8 }));
    expect([dup.status, dup.json()]).toEqual([400, { error: "shared memory region 'in' already in manager" }]);
    const missingKey = await post('/v2/systemsharedmemory/region/x/register', '{"byte_size":8}');
    expect([missingKey.status, missingKey.json()]).toEqual([400, { error: "Shared memory register request has no 'key' field" }]);
    const noFile = await post('/v2/systemsharedmemory/region/x/register', '{"key":"/no_such_switchyard_region","byte_size":8}');
    expect([noFile.status, noFile.json()]).toEqual([500, { error: "Unable to open shared memory region: '/no_such_switchyard_region'" }]);

    expect((await get('/v2/systemsharedmemory/status')).json()).toEqual([
      { name: 'in', key, offset: 0, byte_size: 128 },
      { name: 'out', key, offset: 128, byte_size: 128 },
    ]);
    expect((await get('/v2/systemsharedmemory/region/out/status')).json()).toEqual([{ name: 'out', key, offset: 128, byte_size: 128 }]);

    const request = {
      inputs: [
        { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], parameters: { shared_memory_region: 'in', shared_memory_byte_size: 64 } },
        { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], parameters: { shared_memory_region: 'in', shared_memory_offset: 64, shared_memory_byte_size: 64 } },
      ],
      outputs: [
        { name: 'OUTPUT0', parameters: { shared_memory_region: 'out', shared_memory_byte_size: 64 } },
        { name: 'OUTPUT1', parameters: { shared_memory_region: 'out', shared_memory_offset: 64, shared_memory_byte_size: 64 } },
      ],
    };
    const r = await post('/v2/models/simple/infer', JSON.stringify(request));
    expect(r.status).toBe(200);
    expect(r.json()).toEqual({
      model_name: 'simple',
      model_version: '1',
      outputs: [
        { name: 'OUTPUT0', datatype: 'INT32', shape: [1, 16] },
        { name: 'OUTPUT1', datatype: 'INT32', shape: [1, 16] },
      ],
    });
    const region = fs.readFileSync(file);
    for (let i = 0; i < 16; i++) {
      expect(region.readInt32LE(128 + i * 4)).toBe(i + 1);
      expect(region.readInt32LE(192 + i * 4)).toBe(i - 1);
    }

    const tooSmall = { ...request, outputs: [{ name: 'OUTPUT0', parameters: { shared_memory_region: 'out', shared_memory_byte_size: 16 } }] };
    const small = await post('/v2/models/simple/infer', JSON.stringify(tooSmall));
    expect([small.status, small.json()]).toEqual([
      500,
      { error: "shared memory size specified with the request for output 'OUTPUT0' (16 bytes) should be at least 64 bytes to hold the results" },
    ]);
    const badRegion = { ...request, outputs: [{ name: 'OUTPUT0', parameters: { shared_memory_region: 'nope', shared_memory_byte_size: 64 } }] };
    const nf = await post('/v2/models/simple/infer', JSON.stringify(badRegion));
    expect([nf.status, nf.json()]).toEqual([404, { error: "Unable to find shared memory region: 'nope'" }]);
    const both = { ...request, outputs: [{ name: 'OUTPUT0', parameters: { shared_memory_region: 'out', binary_data: true } }] };
    expect((await post('/v2/models/simple/infer', JSON.stringify(both))).json()).toEqual({
      error: "Output can't set both 'shared_memory_region' and 'binary_data'",
    });

    expect((await post('/v2/systemsharedmemory/region/nope/unregister')).status).toBe(200);
    expect((await post('/v2/systemsharedmemory/region/in/unregister')).status).toBe(200);
    expect((await post('/v2/systemsharedmemory/unregister')).status).toBe(200);
    expect((await get('/v2/systemsharedmemory/status')).json()).toEqual([]);
  });

  it('CUDA shared memory answers as a server without GPUs', async () => {
    expect((await get('/v2/cudasharedmemory/status')).json()).toEqual([]);
    const reg = await post('/v2/cudasharedmemory/region/c/register', '{"raw_handle":{"b64":"AAAA"},"device_id":0,"byte_size":8}');
    expect([reg.status, reg.json()]).toEqual([400, { error: "failed to register CUDA shared memory region: 'c', GPUs not supported" }]);
    const bad = await post('/v2/cudasharedmemory/region/c/register', 'AAAA');
    expect(bad.json()).toEqual({ error: 'failed to parse the request JSON buffer: Invalid value. at 0' });
    expect((await post('/v2/cudasharedmemory/unregister')).status).toBe(200);
    expect((await get('/v2/cudasharedmemory/region/c/status')).status).toBe(404);
  });
});

describe('HTTP front door lifecycle', () => {
  it('close() lets an in-flight request finish', async () => {
    const engine = new FakeEngine();
    let release: () => void = () => {};
    engine.models.set('gate', {
      config: engine.modelConfig('identity'),
      run: (r) => new Promise((resolve) => (release = () => resolve([r.inputs.map((i) => ({ ...i, name: 'OUTPUT0' }))]))),
    });
    const door = createHttpServer({ engine, shm: new SharedMemoryManager({ enabled: false }), settings: new ServerSettings(), port: 0, host: '127.0.0.1', maxInputSize: 1 << 20 });
    const port = await door.listen();
    const pending = rawRequest(port, 'POST', '/v2/models/gate/infer', { body: '{"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[1],"data":[2]}]}' });
    await new Promise((r) => setTimeout(r, 50));
    const closed = door.close();
    await new Promise((r) => setTimeout(r, 20));
    release();
    const res = await pending;
    await closed;
    expect(res.status).toBe(200);
    expect(res.json()).toMatchObject({ outputs: [{ name: 'OUTPUT0', data: [2] }] });
    await expect(rawRequest(port, 'GET', '/v2/health/live')).rejects.toThrow();
  });
});
