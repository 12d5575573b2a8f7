/**
 * `MemoryGpuProbe`: the in-memory twin of the GPU probe. It reports the devices and samples it is
 * given (none by default: a host without GPUs), so tests and embedders decide what the engine sees.
 */
import type { GpuDevice, GpuInventory, GpuProbe, GpuSample } from './gpu-probe.js';

export class MemoryGpuProbe implements GpuProbe {
  #samples: GpuSample[];

  constructor(
    private readonly devices: readonly GpuDevice[] = [],
    samples: readonly GpuSample[] = [],
    private readonly absence = 'no GPU on this host',
  ) {
    this.#samples = [...samples];
  }

  async inventory(): Promise<GpuInventory> {
    return this.devices.length > 0 ? { devices: [...this.devices] } : { devices: [], absence: this.absence };
  }

  async sample(): Promise<GpuSample[]> {
    return this.#samples.map((s) => ({ ...s }));
  }

  /** Replace the figures later samples report. */
  setSamples(samples: readonly GpuSample[]): void {
    this.#samples = [...samples];
  }
}
