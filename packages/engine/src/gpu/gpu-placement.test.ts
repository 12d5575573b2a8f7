/**
 * Instance-group placement through a real engine, with the GPU probe's memory twin standing in for
 * the host: what loads where, and what a model that cannot be placed reports.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { deserializeBytesElements } from '@switchyard/kserve';
import { buildIdentityModel } from '@switchyard/onnx-builder';
import { createEngine, type Engine } from '../engine.js';
import { OnnxRuntimeBackend } from '../onnxruntime/onnxruntime-backend.js';
import { LlmBackend } from '../llm/llm-backend.js';
import { createRepository, float32s, request, tensor, type RepositoryFixture } from '../test-support/repository-fixture.js';
import { GPU_INSTALL_HINT, type GpuDevice } from './gpu-probe.js';
import { MemoryGpuProbe } from './memory-gpu-probe.js';

const GPU0: GpuDevice = { index: 0, uuid: 'GPU-00000000-aaaa', name: 'NVIDIA L4', computeCapability: 8.9 };
const GPU1: GpuDevice = { index: 1, uuid: 'GPU-11111111-bbbb', name: 'NVIDIA L4', computeCapability: 8.9 };
const OLD: GpuDevice = { index: 0, uuid: 'GPU-22222222-cccc', name: 'Tesla K80', computeCapability: 3.7 };

const onnx = (name: string, groups: string): { config: string; versions: Record<number, Record<string, Uint8Array>> } => ({
  config: `name: "${name}" backend: "onnxruntime" max_batch_size: 8
    input { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] } output { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] }
    ${groups}`,
  versions: { 1: { 'model.onnx': buildIdentityModel('FLOAT', ['batch', 4]) } },
});

// Says where its instance runs, as Triton's Python backend tells a model.
const WHERE_MJS = `
export class TritonModel {
  initialize(args) { this.where = [args.model_instance_name, args.model_instance_kind, args.model_instance_device_id].join('|'); this.pb = args.pb; }
  execute(requests) { return requests.map(() => new this.pb.Response({ outputs: [this.pb.Tensor.fromStrings('WHERE', [this.where], [1])] })); }
}
`;
const js = (name: string, groups: string) => ({
  config: `name: "${name}" backend: "javascript" input { name: "IN" data_type: TYPE_INT32 dims: [ 1 ] } output { name: "WHERE" data_type: TYPE_STRING dims: [ 1 ] } ${groups}`,
  versions: { 1: { 'model.mjs': WHERE_MJS } },
});

const MODELS = {
  gpu: onnx('gpu', 'instance_group { kind: KIND_GPU }'),
  gpu_one: onnx('gpu_one', 'instance_group { kind: KIND_GPU gpus: [ 1 ] }'),
  auto: onnx('auto', 'instance_group { kind: KIND_AUTO count: 1 }'),
  plain: onnx('plain', ''),
  js_gpu: js('js_gpu', 'instance_group { kind: KIND_GPU count: 1 gpus: [ 1 ] }'),
};

let repo: RepositoryFixture;
beforeAll(async () => {
  repo = await createRepository(MODELS);
});
afterAll(async () => {
  await repo.cleanup();
});

async function withEngine(options: Parameters<typeof createEngine>[0] extends infer O ? Partial<O> : never, body: (engine: Engine) => Promise<void>): Promise<void> {
  const engine = await createEngine({ modelRepositories: [repo.root], ...options });
  try {
    await body(engine);
  } finally {
    await engine.shutdown();
  }
}

async function states(engine: Engine): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const row of await engine.repositoryIndex(false)) out[row.name] = row.state === 'READY' ? 'READY' : `${row.state}: ${row.reason}`;
  return out;
}

async function identity(engine: Engine, model: string): Promise<number[]> {
  const response = await engine.infer(request(model, [tensor('INPUT0', 'FP32', [1, 4], Float32Array.of(1, 2, 3, 4))]));
  return float32s(response.outputs[0]!.data);
}

async function where(engine: Engine, model: string): Promise<string> {
  const response = await engine.infer(request(model, [tensor('IN', 'INT32', [1], Int32Array.of(0))]));
  return new TextDecoder().decode(deserializeBytesElements(response.outputs[0]!.data)[0]);
}

describe('instance groups on a host without GPUs', () => {
  it('runs KIND_AUTO on the CPU and refuses GPU groups with Triton words and what to install', async () => {
    await withEngine({}, async (engine) => {
      const hint = `(no GPU on this host. ${GPU_INSTALL_HINT})`;
      expect(await states(engine)).toEqual({
        auto: 'READY',
        plain: 'READY',
        gpu: `UNAVAILABLE: instance group gpu_0 of model gpu has kind KIND_GPU but no GPUs are available ${hint}`,
        gpu_one: `UNAVAILABLE: instance group gpu_one_0 of model gpu_one specifies invalid or unsupported gpu id 1. GPUs with at least the minimum required CUDA compute compatibility of 6.000000 are: ${hint}`,
        js_gpu: `UNAVAILABLE: instance group js_gpu_0 of model js_gpu specifies invalid or unsupported gpu id 1. GPUs with at least the minimum required CUDA compute compatibility of 6.000000 are: ${hint}`,
      });
      expect(await identity(engine, 'auto')).toEqual([1, 2, 3, 4]);
    });
  });

  it('does not use GPUs below the minimum compute capability', async () => {
    await withEngine({ gpus: new MemoryGpuProbe([OLD]) }, async (engine) => {
      const s = await states(engine);
      expect(s['auto']).toBe('READY');
      expect(s['gpu']).toBe(
        `UNAVAILABLE: instance group gpu_0 of model gpu has kind KIND_GPU but no GPUs are available (no GPU of this host has compute capability 6 or more: 0 (Tesla K80, 3.7). ${GPU_INSTALL_HINT})`,
      );
    });
    await withEngine({ gpus: new MemoryGpuProbe([OLD]), minComputeCapability: 3.5, backends: { onnxruntime: new OnnxRuntimeBackend({ cudaStatus: () => ({ available: false, reason: 'no provider' }) }) } }, async (engine) => {
      // Placed on the old GPU now; the (substituted) missing provider is what refuses it.
      expect((await states(engine))['gpu']).toMatch(/has kind KIND_GPU but no GPUs are available \(the onnxruntime backend cannot use this host's GPUs: no provider; use KIND_CPU/);
    });
  });
});

describe('instance groups on a host with GPUs', () => {
  it('without the CUDA provider: KIND_AUTO runs on the CPU, KIND_GPU is refused saying what to install', async () => {
    // The real provider check: this install has no CUDA provider libraries.
    await withEngine({ gpus: new MemoryGpuProbe([GPU0, GPU1]) }, async (engine) => {
      const s = await states(engine);
      expect(s['auto']).toBe('READY');
      expect(s['plain']).toBe('READY');
      expect(s['gpu']).toMatch(
        /^UNAVAILABLE: instance group gpu_0 of model gpu has kind KIND_GPU but no GPUs are available \(the onnxruntime backend cannot use this host's GPUs: onnxruntime-node's CUDA execution provider is not installed \(.*libonnxruntime_providers_cuda\.so.* missing from .*\): run 'node .*onnxruntime-node\/script\/install\.js --onnxruntime-node-install=cuda12'/,
      );
      expect(await identity(engine, 'auto')).toEqual([1, 2, 3, 4]);
      // The JavaScript backend gives its model the device, as Triton's Python backend does.
      expect(s['js_gpu']).toBe('READY');
      expect(await where(engine, 'js_gpu')).toBe('js_gpu_0_0|GPU|1');
    });
  });

  it('with the CUDA provider: sessions ask ONNX Runtime for CUDA on the instance device', async () => {
    // The provider is said to be installed; ONNX Runtime itself then fails to load it here, and that
    // failure (not a CPU session) is what the model reports, naming the device.
    const backend = new OnnxRuntimeBackend({ cudaStatus: () => ({ available: true, libraryDir: '/nowhere' }) });
    await withEngine({ gpus: new MemoryGpuProbe([GPU0, GPU1]), backends: { onnxruntime: backend } }, async (engine) => {
      const s = await states(engine);
      expect(s['gpu_one']).toMatch(/^UNAVAILABLE: unable to load model 'gpu_one': onnx runtime error: .*Cuda.*Failed to load shared library \(GPU 1: the CUDA execution provider needs/);
      expect(s['gpu']).toMatch(/\(GPU 0: the CUDA execution provider needs/);
      // KIND_AUTO became KIND_GPU (GPUs exist and the backend can use them), so it fails the same way.
      expect(s['auto']).toMatch(/\(GPU 0: the CUDA execution provider needs/);
      expect(s['plain']).toMatch(/\(GPU 0: the CUDA execution provider needs/);
    });
  });
});

describe('which backends can use GPUs', () => {
  const missing = () => ({ available: false as const, reason: 'no provider here' });
  const present = () => ({ available: true as const, libraryDir: '/ort' });
  it('onnxruntime and llm need the CUDA provider; the mocker computes nothing and runs anywhere', () => {
    expect(new OnnxRuntimeBackend({ cudaStatus: missing }).gpuSupport()).toEqual({ usable: false, reason: 'no provider here' });
    expect(new OnnxRuntimeBackend({ cudaStatus: present }).gpuSupport()).toEqual({ usable: true });
    expect(new LlmBackend('llm', undefined, undefined, undefined, missing).gpuSupport()).toEqual({ usable: false, reason: 'no provider here' });
    expect(new LlmBackend('llm', undefined, undefined, undefined, present).gpuSupport()).toEqual({ usable: true });
    expect(new LlmBackend('mocker', undefined, undefined, undefined, missing).gpuSupport()).toEqual({ usable: true });
  });
});
