/**
 * deploy/observability against the code, end to end: a real Prometheus (Debian's, installed by the
 * harness like etcd) scrapes a local cluster — a router, a prefill and a decode worker serving the
 * mocker LLM, and a planner (memory connector, dry run) — with the scrape relabeling of
 * deploy/observability/prometheus.yml (its Kubernetes discovery swapped for static targets that carry
 * the labels the pods of deploy/kubernetes carry), and evaluates deploy/observability's rules.
 *
 * - `promtool check rules` accepts the rules, and `promtool test rules` passes their unit tests
 *   (deploy/observability/switchyard-rules.test.yaml: synthetic series that must, or must not, fire
 *   the alerts);
 * - every target is up with the job and pool labels the rules and the dashboard select on;
 * - every metric name a rule or a dashboard query uses is one the processes really export (or a
 *   recording rule defines), as Prometheus stores them after a few requests — so neither can drift
 *   from the code's metric names;
 * - every rule is loaded and evaluates healthy, and the recording rules yield series for the traffic;
 * - every dashboard query parses and evaluates in Prometheus.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadAllYaml, loadYaml } from '@kubernetes/client-node';
import OpenAI from 'openai';
import {
  ensureBinaries,
  PROMETHEUS_BINARY,
  PROMTOOL_BINARY,
  repoRoot,
  startAppProcess,
  startPrometheus,
  type AppProcess,
  type PrometheusServer,
} from '@switchyard/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { metricsText, total } from './lib/metrics.js';
import { waitFor } from './lib/wait-for.js';
import { startCluster, type Cluster } from './support/cluster.js';

const DIR = join(repoRoot(), 'deploy', 'observability');
const RULES_PATH = join(DIR, 'switchyard-rules.yaml');
const MIN_REMOTE = 32;
const LOAD = ['--model-control-mode=explicit', '--load-model=mock_llm'];

interface Rule {
  record?: string;
  alert?: string;
  expr: string;
}
const rules = (loadYaml(readFileSync(RULES_PATH, 'utf8')) as { groups: { name: string; rules: Rule[] }[] }).groups.flatMap((g) => g.rules);
const recorded = new Set(rules.flatMap((r) => (r.record === undefined ? [] : [r.record])));

interface Panel {
  type: string;
  id: number;
  title: string;
  datasource?: { uid?: string };
  targets?: { expr: string; refId: string }[];
  panels?: Panel[];
}
const dashboard = JSON.parse(readFileSync(join(DIR, 'grafana-dashboard.json'), 'utf8')) as {
  panels: Panel[];
  templating: { list: { name: string; type: string; query: string | { query: string } }[] };
};
const panels = dashboard.panels.flatMap((p) => [p, ...(p.panels ?? [])]);
const dashboardQueries = panels.flatMap((p) => (p.targets ?? []).map((t) => ({ panel: p.title, expr: t.expr })));
/** `label_values(<selector>, label)` of the query variables: their selectors are queries too. */
const variableSelectors = dashboard.templating.list
  .filter((v) => v.type === 'query')
  .map((v) => {
    const q = typeof v.query === 'string' ? v.query : v.query.query;
    const m = /^label_values\((.+),\s*[a-zA-Z_]\w*\)$/.exec(q);
    if (m === null) throw new Error(`dashboard variable ${v.name}: not a label_values query: ${q}`);
    return { panel: `variable ${v.name}`, expr: m[1]! };
  });

const KEYWORDS = new Set(['and', 'or', 'unless', 'by', 'without', 'on', 'ignoring', 'group_left', 'group_right', 'bool', 'offset', 'inf', 'nan']);

/**
 * The metric names a PromQL expression selects: identifiers outside strings, label matchers, ranges
 * and grouping clauses that are not function calls or keywords.
 */
function metricNames(expr: string): string[] {
  const bare = expr
    .replace(/"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`/g, '""')
    .replace(/\{[^}]*\}/g, ' ')
    .replace(/\[[^\]]*\]/g, ' ')
    .replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, ' ');
  const names = new Set<string>();
  for (const m of bare.matchAll(/(?<![\w:.$])([a-zA-Z_:][a-zA-Z0-9_:]*)(\s*\()?/g)) {
    if (m[2] === undefined && !KEYWORDS.has(m[1]!.toLowerCase())) names.add(m[1]!);
  }
  return [...names].sort();
}

/** Grafana's variables in a dashboard query, as Prometheus can evaluate it. */
const grafanaToPromql = (expr: string): string => expr.replaceAll('$__rate_interval', '1m').replace(/\$(model|pool|instance)\b/g, '.*');

/** The pod-template labels of the Deployment `name` in deploy/kubernetes/base (overlays only patch them). */
function podLabels(name: string): Record<string, string> {
  const files: string[] = [];
  const walk = (dir: string): void => {
    for (const e of readdirSync(dir)) {
      const path = join(dir, e);
      if (statSync(path).isDirectory()) walk(path);
      else if (/\.ya?ml$/.test(e)) files.push(path);
    }
  };
  walk(join(repoRoot(), 'deploy', 'kubernetes', 'base'));
  type Doc = { kind?: string; metadata?: { name?: string }; spec?: { template?: { metadata?: { labels?: Record<string, string> } } } };
  for (const file of files) {
    for (const o of loadAllYaml(readFileSync(file, 'utf8')) as Doc[]) {
      const labels = o?.spec?.template?.metadata?.labels;
      if (o?.kind === 'Deployment' && o.metadata?.name === name && labels !== undefined) return labels;
    }
  }
  throw new Error(`no Deployment ${name} with pod labels under deploy/kubernetes/base`);
}

/** What Kubernetes pod discovery would attach to a pod's `metrics` port, as static target labels. */
function podTarget(address: string, deployment: string, pod: string): { targets: string[]; labels: Record<string, string> } {
  const labels: Record<string, string> = {
    __meta_kubernetes_namespace: 'default',
    __meta_kubernetes_pod_name: pod,
    __meta_kubernetes_pod_container_port_name: 'metrics',
  };
  for (const [k, v] of Object.entries(podLabels(deployment))) labels[`__meta_kubernetes_pod_label_${k.replace(/[^a-zA-Z0-9_]/g, '_')}`] = v;
  return { targets: [address], labels };
}

const hostPort = (url: string): string => new URL(url).host;

let cluster: Cluster;
let planner: AppProcess;
let prometheus: PrometheusServer;
let promtool: string;
let profileDir: string | undefined;

async function api<T>(path: string): Promise<T> {
  const res = await fetch(`${prometheus.url}${path}`);
  const body = (await res.json()) as { status: string; data: T; error?: string };
  if (body.status !== 'success') throw new Error(`${path}: ${res.status} ${body.error ?? ''}`);
  return body.data;
}
const query = (promql: string) => api<{ resultType: string; result: { metric: Record<string, string>; value: [number, string] }[] }>(`/api/v1/query?query=${encodeURIComponent(promql)}`);

beforeAll(async () => {
  // Installs Debian's prometheus on first use (a few minutes on a fresh machine), hence the long hook timeout.
  promtool = (await ensureBinaries([PROMETHEUS_BINARY, PROMTOOL_BINARY])).get('promtool')!;
  cluster = await startCluster({
    workers: [
      ['--role=prefill', '--kv-transfer-address=127.0.0.1', ...LOAD],
      ['--role=decode', '--kv-transfer-address=127.0.0.1', ...LOAD],
    ],
    routerArgs: [`--disagg-min-remote-tokens=${MIN_REMOTE}`],
    waitForModels: ['mock_llm'],
  });
  const roleOf = (w: AppProcess): string | undefined => (w.logs().find((l) => l.msg === 'worker started')?.cluster as { role?: string } | undefined)?.role;
  // sla mode, so the forecast families exist too; a made-up profile (its figures do not matter here)
  profileDir = mkdtempSync(join(tmpdir(), 'switchyard-observability-'));
  const profile = join(profileDir, 'profile.json');
  writeFileSync(
    profile,
    JSON.stringify({
      version: 1,
      prefill: { isl: [16, 256], ttftMs: [20, 200], throughputTokensPerSec: [800, 1300] },
      decode: { kvUsage: [0.1, 0.9], contextLength: [64, 512], itlMs: [[5, 8], [9, 14]], kvCapacityTokens: 1024 },
    }),
  );
  planner = await startAppProcess('planner', [
    '--mode=sla',
    `--profile=${profile}`,
    `--etcd=${cluster.etcd.url}`,
    `--nats=${cluster.nats.url}`,
    `--namespace=${cluster.namespace}`,
    '--model=mock_llm',
    '--connector=memory',
    '--dry-run',
    '--adjustment-interval-secs=1',
    '--metrics-port=0',
    '--metrics-address=127.0.0.1',
  ]);

  // deploy/observability/prometheus.yml, with static targets in place of Kubernetes discovery
  const config = loadYaml(readFileSync(join(DIR, 'prometheus.yml'), 'utf8')) as {
    global: Record<string, string>;
    rule_files: string[];
    scrape_configs: Record<string, unknown>[];
  };
  expect(config.rule_files).toEqual(['switchyard-rules.yaml']);
  expect(config.scrape_configs).toHaveLength(1);
  const scrape = config.scrape_configs[0]!;
  expect(scrape).toHaveProperty('kubernetes_sd_configs');
  delete scrape['kubernetes_sd_configs'];
  scrape['static_configs'] = [
    podTarget(hostPort(cluster.router.metricsUrl), 'switchyard-router', 'router-0'),
    ...cluster.workers.map((w, i) => podTarget(hostPort(w.metricsUrl), `switchyard-${roleOf(w)}`, `worker-${i}`)),
    podTarget(hostPort(planner.metricsUrl), 'switchyard-planner', 'planner-0'),
  ];
  scrape['scrape_interval'] = '1s';
  config.global = { scrape_interval: '1s', evaluation_interval: '1s' };
  config.rule_files = [RULES_PATH];
  prometheus = await startPrometheus({ config: JSON.stringify(config) });

  // Prometheus hands discovered targets to its scrapers every 5 s: the first scrape comes after that
  await waitFor(
    async () => {
      const t = await api<{ activeTargets: { health: string }[] }>('/api/v1/targets?state=active');
      return t.activeTargets.length === 4 && t.activeTargets.every((x) => x.health === 'up');
    },
    { timeoutMs: 20_000, intervalMs: 250, message: 'Prometheus did not scrape every process' },
  );

  // traffic, so histograms and per-request counters have samples: a long prompt (prefilled remotely),
  // a short one (prefilled by the decode worker), and one asking for more tokens than the context holds (an error the router counts)
  const openai = new OpenAI({ baseURL: `${cluster.router.httpUrl}/v1`, apiKey: 'unused', maxRetries: 0 });
  const long = Array.from({ length: 3 }, (_, i) => `Paragraph ${i} of a prompt long enough to be prefilled remotely.`).join(' ');
  for (const prompt of [long, 'hi', long]) {
    const r = await openai.chat.completions.create({ model: 'mock_llm', messages: [{ role: 'user', content: prompt }], max_tokens: 8 });
    expect(r.choices[0]?.finish_reason).toBeDefined();
  }
  // prompt + max_tokens over the context length: the worker's engine refuses it, the router counts it
  await expect(openai.chat.completions.create({ model: 'mock_llm', messages: [{ role: 'user', content: 'hi' }], max_tokens: 4096 })).rejects.toThrow(/maximum context length/);
  // rate() counts increases between two scrapes, and a counter's series is scraped first at the value
  // it had when it appeared: once Prometheus holds the router's and the workers' request series, one
  // more request (remote prefill, so every pool's figures move), so every rate the rules take sees it
  await waitFor(
    async () =>
      (await query('switchyard_router_requests_total{model="mock_llm", endpoint="generate"}')).result.length > 0 &&
      (await query('vllm:request_success_total{job="switchyard-worker"}')).result.length > 0,
    { timeoutMs: 20_000, intervalMs: 250, message: 'Prometheus never scraped the request counters' },
  );
  const after = await openai.chat.completions.create({ model: 'mock_llm', messages: [{ role: 'user', content: long }], max_tokens: 8 });
  expect(after.choices[0]?.finish_reason).toBeDefined();
  const routerText = await metricsText(cluster.router.metricsUrl);
  expect(total(routerText, 'switchyard_router_disagg_requests_total', 'path="remote"')).toBeGreaterThan(0);
  expect(total(routerText, 'switchyard_router_disagg_local_total', 'reason="short_prompt"')).toBeGreaterThan(0);
  expect(total(routerText, 'switchyard_router_request_errors_total', 'code="invalid_argument"')).toBeGreaterThan(0);
}, 300_000);

afterAll(async () => {
  await prometheus?.stop();
  await planner?.stop();
  await cluster?.stop();
  if (profileDir !== undefined) rmSync(profileDir, { recursive: true, force: true });
});

describe('metric name extraction', () => {
  it('finds the selected metrics and nothing else', () => {
    expect(metricNames('sum by (model, le) (rate(vllm:x_bucket{pool=~"$pool", le="0.5"}[$__rate_interval])) / on (model) (b_total offset 5m > 1e3) and bool up')).toEqual([
      'b_total',
      'up',
      'vllm:x_bucket',
    ]);
    expect(metricNames('histogram_quantile(0.9, sum(rate(a_bucket[5m])) by (le))')).toEqual(['a_bucket']);
  });
});

describe('deploy/observability against a real Prometheus and cluster', () => {
  it('promtool accepts the rules, and their unit tests (synthetic series → alerts) pass', () => {
    const check = spawnSync(promtool, ['check', 'rules', RULES_PATH], { encoding: 'utf8', timeout: 30_000 });
    expect(check.status, check.stdout + check.stderr).toBe(0);
    expect(check.stdout).toContain(`SUCCESS: ${rules.length} rules found`);
    const unit = spawnSync(promtool, ['test', 'rules', join(DIR, 'switchyard-rules.test.yaml')], { encoding: 'utf8', timeout: 60_000 });
    expect(unit.status, unit.stdout + unit.stderr).toBe(0);
    expect(unit.stdout).toContain('SUCCESS');
  });

  it('every metric the rules and the dashboard use is exported by the cluster', async () => {
    const used = new Map<string, string[]>();
    const use = (where: string, expr: string): void => {
      for (const n of metricNames(expr)) used.set(n, [...(used.get(n) ?? []), where]);
    };
    for (const r of rules) use(r.record ?? r.alert!, r.expr);
    for (const q of [...dashboardQueries, ...variableSelectors]) use(`dashboard: ${q.panel}`, q.expr);
    // the extraction found the families each part is about (it cannot pass by finding nothing)
    for (const n of ['switchyard_router_requests_total', 'vllm:kv_cache_usage_perc', 'switchyard_planner_decisions_total', 'switchyard_router_disagg_requests_total', 'nv_inference_request_success', 'up']) {
      expect([...used.keys()]).toContain(n);
    }

    let missing: string[] = [];
    await waitFor(
      async () => {
        const stored = new Set([...(await api<string[]>('/api/v1/label/__name__/values')), ...recorded]);
        missing = [...used.keys()].filter((n) => !stored.has(n));
        return missing.length === 0;
      },
      { timeoutMs: 15_000, intervalMs: 250, message: 'names never scraped' },
    ).catch(() => {
      throw new Error(`metric names used but never exported:\n${missing.map((n) => `  ${n} (${used.get(n)!.join('; ')})`).join('\n')}`);
    });
  });

  it('targets are up with the job and pool labels of the Kubernetes relabeling', async () => {
    const targets = await api<{ activeTargets: { labels: Record<string, string>; health: string; lastError: string }[] }>('/api/v1/targets?state=active');
    const seen = targets.activeTargets.map((t) => `${t.labels['job']}/${t.labels['pool'] ?? '-'} ${t.health}`).sort();
    expect(seen, JSON.stringify(targets)).toEqual(['switchyard-planner/- up', 'switchyard-router/- up', 'switchyard-worker/decode up', 'switchyard-worker/prefill up']);
    for (const t of targets.activeTargets) expect(t.labels['pod']).toMatch(/^(router|worker|planner)-\d$/);
  });

  it('every rule is loaded and evaluates healthy; recording rules yield series', async () => {
    type RuleState = { name: string; health: string; lastError?: string; lastEvaluation: string; type: string };
    let states: RuleState[] = [];
    await waitFor(
      async () => {
        states = (await api<{ groups: { rules: RuleState[] }[] }>('/api/v1/rules')).groups.flatMap((g) => g.rules);
        return states.length === rules.length && states.every((s) => s.health !== 'unknown');
      },
      { timeoutMs: 10_000, intervalMs: 250, message: 'rules not evaluated in time' },
    );
    expect(states.filter((s) => s.health !== 'ok').map((s) => `${s.name}: ${s.health} ${s.lastError ?? ''}`)).toEqual([]);
    expect(states.map((s) => s.name).sort()).toEqual(rules.map((r) => r.record ?? r.alert!).sort());

    // rate() over the traffic above, the pool label from the relabeling
    await waitFor(async () => (await query('switchyard:router_requests:rate5m{model="mock_llm", endpoint="generate"} > 0')).result.length === 1, {
      timeoutMs: 10_000,
      message: 'switchyard:router_requests:rate5m never saw the requests',
    });
    const kv = await query('switchyard:kv_cache_usage:max{model="mock_llm"}');
    expect(kv.result.map((r) => r.metric['pool']).sort()).toEqual(['decode', 'prefill']);
    const ttft = await query('switchyard:ttft_slo_miss_ratio:rate5m');
    expect(ttft.result).toHaveLength(1);
    expect(Number(ttft.result[0]!.value[1])).toBeGreaterThanOrEqual(0);
    expect(Number(ttft.result[0]!.value[1])).toBeLessThanOrEqual(1);
  });

  it('every dashboard query evaluates in Prometheus; panels are well formed', async () => {
    const ids = panels.map((p) => p.id);
    expect(new Set(ids).size).toBe(ids.length);
    for (const p of panels.filter((p) => p.type !== 'row')) {
      expect(p.datasource?.uid, p.title).toBe('${datasource}');
      expect(p.targets?.length, p.title).toBeGreaterThan(0);
    }
    for (const q of [...dashboardQueries, ...variableSelectors]) {
      await expect(query(grafanaToPromql(q.expr)), `${q.panel}: ${q.expr}`).resolves.toHaveProperty('resultType');
    }
    // the per-pool selections find the workers
    const running = await query(grafanaToPromql('sum by (pool, instance) (vllm:num_requests_running{job="switchyard-worker", pool=~"$pool", instance=~"$instance", model=~"$model"})'));
    expect(running.result.map((r) => r.metric['pool']).sort()).toEqual(['decode', 'prefill']);
  });
});
