// The benchmark report (bench/report.mjs): a pure function of a results file, drawn with the
// simulator's chart writer. Results here are made up in run.mjs's shape; nothing is measured.
import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

interface ReportFile {
  name: string;
  content: string;
}
const ROOT = new URL('..', import.meta.url);
const { report, writeReport } = (await import(new URL('bench/report.mjs', ROOT).href)) as {
  report: (results: unknown, stem: string) => ReportFile[];
  writeReport: (file: string) => string[];
};

const load = (throughput: number, p50 = 1000) => ({ requests: 100, errors: 0, throughput, p50_us: p50, p99_us: 3 * p50 });
const door = (scale: number) => ({ 1: load(1000 * scale), 16: load(4000 * scale), 64: load(5000 * scale) });
const worker = {
  raw: { batch1: { ...load(20000, 40), rowsPerSec: 20000 } },
  bare: { 'http-json': door(4), 'http-binary': door(4), grpc: door(2) },
  served: { 'http-json': door(2), 'http-binary': door(3), grpc: door(1) },
  minimal: { 'http-json': door(3), 'http-binary': door(4), grpc: door(1.5) },
  goals: { 'served / bare throughput, HTTP JSON, c=16 (goal >= 0.6)': 0.5 },
  goalRounds: { 'served / bare throughput, HTTP JSON, c=16 (goal >= 0.6)': [0.5, 0.45, 0.52] },
  floor: { 'served / minimal throughput, c=16 (JSON, binary, gRPC)': [0.667, 0.75, 0.667] },
  memory: { 'worker RSS at the end of the c=64 window, MiB (JSON, binary, gRPC)': [155.1, 158.3, 205.7], 'worker peak RSS (VmHWM) after the served rows, MiB': 221.9 },
  threadRatios: [
    { mode: 'grpc', concurrency: 16, 'threads/served throughput': 1.01, 'main-thread CPU/req, threads (us)': 76 },
    { mode: 'grpc-stream', concurrency: 16, 'threads/served throughput': 1.15, 'main-thread CPU/req, threads (us)': 74 },
  ],
};
const batching = {
  off: { 1: load(500), 4: load(2000), 16: load(4000), 32: load(4000), 64: load(4000) },
  on: { 1: load(500), 4: load(2500), 16: load(9000), 32: load(17000), 64: load(18000) },
  formed: { 1: { modeBatch: 1 }, 4: { modeBatch: 2 }, 16: { modeBatch: 8 }, 32: { modeBatch: 16 }, 64: { modeBatch: 31 } },
  raw: { 1: { rowsPerSec: 20000 }, 2: { rowsPerSec: 30000 }, 8: { rowsPerSec: 60000 }, 16: { rowsPerSec: 80000 }, 31: { rowsPerSec: 90000 } },
  ratios: [{ concurrency: 64, 'bare http req/s': 20000 }],
  goals: { 'c=32 batching on / off throughput (goal >= 4)': 4.25 },
  ceiling: { 'bare HTTP binary (best) / batching off throughput at c=32 (the most on / off can reach)': 5 },
};
const policyRun = (ttft: number, hit: number, tok = 1000) => ({ ttftMs: { p50: ttft, p99: 3 * ttft }, itlMs: { p50: 5, p99: 9 }, hitRate: hit, outputTokPerSimSec: tok });
const atRate = (rrTtft: number) => ({
  shared: { idealHitRate: 0.9, policies: { kv: policyRun(20, 0.85), 'round-robin': policyRun(rrTtft, 0.3), random: policyRun(rrTtft * 1.1, 0.3), 'least-loaded': policyRun(rrTtft * 0.9, 0.35) } },
  control: { idealHitRate: 0, policies: { kv: policyRun(30, 0), 'round-robin': policyRun(31, 0) } },
  goals: { 'RR TTFT p50 / KV TTFT p50 (goal >= 3)': rrTtft / 20 },
});
const routing = { workers: 8, byRate: { 16: atRate(40), 24: atRate(90), 32: atRate(600) } };
const disaggRun = (attainment: number, goodput: number) => ({ attainment, goodput, ttftMs: { p50: 1, p99: 2 }, tpotMs: { p50: 1, p99: 2 }, paths: { remote: 1 } });
const disagg = {
  slo: { tpotMs: 17.2 },
  workloads: {
    'prefill-heavy': {
      shape: { isl: 3000, osl: 150 },
      ttftSloMs: 330,
      byRate: { 40: { aggregated: disaggRun(1, 40), disaggregated: { 25: disaggRun(1, 40), 400: disaggRun(1, 40) } }, 60: { aggregated: disaggRun(0.4, 24), disaggregated: { 25: disaggRun(0.97, 58), 400: disaggRun(0.98, 59) } } },
    },
  },
  goals: { 'prefill-heavy: max rate with >= 90% in SLO, 4P+4D (25 Gb/s) / 8 agg = 60 / 40 (goal >= 1.5)': 1.5 },
};
const timeline = Array.from({ length: 120 }, (_, i) => ({ tSec: i * 60, arrivalsPerSec: 1 + Math.sin(i / 20), serving: 2 + (i % 3), starting: i % 2, draining: 0, desired: 3 }));
const plannerRun = (sloAttainment: number, vsPeak: number, withTimeline: boolean) => ({ sloAttainment, workerSecondsVsStaticPeak: vsPeak, workerSeconds: 1000 * vsPeak, ...(withTimeline ? { timeline } : {}) });
const planner = {
  shape: 'sin:min=0.4,max=4,period=7200',
  runs: { 'static peak (7)': plannerRun(0.99, 1, false), 'static mean (4)': plannerRun(0.7, 0.57, false), 'planner sla': plannerRun(0.96, 0.61, true) },
  goals: { 'planner sla: within SLO (goal >= 95%)': '96.00%' },
};
const machine = { cpus: 2, model: 'test cpu', node: 'v20.0.0' };
const everything = { date: '2026-01-02T03:04:05.000Z', machine, sections: ['worker', 'batching', 'routing', 'disagg', 'planner'], durationMs: 2500, ...worker, batching, routing, disagg, planner };

function expectWellFormedSvg(svg: string): void {
  const stack: string[] = [];
  for (const m of svg.matchAll(/<(\/?)([a-zA-Z][\w-]*)([^>]*?)(\/?)>/g)) {
    if (m[4] === '/') continue;
    if (m[1] === '/') expect(stack.pop()).toBe(m[2]);
    else stack.push(m[2]!);
  }
  expect(stack).toEqual([]);
  expect(svg.startsWith('<svg xmlns="http://www.w3.org/2000/svg"')).toBe(true);
  expect(svg).not.toMatch(/NaN|Infinity|undefined/);
  expect(svg).toContain('<g class="axes">');
}
const byName = (files: ReportFile[], suffix: string): string => {
  const f = files.find((x) => x.name.endsWith(suffix));
  expect(f, suffix).toBeDefined();
  return f!.content;
};
const series = (svg: string): string[] => [...svg.matchAll(/<g class="series" data-label="([^"]*)">(<polyline|<circle)/g)].map((m) => m[1]!);
const goals = (svg: string): string[] => [...svg.matchAll(/<g class="goal" data-label="([^"]*)">/g)].map((m) => m[1]!);

describe('bench report', () => {
  const files = report(everything, 'run');

  it('writes the Markdown first, then one well-formed SVG per chart, every one referenced from it', () => {
    expect(files[0]!.name).toBe('run.md');
    const md = files[0]!.content;
    const svgs = files.slice(1);
    expect(svgs.length).toBeGreaterThanOrEqual(14);
    for (const f of svgs) {
      expect(f.name).toMatch(/^run-[a-z0-9-]+\.svg$/);
      expectWellFormedSvg(f.content);
      expect(md).toContain(`](${f.name})`);
    }
    for (const title of ['## Worker', '## Dynamic batching', '## Routing: KV-aware', '## Disaggregated', '## Planner']) expect(md).toContain(title);
    expect(md).toContain('| served / bare throughput, HTTP JSON, c=16 (goal >= 0.6) | 0.5 |');
    expect(md).toContain('Goals, at 24 req/s:');
    // the worker's floor: listed apart from its goals, arrays as comma-separated values
    expect(md).toContain('Not goals: the floor');
    expect(md).toContain('| served / minimal throughput, c=16 (JSON, binary, gRPC) | 0.667, 0.75, 0.667 |');
    // each round of the goal cells, the goal lines being their medians
    expect(md).toContain('Each round of the goal cells');
    expect(md).toContain('| served / bare throughput, HTTP JSON, c=16 (goal >= 0.6) | 0.5, 0.45, 0.52 |');
    // the worker's RSS under the c=64 load (issue 15's rule): listed apart too
    expect(md).toContain("Memory: the worker's RSS under the c=64 load");
    expect(md).toContain('| worker RSS at the end of the c=64 window, MiB (JSON, binary, gRPC) | 155.1, 158.3, 205.7 |');
    // the batching ceiling (bare / off): listed apart from its goals too
    expect(md).toContain('Not goals: the ceiling');
    expect(md).toContain('| bare HTTP binary (best) / batching off throughput at c=32 (the most on / off can reach) | 5 |');
    // the front-threads comparison, as run.mjs prints it
    expect(md).toContain('## Worker: front threads against the event loop');
    expect(md).toContain('| mode | concurrency | threads/served throughput | main-thread CPU/req, threads (us) |');
    expect(md).toContain('| grpc-stream | 16 | 1.15 | 74 |');
  });

  it('draws each headline with its series and the goal the issue states', () => {
    const servedBare = byName(files, '-worker-served-bare.svg');
    expect(series(servedBare)).toEqual(['HTTP JSON', 'HTTP binary', 'gRPC']);
    expect(goals(servedBare)).toEqual(['goal ≥ 0.6 at c=16']);
    expect(series(byName(files, '-worker-throughput.svg'))).toEqual(expect.arrayContaining(['served gRPC', 'bare gRPC', 'minimal gRPC', 'raw session.run b=1']));
    expect(goals(byName(files, '-batching-gain.svg'))).toEqual(['goal ≥ 4 at c=32']);
    expect(series(byName(files, '-batching-efficiency.svg'))).toEqual(['on / raw at formed batch', 'on / bare HTTP']);
    expect(series(byName(files, '-routing-ttft.svg'))).toEqual(['kv', 'round-robin', 'random', 'least-loaded']);
    expect(goals(byName(files, '-routing-ttft-gain.svg'))).toEqual(['goal ≥ 3']);
    expect(goals(byName(files, '-routing-control.svg'))).toEqual(['goal ≥ 0.95', 'goal ≤ 1.05']);
    const attainment = byName(files, '-disagg-prefill-heavy-attainment.svg');
    expect(series(attainment)).toEqual(['8 aggregated', '4P+4D, 25 Gb/s', '4P+4D, 400 Gb/s']);
    // aggregated holds 90% up to 40 req/s: the goal is 4P+4D holding it up to 1.5x that
    expect(goals(attainment)).toEqual(['90% within SLO', 'goal: 4P+4D ≥ 90% up to 60 req/s (1.5 × agg)']);
    // the right axis's series is drawn first, under the replicas
    expect(series(byName(files, '-planner-sla.svg'))).toEqual(['arrivals / s', 'serving', 'serving + starting', 'planner target']);
    const summary = byName(files, '-planner-summary.svg');
    expect(series(summary)).toEqual(['static peak (7)', 'static mean (4)', 'planner sla']);
    expect(goals(summary)).toEqual(['goal ≥ 95% within SLO', 'goal ≤ 0.7 × static peak']);
  });

  it('puts the routing gain where the results put it: RR/KV grows with the rate, so the line rises', () => {
    const svg = byName(files, '-routing-ttft-gain.svg');
    const pts = /data-label="RR \/ KV TTFT p50"><polyline[^>]*points="([^"]+)"/.exec(svg)![1]!.split(' ').map((p) => p.split(',').map(Number));
    expect(pts).toHaveLength(3);
    // SVG y grows downwards: 2x, 4.5x, 30x
    expect(pts[0]![1]!).toBeGreaterThan(pts[1]![1]!);
    expect(pts[1]![1]!).toBeGreaterThan(pts[2]![1]!);
  });

  it('shows only the sections that ran, and renders older files without the newer fields', () => {
    const only = report({ date: 'd', machine, sections: ['routing'], durationMs: 800, routing }, 'r');
    const md = only[0]!.content;
    expect(md).toContain('## Routing: KV-aware');
    expect(md).not.toMatch(/## (Worker|Dynamic batching|Planner|Disaggregated)/);
    expect(only.slice(1).every((f) => f.name.startsWith('r-routing-'))).toBe(true);
    expect(md).toContain('quick run');
    // a planner section written before runs kept their timeline: the summary only
    const old = report({ date: 'd', machine, sections: ['planner'], planner: { ...planner, runs: { 'planner sla': plannerRun(0.96, 0.61, false) } } }, 'o');
    expect(old.map((f) => f.name)).toEqual(['o.md', 'o-planner-summary.svg']);
    // a section the report draws no chart for still lists its goals
    const hop = report({ date: 'd', machine, sections: ['cluster'], clusterHop: { headlines: ['router hop adds 120 us | at p50'] } }, 'h');
    expect(hop).toHaveLength(1);
    expect(hop[0]!.content).toContain('- router hop adds 120 us \\| at p50');
    expect(() => report(null, 'x')).toThrow(TypeError);
  });

  describe('node bench/report.mjs <file>', () => {
    const dir = mkdtempSync(join(tmpdir(), 'switchyard-bench-report-'));
    afterAll(() => rmSync(dir, { recursive: true, force: true }));

    it('writes the report beside the results file', () => {
      const file = join(dir, '2026-01-02T03-04-05-000Z-node20.json');
      writeFileSync(file, JSON.stringify({ date: 'd', machine, sections: ['batching'], batching }));
      const written = writeReport(file);
      expect(written[0]).toBe(join(dir, '2026-01-02T03-04-05-000Z-node20.md'));
      expect(readdirSync(dir).sort()).toEqual(
        ['2026-01-02T03-04-05-000Z-node20.json', '2026-01-02T03-04-05-000Z-node20.md', ...['efficiency', 'gain', 'throughput'].map((k) => `2026-01-02T03-04-05-000Z-node20-batching-${k}.svg`)].sort(),
      );
      expectWellFormedSvg(readFileSync(join(dir, '2026-01-02T03-04-05-000Z-node20-batching-gain.svg'), 'utf8'));
      expect(readFileSync(written[0]!, 'utf8')).toContain('](2026-01-02T03-04-05-000Z-node20-batching-gain.svg)');
    });
  });
});
