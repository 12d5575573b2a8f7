import { describe, expect, it } from 'vitest';
import { cudaProviderInstall, cudaProviderStatus, ortBindingDir, ortInstallScript } from './execution-providers.js';
import { existsSync } from 'node:fs';

const CUDA_PROVIDER_INSTALL = cudaProviderInstall();

describe('cudaProviderStatus', () => {
  it('names the installer that exists in this install', () => {
    expect(existsSync(ortInstallScript())).toBe(true);
    expect(CUDA_PROVIDER_INSTALL).toBe(`run 'node ${ortInstallScript()} --onnxruntime-node-install=cuda12' (it downloads the CUDA 12 provider libraries) on a host with the NVIDIA driver, CUDA 12 and cuDNN 9`);
  });

  it('reads the real install: onnxruntime-node lists cuda, and says what is missing when its libraries are', () => {
    const status = cudaProviderStatus();
    if (status.available) {
      expect(status.libraryDir).toBe(ortBindingDir());
    } else {
      expect(status.reason).toContain(CUDA_PROVIDER_INSTALL);
    }
  });

  it('is available only with both provider libraries beside the binding', () => {
    const supported = () => [
      { name: 'cpu', bundled: true },
      { name: 'cuda', bundled: false },
    ];
    const io = (present: string[]) => ({ supported, dir: '/ort/bin', exists: (p: string) => present.some((f) => p === `/ort/bin/${f}`) });
    expect(cudaProviderStatus(io(['libonnxruntime_providers_shared.so', 'libonnxruntime_providers_cuda.so']))).toEqual({ available: true, libraryDir: '/ort/bin' });
    if (process.platform === 'win32') return;
    expect(cudaProviderStatus(io(['libonnxruntime_providers_shared.so']))).toEqual({
      available: false,
      reason: `onnxruntime-node's CUDA execution provider is not installed (libonnxruntime_providers_cuda.so missing from /ort/bin): ${CUDA_PROVIDER_INSTALL}`,
    });
  });

  it('is unavailable where onnxruntime-node has no CUDA provider at all', () => {
    const status = cudaProviderStatus({ supported: () => [{ name: 'cpu', bundled: true }], dir: '/x' });
    expect(status.available).toBe(false);
    expect(!status.available && status.reason).toMatch(/^onnxruntime-node has no CUDA execution provider on /);
  });
});
