import { request } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { InferenceEngine, ModelMetricsSnapshot } from '@switchyard/engine';
import { FakeEngine, fakeStatistics } from '../test-support/fake-engine.js';
import { cpuUtilization, IntervalCpuSampler, parseMemInfo, parseProcStat, ProcCpuSampler, type CpuMetricsSource } from './cpu-stats.js';
import { createMetricsServer, type MetricsFrontDoor } from './metrics-server.js';
import { formatValue } from './prometheus-text.js';
import { TritonMetrics } from './triton-metrics.js';

const d = (count: number, ns: number): { count: number; ns: number } => ({ count, ns });

function snapshot(name: string, version: string, n: number): ModelMetricsSnapshot {
  return {
    statistics: fakeStatistics(name, version, {
      inference_count: 8 * n,
      execution_count: n,
      inference_stats: {
        success: d(n, 59_877_400),
        fail: d(1, 0),
        queue: d(n, 473_999),
        compute_input: d(n, 316_000),
        compute_infer: d(n, 58_653_000),
        compute_output: d(n, 404_000),
        cache_hit: d(0, 0),
        cache_miss: d(0, 0),
      },
    }),
    failures: { REJECTED: 0, CANCELED: 2, BACKEND: 1, OTHER: 0 },
    pendingRequests: 3,
    loadDurationSecs: 1.611378656,
  };
}

const fixedCpu: CpuMetricsSource = { sample: () => ({ utilization: 0.02255639097744361, memoryTotalBytes: 16861294592, memoryUsedBytes: 4000546816 }) };

const EXPECTED = `# HELP nv_inference_request_success Number of successful inference requests, all batch sizes
# TYPE nv_inference_request_success counter
nv_inference_request_success{model="simple",version="1"} 2
# HELP nv_inference_request_failure Number of failed inference requests, all batch sizes
# TYPE nv_inference_request_failure counter
nv_inference_request_failure{model="simple",reason="REJECTED",version="1"} 0
nv_inference_request_failure{model="simple",reason="CANCELED",version="1"} 2
nv_inference_request_failure{model="simple",reason="BACKEND",version="1"} 1
nv_inference_request_failure{model="simple",reason="OTHER",version="1"} 0
# HELP nv_inference_count Number of inferences performed (does not include cached requests)
# TYPE nv_inference_count counter
nv_inference_count{model="simple",version="1"} 16
# HELP nv_inference_exec_count Number of model executions performed (does not include cached requests)
# TYPE nv_inference_exec_count counter
nv_inference_exec_count{model="simple",version="1"} 2
# HELP nv_inference_request_duration_us Cumulative inference request duration in microseconds (includes cached requests)
# TYPE nv_inference_request_duration_us counter
nv_inference_request_duration_us{model="simple",version="1"} 59877
# HELP nv_inference_queue_duration_us Cumulative inference queuing duration in microseconds (includes cached requests)
# TYPE nv_inference_queue_duration_us counter
nv_inference_queue_duration_us{model="simple",version="1"} 473
# HELP nv_inference_compute_input_duration_us Cumulative compute input duration in microseconds (does not include cached requests)
# TYPE nv_inference_compute_input_duration_us counter
nv_inference_compute_input_duration_us{model="simple",version="1"} 316
# HELP nv_inference_compute_infer_duration_us Cumulative compute inference duration in microseconds (does not include cached requests)
# TYPE nv_inference_compute_infer_duration_us counter
nv_inference_compute_infer_duration_us{model="simple",version="1"} 58653
# HELP nv_inference_compute_output_duration_us Cumulative inference compute output duration in microseconds (does not include cached requests)
# TYPE nv_inference_compute_output_duration_us counter
nv_inference_compute_output_duration_us{model="simple",version="1"} 404
# HELP nv_inference_pending_request_count Instantaneous number of pending requests awaiting execution per-model.
# TYPE nv_inference_pending_request_count gauge
nv_inference_pending_request_count{model="simple",version="1"} 3
# HELP nv_model_load_duration_secs Model load time in seconds
# TYPE nv_model_load_duration_secs gauge
nv_model_load_duration_secs{model="simple",version="1"} 1.611378656
# HELP nv_cpu_utilization CPU utilization rate [0.0 - 1.0]
# TYPE nv_cpu_utilization gauge
nv_cpu_utilization 0.02255639097744361
# HELP nv_cpu_memory_total_bytes CPU total memory (RAM), in bytes
# TYPE nv_cpu_memory_total_bytes gauge
nv_cpu_memory_total_bytes 16861294592
# HELP nv_cpu_memory_used_bytes CPU used memory (RAM), in bytes
# TYPE nv_cpu_memory_used_bytes gauge
nv_cpu_memory_used_bytes 4000546816
`;

describe('TritonMetrics', () => {
  it('renders Triton families, HELP texts, sorted labels and values exactly', async () => {
    const engine = { metricsSnapshot: () => [snapshot('simple', '1', 2)] };
    expect(await new TritonMetrics({ engine, cpu: fixedCpu }).render()).toBe(EXPECTED);
  });

  it('reads the engine at every scrape and drops unloaded models', async () => {
    let models = [snapshot('a', '1', 1), snapshot('b', '2', 1)];
    const metrics = new TritonMetrics({ engine: { metricsSnapshot: () => models }, cpu: null });
    const first = await metrics.render();
    expect(first).toContain('nv_inference_request_success{model="a",version="1"} 1\nnv_inference_request_success{model="b",version="2"} 1\n');
    expect(first).toContain('nv_inference_request_failure{model="b",reason="OTHER",version="2"} 0\n');
    models = [snapshot('a', '1', 5)];
    const second = await metrics.render();
    expect(second).toContain('nv_inference_request_success{model="a",version="1"} 5\n');
    expect(second).not.toContain('model="b"');
    expect(second).not.toContain('nv_cpu_');
    models = [];
    expect(await metrics.render()).toBe('');
  });
});

describe('TritonMetrics GPU families', () => {
  const gpu = (uuid: string, used: number) => ({
    uuid,
    utilization: 0.37,
    memoryTotalBytes: 16106127360,
    memoryUsedBytes: used,
    powerUsageWatts: 20.085,
    powerLimitWatts: 60,
    energyJoules: 320.387,
  });

  it('renders Triton GPU families per gpu_uuid: the counter after the model counters, gauges before the CPU ones', async () => {
    let samples = [gpu('GPU-340cec52-80ba-c0df-8511-5f9680aae0ed', 617611264)];
    const metrics = new TritonMetrics({ engine: { metricsSnapshot: () => [snapshot('simple', '1', 2)] }, cpu: fixedCpu, gpu: { sample: async () => samples } });
    const text = await metrics.render();
    const label = '{gpu_uuid="GPU-340cec52-80ba-c0df-8511-5f9680aae0ed"}';
    expect(text).toContain(
      [
        'nv_inference_compute_output_duration_us{model="simple",version="1"} 404',
        '# HELP nv_energy_consumption GPU energy consumption in joules since the Triton Server started',
        '# TYPE nv_energy_consumption counter',
        `nv_energy_consumption${label} 320.387`,
        '# HELP nv_inference_pending_request_count',
      ].join('\n'),
    );
    expect(text).toContain(
      [
        'nv_model_load_duration_secs{model="simple",version="1"} 1.611378656',
        '# HELP nv_gpu_utilization GPU utilization rate [0.0 - 1.0)',
        '# TYPE nv_gpu_utilization gauge',
        `nv_gpu_utilization${label} 0.37`,
        '# HELP nv_gpu_memory_total_bytes GPU total memory, in bytes',
        '# TYPE nv_gpu_memory_total_bytes gauge',
        `nv_gpu_memory_total_bytes${label} 16106127360`,
        '# HELP nv_gpu_memory_used_bytes GPU used memory, in bytes',
        '# TYPE nv_gpu_memory_used_bytes gauge',
        `nv_gpu_memory_used_bytes${label} 617611264`,
        '# HELP nv_gpu_power_usage GPU power usage in watts',
        '# TYPE nv_gpu_power_usage gauge',
        `nv_gpu_power_usage${label} 20.085`,
        '# HELP nv_gpu_power_limit GPU power management limit in watts',
        '# TYPE nv_gpu_power_limit gauge',
        `nv_gpu_power_limit${label} 60`,
        '# HELP nv_cpu_utilization',
      ].join('\n'),
    );
    samples = [gpu('GPU-a', 1), gpu('GPU-b', 2)];
    const second = await metrics.render();
    expect(second).toContain('nv_gpu_memory_used_bytes{gpu_uuid="GPU-a"} 1\nnv_gpu_memory_used_bytes{gpu_uuid="GPU-b"} 2\n');
    expect(second).not.toContain('GPU-340cec52');
  });

  it('has no GPU family without GPUs, without a source, or when sampling fails', async () => {
    const engine = { metricsSnapshot: () => [snapshot('simple', '1', 2)] };
    for (const source of [{ sample: async () => [] }, null, { sample: () => Promise.reject(new Error('nvidia-smi gone')) }]) {
      const text = await new TritonMetrics({ engine, cpu: fixedCpu, gpu: source }).render();
      expect(text).toBe(EXPECTED);
    }
  });
});

describe('formatValue', () => {
  it('prints like prometheus-cpp (%.16g)', () => {
    expect(formatValue(0)).toBe('0');
    expect(formatValue(59877)).toBe('59877');
    expect(formatValue(16861294592)).toBe('16861294592');
    expect(formatValue(0.1 + 0.2)).toBe('0.3');
    expect(formatValue(1.611378656)).toBe('1.611378656');
    expect(formatValue(1e17)).toBe('1e+17');
    expect(formatValue(0.00001)).toBe('1e-05');
    expect(formatValue(Number.NaN)).toBe('Nan');
    expect(formatValue(-Infinity)).toBe('-Inf');
  });
});

describe('cpu stats', () => {
  const stat = (user: number, idle: number): string => `cpu  ${user} 0 0 ${idle} 0 0 0 0 0 0\ncpu0 1 2 3 4 5 6 7 8 9 10\n`;
  it('parses /proc/stat and /proc/meminfo', () => {
    expect(parseProcStat(stat(10, 30))).toEqual({ user: 10, nice: 0, system: 0, idle: 30, iowait: 0, irq: 0, softirq: 0, steal: 0 });
    expect(parseProcStat('intr 1 2')).toBeUndefined();
    expect(parseMemInfo('MemTotal:       1000 kB\nMemFree:  10 kB\nMemAvailable:    250 kB\n')).toEqual({ totalBytes: 1024000, usedBytes: 768000 });
    expect(parseMemInfo('MemTotal: 1000 kB\n')).toBeUndefined();
  });
  it('computes utilisation between samples', () => {
    const before = parseProcStat(stat(10, 30));
    const after = parseProcStat(stat(40, 40));
    if (before === undefined || after === undefined) throw new Error('parse');
    expect(cpuUtilization(after, before)).toBe(0.75);
    expect(cpuUtilization(before, before)).toBeNaN();
  });
  it('samples through an injected reader and keeps the last value when no time passed', () => {
    let text = stat(10, 30);
    const sampler = new ProcCpuSampler((p) => (p === '/proc/stat' ? text : 'MemTotal: 4 kB\nMemAvailable: 1 kB\n'));
    text = stat(20, 40);
    expect(sampler.sample()).toEqual({ utilization: 0.5, memoryTotalBytes: 4096, memoryUsedBytes: 3072 });
    expect(sampler.sample().utilization).toBe(0.5);
  });
  it('reads the real /proc', () => {
    const s = new ProcCpuSampler().sample();
    expect(s.memoryTotalBytes).toBeGreaterThan(0);
    expect(s.utilization).toBeGreaterThanOrEqual(0);
    expect(s.utilization).toBeLessThanOrEqual(1);
  });
});

function get(port: number, path: string, method = 'GET'): Promise<{ status: number; type: string | undefined; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path, method }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, type: res.headers['content-type'], body }));
    });
    req.on('error', reject);
    req.end();
  });
}

describe('metrics front door', () => {
  const engine = new FakeEngine();
  let door: MetricsFrontDoor;
  let port: number;
  beforeAll(async () => {
    engine.snapshot = [snapshot('simple', '1', 2)];
    door = createMetricsServer({ engine: engine as InferenceEngine, port: 0, host: '127.0.0.1', cpu: fixedCpu });
    port = await door.listen();
  });
  afterAll(() => door.close());

  it('serves GET /metrics as Prometheus text', async () => {
    const res = await get(port, '/metrics');
    expect(res.status).toBe(200);
    expect(res.type).toBe('text/plain; charset=utf-8');
    expect(res.body).toBe(EXPECTED);
    expect((await get(port, '/metrics/?x=1')).status).toBe(200);
  });

  it('refuses other methods and paths', async () => {
    expect(await get(port, '/metrics', 'POST')).toEqual({ status: 405, type: 'application/json', body: '{"error":"Method Not Allowed"}' });
    expect(await get(port, '/metricsx')).toEqual({ status: 404, type: 'application/json', body: '{"error":"Not Found"}' });
    expect((await get(port, '/')).status).toBe(404);
  });
});

describe('metrics front door with extra families', () => {
  it('appends the extra text after the engine families at every scrape, and fails the scrape when it throws', async () => {
    const engine = new FakeEngine();
    engine.snapshot = [snapshot('simple', '1', 2)];
    let scrapes = 0;
    let broken = false;
    const door = createMetricsServer({
      engine: engine as InferenceEngine,
      port: 0,
      host: '127.0.0.1',
      cpu: fixedCpu,
      extraMetrics: () => {
        if (broken) throw new Error('stats unavailable');
        scrapes++;
        return `# HELP extra_total Extra.\n# TYPE extra_total counter\nextra_total ${scrapes}`;
      },
    });
    const port = await door.listen();
    try {
      const first = await get(port, '/metrics');
      expect(first.body).toBe(`${EXPECTED}# HELP extra_total Extra.\n# TYPE extra_total counter\nextra_total 1\n`);
      expect((await get(port, '/metrics')).body).toContain('\nextra_total 2\n');
      broken = true;
      expect(await get(port, '/metrics')).toEqual({ status: 500, type: 'application/json', body: '{"error":"stats unavailable"}' });
    } finally {
      await door.close();
    }
  });
});

describe('--metrics-config and --metrics-interval-ms', () => {
  it('counter_latencies=false leaves out exactly the *_duration_us counters', async () => {
    const engine = new FakeEngine();
    engine.snapshot = [snapshot('simple', '1', 2)];
    const text = await new TritonMetrics({ engine, cpu: fixedCpu, settings: { counterLatencies: false } }).render();
    const families = (t: string): string[] => [...t.matchAll(/^# TYPE (\S+)/gm)].map((m) => m[1]!);
    const all = families(EXPECTED);
    expect(families(text)).toEqual(all.filter((f) => !f.endsWith('_duration_us')));
    expect(all.filter((f) => f.endsWith('_duration_us'))).toEqual([
      'nv_inference_request_duration_us',
      'nv_inference_queue_duration_us',
      'nv_inference_compute_input_duration_us',
      'nv_inference_compute_infer_duration_us',
      'nv_inference_compute_output_duration_us',
    ]);
  });

  it('samples the CPU source on its interval and answers scrapes from the last sample', async () => {
    let n = 0;
    const counting: CpuMetricsSource = { sample: () => ({ utilization: 0, memoryTotalBytes: 100, memoryUsedBytes: ++n }) };
    const sampler = new IntervalCpuSampler(counting, 20);
    try {
      expect(n).toBe(1);
      expect(sampler.sample().memoryUsedBytes).toBe(1);
      expect(sampler.sample().memoryUsedBytes).toBe(1); // a scrape does not sample
      await new Promise((r) => setTimeout(r, 110));
      expect(n).toBeGreaterThanOrEqual(3);
      expect(sampler.sample().memoryUsedBytes).toBe(n);
    } finally {
      sampler.stop();
    }
    const stopped = n;
    await new Promise((r) => setTimeout(r, 60));
    expect(n).toBe(stopped);
    expect(() => new IntervalCpuSampler(counting, 0)).toThrow(RangeError);
  });
});
