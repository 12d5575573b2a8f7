/**
 * Host CPU utilisation and memory for `nv_cpu_utilization`, `nv_cpu_memory_total_bytes` and
 * `nv_cpu_memory_used_bytes`, computed as Triton's core/src/metrics.cc does: utilisation from the
 * aggregate `cpu` line of /proc/stat between two samples, used memory = MemTotal − MemAvailable
 * from /proc/meminfo. Parsing is pure; `ProcCpuSampler` does the reading.
 */
import { readFileSync } from 'node:fs';

/** The aggregate jiffy counters of /proc/stat's first line, in file order. */
export interface CpuTimes {
  user: number;
  nice: number;
  system: number;
  idle: number;
  iowait: number;
  irq: number;
  softirq: number;
  steal: number;
}

export interface CpuSample {
  /** Busy share of all CPU time since the previous sample, in [0, 1]. */
  utilization: number;
  memoryTotalBytes: number;
  memoryUsedBytes: number;
}

/** Where the metrics front door gets host figures; tests substitute a fixed one. */
export interface CpuMetricsSource {
  sample(): CpuSample;
}

export function parseProcStat(text: string): CpuTimes | undefined {
  const first = text.split('\n', 1)[0] ?? '';
  if (!first.startsWith('cpu ')) return undefined;
  const v = first.trim().split(/\s+/).slice(1).map(Number);
  if (v.length < 8 || v.slice(0, 8).some((n) => !Number.isFinite(n))) return undefined;
  const [user, nice, system, idle, iowait, irq, softirq, steal] = v as [number, number, number, number, number, number, number, number];
  return { user, nice, system, idle, iowait, irq, softirq, steal };
}

/** MemTotal and MemTotal − MemAvailable in bytes, or undefined when either is missing or inconsistent. */
export function parseMemInfo(text: string): { totalBytes: number; usedBytes: number } | undefined {
  const kb = new Map<string, number>();
  for (const line of text.split('\n')) {
    const m = /^(\w+):\s+(\d+)/.exec(line);
    if (m?.[1] !== undefined && m[2] !== undefined) kb.set(m[1], Number(m[2]));
  }
  const total = kb.get('MemTotal');
  const available = kb.get('MemAvailable');
  if (total === undefined || available === undefined || available > total) return undefined;
  return { totalBytes: total * 1024, usedBytes: (total - available) * 1024 };
}

/** Triton's CpuUtilization: busy jiffies / (busy + idle jiffies) between two samples; counters that went backwards count as 0. */
export function cpuUtilization(now: CpuTimes, before: CpuTimes): number {
  const d = (a: number, b: number): number => (a > b ? a - b : 0);
  const busy =
    d(now.user, before.user) + d(now.nice, before.nice) + d(now.system, before.system) + d(now.irq, before.irq) + d(now.softirq, before.softirq) + d(now.steal, before.steal);
  const idle = d(now.idle, before.idle) + d(now.iowait, before.iowait);
  return busy + idle === 0 ? Number.NaN : busy / (busy + idle);
}

/**
 * Samples /proc at scrape time. Utilisation covers the time since the previous scrape (the
 * first one: since construction); when no jiffy has passed the previous value is repeated.
 * Unreadable files yield zeros, as Triton reports when its parsing fails.
 */
export class ProcCpuSampler implements CpuMetricsSource {
  readonly #read: (path: string) => string;
  #last: CpuTimes | undefined;
  #lastUtilization = 0;

  constructor(read: (path: string) => string = (p) => readFileSync(p, 'utf8')) {
    this.#read = read;
    this.#last = this.#cpu();
  }

  sample(): CpuSample {
    const now = this.#cpu();
    if (now !== undefined && this.#last !== undefined) {
      const u = cpuUtilization(now, this.#last);
      if (!Number.isNaN(u)) this.#lastUtilization = u;
    }
    if (now !== undefined) this.#last = now;
    const mem = this.#mem();
    return { utilization: now === undefined ? 0 : this.#lastUtilization, memoryTotalBytes: mem?.totalBytes ?? 0, memoryUsedBytes: mem?.usedBytes ?? 0 };
  }

  #cpu(): CpuTimes | undefined {
    try {
      return parseProcStat(this.#read('/proc/stat'));
    } catch {
      return undefined;
    }
  }

  #mem(): { totalBytes: number; usedBytes: number } | undefined {
    try {
      return parseMemInfo(this.#read('/proc/meminfo'));
    } catch {
      return undefined;
    }
  }
}

/**
 * `--metrics-interval-ms`: samples `source` every `intervalMs` on a timer (the first sample at
 * once), and answers each scrape with the latest sample, as Triton's metrics thread does: a scrape
 * costs no /proc read, and utilisation covers one interval whatever the scrape rate. `stop()` ends
 * the timer (the door calls it on close); the timer never keeps the process alive.
 */
export class IntervalCpuSampler implements CpuMetricsSource {
  #latest: CpuSample;
  readonly #timer: NodeJS.Timeout;

  constructor(source: CpuMetricsSource, intervalMs: number) {
    if (!Number.isSafeInteger(intervalMs) || intervalMs < 1) throw new RangeError(`metrics interval must be a positive integer of ms, got ${intervalMs}`);
    this.#latest = source.sample();
    this.#timer = setInterval(() => {
      this.#latest = source.sample();
    }, intervalMs);
    this.#timer.unref();
  }

  sample(): CpuSample {
    return this.#latest;
  }

  stop(): void {
    clearInterval(this.#timer);
  }
}
