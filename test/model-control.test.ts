/**
 * Model repository and lifecycle over HTTP against real worker processes: control modes, the
 * repository API with config and file overrides, broken models that become UNAVAILABLE while the
 * server keeps serving, and poll mode picking up changes.
 */
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { repoRoot, startWorkerProcess, type WorkerProcess } from '@switchyard/testing';
import { get, post, range } from './lib/tensors.js';
import { waitFor } from './lib/wait-for.js';

const FIXTURES = join(repoRoot(), 'test/fixtures/model_repository');
const simpleBody = { inputs: ['INPUT0', 'INPUT1'].map((name) => ({ name, shape: [1, 16], datatype: 'INT32', data: range(16) })) };

describe('control mode none: everything loads at start, broken models are UNAVAILABLE', () => {
  let worker: WorkerProcess;
  beforeAll(async () => {
    // the broken models are the point here: serve the rest, as tritonserver does with --exit-on-error=false
    worker = await startWorkerProcess({ modelRepositories: [FIXTURES], args: ['--exit-on-error=false'] });
  });
  afterAll(async () => {
    await worker?.stop();
  });

  it('reports each broken model with a reason and serves the rest', async () => {
    const index = (await post(worker.httpUrl + '/v2/repository/index', undefined)).json() as Array<{ name: string; state?: string; reason?: string }>;
    const byName = new Map(index.map((m) => [m.name, m]));
    expect(byName.get('simple')?.state).toBe('READY');
    for (const broken of ['corrupt', 'bad_config', 'tensorrt_model']) {
      expect(byName.get(broken)?.state, broken).toBe('UNAVAILABLE');
      expect(byName.get(broken)?.reason, broken).toBeTruthy();
    }
    expect(byName.get('tensorrt_model')?.reason).toMatch(/tensorrt/);
    expect(byName.get('bad_config')?.reason).toMatch(/config\.pbtxt:\d+:\d+/);
    const r = await post(worker.httpUrl + '/v2/models/simple/infer', simpleBody);
    expect(r.status).toBe(200);
    const bad = await post(worker.httpUrl + '/v2/models/corrupt/infer', simpleBody);
    expect(bad.status).toBeGreaterThanOrEqual(400);
    expect(bad.json().error).toContain("Request for unknown model: 'corrupt'");
  });

  it('warms a model up before it is READY; serves every instance of an instance group', async () => {
    const warm = (await get(worker.httpUrl + '/v2/models/warmup/config')).json();
    expect(warm.model_warmup.length).toBeGreaterThan(0);
    expect((await get(worker.httpUrl + '/v2/models/warmup/ready')).status).toBe(200);
    // Warmup runs are not client requests: the statistics start empty.
    const stats = (await get(worker.httpUrl + '/v2/models/warmup/stats')).json();
    expect(stats.model_stats[0].inference_stats.success.count).toBe(0);
    const two = (await get(worker.httpUrl + '/v2/models/two_instances/config')).json();
    expect(two.instance_group).toEqual([expect.objectContaining({ count: 2, kind: 'KIND_CPU' })]);
    const results = await Promise.all(Array.from({ length: 8 }, () => post(worker.httpUrl + '/v2/models/two_instances/infer', simpleBody)));
    expect(results.map((r) => r.status)).toEqual(Array(8).fill(200));
  });

  it('generate extension: top-level JSON keys become inputs', async () => {
    const r = await post(worker.httpUrl + '/v2/models/simple_nobatch/generate', { INPUT0: range(16), INPUT1: range(16, () => 1) });
    expect(r.status, r.body.toString()).toBe(200);
    const body = r.json();
    expect(body.model_name).toBe('simple_nobatch');
    expect(body.OUTPUT0).toEqual(range(16, (i) => i + 1));
  });

  it('auto-completes a model without config.pbtxt', async () => {
    const cfg = (await get(worker.httpUrl + '/v2/models/autocomplete/config')).json();
    expect(cfg.platform).toBe('onnxruntime_onnx');
    expect(cfg.input.length).toBeGreaterThan(0);
    expect(cfg.max_batch_size).toBe(4);
  });

  it('serves every version of an all-versions model', async () => {
    const meta = (await get(worker.httpUrl + '/v2/models/multi_version')).json();
    expect([...meta.versions].sort()).toEqual(['1', '2', '3']);
    for (const v of [1, 2, 3]) {
      const r = await post(`${worker.httpUrl}/v2/models/multi_version/versions/${v}/infer`, { inputs: [{ name: 'INPUT0', shape: [4], datatype: 'FP32', data: [0, 0, 0, 0] }] });
      expect(r.status).toBe(200);
      expect(r.json().model_version).toBe(String(v));
    }
  });

  it('refuses load and unload outside explicit mode', async () => {
    const r = await post(worker.httpUrl + '/v2/repository/models/simple/unload', undefined);
    expect(r.status).toBe(503);
    expect(r.json().error).toContain('explicit model load / unload is not allowed if polling is enabled');
  });
});

describe('control mode explicit: repository API', () => {
  let worker: WorkerProcess;
  beforeAll(async () => {
    worker = await startWorkerProcess({ modelRepositories: [FIXTURES], args: ['--model-control-mode=explicit', '--load-model=simple'] });
  });
  afterAll(async () => {
    await worker?.stop();
  });

  it('index lists models on disk; only the loaded one has a state', async () => {
    const index = (await post(worker.httpUrl + '/v2/repository/index', undefined)).json() as Array<{ name: string; state?: string }>;
    expect(index.find((m) => m.name === 'simple')).toMatchObject({ name: 'simple', version: '1', state: 'READY' });
    expect(index.find((m) => m.name === 'identity_fp32')).toEqual({ name: 'identity_fp32' });
    const ready = (await post(worker.httpUrl + '/v2/repository/index', { ready: true })).json();
    expect(ready.map((m: any) => m.name)).toEqual(['simple']);
    expect((await post(worker.httpUrl + '/v2/repository/index', { ready: 'yes' })).status).toBe(400);
  });

  it('load, unload (unloaded reason), unknown model errors', async () => {
    expect((await post(worker.httpUrl + '/v2/repository/models/identity_fp32/load', undefined)).status).toBe(200);
    expect((await get(worker.httpUrl + '/v2/models/identity_fp32/ready')).status).toBe(200);
    expect((await post(worker.httpUrl + '/v2/repository/models/identity_fp32/unload', { parameters: { unload_dependents: false } })).status).toBe(200);
    const index = (await post(worker.httpUrl + '/v2/repository/index', undefined)).json();
    expect(index.find((m: any) => m.name === 'identity_fp32')).toMatchObject({ state: 'UNAVAILABLE', reason: 'unloaded' });
    const r = await post(worker.httpUrl + '/v2/repository/models/nosuchmodel/load', undefined);
    expect(r.status).toBe(500);
    expect(r.json().error).toContain("failed to load 'nosuchmodel'");
    expect((await post(worker.httpUrl + '/v2/repository/models/nosuchmodel/unload', undefined)).status).toBe(200);
    const bad = await post(worker.httpUrl + '/v2/repository/models/simple/load', { parameters: { bogus: 1 } });
    expect(bad.status).toBe(400);
    expect(bad.json().error).toContain("Unrecognized load parameter 'bogus'");
  });

  it('load with a config override', async () => {
    const r = await post(worker.httpUrl + '/v2/repository/models/simple/load', { parameters: { config: JSON.stringify({ max_batch_size: '4' }) } });
    expect(r.status).toBe(200);
    const cfg = (await get(worker.httpUrl + '/v2/models/simple/config')).json();
    expect(cfg.max_batch_size).toBe(4);
    const bad = await post(worker.httpUrl + '/v2/repository/models/simple/load', { parameters: { config: '{"max_batch_size": ' } });
    expect(bad.status).toBeGreaterThanOrEqual(400);
    expect(bad.json().error).toContain('failed to load');
    expect((await post(worker.httpUrl + '/v2/models/simple/infer', simpleBody)).status).toBe(200);
  });

  it('load with file overrides; a path escaping the model folder is rejected', async () => {
    const onnx = readFileSync(join(FIXTURES, 'identity_fp32/1/model.onnx'));
    const config = JSON.stringify({ name: 'uploaded', backend: 'onnxruntime', max_batch_size: 8, input: [{ name: 'INPUT0', data_type: 'TYPE_FP32', dims: [-1] }], output: [{ name: 'OUTPUT0', data_type: 'TYPE_FP32', dims: [-1] }] });
    let r = await post(worker.httpUrl + '/v2/repository/models/uploaded/load', { parameters: { config, 'file:1/model.onnx': onnx.toString('base64') } });
    expect(r.status, r.body.toString()).toBe(200);
    r = await post(worker.httpUrl + '/v2/models/uploaded/infer', { inputs: [{ name: 'INPUT0', shape: [1, 2], datatype: 'FP32', data: [1, 2] }] });
    expect(r.json().outputs[0].data).toEqual([1, 2]);
    r = await post(worker.httpUrl + '/v2/repository/models/evil/load', { parameters: { config, 'file:../../etc/evil': Buffer.from('x').toString('base64') } });
    expect([r.status, r.json().error]).toEqual([400, "Invalid file parameter 'file:../../etc/evil' with normalized path '../../etc/evil' must stay within model directory."]);
  });

  it('model names and file overrides are refused as Triton refuses them, never naming a local path or an errno', async () => {
    const x = Buffer.from('x').toString('base64');
    const load = (name: string, body?: object) => post(`${worker.httpUrl}/v2/repository/models/${encodeURIComponent(name)}/load`, body);
    // A name of whitespace only is empty.
    for (const blank of [' ', '\t ']) {
      const r = await load(blank);
      expect([r.status, r.json().error]).toEqual([400, 'Model name cannot be empty. Please enter a valid name to deploy.']);
    }
    // '...' is a name like any other: unknown here, not a path.
    let r = await load('...');
    expect([r.status, r.json().error]).toEqual([500, "failed to load '...', failed to poll from model repository"]);
    r = await post(`${worker.httpUrl}/v2/models/.../infer`, simpleBody);
    expect(r.json().error).toContain("Request for unknown model: '...' is not found");
    // Files without the config they belong to.
    r = await load('uploaded2', { parameters: { 'file:1/model.onnx': x } });
    expect([r.status, r.json().error]).toEqual([400, "Load parameter 'config' must be specified for model file override"]);
    // A file name longer than the file system takes.
    const long = `1/${'n'.repeat(5000)}`;
    r = await load('uploaded2', { parameters: { config: '{}', [`file:${long}`]: x } });
    expect([r.status, r.json().error]).toEqual([400, `Invalid file parameter 'file:${long}', the name is too long`]);
    // A model name longer than a folder name: the override folder is not named after the model,
    // so the load goes on (and fails here only for want of a backend), as in Triton.
    const longName = 'm'.repeat(300);
    r = await load(longName, { parameters: { config: '{}', 'file:1/x': x } });
    expect(r.status).toBe(400);
    expect(r.json().error).toContain(`load failed for model '${longName}'`);
    expect(r.json().error).toContain('no backend or platform is specified');
    for (const error of [r.json().error as string]) {
      expect(error).not.toMatch(/ENAMETOOLONG|\/tmp|switchyard-override/);
    }
    expect((await post(worker.httpUrl + '/v2/models/simple/infer', simpleBody)).status).toBe(200);
  });
});

describe('control mode poll', () => {
  let worker: WorkerProcess;
  let repo: string;
  beforeAll(async () => {
    repo = mkdtempSync(join(tmpdir(), 'switchyard-poll-'));
    cpSync(join(FIXTURES, 'simple'), join(repo, 'simple'), { recursive: true });
    worker = await startWorkerProcess({ modelRepositories: [repo], args: ['--model-control-mode=poll', '--repository-poll-secs=1'] });
  });
  afterAll(async () => {
    await worker?.stop();
    rmSync(repo, { recursive: true, force: true });
  });

  it('picks up added and removed models; a broken change keeps the old version serving', async () => {
    cpSync(join(FIXTURES, 'identity_fp32'), join(repo, 'identity_fp32'), { recursive: true });
    await waitFor(async () => (await get(worker.httpUrl + '/v2/models/identity_fp32/ready')).status === 200);
    rmSync(join(repo, 'identity_fp32'), { recursive: true });
    await waitFor(async () => (await get(worker.httpUrl + '/v2/models/identity_fp32/ready')).status !== 200);
    // Break simple's config: the old version keeps serving.
    const cfgPath = join(repo, 'simple', 'config.pbtxt');
    const loadFailures = (): number => worker.logs().filter((l) => l['msg'] === 'failed to load model' && l['model'] === 'simple').length;
    const failuresBefore = loadFailures();
    writeFileSync(cfgPath, readFileSync(cfgPath, 'utf8') + '\nthis_is_not_a_field: 1\n');
    // a poll has read the broken config (and refused it)
    await waitFor(async () => loadFailures() > failuresBefore, { message: 'no poll refused the broken config' });
    expect((await post(worker.httpUrl + '/v2/models/simple/infer', simpleBody)).status).toBe(200);
    // A new version appears.
    mkdirSync(join(repo, 'simple', '2'));
    writeFileSync(cfgPath, readFileSync(join(FIXTURES, 'simple', 'config.pbtxt'), 'utf8').replace(/version_policy[^\n]*\n/, '') + '\nversion_policy: { all { } }\n');
    cpSync(join(repo, 'simple', '1', 'model.onnx'), join(repo, 'simple', '2', 'model.onnx'));
    await waitFor(async () => (await get(worker.httpUrl + '/v2/models/simple/versions/2/ready')).status === 200);
  });
});
