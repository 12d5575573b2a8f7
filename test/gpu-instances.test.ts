/**
 * GPU instance groups as a user meets them, on real worker processes. The machines this suite runs
 * on have no GPU: the first worker sees none (no nvidia-smi, no driver), as a CPU-only host does; the
 * second sees two through a stand-in `nvidia-smi` on its PATH (the driver's tool is all the worker asks),
 * while onnxruntime-node's CUDA provider is not installed, as after a plain `npm install`.
 */
import { spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildIdentityModel } from '@switchyard/onnx-builder';
import { repoRoot, startWorkerProcess, type WorkerProcess } from '@switchyard/testing';
import { fixtureRepository, type FixtureRepository } from './lib/fixture-repository.js';
import { grpc, loadGrpcClients, unary, unaryError, type GrpcClient } from './lib/grpc-client.js';
import { deserializeStrings, fp32Bytes, post, readFp32 } from './lib/tensors.js';

const ONNX = buildIdentityModel('FLOAT', ['batch', 4]);
const ONNX_MODELS = ['gpu_group', 'gpu_named', 'auto_group', 'cpu_default'];
const ALL = [...ONNX_MODELS, 'js_gpu'];

const INSTALL = 'onnxruntime-node/script/install.js --onnxruntime-node-install=cuda12';
/** This install has onnxruntime-node's CUDA provider libraries (then the second suite's premise does not hold). */
const HAS_CUDA_PROVIDER = existsSync(join(repoRoot(), 'node_modules/onnxruntime-node/bin/napi-v6', process.platform, process.arch, 'libonnxruntime_providers_cuda.so'));

function repository(): FixtureRepository {
  return fixtureRepository('gpu_repository', { files: Object.fromEntries(ONNX_MODELS.map((m) => [`${m}/1/model.onnx`, ONNX])) });
}

async function load(worker: WorkerProcess, model: string): Promise<{ status: number; error?: string }> {
  const r = await post(`${worker.httpUrl}/v2/repository/models/${model}/load`, undefined);
  return r.status === 200 ? { status: 200 } : { status: r.status, error: r.json().error };
}

async function index(worker: WorkerProcess): Promise<Record<string, string>> {
  const rows = (await post(`${worker.httpUrl}/v2/repository/index`, undefined)).json() as Array<{ name: string; state?: string; reason?: string }>;
  return Object.fromEntries(rows.map((r) => [r.name, r.state === 'READY' ? 'READY' : `${r.state}: ${r.reason}`]));
}

async function identity(worker: WorkerProcess, model: string): Promise<number[]> {
  const body = { inputs: [{ name: 'INPUT0', shape: [1, 4], datatype: 'FP32', data: [1, 2, 3, 4] }] };
  const r = await post(`${worker.httpUrl}/v2/models/${model}/infer`, body);
  expect(r.status).toBe(200);
  return r.json().outputs[0].data;
}

/** A host with the NVIDIA driver (a GPU machine): the first suite's premise does not hold there. */
const HOST_HAS_DRIVER = existsSync('/proc/driver/nvidia/gpus') || spawnSync('nvidia-smi', ['-L']).error === undefined;

describe.skipIf(HOST_HAS_DRIVER)('a worker that sees no GPU', () => {
  let repo: FixtureRepository;
  let worker: WorkerProcess;
  let grpcClient: GrpcClient;

  beforeAll(async () => {
    repo = repository();
    // This host has no nvidia-smi and no /proc/driver/nvidia: the worker's real probe finds nothing.
    worker = await startWorkerProcess({ modelRepositories: [repo.path], args: ['--model-control-mode=explicit', '--load-model=auto_group'] });
    grpcClient = loadGrpcClients(worker.grpcAddress).inference;
  });
  afterAll(async () => {
    grpcClient?.close();
    await worker?.stop();
    repo?.remove();
  });

  it('logs that it found no GPU and why', () => {
    const line = worker.logs().find((l) => l['msg'] === 'no GPU: KIND_AUTO instance groups run on the CPU, KIND_GPU ones are refused');
    expect(line?.['reason']).toMatch(/^no NVIDIA driver on this host \(no nvidia-smi on PATH, no \/proc\/driver\/nvidia\/gpus\)$/);
  });

  it('runs KIND_AUTO and default groups on the CPU', async () => {
    expect(await identity(worker, 'auto_group')).toEqual([1, 2, 3, 4]);
    expect(await load(worker, 'cpu_default')).toEqual({ status: 200 });
    expect(await identity(worker, 'cpu_default')).toEqual([1, 2, 3, 4]);
  });

  it('refuses KIND_GPU with Triton words, then why and what to install; the model is UNAVAILABLE and the server keeps serving', async () => {
    const why = '(no NVIDIA driver on this host (no nvidia-smi on PATH, no /proc/driver/nvidia/gpus). KIND_GPU instances need an NVIDIA GPU with its driver (nvidia-smi)';
    const gpu = await load(worker, 'gpu_group');
    expect(gpu.status).toBe(400);
    expect(gpu.error).toContain(
      `load failed for model 'gpu_group': version 1 is at UNAVAILABLE state: instance group gpu_group_0 of model gpu_group has kind KIND_GPU but no GPUs are available ${why}`,
    );
    expect(gpu.error).toContain(INSTALL);
    const named = await load(worker, 'gpu_named');
    expect(named.error).toContain(
      `instance group gpu_named_0 of model gpu_named specifies invalid or unsupported gpu id 1. GPUs with at least the minimum required CUDA compute compatibility of 6.000000 are: ${why}`,
    );
    expect((await load(worker, 'js_gpu')).error).toContain('instance group js_gpu_0 of model js_gpu specifies invalid or unsupported gpu id 1.');
    const states = await index(worker);
    expect(states['gpu_group']).toMatch(/^UNAVAILABLE: instance group gpu_group_0 of model gpu_group has kind KIND_GPU but no GPUs are available \(/);
    expect(states['gpu_named']).toMatch(/^UNAVAILABLE: instance group gpu_named_0 of model gpu_named specifies invalid or unsupported gpu id 1/);
    expect(states['auto_group']).toBe('READY');
    expect((await fetch(`${worker.httpUrl}/v2/models/gpu_group/ready`)).status).toBe(400);
    expect(await identity(worker, 'auto_group')).toEqual([1, 2, 3, 4]);
  });

  it('says the same over gRPC', async () => {
    const err = await unaryError(grpcClient, 'RepositoryModelLoad', { model_name: 'gpu_group' });
    expect(err.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(err.details).toContain('instance group gpu_group_0 of model gpu_group has kind KIND_GPU but no GPUs are available (');
    const rows = (await unary(grpcClient, 'RepositoryIndex', {})).models as Array<{ name: string; state: string; reason: string }>;
    expect(rows.find((r) => r.name === 'gpu_group')?.state).toBe('UNAVAILABLE');
  });

  it('has no nv_gpu_* metrics', async () => {
    const text = await (await fetch(`${worker.metricsUrl}/metrics`)).text();
    expect(text).toMatch(/nv_cpu_utilization/);
    expect(text).not.toMatch(/nv_gpu_|nv_energy_consumption/);
  });
});

describe.skipIf(HAS_CUDA_PROVIDER)('a worker that sees two GPUs but has no CUDA provider', () => {
  let repo: FixtureRepository;
  let worker: WorkerProcess;
  let bin: string;

  beforeAll(async () => {
    repo = repository();
    bin = mkdtempSync(join(tmpdir(), 'switchyard-fake-smi-'));
    // Answers the two queries the worker makes, as nvidia-smi formats them (csv, noheader, nounits).
    writeFileSync(
      join(bin, 'nvidia-smi'),
      [
        '#!/bin/sh',
        'case "$1" in',
        "  *compute_cap*) printf '0, GPU-5f8d0c4e-1111-2222-3333-444444444444, NVIDIA L4, 8.9\\n1, GPU-9a7b6c5d-5555-6666-7777-888888888888, NVIDIA L4, 8.9\\n' ;;",
        "  *) printf 'GPU-5f8d0c4e-1111-2222-3333-444444444444, 12, 23034, 512, 16.29, 72.00, 1000000\\nGPU-9a7b6c5d-5555-6666-7777-888888888888, 0, 23034, 0, 11.5, 72.00, 2000000\\n' ;;",
        'esac',
        '',
      ].join('\n'),
    );
    chmodSync(join(bin, 'nvidia-smi'), 0o755);
    worker = await startWorkerProcess({
      modelRepositories: [repo.path],
      // the GPU group is refused here: serve the rest, as a qa test.sh does with --exit-on-error=false
      args: ['--model-control-mode=explicit', '--exit-on-error=false', ...ALL.map((m) => `--load-model=${m}`)],
      env: { PATH: `${bin}:${process.env['PATH'] ?? ''}` },
    });
  });
  afterAll(async () => {
    await worker?.stop();
    repo?.remove();
    if (bin !== undefined) rmSync(bin, { recursive: true, force: true });
  });

  it('places ONNX models as if there were no GPU: KIND_AUTO on the CPU, KIND_GPU refused naming the CUDA provider install', async () => {
    const states = await index(worker);
    expect(states['auto_group']).toBe('READY');
    expect(states['cpu_default']).toBe('READY');
    expect(await identity(worker, 'auto_group')).toEqual([1, 2, 3, 4]);
    expect(states['gpu_group']).toMatch(
      /^UNAVAILABLE: instance group gpu_group_0 of model gpu_group has kind KIND_GPU but no GPUs are available \(the onnxruntime backend cannot use this host's GPUs: onnxruntime-node's CUDA execution provider is not installed \(/,
    );
    expect(states['gpu_group']).toContain(INSTALL);
  });

  it('runs a JavaScript model on the GPU it names and tells it so', async () => {
    expect((await index(worker))['js_gpu']).toBe('READY');
    const r = await post(`${worker.httpUrl}/v2/models/js_gpu/infer`, { inputs: [{ name: 'IN', shape: [1], datatype: 'INT32', data: [0] }] });
    expect(r.status).toBe(200);
    expect(r.json().outputs[0].data).toEqual(['js_gpu_0_0|GPU|1']);
  });

  it('exports nv_gpu_* per gpu_uuid from nvidia-smi', async () => {
    const text = await (await fetch(`${worker.metricsUrl}/metrics`)).text();
    const a = 'gpu_uuid="GPU-5f8d0c4e-1111-2222-3333-444444444444"';
    const b = 'gpu_uuid="GPU-9a7b6c5d-5555-6666-7777-888888888888"';
    expect(text).toContain('# HELP nv_gpu_utilization GPU utilization rate [0.0 - 1.0)\n# TYPE nv_gpu_utilization gauge\n');
    expect(text).toContain(`nv_gpu_utilization{${a}} 0.12\nnv_gpu_utilization{${b}} 0\n`);
    expect(text).toContain(`nv_gpu_memory_total_bytes{${a}} 24152899584\n`);
    expect(text).toContain(`nv_gpu_memory_used_bytes{${a}} 536870912\n`);
    expect(text).toContain(`nv_gpu_power_usage{${a}} 16.29\n`);
    expect(text).toContain(`nv_gpu_power_limit{${b}} 72\n`);
    // Energy counts from the worker's first reading; the stand-in's counter does not move.
    expect(text).toContain(`nv_energy_consumption{${a}} 0\n`);
  });
});
