/**
 * The response cache end to end (Triton's `--cache-config local,size=N` plus
 * `response_cache { enable: true }`): hits and misses over HTTP and gRPC sharing one cache, what
 * the statistics and metrics count, LRU eviction in a small cache, failures not cached, models
 * the cache refuses, a server without a cache, and the flags' bad forms.
 */
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BATCH_DIM, GraphBuilder, buildIdentityModel } from '@switchyard/onnx-builder';
import { repoRoot, startWorkerProcess, type WorkerProcess } from '@switchyard/testing';
import { fixtureRepository, type FixtureRepository } from './lib/fixture-repository.js';
import { loadGrpcClients, unary, type GrpcClient } from './lib/grpc-client.js';
import { fp32Bytes, get, post, readFp32 } from './lib/tensors.js';

const BIN = join(repoRoot(), 'bin', 'switchyard.mjs');

/** The fixture configs copied to a temporary folder, with their ONNX files generated beside them. */
function prepareRepository(): FixtureRepository {
  const identity = buildIdentityModel('FLOAT', [BATCH_DIM, -1]);
  const gather = new GraphBuilder('gather_cache')
    .input('INDEX', 'INT64', [1])
    .output('OUTPUT', 'FLOAT', [1])
    .initializer('DATA', 'FLOAT', [4], [10, 20, 30, 40])
    .node('Gather', ['DATA', 'INDEX'], ['OUTPUT'], { axis: 0 })
    .buildModel();
  return fixtureRepository('cache_repository', {
    files: {
      'identity_cache/1/model.onnx': identity,
      'identity_nocache/1/model.onnx': identity,
      'decoupled_cache/1/model.onnx': identity,
      'sequence_cache/1/model.onnx': identity,
      'gather_cache/1/model.onnx': gather,
    },
  });
}

const identityBody = (data: number[], id?: string, extra: Record<string, unknown> = {}) => ({
  ...(id === undefined ? {} : { id }),
  inputs: [{ name: 'INPUT0', shape: [1, data.length], datatype: 'FP32', data }],
  ...extra,
});

async function stats(worker: WorkerProcess, model: string) {
  const r = await get(`${worker.httpUrl}/v2/models/${model}/stats`);
  expect(r.status).toBe(200);
  return r.json().model_stats[0];
}

async function metrics(worker: WorkerProcess): Promise<string> {
  return (await fetch(worker.metricsUrl + '/metrics')).text();
}

let repo: FixtureRepository;
beforeAll(() => {
  repo = prepareRepository();
});
afterAll(() => repo?.remove());

describe('a server with a 1 MB local cache', () => {
  let worker: WorkerProcess;
  let client: GrpcClient;
  beforeAll(async () => {
    // decoupled_cache must fail to load (no cache for decoupled models) while the rest serve: tritonserver's --exit-on-error=false
    worker = await startWorkerProcess({ modelRepositories: [repo.path], args: ['--cache-config', 'local,size=1048576', '--exit-on-error=false'] });
    ({ inference: client } = loadGrpcClients(worker.grpcAddress));
  });
  afterAll(async () => {
    client?.close();
    await worker?.stop();
  });

  it('answers an identical request from the cache, over HTTP and gRPC alike', async () => {
    const first = await post(`${worker.httpUrl}/v2/models/identity_cache/infer`, identityBody([1, 2, 3, 4], 'one'));
    expect(first.status, first.body.toString()).toBe(200);
    expect(first.json().outputs[0].data).toEqual([1, 2, 3, 4]);
    let s = await stats(worker, 'identity_cache');
    expect([s.inference_stats.cache_miss.count, s.inference_stats.cache_hit.count, s.inference_count, s.execution_count]).toEqual([1, 0, 1, 1]);

    const second = await post(`${worker.httpUrl}/v2/models/identity_cache/infer`, identityBody([1, 2, 3, 4], 'two'));
    expect(second.status).toBe(200);
    expect(second.json()).toMatchObject({ id: 'two', model_name: 'identity_cache', model_version: '1' });
    expect(second.json().outputs[0]).toEqual({ name: 'OUTPUT0', datatype: 'FP32', shape: [1, 4], data: [1, 2, 3, 4] });

    const grpcHit = await unary(client, 'ModelInfer', {
      model_name: 'identity_cache',
      id: 'three',
      inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 4] }],
      raw_input_contents: [fp32Bytes([1, 2, 3, 4])],
    });
    expect(grpcHit.id).toBe('three');
    expect(readFp32(grpcHit.raw_output_contents[0])).toEqual([1, 2, 3, 4]);

    s = await stats(worker, 'identity_cache');
    // Hits are successes with request and queue time, but not inferences, executions or compute.
    expect(s.inference_stats.cache_hit.count).toBe(2);
    expect(s.inference_stats.cache_hit.ns).toBeGreaterThan(0);
    expect(s.inference_stats.cache_miss.count).toBe(1);
    expect(s.inference_stats.success.count).toBe(3);
    expect(s.inference_stats.queue.count).toBe(3);
    expect(s.inference_count).toBe(1);
    expect(s.execution_count).toBe(1);
    expect(s.inference_stats.compute_infer.count).toBe(1);

    const grpcStats = await unary(client, 'ModelStatistics', { name: 'identity_cache', version: '' });
    expect(grpcStats.model_stats[0].inference_stats.cache_hit.count).toBe(2);
    expect(grpcStats.model_stats[0].inference_stats.cache_miss.count).toBe(1);
  });

  it('keys on every input byte and the shape; naming the only output is the same request', async () => {
    const before = (await stats(worker, 'identity_cache')).inference_stats;
    const other = await post(`${worker.httpUrl}/v2/models/identity_cache/infer`, identityBody([1, 2, 3, 5]));
    expect(other.json().outputs[0].data).toEqual([1, 2, 3, 5]);
    // Same bytes as [1,2,3,4] in one row, split in two rows: a different request.
    const rows = await post(`${worker.httpUrl}/v2/models/identity_cache/infer`, {
      inputs: [{ name: 'INPUT0', shape: [2, 2], datatype: 'FP32', data: [1, 2, 3, 4] }],
    });
    expect(rows.json().outputs[0].shape).toEqual([2, 2]);
    const named = await post(`${worker.httpUrl}/v2/models/identity_cache/infer`, identityBody([1, 2, 3, 4], undefined, { outputs: [{ name: 'OUTPUT0' }] }));
    expect(named.json().outputs[0].data).toEqual([1, 2, 3, 4]);
    const after = (await stats(worker, 'identity_cache')).inference_stats;
    expect(after.cache_miss.count - before.cache_miss.count).toBe(2);
    expect(after.cache_hit.count - before.cache_hit.count).toBe(1);
    // The two-row request is a batch of 2: on its miss it counted 2 inferences.
    expect((await stats(worker, 'identity_cache')).inference_count).toBe(1 + 1 + 2);
  });

  it('classification and binary output apply to a cached response as to a computed one', async () => {
    const body = identityBody([0.5, 3, 1, 2], 'c1', { outputs: [{ name: 'OUTPUT0', parameters: { classification: 2 } }] });
    const computed = await post(`${worker.httpUrl}/v2/models/identity_cache/infer`, body);
    const cached = await post(`${worker.httpUrl}/v2/models/identity_cache/infer`, { ...body, id: 'c2' });
    for (const r of [computed, cached]) {
      expect(r.status).toBe(200);
      expect(r.json().outputs[0]).toEqual({ name: 'OUTPUT0', datatype: 'BYTES', shape: [1, 2], data: ['3.000000:1', '2.000000:3'] });
    }
    const binary = await post(`${worker.httpUrl}/v2/models/identity_cache/infer`, identityBody([0.5, 3, 1, 2], undefined, { parameters: { binary_data_output: true } }));
    expect(binary.status).toBe(200);
    expect(Number(binary.headers.get('inference-header-content-length'))).toBeGreaterThan(0);
    const s = await stats(worker, 'identity_cache');
    // The cached and the binary request hit the entry the classification request created.
    expect(s.inference_stats.cache_hit.count).toBe(5);
  });

  it('never caches a model without response_cache', async () => {
    for (let i = 0; i < 2; i++) expect((await post(`${worker.httpUrl}/v2/models/identity_nocache/infer`, identityBody([7, 7]))).status).toBe(200);
    const s = await stats(worker, 'identity_nocache');
    expect([s.inference_stats.cache_hit.count, s.inference_stats.cache_miss.count, s.inference_count, s.execution_count]).toEqual([0, 0, 2, 2]);
  });

  it('does not cache a request that fails in the model, and caches the same model once it succeeds', async () => {
    const bad = { inputs: [{ name: 'INDEX', shape: [1], datatype: 'INT64', data: [7] }] };
    const failures = [await post(`${worker.httpUrl}/v2/models/gather_cache/infer`, bad), await post(`${worker.httpUrl}/v2/models/gather_cache/infer`, bad)];
    for (const r of failures) {
      expect(r.status).toBeGreaterThanOrEqual(400);
      expect(r.json().error).toBeTruthy();
    }
    let s = await stats(worker, 'gather_cache');
    expect(s.inference_stats.fail.count).toBe(2);
    expect([s.inference_stats.cache_hit.count, s.inference_stats.cache_miss.count]).toEqual([0, 0]);

    const good = { inputs: [{ name: 'INDEX', shape: [1], datatype: 'INT64', data: [2] }] };
    for (let i = 0; i < 2; i++) {
      const r = await post(`${worker.httpUrl}/v2/models/gather_cache/infer`, good);
      expect(r.status).toBe(200);
      expect(r.json().outputs[0].data).toEqual([30]);
    }
    s = await stats(worker, 'gather_cache');
    expect([s.inference_stats.cache_hit.count, s.inference_stats.cache_miss.count, s.inference_count]).toEqual([1, 1, 1]);
  });

  it("shows Triton's per-model cache metrics for cached models only", async () => {
    const text = await metrics(worker);
    const hits = (await stats(worker, 'identity_cache')).inference_stats.cache_hit.count;
    expect(text).toContain('# HELP nv_cache_num_hits_per_model Number of cache hits per model\n# TYPE nv_cache_num_hits_per_model counter\n');
    expect(text).toContain(`nv_cache_num_hits_per_model{model="identity_cache",version="1"} ${hits}\n`);
    expect(text).toContain('nv_cache_num_misses_per_model{model="gather_cache",version="1"} 1\n');
    expect(text).toMatch(/nv_cache_hit_duration_per_model\{model="identity_cache",version="1"\} \d+\n/);
    expect(text).toContain('# HELP nv_cache_miss_duration_per_model Total cache miss (insert+lookup) duration per model, in microseconds\n');
    expect(text).not.toMatch(/nv_cache_\w+\{model="identity_nocache"/);
    // Order: the cache counters follow the compute counters and precede the gauges.
    const at = (name: string) => text.indexOf(`# HELP ${name} `);
    expect(at('nv_inference_compute_output_duration_us')).toBeLessThan(at('nv_cache_num_hits_per_model'));
    expect(at('nv_cache_num_hits_per_model')).toBeLessThan(at('nv_cache_hit_duration_per_model'));
    expect(at('nv_cache_hit_duration_per_model')).toBeLessThan(at('nv_cache_num_misses_per_model'));
    expect(at('nv_cache_num_misses_per_model')).toBeLessThan(at('nv_cache_miss_duration_per_model'));
    expect(at('nv_cache_miss_duration_per_model')).toBeLessThan(at('nv_inference_pending_request_count'));
    // Successes include hits; inference counts do not.
    const s = await stats(worker, 'identity_cache');
    expect(text).toContain(`nv_inference_request_success{model="identity_cache",version="1"} ${s.inference_stats.success.count}\n`);
    expect(text).toContain(`nv_inference_count{model="identity_cache",version="1"} ${s.inference_count}\n`);
  });

  it('refuses the cache on decoupled and sequence-batched models, with Triton\'s messages', async () => {
    const index = (await post(`${worker.httpUrl}/v2/repository/index`, {})).json() as Array<{ name: string; state?: string; reason?: string }>;
    const byName = new Map(index.map((m) => [m.name, m]));
    expect(byName.get('decoupled_cache')).toMatchObject({ state: 'UNAVAILABLE' });
    expect(byName.get('decoupled_cache')?.reason).toContain(
      "Response Cache does not currently support model decoupled_cache with 'decoupled' transaction policy. Please disable the response cache.",
    );
    expect(byName.get('sequence_cache')?.reason).toContain(
      'Response Cache does not currently support model sequence_cache with sequence batching scheduler. Please disable the response cache.',
    );
  });
});

describe('a small cache (deprecated --response-cache-byte-size)', () => {
  let worker: WorkerProcess;
  // One 64-float response packs to 315 bytes: two fit in 700, a third evicts the least recently used.
  const row = (v: number) => Array.from({ length: 64 }, () => v);
  beforeAll(async () => {
    worker = await startWorkerProcess({
      modelRepositories: [repo.path],
      args: ['--response-cache-byte-size=700', '--model-control-mode=explicit', '--load-model=identity_cache'],
    });
  });
  afterAll(async () => {
    await worker?.stop();
  });

  it('evicts the least recently used response', async () => {
    const infer = async (v: number) => {
      const r = await post(`${worker.httpUrl}/v2/models/identity_cache/infer`, identityBody(row(v)));
      expect(r.status).toBe(200);
      expect(r.json().outputs[0].data).toEqual(row(v));
    };
    const counts = async () => {
      const s = (await stats(worker, 'identity_cache')).inference_stats;
      return [s.cache_hit.count, s.cache_miss.count];
    };
    await infer(1); // miss: [1]
    await infer(2); // miss: [1, 2]
    await infer(1); // hit: [2, 1]
    expect(await counts()).toEqual([1, 2]);
    await infer(3); // miss, evicts 2: [1, 3]
    await infer(1); // hit
    await infer(2); // miss again, evicts 3: [1, 2]
    expect(await counts()).toEqual([2, 4]);
    await infer(3); // evicted earlier: miss
    expect(await counts()).toEqual([2, 5]);
  });

  it('logs that the flag is deprecated', () => {
    expect(worker.output()).toContain("'--response-cache-byte-size' is deprecated: use the equivalent '--cache-config=local,size=700'");
  });

  it('refuses a response larger than the whole cache, counting the miss', async () => {
    const big = Array.from({ length: 256 }, (_, i) => i);
    for (let i = 0; i < 2; i++) expect((await post(`${worker.httpUrl}/v2/models/identity_cache/infer`, identityBody(big))).status).toBe(200);
    const s = (await stats(worker, 'identity_cache')).inference_stats;
    expect([s.cache_hit.count, s.cache_miss.count]).toEqual([2, 7]);
    expect(worker.output()).toMatch(/Failed to insert key \[[^\]]+\] into response cache/);
  });
});

describe('a server without a cache', () => {
  it('ignores response_cache in model configs: no hits, no cache metrics', async () => {
    const worker = await startWorkerProcess({ modelRepositories: [repo.path], args: ['--model-control-mode=explicit', '--load-model=identity_cache'] });
    try {
      for (let i = 0; i < 2; i++) expect((await post(`${worker.httpUrl}/v2/models/identity_cache/infer`, identityBody([1]))).status).toBe(200);
      const s = await stats(worker, 'identity_cache');
      expect([s.inference_stats.cache_hit.count, s.inference_stats.cache_miss.count, s.execution_count]).toEqual([0, 0, 2]);
      expect(await metrics(worker)).not.toContain('nv_cache_');
    } finally {
      await worker.stop();
    }
  });
});

describe('cache flags', () => {
  const run = (...flags: string[]) => spawnSync(process.execPath, [BIN, 'worker', `--model-repository=${repo.path}`, ...flags], { encoding: 'utf8' });
  it.each([
    [['--cache-config=local,size=1024', '--cache-config=redis,host=localhost'], 'multiple cache configurations are not supported'],
    [['--response-cache-byte-size=1024', '--cache-config=local,size=1024'], 'Error: Incompatible flags --response-cache-byte-size and --cache-config both provided.'],
    [['--cache-config=size=1024'], 'No cache specified. --cache-config option format is <cache name>,<setting>=<value>. Got size=1024'],
    [['--cache-config=local,size'], "--cache-config option format is '<cache name>,<setting>=<value>'. Got local,size"],
    [['--cache-config=redis,host=localhost'], "unable to find cache 'redis'"],
    [['--cache-config=local,size=0'], "the 'local' cache needs size=<bytes> with a positive number of bytes, got '0'"],
    [['--cache-config=local,capacity=10'], "unknown setting 'capacity' for the 'local' cache"],
  ])('%j exits 2: %s', (flags, message) => {
    const r = run(...flags);
    expect(r.status).toBe(2);
    expect(r.stderr).toContain(message);
  });

  it('--help lists both flags', () => {
    const r = spawnSync(process.execPath, [BIN, 'worker', '--help'], { encoding: 'utf8' });
    expect(r.stdout).toContain('--cache-config');
    expect(r.stdout).toContain('--response-cache-byte-size');
  });
});
