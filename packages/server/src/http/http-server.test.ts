import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ServerSettings } from '../settings.js';
import { SharedMemoryManager } from '../shared-memory.js';
import { FakeEngine } from '../test-support/fake-engine.js';
import { type HttpFrontDoor, createHttpServer } from './http-server.js';
import { rawRequest } from './http-test-client.js';

describe('HTTP front door: routing, metadata, control, extensions', () => {
  const engine = new FakeEngine();
  const settings = new ServerSettings();
  let door: HttpFrontDoor;
  let port: number;
  const get = (path: string) => rawRequest(port, 'GET', path);
  const post = (path: string, body?: string, headers?: Record<string, string>) => rawRequest(port, 'POST', path, { body, headers });

  beforeAll(async () => {
    door = createHttpServer({ engine, shm: new SharedMemoryManager({ enabled: false }), settings, port: 0, host: '127.0.0.1', maxInputSize: 1 << 20 });
    port = await door.listen();
  });
  afterAll(async () => {
    await door.close();
  });

  it('404 for unknown paths, bad version segments and versioned trace settings', async () => {
    for (const path of ['/', '/v2/models/simple/versions/abc/infer', '/v2/models/simple/versions/1/trace/setting', '/v2/health/alive']) {
      const r = await get(path);
      expect(r.status, path).toBe(404);
      expect(r.headers['content-type']).toBe('application/json');
      expect(r.json()).toEqual({ error: 'Not Found' });
    }
  });

  it('405 for the wrong method', async () => {
    for (const [method, path] of [
      ['POST', '/v2/health/live'],
      ['GET', '/v2/models/simple/infer'],
      ['DELETE', '/v2/logging'],
      ['GET', '/v2/repository/index'],
      ['POST', '/v2/systemsharedmemory/status'],
      ['GET', '/v2/systemsharedmemory/region/r/register'],
    ] as const) {
      const r = await rawRequest(port, method, path);
      expect(r.status, `${method} ${path}`).toBe(405);
      expect(r.json()).toEqual({ error: 'Method Not Allowed' });
    }
  });

  it('health: 200 / 400 with empty bodies; the query string is ignored', async () => {
    const live = await get('/v2/health/live?x=1');
    expect([live.status, live.body.byteLength]).toEqual([200, 0]);
    engine.ready = false;
    const notReady = await get('/v2/health/ready');
    expect([notReady.status, notReady.body.byteLength]).toEqual([400, 0]);
    engine.ready = true;
    expect((await get('/v2/health/ready')).status).toBe(200);
  });

  it('server and model metadata', async () => {
    expect((await get('/v2')).json()).toEqual({ name: 'triton', version: '2.73.0', extensions: ['classification', 'binary_tensor_data'] });
    const m = await get('/v2/models/simple');
    expect(m.text).toBe(
      '{"name":"simple","versions":["1"],"platform":"fake","inputs":[{"name":"INPUT0","datatype":"INT32","shape":[-1,16]},{"name":"INPUT1","datatype":"INT32","shape":[-1,16]}],"outputs":[{"name":"OUTPUT0","datatype":"INT32","shape":[-1,16]},{"name":"OUTPUT1","datatype":"INT32","shape":[-1,16]}]}',
    );
    expect((await get('/v2/models/simple/versions/1')).status).toBe(200);
    const unknown = await get('/v2/models/nope');
    expect([unknown.status, unknown.json()]).toEqual([400, { error: "Request for unknown model: 'nope' is not found" }]);
    const badVersion = await get('/v2/models/simple/versions/7');
    expect([badVersion.status, badVersion.json()]).toEqual([404, { error: "Request for unknown model: 'simple' version 7 is not found" }]);
  });

  it('model ready, config and statistics', async () => {
    expect((await get('/v2/models/simple/ready')).status).toBe(200);
    const notReady = await get('/v2/models/nope/ready');
    expect([notReady.status, notReady.json()]).toEqual([400, { error: 'Model version not ready' }]);
    const config = await get('/v2/models/simple/config');
    expect(config.status).toBe(200);
    expect(config.text.startsWith('{"name":"simple","platform":"","backend":"fake"')).toBe(true);
    const all = (await get('/v2/models/stats')).json() as { model_stats: Array<{ name: string }> };
    expect(all.model_stats.map((s) => s.name)).toContain('simple');
    const one = await get('/v2/models/simple/versions/1/stats');
    expect(Object.keys((one.json() as { model_stats: object[] }).model_stats[0] as object)).toEqual([
      'name', 'version', 'last_inference', 'inference_count', 'execution_count', 'inference_stats', 'response_stats', 'batch_stats', 'memory_usage',
    ]);
  });

  it('repository index, load and unload', async () => {
    const idx = await post('/v2/repository/index');
    expect(idx.json()).toContainEqual({ name: 'never_loaded' });
    expect((await post('/v2/repository/index', '{"ready":true}')).json()).not.toContainEqual({ name: 'never_loaded' });
    const bad = await post('/v2/repository/index', '{"ready":1}');
    expect([bad.status, bad.json()]).toEqual([400, { error: "Invalid value for 'ready': expected a boolean" }]);

    const file = Buffer.from('onnx bytes').toString('base64');
    const load = await post('/v2/repository/models/m1/load', JSON.stringify({ parameters: { config: '{"max_batch_size":16}', 'file:1/model.onnx': file } }));
    expect(load.status).toBe(200);
    const [name, options] = engine.lastCall('loadModel') ?? [];
    expect(name).toBe('m1');
    expect(options?.config).toBe('{"max_batch_size":16}');
    expect(Buffer.from(options?.files?.get('1/model.onnx') ?? []).toString()).toBe('onnx bytes');
    expect((await post('/v2/repository/models/m1/load')).status).toBe(200);

    const unknownKey = await post('/v2/repository/models/m1/load', '{"parameters":{"bogus":true}}');
    expect([unknownKey.status, unknownKey.json()]).toEqual([400, { error: "Unrecognized load parameter 'bogus' with type 'BOOL'" }]);
    // File names are confined by the engine (one resolver for both doors): the door passes them on.
    const escape = await post('/v2/repository/models/m1/load', JSON.stringify({ parameters: { config: '{}', 'file:../x': file } }));
    expect(escape.status).toBe(200);
    expect([...(engine.lastCall('loadModel')?.[1]?.files?.keys() ?? [])]).toEqual(['../x']);
    const nonString = await post('/v2/repository/models/m1/load', '{"parameters":{"config":42}}');
    expect([nonString.status, nonString.json()]).toEqual([400, { error: 'attempt to access JSON non-string as string' }]);
    const repoName = await post('/v2/repository/myrepo/models/m1/load');
    expect([repoName.status, repoName.json()]).toEqual([501, { error: "'repository_name' specification is not supported" }]);

    expect((await post('/v2/repository/models/m1/unload', '{"parameters":{"unload_dependents":true}}')).status).toBe(200);
    expect(engine.lastCall('unloadModel')).toEqual(['m1', { unloadDependents: true }]);
    const parseError = await post('/v2/repository/models/m1/unload', 'AAAA');
    expect([parseError.status, parseError.json()]).toEqual([500, { error: 'failed to parse the request JSON buffer: Invalid value. at 0' }]);
  });

  it('shared memory is refused when disabled, status still answers', async () => {
    expect((await get('/v2/systemsharedmemory/status')).json()).toEqual([]);
    const reg = await post('/v2/systemsharedmemory/region/r/register', '{"key":"/k","byte_size":4}');
    expect([reg.status, reg.json()]).toEqual([501, { error: "Client shared memory is disabled. Start the server with '--allow-client-shm=true' to enable." }]);
    expect((await post('/v2/cudasharedmemory/unregister')).status).toBe(501);
    expect((await get('/v2/cudasharedmemory/status')).json()).toEqual([]);
    const missing = await get('/v2/systemsharedmemory/region/zz/status');
    expect([missing.status, missing.json()]).toEqual([404, { error: "Unable to find system shared memory region: 'zz'" }]);
  });

  it('logging settings', async () => {
    expect((await get('/v2/logging')).text).toBe(
      '{"log_file":"","log_info":true,"log_warning":true,"log_error":true,"log_verbose_level":0,"log_format":"default"}',
    );
    const upd = await post('/v2/logging', '{"log_info":false,"log_verbose_level":1,"log_format":"ISO8601"}');
    expect(upd.json()).toMatchObject({ log_info: false, log_verbose_level: 1, log_format: 'ISO8601' });
    const file = await post('/v2/logging', '{"log_file":"x.log"}');
    expect([file.status, file.json()]).toEqual([501, { error: 'log file location can not be updated through network protocol' }]);
    const badType = await post('/v2/logging', '{"log_info":"no"}');
    expect([badType.status, badType.json()]).toEqual([500, { error: 'attempt to access JSON non-boolean as boolean' }]);
    const badFormat = await post('/v2/logging', '{"log_format":"json"}');
    expect([badFormat.status, badFormat.json()]).toEqual([400, { error: 'invalid argument for log_format, got: json' }]);
    await post('/v2/logging', '{"log_info":true,"log_verbose_level":0,"log_format":"default"}');
  });

  it('trace settings, global and per model', async () => {
    expect((await get('/v2/trace/setting')).json()).toEqual({
      trace_level: ['OFF'], trace_rate: '1000', trace_count: '-1', log_frequency: '0', trace_file: '', trace_mode: 'triton',
    });
    // Triton refuses a level that would trace into no file (TraceSetting::Valid)
    const invalid = await post('/v2/models/simple/trace/setting', '{"trace_level":["TIMESTAMPS"]}');
    expect([invalid.status, invalid.json()]).toEqual([400, { error: 'Attempting to set invalid trace setting :trace file name is not given' }]);
    const m = await post('/v2/models/simple/trace/setting', '{"trace_rate":"12","trace_level":["OFF"]}');
    expect(m.json()).toMatchObject({ trace_rate: '12', trace_level: ['OFF'] });
    expect((await get('/v2/trace/setting')).json()).toMatchObject({ trace_rate: '1000' });
    expect((await post('/v2/models/simple/trace/setting', '{"trace_rate":null}')).json()).toMatchObject({ trace_rate: '1000' });
    const file = await post('/v2/trace/setting', '{"trace_file":"x"}');
    expect([file.status, file.json()]).toEqual([501, { error: 'trace file location can not be updated through network protocol' }]);
    const unknown = await get('/v2/models/nope/trace/setting');
    expect([unknown.status, unknown.json()]).toEqual([400, { error: 'Request for unknown model : nope' }]);
  });
});
