/**
 * `NvidiaSmiProbe`: the GPU probe on a host with the NVIDIA driver, dependency-free.
 *
 * Inventory: `nvidia-smi --query-gpu=index,uuid,name,compute_cap` (the driver's own tool; no CUDA
 * or NVML binding needed in the process). Without nvidia-smi, the driver's
 * `/proc/driver/nvidia/gpus/<pci address>/information` files (model and UUID, no compute
 * capability), in PCI bus order. Neither: no GPU, and the absence says so. Then CUDA's
 * `CUDA_VISIBLE_DEVICES` rule (given by the app, which reads the environment) picks and renumbers
 * the devices this process may use. The inventory is read once and kept.
 *
 * Samples: `nvidia-smi --query-gpu=uuid,utilization.gpu,memory.total,memory.used,power.draw,
 * power.limit,total_energy_consumption`, for the metrics scrape. Every run of nvidia-smi is bounded
 * by `timeoutMs` and 1 MiB of output; concurrent samples share one run, and a sample younger than
 * `sampleIntervalMs` is reused.
 *
 * Device order: nvidia-smi and /proc number GPUs in PCI bus order; CUDA numbers them fastest first
 * unless `CUDA_DEVICE_ORDER=PCI_BUS_ID`. On hosts with mixed GPUs set that variable so that
 * `gpus: [N]` and `gpu_uuid` name the same device in both.
 */
import { execFile } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { GpuDevice, GpuInventory, GpuProbe, GpuSample } from './gpu-probe.js';

export const DEFAULT_NVIDIA_SMI_TIMEOUT_MS = 5000;
export const DEFAULT_GPU_SAMPLE_INTERVAL_MS = 2000;
const MAX_OUTPUT_BYTES = 1 << 20;
const MIB = 1024 * 1024;

export interface NvidiaSmiProbeOptions {
  /** The nvidia-smi executable; default `nvidia-smi` on PATH. */
  command?: string;
  /** The value of `CUDA_VISIBLE_DEVICES` for this process; undefined: unset (every GPU visible). */
  visibleDevices?: string | undefined;
  /** Bound of one nvidia-smi run; default 5000 ms. */
  timeoutMs?: number;
  /** The driver's per-GPU folder; default `/proc/driver/nvidia/gpus`. */
  procGpusDir?: string;
  /**
   * A sample younger than this is answered again instead of running nvidia-smi (Triton polls its GPU
   * figures every `--metrics-interval-ms`, 2000 by default); so scrapes, however frequent, start at most
   * one nvidia-smi per interval. Default 2000 ms.
   */
  sampleIntervalMs?: number;
}

/** A number from nvidia-smi's CSV, or undefined for `[N/A]`, `[Not Supported]` and the like. */
function csvNumber(field: string | undefined): number | undefined {
  if (field === undefined) return undefined;
  const v = Number(field.trim());
  return field.trim() !== '' && Number.isFinite(v) ? v : undefined;
}

/** `index, uuid, name, compute_cap` lines; a name may hold commas, the other fields do not. */
export function parseInventoryCsv(text: string): GpuDevice[] {
  const devices: GpuDevice[] = [];
  for (const line of text.split('\n')) {
    const fields = line.split(',').map((f) => f.trim());
    if (fields.length < 4) continue;
    const index = csvNumber(fields[0]);
    const uuid = fields[1] ?? '';
    if (index === undefined || !Number.isInteger(index) || index < 0 || uuid === '') continue;
    devices.push({ index, uuid, name: fields.slice(2, -1).join(', '), computeCapability: csvNumber(fields.at(-1)) });
  }
  return devices.sort((a, b) => a.index - b.index);
}

/** The `Model:` and `GPU UUID:` lines of a `/proc/driver/nvidia/gpus/<bus>/information` file. */
export function parseProcGpuInformation(text: string): { name: string; uuid: string } | undefined {
  const field = (key: string): string | undefined => new RegExp(`^${key}:\\s*(.+?)\\s*$`, 'm').exec(text)?.[1];
  const uuid = field('GPU UUID');
  return uuid === undefined ? undefined : { name: field('Model') ?? 'unknown', uuid };
}

/**
 * CUDA's reading of `CUDA_VISIBLE_DEVICES`: a comma list of physical indices or UUIDs (a unique
 * prefix of one, `GPU-` included); the list stops at the first entry that names no device or one
 * already named; the chosen devices are renumbered 0, 1, ... in list order. Unset: all devices.
 */
export function applyVisibleDevices(physical: readonly GpuDevice[], visible: string | undefined): GpuDevice[] {
  if (visible === undefined) return [...physical];
  const chosen: GpuDevice[] = [];
  for (const raw of visible.split(',')) {
    const entry = raw.trim();
    let device: GpuDevice | undefined;
    if (/^\d+$/.test(entry)) device = physical.find((d) => d.index === Number(entry));
    else if (entry !== '') {
      const matches = physical.filter((d) => d.uuid.startsWith(entry) || d.uuid.startsWith(`GPU-${entry}`));
      device = matches.length === 1 ? matches[0] : undefined;
    }
    if (device === undefined || chosen.includes(device)) break;
    chosen.push(device);
  }
  return chosen.map((d, index) => ({ ...d, index }));
}

/** `uuid, utilization.gpu, memory.total, memory.used, power.draw, power.limit, total_energy_consumption` lines. */
export function parseSampleCsv(text: string): (Omit<GpuSample, 'energyJoules'> & { energyMillijoules: number | undefined })[] {
  const samples: (Omit<GpuSample, 'energyJoules'> & { energyMillijoules: number | undefined })[] = [];
  for (const line of text.split('\n')) {
    const f = line.split(',').map((x) => x.trim());
    if (f.length !== 7 || f[0] === '') continue;
    samples.push({
      uuid: f[0]!,
      utilization: (csvNumber(f[1]) ?? 0) / 100,
      memoryTotalBytes: (csvNumber(f[2]) ?? 0) * MIB,
      memoryUsedBytes: (csvNumber(f[3]) ?? 0) * MIB,
      powerUsageWatts: csvNumber(f[4]) ?? 0,
      powerLimitWatts: csvNumber(f[5]) ?? 0,
      energyMillijoules: csvNumber(f[6]),
    });
  }
  return samples;
}

type RunResult = { ok: true; stdout: string } | { ok: false; missing: boolean; message: string };

export class NvidiaSmiProbe implements GpuProbe {
  readonly #command: string;
  readonly #visible: string | undefined;
  readonly #timeoutMs: number;
  readonly #procDir: string;
  #inventory: Promise<GpuInventory> | undefined;
  #sampling: Promise<GpuSample[]> | undefined;
  readonly #sampleIntervalMs: number;
  #lastSample: { at: number; samples: GpuSample[] } | undefined;
  /** First energy reading per device (mJ): the zero of `energyJoules`. */
  readonly #energyBase = new Map<string, number>();

  constructor(options: NvidiaSmiProbeOptions = {}) {
    this.#command = options.command ?? 'nvidia-smi';
    this.#visible = options.visibleDevices;
    this.#timeoutMs = options.timeoutMs ?? DEFAULT_NVIDIA_SMI_TIMEOUT_MS;
    this.#procDir = options.procGpusDir ?? '/proc/driver/nvidia/gpus';
    this.#sampleIntervalMs = options.sampleIntervalMs ?? DEFAULT_GPU_SAMPLE_INTERVAL_MS;
  }

  inventory(): Promise<GpuInventory> {
    this.#inventory ??= this.#readInventory();
    return this.#inventory;
  }

  sample(): Promise<GpuSample[]> {
    const last = this.#lastSample;
    if (last !== undefined && Date.now() - last.at < this.#sampleIntervalMs) return Promise.resolve(last.samples.map((g) => ({ ...g })));
    this.#sampling ??= this.#readSamples()
      .then((samples) => {
        this.#lastSample = { at: Date.now(), samples };
        return samples.map((g) => ({ ...g }));
      })
      .finally(() => (this.#sampling = undefined));
    return this.#sampling;
  }

  async #readInventory(): Promise<GpuInventory> {
    const smi = await this.#run(['--query-gpu=index,uuid,name,compute_cap', '--format=csv,noheader,nounits']);
    let physical: GpuDevice[];
    let source: string;
    if (smi.ok) {
      physical = parseInventoryCsv(smi.stdout);
      source = 'nvidia-smi lists no GPU';
    } else {
      const proc = this.#readProc();
      if (proc === undefined) {
        return {
          devices: [],
          absence: smi.missing
            ? `no NVIDIA driver on this host (no nvidia-smi on PATH, no ${this.#procDir})`
            : `nvidia-smi failed (${smi.message}) and ${this.#procDir} is not readable`,
        };
      }
      physical = proc;
      source = `${this.#procDir} lists no GPU`;
    }
    if (physical.length === 0) return { devices: [], absence: source };
    const devices = applyVisibleDevices(physical, this.#visible);
    if (devices.length === 0) return { devices: [], absence: `CUDA_VISIBLE_DEVICES='${this.#visible}' hides every GPU of this host` };
    return { devices };
  }

  /** The driver's GPU folders in PCI bus order, or undefined when the driver has none. */
  #readProc(): GpuDevice[] | undefined {
    let entries: string[];
    try {
      entries = readdirSync(this.#procDir).sort();
    } catch {
      return undefined;
    }
    const devices: GpuDevice[] = [];
    for (const entry of entries) {
      let info: { name: string; uuid: string } | undefined;
      try {
        info = parseProcGpuInformation(readFileSync(join(this.#procDir, entry, 'information'), 'utf8').slice(0, 64 * 1024));
      } catch {
        info = undefined;
      }
      if (info !== undefined) devices.push({ index: devices.length, uuid: info.uuid, name: info.name, computeCapability: undefined });
    }
    return devices;
  }

  async #readSamples(): Promise<GpuSample[]> {
    const { devices } = await this.inventory();
    if (devices.length === 0) return [];
    const smi = await this.#run([
      '--query-gpu=uuid,utilization.gpu,memory.total,memory.used,power.draw,power.limit,total_energy_consumption',
      '--format=csv,noheader,nounits',
    ]);
    if (!smi.ok) return [];
    const visible = new Set(devices.map((d) => d.uuid));
    return parseSampleCsv(smi.stdout)
      .filter((s) => visible.has(s.uuid))
      .map(({ energyMillijoules, ...s }) => {
        let energyJoules = 0;
        if (energyMillijoules !== undefined) {
          const base = this.#energyBase.get(s.uuid) ?? energyMillijoules;
          this.#energyBase.set(s.uuid, base);
          energyJoules = Math.max(0, energyMillijoules - base) / 1000;
        }
        return { ...s, energyJoules };
      });
  }

  #run(args: string[]): Promise<RunResult> {
    return new Promise((resolve) => {
      execFile(this.#command, args, { timeout: this.#timeoutMs, maxBuffer: MAX_OUTPUT_BYTES, encoding: 'utf8', windowsHide: true }, (err, stdout) => {
        if (err === null) resolve({ ok: true, stdout });
        else {
          const code = (err as NodeJS.ErrnoException).code;
          resolve({ ok: false, missing: code === 'ENOENT' || code === 'EACCES', message: err.killed ? `no answer within ${this.#timeoutMs} ms` : err.message.split('\n', 1)[0] ?? '' });
        }
      });
    });
  }
}
