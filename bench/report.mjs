// The benchmark as pictures: a Markdown report and SVG charts drawn from one results file of
// bench/run.mjs. `report(results, stem)` is a pure function of the results (no clock, no IO), so an
// older results file renders the same way it would have the day it was written:
//
//   node bench/report.mjs bench/results/<stem>.json     → bench/results/<stem>.md + <stem>-<chart>.svg
//
// run.mjs calls it after writing the JSON. Only the sections the file holds appear. Charts (each with
// the goal the issue states drawn as a dashed red line, where there is one):
//   worker      served / bare and served / raw throughput per door against concurrency; req/s of served, bare, minimal (when measured) and raw
//   batching    on / off throughput (the batching gain), on / raw and on / bare, and req/s, against concurrency
//   routing     TTFT p50 per policy against arrival rate; RR / KV TTFT gain; hit rate / ideal; the no-reuse control
//   disagg      per workload: share of requests within SLO and goodput against arrival rate, aggregated vs 4P+4D
//   planner     per planner run: replicas (serving, starting, target) against the arrival rate over time;
//               every run's SLO attainment against its worker-seconds
// Every section's `goals` (and the cluster hop's headlines) are listed as text beside the charts; the
// front-threads comparison (`threadRatios`) and the JSON codec's rows (`jsonCodec`) as tables.
// The charts are drawn by @switchyard/simulator's SVG writer (`renderPlotSvg`), the same that
// draws `switchyard simulate`'s timeline.
import { readFileSync, writeFileSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { renderPlotSvg, timelinePlot } from '@switchyard/simulator';

const DOORS = [
  ['http-json', 'HTTP JSON', '#1f77b4'],
  ['http-binary', 'HTTP binary', '#ff7f0e'],
  ['grpc', 'gRPC', '#2ca02c'],
];
const POLICY_COLORS = { kv: '#1f77b4', 'round-robin': '#ff7f0e', random: '#7f7f7f', 'least-loaded': '#9467bd' };
const CHART = { width: 760, height: 400 };

/** Numeric keys of an object, sorted (concurrencies, rates). */
const numericKeys = (o) =>
  Object.keys(o ?? {})
    .map(Number)
    .filter(Number.isFinite)
    .sort((a, b) => a - b);
const ratio = (a, b) => (Number.isFinite(a) && Number.isFinite(b) && b > 0 ? a / b : Number.NaN);
const fmt = (v) => (Array.isArray(v) ? v.map(fmt).join(', ') : typeof v === 'number' ? (Number.isInteger(v) ? String(v) : String(Number(v.toPrecision(4)))) : String(v));
const mdCell = (s) => String(s).replace(/\|/g, '\\|').replace(/[\r\n]+/g, ' ');
const slug = (s) => String(s).toLowerCase().replace(/[^a-z0-9]+/g, '-').replace(/^-|-$/g, '');

/** One section's charts: [{ key, caption, plot }] → files and Markdown lines. */
function chartsOf(section, stem, charts, files, lines) {
  for (const { key, caption, plot } of charts) {
    const name = `${stem}-${section}-${key}.svg`;
    files.push({ name, content: renderPlotSvg({ ...CHART, ...plot }) });
    lines.push(`![${mdCell(plot.title)}](${encodeURI(name)})`, '', `*${caption}*`, '');
  }
}

function goalsTable(goals) {
  const entries = Object.entries(goals ?? {});
  if (entries.length === 0) return [];
  return ['| measure | value |', '|---|---|', ...entries.map(([k, v]) => `| ${mdCell(k)} | ${mdCell(fmt(v))} |`), ''];
}

/** A list of like rows (run.mjs's console tables) as a Markdown table, columns from the first row. */
function rowsTable(rows) {
  if (rows.length === 0 || typeof rows[0] !== 'object' || rows[0] === null) return [];
  const cols = Object.keys(rows[0]);
  return [`| ${cols.map(mdCell).join(' | ')} |`, `|${cols.map(() => '---').join('|')}|`, ...rows.map((r) => `| ${cols.map((c) => mdCell(fmt(r[c] ?? ''))).join(' | ')} |`), ''];
}

// --- worker -------------------------------------------------------------------------------------
function workerCharts(r) {
  const raw = r.raw?.batch1?.throughput;
  const doors = DOORS.filter(([mode]) => r.served?.[mode] !== undefined && r.bare?.[mode] !== undefined);
  const cs = numericKeys(r.served?.[doors[0]?.[0]]);
  const x = { label: 'concurrent clients', log: true, ticks: cs };
  const perDoor = (value) => doors.map(([mode, label, color]) => ({ label, color, points: cs.map((c) => [c, value(mode, c)]) }));
  return [
    {
      key: 'served-bare',
      caption: 'The worker over each door against a bare node:http / grpc-js server answering the same bytes with no inference (1.0 = serving costs nothing over the transport). Goal (issue 15): ≥ 0.6 at c=16 on every door.',
      plot: { title: 'served / bare-server throughput, MLP', x, y: { label: 'served / bare throughput' }, series: perDoor((m, c) => ratio(r.served[m][c]?.throughput, r.bare[m][c]?.throughput)), goals: [{ label: 'goal ≥ 0.6 at c=16', value: 0.6 }] },
    },
    {
      key: 'served-raw',
      caption: 'The worker over each door against in-process session.run at batch 1. Goal (issue 2): gRPC at c=16 ≥ 0.5.',
      plot: { title: 'served / raw session.run throughput, MLP', x, y: { label: 'served / raw batch-1 throughput' }, series: perDoor((m, c) => ratio(r.served[m][c]?.throughput, raw)), goals: [{ label: 'goal ≥ 0.5 (gRPC, c=16)', value: 0.5 }] },
    },
    {
      key: 'throughput',
      caption: 'Requests per second: served (solid), bare server (dashed) and, when measured, a minimal server running the model with nothing else (dotted) per door; raw session.run at batch 1 (grey) for scale.',
      plot: {
        title: 'throughput, MLP',
        x,
        y: { label: 'requests / s', log: true },
        series: [
          ...perDoor((m, c) => r.served[m][c]?.throughput).map((s) => ({ ...s, label: `served ${s.label}` })),
          ...perDoor((m, c) => r.bare[m][c]?.throughput).map((s) => ({ ...s, label: `bare ${s.label}`, dash: '5,4' })),
          ...(r.minimal?.[doors[0]?.[0]] !== undefined ? perDoor((m, c) => r.minimal[m]?.[c]?.throughput).map((s) => ({ ...s, label: `minimal ${s.label}`, dash: '1,3' })) : []),
          ...(Number.isFinite(raw) ? [{ label: 'raw session.run b=1', color: '#7f7f7f', points: cs.map((c) => [c, raw]), markers: false }] : []),
        ],
      },
    },
  ];
}

// --- batching -----------------------------------------------------------------------------------
function batchingCharts(b) {
  const cs = numericKeys(b.on);
  const x = { label: 'concurrent clients', log: true, ticks: cs };
  const rawAt = (c) => b.raw?.[b.formed?.[c]?.modeBatch]?.rowsPerSec;
  const bareAt = (c) => b.ratios?.find((row) => row.concurrency === c)?.['bare http req/s'];
  const hasBare = cs.some((c) => Number.isFinite(bareAt(c)));
  return [
    {
      key: 'gain',
      caption: 'Dynamic batching on against off, the MLP on one instance over HTTP binary. Goal (issue 15): ≥ 4 at c=32.',
      plot: { title: 'batching gain: on / off throughput', x, y: { label: 'on / off throughput' }, series: [{ label: 'on / off', points: cs.map((c) => [c, ratio(b.on[c]?.throughput, b.off[c]?.throughput)]) }], goals: [{ label: 'goal ≥ 4 at c=32', value: 4 }] },
    },
    {
      key: 'efficiency',
      caption: 'Batching on against raw session.run at the batch size the batcher formed most (rows/s), and against the bare HTTP server. Goals: on / raw ≥ 0.8 at c ≥ 16; on / bare ≥ 0.8 at c=64.',
      plot: {
        title: 'batching on / raw and on / bare',
        x,
        y: { label: 'ratio' },
        series: [
          { label: 'on / raw at formed batch', points: cs.map((c) => [c, ratio(b.on[c]?.throughput, rawAt(c))]) },
          // the bare server ran at the worker section's concurrencies only: a line through those
          ...(hasBare ? [{ label: 'on / bare HTTP', points: cs.filter((c) => Number.isFinite(bareAt(c))).map((c) => [c, ratio(b.on[c]?.throughput, bareAt(c))]) }] : []),
        ],
        goals: [{ label: 'goal ≥ 0.8', value: 0.8 }],
      },
    },
    {
      key: 'throughput',
      caption: 'Requests per second with batching off and on, and the bare HTTP server (when the worker section ran).',
      plot: {
        title: 'batching throughput, MLP',
        x,
        y: { label: 'requests / s' },
        series: [
          { label: 'off', points: cs.map((c) => [c, b.off[c]?.throughput]) },
          { label: 'on', points: cs.map((c) => [c, b.on[c]?.throughput]) },
          ...(hasBare ? [{ label: 'bare HTTP', dash: '5,4', color: '#7f7f7f', points: cs.filter((c) => Number.isFinite(bareAt(c))).map((c) => [c, bareAt(c)]) }] : []),
        ],
      },
    },
  ];
}

// --- routing ------------------------------------------------------------------------------------
function routingCharts(rt) {
  const rates = numericKeys(rt.byRate);
  const x = { label: 'arrival rate (req/s, simulated)', ticks: rates.length > 0 ? rates : undefined, min: 0 };
  const at = (rate, key, policy) => rt.byRate[rate]?.[key]?.policies?.[policy];
  const policies = Object.keys(rt.byRate[rates[0]]?.shared?.policies ?? {});
  return [
    {
      key: 'ttft',
      caption: `Time to first token (p50) per routing policy on the shared-prefix workload, ${rt.workers ?? '?'} simulated workers, against the arrival rate.`,
      plot: {
        title: 'TTFT p50 by routing policy (shared prefixes)',
        x,
        y: { label: 'TTFT p50 (ms, simulated)', log: true },
        series: policies.map((p) => ({ label: p, color: POLICY_COLORS[p], points: rates.map((rate) => [rate, at(rate, 'shared', p)?.ttftMs?.p50]) })),
      },
    },
    {
      key: 'ttft-gain',
      caption: 'Round-robin TTFT p50 over KV-aware TTFT p50 against load. Goal (issue 5, Dynamo\'s published figure): ≥ 3.',
      plot: {
        title: 'KV-aware routing gain: RR / KV TTFT p50',
        x,
        y: { label: 'round-robin / KV-aware TTFT p50' },
        series: [{ label: 'RR / KV TTFT p50', points: rates.map((rate) => [rate, ratio(at(rate, 'shared', 'round-robin')?.ttftMs?.p50, at(rate, 'shared', 'kv')?.ttftMs?.p50)]) }],
        goals: [{ label: 'goal ≥ 3', value: 3 }],
      },
    },
    {
      key: 'hit-rate',
      caption: 'Prefix-cache hit rate over the ideal (infinite cache, perfect affinity) per policy. Goal (issue 5): KV-aware ≥ 0.9.',
      plot: {
        title: 'prefix hit rate / ideal',
        x,
        y: { label: 'hit rate / ideal', min: 0 },
        series: policies.map((p) => ({ label: p, color: POLICY_COLORS[p], points: rates.map((rate) => [rate, ratio(at(rate, 'shared', p)?.hitRate, rt.byRate[rate]?.shared?.idealHitRate)]) })),
        goals: [{ label: 'goal ≥ 0.9 (KV-aware)', value: 0.9 }],
      },
    },
    {
      key: 'control',
      caption: 'The no-reuse control: KV-aware over round-robin, TTFT p50 and output tokens/s. Goal (issue 5): within 5% (0.95–1.05).',
      plot: {
        title: 'no-reuse control: KV-aware / round-robin',
        x,
        y: { label: 'KV-aware / round-robin' },
        series: [
          { label: 'TTFT p50', points: rates.map((rate) => [rate, ratio(at(rate, 'control', 'kv')?.ttftMs?.p50, at(rate, 'control', 'round-robin')?.ttftMs?.p50)]) },
          { label: 'output tok/s', points: rates.map((rate) => [rate, ratio(at(rate, 'control', 'kv')?.outputTokPerSimSec, at(rate, 'control', 'round-robin')?.outputTokPerSimSec)]) },
        ],
        goals: [
          { label: 'goal ≥ 0.95', value: 0.95 },
          { label: 'goal ≤ 1.05', value: 1.05 },
        ],
      },
    },
  ];
}

// --- disaggregation -----------------------------------------------------------------------------
function disaggCharts(d) {
  const charts = [];
  for (const [name, w] of Object.entries(d.workloads ?? {})) {
    const rates = numericKeys(w.byRate);
    const first = w.byRate[rates[0]];
    const gbps = numericKeys(first?.disaggregated);
    const clusters = [
      { label: '8 aggregated', color: '#1f77b4', pick: (r) => r?.aggregated },
      ...gbps.map((g, i) => ({ label: `4P+4D, ${g} Gb/s`, color: ['#ff7f0e', '#2ca02c', '#9467bd'][i % 3], dash: i > 0 ? '5,4' : undefined, pick: (r) => r?.disaggregated?.[g] })),
    ];
    const x = { label: 'arrival rate (req/s, simulated)', ticks: rates, min: 0 };
    const series = (value) => clusters.map((c) => ({ label: c.label, color: c.color, dash: c.dash, points: rates.map((rate) => [rate, value(c.pick(w.byRate[rate]))]) }));
    // DistServe's goodput: the highest rate swept at which ≥ 90% of requests meet the SLO.
    const aggMax = Math.max(0, ...rates.filter((rate) => w.byRate[rate]?.aggregated?.attainment >= 0.9));
    const heavy = name === 'prefill-heavy';
    const goals = [{ label: '90% within SLO', value: 0.9 }];
    if (aggMax > 0 && heavy) goals.push({ label: `goal: 4P+4D ≥ 90% up to ${fmt(1.5 * aggMax)} req/s (1.5 × agg)`, value: 1.5 * aggMax, axis: 'x' });
    if (aggMax > 0 && !heavy) goals.push({ label: `goal: 4P+4D's knee within 5% of ${fmt(aggMax)} req/s`, value: aggMax, axis: 'x' });
    const slo = `TTFT ≤ ${fmt(w.ttftSloMs)} ms, TPOT ≤ ${fmt(d.slo?.tpotMs)} ms`;
    const isl = w.shape?.isl;
    const osl = w.shape?.osl;
    charts.push({
      key: `${slug(name)}-attainment`,
      caption: `${name} (${isl ?? '?'} in / ${osl ?? '?'} out): share of requests within the SLO (${slo}) against the arrival rate. The cluster's goodput is the highest rate still at ≥ 90%; goal (issue 11): ${heavy ? '4P+4D ≥ 1.5 × the aggregated goodput' : 'conditional disaggregation within 5% of aggregated'}.`,
      plot: { title: `${name}: requests within SLO`, x, y: { label: 'share within SLO', min: 0, max: 1.05 }, series: series((r) => r?.attainment), goals },
    });
    charts.push({
      key: `${slug(name)}-goodput`,
      caption: `${name}: requests within SLO per second against the arrival rate (the diagonal is every request in SLO).`,
      plot: {
        title: `${name}: goodput`,
        x,
        y: { label: 'requests within SLO / s' },
        series: [...series((r) => r?.goodput), { label: 'offered load', color: '#bbbbbb', dash: '2,2', markers: false, points: rates.map((rate) => [rate, rate]) }],
      },
    });
  }
  return charts;
}

// --- planner ------------------------------------------------------------------------------------
function plannerCharts(p) {
  const charts = [];
  const runs = Object.entries(p.runs ?? {});
  for (const [label, run] of runs) {
    if (!Array.isArray(run.timeline) || run.timeline.length === 0) continue;
    const plot = timelinePlot(run.timeline, `${label}: ${p.shape ?? ''}`);
    charts.push({
      key: slug(label.replace(/^planner /, '')),
      caption: `${label}: replicas serving (blue), serving + starting (orange) and the planner's target (red dashed) against the arrival rate (grey, right axis). ${fmt(100 * run.sloAttainment)}% of requests within SLO, ${fmt(100 * (1 - run.workerSecondsVsStaticPeak))}% fewer worker-seconds than static peak.`,
      plot: { ...plot, width: 960 },
    });
  }
  if (runs.length > 0) {
    charts.push({
      key: 'summary',
      caption: 'Every run: share of requests within the SLOs against worker-seconds relative to static peak provisioning. Goal (issue 12): ≥ 95% within SLO with ≥ 30% fewer worker-seconds (top left of both lines).',
      plot: {
        title: 'planner: SLO attainment against cost',
        x: { label: 'worker-seconds / static peak', min: 0, max: 1.1 },
        y: { label: 'share within SLO', min: Math.min(0.5, ...runs.map(([, r]) => r.sloAttainment).filter(Number.isFinite)) - 0.05, max: 1.01 },
        series: runs.map(([label, r]) => ({ label, points: [[r.workerSecondsVsStaticPeak, r.sloAttainment]], markers: true })),
        goals: [
          { label: 'goal ≥ 95% within SLO', value: 0.95 },
          { label: 'goal ≤ 0.7 × static peak', value: 0.7, axis: 'x' },
        ],
      },
    });
  }
  return charts;
}

/** Every `goals` object in a section's results, with where it was found (`byRate.16` …). */
function goalsIn(value, path = [], out = [], depth = 0) {
  if (value === null || typeof value !== 'object' || Array.isArray(value) || depth > 3) return out;
  if (value.goals !== undefined && typeof value.goals === 'object') out.push({ where: path.join(' '), goals: value.goals });
  for (const [k, v] of Object.entries(value)) if (k !== 'goals') goalsIn(v, [...path, k], out, depth + 1);
  return out;
}

/** The sections in run.mjs's order: title, where in the results, charts (optional). */
const SECTIONS = [
  { title: 'Worker: served vs raw and bare (issue 2)', has: (r) => r.served?.['http-json'] !== undefined && r.bare?.['http-json'] !== undefined, data: (r) => r, charts: workerCharts, id: 'worker', goals: (r) => [{ where: '', goals: r.goals }, ...(r.floor !== undefined ? [{ where: 'floor', title: 'Not goals: the floor, a minimal Node.js server running the same model with nothing else (`bench/lib/minimal-servers.mjs`)', goals: r.floor }] : []), ...(r.goalRounds !== undefined ? [{ where: 'rounds', title: 'Each round of the goal cells (`--rounds`): the goal lines above are their medians', goals: r.goalRounds }] : []), ...(r.memory !== undefined ? [{ where: 'memory', title: "Memory: the worker's RSS under the c=64 load (must not grow from one build to the next: `bench/compare.mjs`)", goals: r.memory }] : [])] },
  { title: 'Worker: front threads against the event loop', data: (r) => r.threadRatios, rows: true, id: 'threads' },
  { title: 'Worker: HTTP JSON tensor codec against JSON.parse / JSON.stringify', data: (r) => r.jsonCodec?.rows, rows: true, id: 'json-codec' },
  { title: 'Dynamic batching (issue 3)', data: (r) => r.batching, charts: batchingCharts, id: 'batching', goals: (r) => [...goalsIn(r.batching), ...(r.batching.ceiling !== undefined ? [{ where: 'ceiling', title: 'Not goals: the ceiling, a bare node:http server answering the same payload with no work', goals: r.batching.ceiling }] : [])] },
  { title: 'Embeddings', data: (r) => r.embeddings, id: 'embeddings' },
  { title: 'LLM: replay in virtual time (issue 4)', data: (r) => r.llmReplay, id: 'llm-replay' },
  { title: 'LLM: ONNX executor on the tiny decoder (issue 4)', data: (r) => r.llmOnnx, id: 'llm-onnx' },
  { title: 'Guided decoding', data: (r) => r.guidedDecoding, id: 'guided' },
  { title: 'Routing: KV-aware vs round-robin (issue 5)', data: (r) => r.routing, charts: routingCharts, id: 'routing' },
  { title: 'Routing: decision latency (issue 5)', data: (r) => r.routingDecision, id: 'routing-decision' },
  { title: 'Disaggregated vs aggregated serving (issue 11)', data: (r) => r.disagg, charts: disaggCharts, id: 'disagg' },
  { title: 'Planner against static provisioning (issue 12)', data: (r) => r.planner, charts: plannerCharts, id: 'planner' },
  { title: 'Cluster: the router hop', data: (r) => r.clusterHop, id: 'cluster' },
  { title: 'KV transfer plane (issue 11)', data: (r) => r.kvTransfer, id: 'kv-transfer' },
  { title: 'KV transfer on the tiny ONNX LLM (issue 11)', data: (r) => r.kvTransferOnnx, id: 'kv-transfer-onnx' },
];

/**
 * The report of one results object: `[{ name, content }]`, the Markdown file `<stem>.md` first, then
 * one SVG per chart (`<stem>-<section>-<chart>.svg`, referenced from the Markdown by name, so the
 * files belong in one folder). Sections absent from the results are left out.
 */
export function report(results, stem) {
  if (results === null || typeof results !== 'object') throw new TypeError('report: the results must be an object (a bench/run.mjs results file)');
  const files = [];
  const m = results.machine ?? {};
  const lines = [
    `# Switchyard benchmark, ${results.date ?? 'undated'}`,
    '',
    `Node.js ${m.node ?? '?'}, ${m.cpus ?? '?'} CPUs (${m.model ?? '?'})${results.durationMs !== undefined && results.durationMs < 2500 ? ', quick run' : ''}; sections run: ${(results.sections ?? []).join(', ') || '?'}. Results: \`${stem}.json\`. Goals are drawn as dashed red lines.`,
    '',
  ];
  let drawn = 0;
  for (const s of SECTIONS) {
    const data = s.has !== undefined ? (s.has(results) ? s.data(results) : undefined) : s.data(results);
    if (data === undefined || data === null) continue;
    drawn++;
    lines.push(`## ${s.title}`, '');
    const goals = s.goals !== undefined ? s.goals(results) : goalsIn(data);
    for (const { where, title, goals: g } of goals) {
      if (title !== undefined) lines.push(`${title}:`, '');
      else if (where !== '') lines.push(`Goals, ${where.replace(/^byRate /, 'at ').replace(/^at (\d+(\.\d+)?)$/, 'at $1 req/s')}:`, '');
      lines.push(...goalsTable(g));
    }
    if (Array.isArray(data.headlines)) lines.push(...data.headlines.map((h) => `- ${mdCell(h)}`), '');
    if (s.rows === true && Array.isArray(data)) lines.push(...rowsTable(data));
    if (s.charts !== undefined) chartsOf(s.id, stem, s.charts(data), files, lines);
  }
  if (drawn === 0) lines.push('No section of this file is known to the report.', '');
  return [{ name: `${stem}.md`, content: lines.join('\n') }, ...files];
}

/** Render `file` (a results JSON) beside itself; returns the paths written. */
export function writeReport(file) {
  const results = JSON.parse(readFileSync(file, 'utf8'));
  const dir = dirname(file);
  const stem = basename(file).replace(/\.json$/, '');
  return report(results, stem).map(({ name, content }) => {
    writeFileSync(join(dir, name), content);
    return join(dir, name);
  });
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const files = process.argv.slice(2);
  if (files.length === 0) {
    console.error('usage: node bench/report.mjs bench/results/<stem>.json [...]');
    process.exit(2);
  }
  for (const f of files) {
    const written = writeReport(f);
    console.log(`${f}: ${written[0]} and ${written.length - 1} chart${written.length === 2 ? '' : 's'}`);
  }
}
