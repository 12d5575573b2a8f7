/**
 * The GPU probe role: which GPUs this host has (for placing instance groups) and how they are doing
 * (for the `nv_gpu_*` metrics). Two implementations: `NvidiaSmiProbe` (the NVIDIA driver's
 * `nvidia-smi`, else `/proc/driver/nvidia/gpus`) and `MemoryGpuProbe` (fixed devices, for tests and
 * embedders that know their hardware). `gpuPlacement` turns an inventory into what the config
 * normalisation and validation need: pure, so every decision is testable without a GPU.
 */

/** One GPU as CUDA numbers it for this process (after `CUDA_VISIBLE_DEVICES`). */
export interface GpuDevice {
  /** CUDA device ordinal: what `gpus: [...]` in an instance group names. */
  index: number;
  /** `GPU-xxxxxxxx-...`: the `gpu_uuid` label of the metrics. */
  uuid: string;
  name: string;
  /** e.g. 8.6; undefined when the source does not report it (then the device is not filtered on it). */
  computeCapability: number | undefined;
}

export interface GpuInventory {
  devices: GpuDevice[];
  /** Set when `devices` is empty: why (no driver, no device, all hidden), in a few words. */
  absence?: string;
}

/** One device's figures at one moment, in the units of Triton's GPU metrics. */
export interface GpuSample {
  uuid: string;
  /** [0, 1]. */
  utilization: number;
  memoryTotalBytes: number;
  memoryUsedBytes: number;
  powerUsageWatts: number;
  powerLimitWatts: number;
  /** Joules since the probe's first reading (Triton: since the server started). */
  energyJoules: number;
}

export interface GpuProbe {
  /**
   * The GPUs of this host. Called by the engine before it places a model's instance groups (the
   * answer may be cached: GPUs do not come and go). Never throws: a source that fails means no GPU,
   * with `absence` saying why. Bounded in time.
   */
  inventory(): Promise<GpuInventory>;
  /** Current figures of every device in the inventory; [] when there is none or reading failed. Bounded in time. */
  sample(): Promise<GpuSample[]>;
}

/** What to install to get GPU instances, said after Triton's refusal. */
export const GPU_INSTALL_HINT =
  'KIND_GPU instances need an NVIDIA GPU with its driver (nvidia-smi), and for onnxruntime and llm models the CUDA 12 and cuDNN 9 libraries with ' +
  "onnxruntime-node's CUDA execution provider (node node_modules/onnxruntime-node/script/install.js --onnxruntime-node-install=cuda12); use KIND_CPU or KIND_AUTO to run on CPU";

export interface GpuPlacement {
  /** CUDA ordinals instances may be placed on (Triton's `GetSupportedGPUs`). */
  supportedGpus: number[];
  /** When none: why, and what to install (`ValidateOptions.gpuHint`). */
  hint?: string;
}

/** The devices at or above the minimum compute capability; a device that reports none counts as supported. */
export function gpuPlacement(inventory: GpuInventory, minComputeCapability: number): GpuPlacement {
  const supported = inventory.devices.filter((d) => d.computeCapability === undefined || d.computeCapability >= minComputeCapability);
  if (supported.length > 0) return { supportedGpus: supported.map((d) => d.index) };
  const why =
    inventory.devices.length > 0
      ? `no GPU of this host has compute capability ${minComputeCapability} or more: ${inventory.devices.map((d) => `${d.index} (${d.name}, ${d.computeCapability})`).join(', ')}`
      : (inventory.absence ?? 'no GPU found');
  return { supportedGpus: [], hint: `${why}. ${GPU_INSTALL_HINT}` };
}
