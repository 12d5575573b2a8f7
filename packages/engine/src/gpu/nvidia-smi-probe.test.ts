import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { gpuPlacement, GPU_INSTALL_HINT } from './gpu-probe.js';
import { MemoryGpuProbe } from './memory-gpu-probe.js';
import { applyVisibleDevices, NvidiaSmiProbe, parseInventoryCsv, parseProcGpuInformation, parseSampleCsv } from './nvidia-smi-probe.js';

const A = { index: 0, uuid: 'GPU-aaaa-1111', name: 'NVIDIA A100', computeCapability: 8 };
const B = { index: 1, uuid: 'GPU-bbbb-2222', name: 'Tesla K80', computeCapability: 3.7 };
const C = { index: 2, uuid: 'GPU-cccc-3333', name: 'NVIDIA L4', computeCapability: 8.9 };

const dir = mkdtempSync(join(tmpdir(), 'gpu-probe-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A stand-in nvidia-smi: prints `inventory` for the inventory query and `samples` for the sample query. */
function fakeSmi(name: string, inventory: string, samples: string, exitCode = 0): string {
  const path = join(dir, name);
  writeFileSync(
    path,
    `#!/bin/sh\ncase "$1" in\n  *compute_cap*) printf '%s' '${inventory}' ;;\n  *) printf '%s' '${samples}' ;;\nesac\nexit ${exitCode}\n`,
  );
  chmodSync(path, 0o755);
  return path;
}

describe('nvidia-smi output', () => {
  it('reads the inventory, names with commas and unreported compute capability included', () => {
    expect(parseInventoryCsv('1, GPU-b, Tesla, K80, [N/A]\n0, GPU-a, NVIDIA A100, 8.0\n\nbad line\n')).toEqual([
      { index: 0, uuid: 'GPU-a', name: 'NVIDIA A100', computeCapability: 8 },
      { index: 1, uuid: 'GPU-b', name: 'Tesla, K80', computeCapability: undefined },
    ]);
  });

  it('reads samples in Triton units', () => {
    expect(parseSampleCsv('GPU-a, 37, 40960, 1024, 61.5, 250.00, 123456\nGPU-b, [N/A], 16, [N/A], [N/A], [N/A], [N/A]\n')).toEqual([
      { uuid: 'GPU-a', utilization: 0.37, memoryTotalBytes: 40960 * 1048576, memoryUsedBytes: 1024 * 1048576, powerUsageWatts: 61.5, powerLimitWatts: 250, energyMillijoules: 123456 },
      { uuid: 'GPU-b', utilization: 0, memoryTotalBytes: 16 * 1048576, memoryUsedBytes: 0, powerUsageWatts: 0, powerLimitWatts: 0, energyMillijoules: undefined },
    ]);
  });

  it('reads the driver information file', () => {
    expect(parseProcGpuInformation('Model: \t\t NVIDIA L4\nIRQ:   42\nGPU UUID: \t GPU-cccc-3333\nBus Type: PCIe\n')).toEqual({ name: 'NVIDIA L4', uuid: 'GPU-cccc-3333' });
    expect(parseProcGpuInformation('Model: x\n')).toBeUndefined();
  });
});

describe('CUDA_VISIBLE_DEVICES', () => {
  const all = [A, B, C];
  it('keeps every device when unset and none when empty', () => {
    expect(applyVisibleDevices(all, undefined)).toEqual(all);
    expect(applyVisibleDevices(all, '')).toEqual([]);
  });
  it('picks by index or UUID prefix and renumbers in list order', () => {
    expect(applyVisibleDevices(all, '2,0').map((d) => [d.index, d.uuid])).toEqual([
      [0, C.uuid],
      [1, A.uuid],
    ]);
    expect(applyVisibleDevices(all, 'GPU-bbbb').map((d) => [d.index, d.uuid])).toEqual([[0, B.uuid]]);
    expect(applyVisibleDevices(all, 'cccc').map((d) => d.uuid)).toEqual([C.uuid]);
  });
  it('stops at the first entry naming no device, a repeated one or an ambiguous prefix', () => {
    expect(applyVisibleDevices(all, '1,7,0').map((d) => d.uuid)).toEqual([B.uuid]);
    expect(applyVisibleDevices(all, '0,0,1').map((d) => d.uuid)).toEqual([A.uuid]);
    expect(applyVisibleDevices(all, 'GPU-,1')).toEqual([]);
    expect(applyVisibleDevices(all, '-1,0')).toEqual([]);
  });
});

describe('gpuPlacement', () => {
  it('supports devices at or above the minimum compute capability (unknown counts as supported)', () => {
    expect(gpuPlacement({ devices: [A, B, { ...C, computeCapability: undefined }] }, 6)).toEqual({ supportedGpus: [0, 2] });
  });
  it('says why there is none and what to install', () => {
    expect(gpuPlacement({ devices: [], absence: 'no NVIDIA driver' }, 6)).toEqual({ supportedGpus: [], hint: `no NVIDIA driver. ${GPU_INSTALL_HINT}` });
    expect(gpuPlacement({ devices: [B] }, 6).hint).toBe(`no GPU of this host has compute capability 6 or more: 1 (Tesla K80, 3.7). ${GPU_INSTALL_HINT}`);
  });
  it('works from the memory twin', async () => {
    expect(gpuPlacement(await new MemoryGpuProbe().inventory(), 6)).toEqual({ supportedGpus: [], hint: `no GPU on this host. ${GPU_INSTALL_HINT}` });
    expect(gpuPlacement(await new MemoryGpuProbe([A]).inventory(), 6)).toEqual({ supportedGpus: [0] });
  });
});

describe('NvidiaSmiProbe', () => {
  it('lists the devices nvidia-smi reports, as CUDA_VISIBLE_DEVICES shows them', async () => {
    const smi = fakeSmi('smi-ok', `0, ${A.uuid}, NVIDIA A100, 8.0\n1, ${C.uuid}, NVIDIA L4, 8.9\n`, '');
    expect((await new NvidiaSmiProbe({ command: smi }).inventory()).devices).toEqual([A, { ...C, index: 1 }]);
    expect((await new NvidiaSmiProbe({ command: smi, visibleDevices: '1' }).inventory()).devices).toEqual([{ ...C, index: 0 }]);
    expect(await new NvidiaSmiProbe({ command: smi, visibleDevices: '' }).inventory()).toEqual({
      devices: [],
      absence: "CUDA_VISIBLE_DEVICES='' hides every GPU of this host",
    });
  });

  it('samples the visible devices, energy counted from the first reading', async () => {
    const first = fakeSmi('smi-s1', `0, ${A.uuid}, NVIDIA A100, 8.0\n1, ${C.uuid}, NVIDIA L4, 8.9\n`, `${A.uuid}, 50, 100, 10, 70, 300, 5000\n${C.uuid}, 1, 1, 1, 1, 1, 1\n`);
    const probe = new NvidiaSmiProbe({ command: first, visibleDevices: '0' });
    expect(await probe.sample()).toEqual([
      { uuid: A.uuid, utilization: 0.5, memoryTotalBytes: 100 * 1048576, memoryUsedBytes: 10 * 1048576, powerUsageWatts: 70, powerLimitWatts: 300, energyJoules: 0 },
    ]);
  });

  it('runs nvidia-smi at most once per sample interval, however often it is asked', async () => {
    const count = join(dir, 'runs');
    writeFileSync(count, '');
    const path = join(dir, 'smi-counting');
    writeFileSync(
      path,
      `#!/bin/sh\ncase "$1" in\n  *compute_cap*) printf '0, ${A.uuid}, NVIDIA A100, 8.0\\n' ;;\n  *) echo run >> '${count}'; printf '${A.uuid}, 1, 1, 1, 1, 1, 1000\\n' ;;\nesac\n`,
    );
    chmodSync(path, 0o755);
    const probe = new NvidiaSmiProbe({ command: path, sampleIntervalMs: 60_000 });
    const all = await Promise.all([probe.sample(), probe.sample(), probe.sample()]);
    await probe.sample();
    expect(all.every((s) => s.length === 1 && s[0]!.uuid === A.uuid)).toBe(true);
    expect(readFileSync(count, 'utf8')).toBe('run\n');
    const eager = new NvidiaSmiProbe({ command: path, sampleIntervalMs: 0 });
    await eager.sample();
    await eager.sample();
    expect(readFileSync(count, 'utf8')).toBe('run\nrun\nrun\n');
  });

  it('has no GPU without a driver, and says so', async () => {
    const probe = new NvidiaSmiProbe({ command: join(dir, 'no-such-smi'), procGpusDir: join(dir, 'no-such-proc') });
    expect(await probe.inventory()).toEqual({ devices: [], absence: `no NVIDIA driver on this host (no nvidia-smi on PATH, no ${join(dir, 'no-such-proc')})` });
    expect(await probe.sample()).toEqual([]);
  });

  it('falls back to the driver folder when nvidia-smi fails, and bounds a hung nvidia-smi', async () => {
    const proc = join(dir, 'proc');
    mkdirSync(join(proc, '0000:41:00.0'), { recursive: true });
    mkdirSync(join(proc, '0000:01:00.0'), { recursive: true });
    writeFileSync(join(proc, '0000:41:00.0', 'information'), `Model: \t NVIDIA L4\nGPU UUID: \t ${C.uuid}\n`);
    writeFileSync(join(proc, '0000:01:00.0', 'information'), `Model: \t NVIDIA A100\nGPU UUID: \t ${A.uuid}\n`);
    const failing = fakeSmi('smi-fail', 'Field "compute_cap" is not a valid field to query.', '', 2);
    expect((await new NvidiaSmiProbe({ command: failing, procGpusDir: proc }).inventory()).devices).toEqual([
      { ...A, computeCapability: undefined },
      { ...C, index: 1, computeCapability: undefined },
    ]);
    const hung = join(dir, 'smi-hung');
    writeFileSync(hung, '#!/bin/sh\nexec sleep 30\n');
    chmodSync(hung, 0o755);
    const started = Date.now();
    const inventory = await new NvidiaSmiProbe({ command: hung, timeoutMs: 200, procGpusDir: join(dir, 'none') }).inventory();
    expect(Date.now() - started).toBeLessThan(5000);
    expect(inventory.devices).toEqual([]);
    expect(inventory.absence).toMatch(/^nvidia-smi failed \(no answer within 200 ms\)/);
  });
});
