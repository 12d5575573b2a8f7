// Which of onnxruntime-node's execution providers this install can use, without creating a session.
//
// onnxruntime-node's `listSupportedBackends()` names the providers its binding was built with; those
// marked `bundled: false` (CUDA and TensorRT on linux/x64) live in separate shared libraries that the
// package's install script downloads (`--onnxruntime-node-install=cuda12`); an install whose scripts
// did not run (npm's script policy, no network, `--onnxruntime-node-install=skip`) lacks them. ONNX Runtime then fails
// every session that asks for the provider ("Failed to load shared library") instead of falling
// back to the CPU, so the engine checks before it tries and says what to install.
// Whether the CUDA 12 / cuDNN 9 runtime libraries that the provider itself loads are present is only
// known when a session is created: that failure comes with ONNX Runtime's own message.
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';

// Required, not imported: importing this CommonJS package from an ES module makes each thread that
// loads it (every session thread; see ort-tensor.js) scan its sources for export names first, ~4 ms of the ~45 ms of
// CPU a session thread takes to start.
/** @type {typeof import('onnxruntime-node')} */
const ort = createRequire(import.meta.url)('onnxruntime-node');

/** onnxruntime-node's own installer of the libraries it does not bundle. */
export function ortInstallScript() {
  return join(dirname(createRequire(import.meta.url).resolve('onnxruntime-node')), '..', 'script', 'install.js');
}

/**
 * How to get the CUDA execution provider into an existing install. npm runs the package's installer
 * only where install scripts are allowed (this project's package.json turns them off for
 * onnxruntime-node), so the command runs it directly.
 */
export function cudaProviderInstall() {
  return `run 'node ${ortInstallScript()} --onnxruntime-node-install=cuda12' (it downloads the CUDA 12 provider libraries) on a host with the NVIDIA driver, CUDA 12 and cuDNN 9`;
}

/**
 * @typedef {{ available: true, libraryDir: string } | { available: false, reason: string }} ProviderStatus
 */

/** The folder holding onnxruntime-node's native binding and provider libraries for this platform. */
export function ortBindingDir() {
  const entry = createRequire(import.meta.url).resolve('onnxruntime-node');
  return join(dirname(entry), '..', 'bin', 'napi-v6', process.platform, process.arch);
}

/**
 * Whether onnxruntime-node can use its CUDA execution provider here: built in, and its provider
 * libraries installed beside the binding.
 * @param {{ supported?: () => { name: string, bundled: boolean }[], exists?: (path: string) => boolean, dir?: string }} [io] tests substitute the binding's answers
 * @returns {ProviderStatus}
 */
export function cudaProviderStatus(io = {}) {
  const supported = (io.supported ?? ort.listSupportedBackends)();
  const cuda = supported.find((b) => b.name === 'cuda');
  const dir = io.dir ?? ortBindingDir();
  if (cuda === undefined) {
    return { available: false, reason: `onnxruntime-node has no CUDA execution provider on ${process.platform}/${process.arch} (it ships one for linux/x64 and win32/x64)` };
  }
  if (cuda.bundled) return { available: true, libraryDir: dir };
  const exists = io.exists ?? existsSync;
  const missing = ['libonnxruntime_providers_shared.so', 'libonnxruntime_providers_cuda.so'].filter((f) => !exists(join(dir, f)));
  if (process.platform === 'win32' || missing.length === 0) return { available: true, libraryDir: dir };
  return { available: false, reason: `onnxruntime-node's CUDA execution provider is not installed (${missing.join(' and ')} missing from ${dir}): ${cudaProviderInstall()}` };
}
