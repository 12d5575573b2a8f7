/**
 * Planner command-line flags parsed into one validated options object. The names follow Dynamo's
 * planner (`--adjustment-interval-secs`, `--ttft-slo-ms`, `--itl-slo-ms`, per-pool replica bounds)
 * and the router's infrastructure flags (`--etcd`, `--nats`, `--namespace`).
 *
 * User-facing defaults live in `DEFAULTS`; `parsePlannerArgs` is the one place that turns argv into
 * `PlannerAppOptions` and rejects anything malformed with a `UsageError` (exit code 2).
 * `loadProfile` (the only IO here: reading `--profile`) and `plannerOptions` (flags → the decision
 * core's `PlannerOptions`, compiled) run right after it, inside the same usage check.
 */
import { readFileSync, statSync } from 'node:fs';
import { LOG_FORMAT_HELP, LOG_FORMATS, UsageError, flagHelpLines, parseFlags, type FlagTable, type LogFormat } from '@switchyard/cli';
import { isSwitchyardError } from '@switchyard/common';
import { DEFAULT_LOAD_RULES, DEFAULT_MOVING_AVERAGE_WINDOW, DEFAULT_POOL_BOUNDS, DEFAULT_PREDICTOR, DEFAULT_SLA_TARGETS, MAX_MOVING_AVERAGE_WINDOW, POOLS, compilePlannerConfig, parseProfile, type PlannerConfig, type PlannerMode, type PlannerOptions, type Pool, type Profile } from '@switchyard/planner';
import { DEFAULT_DRAIN_TIMEOUT_MS, MAX_LOCAL_REPLICAS, MAX_MODEL_NAME_LENGTH, NAME_PATTERN, parseWorkerTemplate } from '@switchyard/runtime';
import { CONNECTORS, DEFAULT_CONNECTOR, type ConnectorKind } from './parts.js';
import { ShellWordsError, splitShellWords } from './shell-words.js';

export { UsageError };

/** The namespace workers, routers and planners share when `--namespace` is not given. */
export const DEFAULT_NAMESPACE = 'default';
/** Largest `--*-max-replicas`: far above any pool this planner sizes, small enough to catch a typo. */
export const MAX_REPLICAS = 1000;
/** Longest adjustment interval: a day. */
export const MAX_ADJUSTMENT_INTERVAL_SECS = 86_400;
/** Largest latency objective: an hour. */
export const MAX_SLO_MS = 3_600_000;
/** Largest profile file read (the profile's own point limits keep a valid one far smaller). */
export const MAX_PROFILE_BYTES = 16 * 1024 * 1024;
/** Longest leader lease TTL: how long a dead leader may keep the others waiting. */
export const MAX_LEADER_LEASE_TTL_SECS = 300;
/** Longest `--drain-timeout-secs`: a day. */
export const MAX_DRAIN_TIMEOUT_SECS = 86_400;
/** The infrastructure flags the planner gives a local replica unless its template sets them. */
export const INHERITED_WORKER_FLAGS = ['etcd', 'nats', 'namespace'] as const;

export const MODES: readonly PlannerMode[] = ['load', 'sla'];

export interface PlannerAppOptions {
  /** etcd endpoint(s): the leader election. Required. */
  etcd: string;
  /** NATS server(s) with JetStream: the event plane the observations come from. Required. */
  nats: string;
  namespace: string;
  /** The model whose pools this planner sizes. Required. */
  model: string;
  mode: PlannerMode;
  connector: ConnectorKind;
  adjustmentIntervalSecs: number;
  metricsPort: number;
  metricsAddress: string;
  /** Bounds of every pool (the aggregated pool's, and the others' unless set below). */
  minReplicas: number;
  maxReplicas: number;
  prefillMinReplicas: number | undefined;
  prefillMaxReplicas: number | undefined;
  decodeMinReplicas: number | undefined;
  decodeMaxReplicas: number | undefined;
  ttftSloMs: number;
  itlSloMs: number;
  /** The percentile the SLOs hold at, in (0, 100]. */
  sloPercentile: number;
  /** load mode's thresholds (Dynamo's flag names): mean KV usage of decode / aggregated workers, waiting requests per prefill / aggregated worker. */
  decodeKvScaleUpThreshold: number;
  decodeKvScaleDownThreshold: number;
  prefillQueueScaleUpThreshold: number;
  prefillQueueScaleDownThreshold: number;
  /** Intervals after a decode (or aggregated) scale-up during which it does not scale down. */
  scaleDownCooldownIntervals: number;
  /** sla mode's forecast: `holt` (level + trend), `moving-average` over `loadPredictionWindowSize` intervals, or `constant` (the last interval). */
  loadPredictor: 'constant' | 'moving-average' | 'holt';
  loadPredictionWindowSize: number;
  /** sla mode: the worker profile file (`switchyard planner profile` writes one). */
  profile: string | undefined;
  /** Decide and report, never act. */
  dryRun: boolean;
  /** TTL of the leader's etcd lease: a dead leader is replaced within about this long. */
  leaderLeaseTtlSecs: number;
  /** local: `--worker-args` / `--prefill-worker-args` / `--decode-worker-args` as given (each occurrence one shell-like string). */
  workerArgs: string[];
  prefillWorkerArgs: string[];
  decodeWorkerArgs: string[];
  /** local: where replica records, logs and the lock live; undefined: `defaultStateDir(namespace, model)`. */
  stateDir: string | undefined;
  /** local: how long a draining replica may take before it is killed. */
  drainTimeoutSecs: number;
  /** kubernetes: `POOL=DEPLOYMENT` as given. */
  kubeDeployment: string[];
  kubeconfig: string | undefined;
  kubeNamespace: string | undefined;
  /**
   * Derived by `parsePlannerArgs`: local, each managed pool's argument template (split, checked, with
   * `--etcd` / `--nats` / `--namespace` added unless set); kubernetes, pool → Deployment.
   */
  workerTemplates: Partial<Record<Pool, string[]>>;
  kubeDeployments: Partial<Record<Pool, string>>;
  logVerbose: number;
  logFormat: LogFormat;
  help: boolean;
}

export const DEFAULTS = {
  namespace: DEFAULT_NAMESPACE,
  mode: 'load',
  connector: DEFAULT_CONNECTOR,
  // Dynamo's planner default (adjustment-interval = 30 s)
  adjustmentIntervalSecs: 30,
  metricsPort: 8083,
  metricsAddress: '0.0.0.0',
  minReplicas: DEFAULT_POOL_BOUNDS.minReplicas,
  maxReplicas: DEFAULT_POOL_BOUNDS.maxReplicas,
  ttftSloMs: DEFAULT_SLA_TARGETS.ttftMs,
  itlSloMs: DEFAULT_SLA_TARGETS.itlMs,
  sloPercentile: DEFAULT_SLA_TARGETS.percentile,
  decodeKvScaleUpThreshold: DEFAULT_LOAD_RULES.kvUsageUp,
  decodeKvScaleDownThreshold: DEFAULT_LOAD_RULES.kvUsageDown,
  prefillQueueScaleUpThreshold: DEFAULT_LOAD_RULES.queueUp,
  prefillQueueScaleDownThreshold: DEFAULT_LOAD_RULES.queueDown,
  scaleDownCooldownIntervals: DEFAULT_LOAD_RULES.decodeScaleDownCooldownIntervals,
  loadPredictor: 'holt',
  loadPredictionWindowSize: DEFAULT_MOVING_AVERAGE_WINDOW,
  dryRun: false,
  leaderLeaseTtlSecs: 10,
  drainTimeoutSecs: DEFAULT_DRAIN_TIMEOUT_MS / 1000,
  logVerbose: 0,
  logFormat: 'default',
} as const satisfies Partial<PlannerAppOptions>;

const replicaFlag = (key: 'prefillMinReplicas' | 'prefillMaxReplicas' | 'decodeMinReplicas' | 'decodeMaxReplicas', help: string) =>
  ({ kind: 'int', key, min: 0, max: MAX_REPLICAS, help }) as const;

const FLAGS: FlagTable<PlannerAppOptions> = {
  etcd: { kind: 'string', key: 'etcd', help: 'etcd URL(s) for the leader election, comma separated, e.g. http://127.0.0.1:2379 (required).' },
  nats: { kind: 'string', key: 'nats', help: 'NATS URL(s) with JetStream, where workers and routers publish load and request figures (required).' },
  namespace: { kind: 'string', key: 'namespace', help: `Cluster namespace shared with the workers and routers (default ${DEFAULT_NAMESPACE}).` },
  model: { kind: 'string', key: 'model', help: 'The model whose worker pools this planner sizes (required).' },
  mode: { kind: 'enum', key: 'mode', values: MODES, help: 'load: thresholds on KV usage and queues; sla: size pools from a worker profile and the SLOs (default load).' },
  connector: { kind: 'enum', key: 'connector', values: CONNECTORS, help: `How the planner acts: local (worker processes on this machine, from --*worker-args), kubernetes (Deployments' replicas, --kube-deployment), memory (counts only: dry runs) (default ${DEFAULT_CONNECTOR}).` },
  'adjustment-interval-secs': {
    kind: 'int',
    key: 'adjustmentIntervalSecs',
    min: 1,
    max: MAX_ADJUSTMENT_INTERVAL_SECS,
    help: `Seconds between two decisions (default ${DEFAULTS.adjustmentIntervalSecs}).`,
  },
  'metrics-port': { kind: 'int', key: 'metricsPort', min: 0, max: 65535, help: `Prometheus metrics port (default ${DEFAULTS.metricsPort}; 0 picks a free port).` },
  'metrics-address': { kind: 'string', key: 'metricsAddress', help: 'Address the metrics server binds (default 0.0.0.0).' },
  'min-replicas': { kind: 'int', key: 'minReplicas', min: 0, max: MAX_REPLICAS, help: `Fewest replicas of each pool; 0 allows scale to zero (default ${DEFAULTS.minReplicas}).` },
  'max-replicas': { kind: 'int', key: 'maxReplicas', min: 1, max: MAX_REPLICAS, help: `Most replicas of each pool (default ${DEFAULTS.maxReplicas}).` },
  'prefill-min-replicas': replicaFlag('prefillMinReplicas', 'Fewest prefill workers (default: --min-replicas).'),
  'prefill-max-replicas': replicaFlag('prefillMaxReplicas', 'Most prefill workers (default: --max-replicas).'),
  'decode-min-replicas': replicaFlag('decodeMinReplicas', 'Fewest decode workers (default: --min-replicas).'),
  'decode-max-replicas': replicaFlag('decodeMaxReplicas', 'Most decode workers (default: --max-replicas).'),
  'ttft-slo-ms': { kind: 'number', key: 'ttftSloMs', min: 0, max: MAX_SLO_MS, help: `sla: time-to-first-token objective, ms (default ${DEFAULTS.ttftSloMs}).` },
  'itl-slo-ms': { kind: 'number', key: 'itlSloMs', min: 0, max: MAX_SLO_MS, help: `sla: inter-token latency objective, ms (default ${DEFAULTS.itlSloMs}).` },
  'slo-percentile': { kind: 'number', key: 'sloPercentile', min: 0, max: 100, help: `sla: the percentile of requests the objectives hold for, in (0, 100] (default ${DEFAULTS.sloPercentile}).` },
  'decode-kv-scale-up-threshold': { kind: 'number', key: 'decodeKvScaleUpThreshold', min: 0, max: 1, help: `load: add a decode (or aggregated) worker when mean KV usage is above this (default ${DEFAULTS.decodeKvScaleUpThreshold}).` },
  'decode-kv-scale-down-threshold': { kind: 'number', key: 'decodeKvScaleDownThreshold', min: 0, max: 1, help: `load: remove one when mean KV usage is below this (default ${DEFAULTS.decodeKvScaleDownThreshold}).` },
  'prefill-queue-scale-up-threshold': { kind: 'number', key: 'prefillQueueScaleUpThreshold', min: 0, max: 1_000_000, help: `load: add a prefill (or aggregated) worker when waiting requests per worker are above this (default ${DEFAULTS.prefillQueueScaleUpThreshold}).` },
  'prefill-queue-scale-down-threshold': { kind: 'number', key: 'prefillQueueScaleDownThreshold', min: 0, max: 1_000_000, help: `load: remove one when waiting requests per worker are below this (default ${DEFAULTS.prefillQueueScaleDownThreshold}).` },
  'scale-down-cooldown-intervals': { kind: 'int', key: 'scaleDownCooldownIntervals', min: 0, max: 1000, help: `No decode or aggregated scale-down within this many intervals of a scale-up (default ${DEFAULTS.scaleDownCooldownIntervals}).` },
  'load-predictor': { kind: 'enum', key: 'loadPredictor', values: ['constant', 'moving-average', 'holt'], help: `sla: how the next interval's load is forecast: constant (the last interval), moving-average, holt (level and trend) (default ${DEFAULTS.loadPredictor}).` },
  'load-prediction-window-size': { kind: 'int', key: 'loadPredictionWindowSize', min: 1, max: MAX_MOVING_AVERAGE_WINDOW, help: `sla, moving-average: intervals averaged (default ${DEFAULTS.loadPredictionWindowSize}).` },
  profile: { kind: 'string', key: 'profile', help: 'sla: the worker profile JSON file (required in sla mode).' },
  'dry-run': { kind: 'bool', key: 'dryRun', help: 'Decide, log and export every decision, but never act on the pools (default false).' },
  'leader-lease-ttl-secs': {
    kind: 'int',
    key: 'leaderLeaseTtlSecs',
    min: 1,
    max: MAX_LEADER_LEASE_TTL_SECS,
    help: `TTL of the leader's etcd lease: a planner that dies is replaced within about this long (default ${DEFAULTS.leaderLeaseTtlSecs}).`,
  },
  'worker-args': {
    kind: 'strings',
    key: 'workerArgs',
    help: "local: the aggregated pool's worker flags, one shell-like string (quote it; repeatable, appended), e.g. --worker-args='--model-repository=/models --http-port={http_port}'. Placeholders {http_port} {grpc_port} {metrics_port} {kv_transfer_port} {replica} {pool}.",
  },
  'prefill-worker-args': { kind: 'strings', key: 'prefillWorkerArgs', help: "local: the prefill pool's worker flags (as --worker-args)." },
  'decode-worker-args': { kind: 'strings', key: 'decodeWorkerArgs', help: "local: the decode pool's worker flags (as --worker-args)." },
  'state-dir': { kind: 'string', key: 'stateDir', help: 'local: replica records, logs and lock (default <tmpdir>/switchyard-planner/<namespace>/<model>; planners that take over from each other must share it).' },
  'drain-timeout-secs': {
    kind: 'int',
    key: 'drainTimeoutSecs',
    min: 0,
    max: MAX_DRAIN_TIMEOUT_SECS,
    help: `local: seconds a draining worker may take before it is killed; keep it above the workers' --exit-timeout-secs (default ${DEFAULTS.drainTimeoutSecs}).`,
  },
  'kube-deployment': { kind: 'strings', key: 'kubeDeployment', help: 'kubernetes: POOL=DEPLOYMENT, the Deployment that serves a pool (aggregated, prefill or decode; repeatable).' },
  kubeconfig: { kind: 'string', key: 'kubeconfig', help: 'kubernetes: a kubeconfig file (default: the in-cluster config of the pod).' },
  'kube-namespace': { kind: 'string', key: 'kubeNamespace', help: "kubernetes: the Deployments' namespace (default: the kubeconfig context's, else the pod's own)." },
  'log-verbose': { kind: 'int', key: 'logVerbose', min: 0, help: 'Verbose logging level: 0 info, 1 debug, 2+ trace (default 0).' },
  'log-format': { kind: 'enum', key: 'logFormat', values: LOG_FORMATS, help: LOG_FORMAT_HELP },
};

export function parsePlannerArgs(argv: readonly string[]): PlannerAppOptions {
  const out = parseFlags(argv, FLAGS, {
    ...DEFAULTS,
    etcd: '',
    nats: '',
    model: '',
    prefillMinReplicas: undefined,
    prefillMaxReplicas: undefined,
    decodeMinReplicas: undefined,
    decodeMaxReplicas: undefined,
    profile: undefined,
    workerArgs: [],
    prefillWorkerArgs: [],
    decodeWorkerArgs: [],
    stateDir: undefined,
    kubeDeployment: [],
    kubeconfig: undefined,
    kubeNamespace: undefined,
    workerTemplates: {},
    kubeDeployments: {},
    help: false,
  });
  return validate(out);
}

function validate(o: PlannerAppOptions): PlannerAppOptions {
  if (o.help) return o;
  const missing = (['etcd', 'nats', 'model'] as const).filter((k) => o[k] === '');
  if (missing.length > 0) {
    throw new UsageError(
      `${missing.map((k) => `--${k}`).join(', ')} ${missing.length === 1 ? 'is' : 'are'} required: a planner campaigns for leadership in etcd, ` +
        "reads its model's load and request figures from NATS, and sizes that model's worker pools",
    );
  }
  checkUrl('etcd', o.etcd, ['http:', 'https:']);
  checkUrl('nats', o.nats, ['nats:', 'tls:', 'ws:', 'wss:']);
  if (!NAME_PATTERN.test(o.namespace)) {
    throw new UsageError(`flag '--namespace' must be 1-63 characters of a-z, 0-9, '_' and '-', starting with a letter or digit; got '${o.namespace}'`);
  }
  if (o.model.length > MAX_MODEL_NAME_LENGTH || /[\x00-\x1f\x7f]/.test(o.model)) {
    throw new UsageError(`flag '--model' must be 1-${MAX_MODEL_NAME_LENGTH} printable characters`);
  }
  checkBounds('', o.minReplicas, o.maxReplicas);
  checkBounds('prefill-', o.prefillMinReplicas ?? o.minReplicas, o.prefillMaxReplicas ?? o.maxReplicas);
  checkBounds('decode-', o.decodeMinReplicas ?? o.minReplicas, o.decodeMaxReplicas ?? o.maxReplicas);
  for (const [flag, v] of [
    ['ttft-slo-ms', o.ttftSloMs],
    ['itl-slo-ms', o.itlSloMs],
    ['slo-percentile', o.sloPercentile],
  ] as const) {
    if (!(v > 0)) throw new UsageError(`flag '--${flag}' must be greater than 0, got '${v}'`);
  }
  for (const [what, down, up] of [
    ['decode-kv', o.decodeKvScaleDownThreshold, o.decodeKvScaleUpThreshold],
    ['prefill-queue', o.prefillQueueScaleDownThreshold, o.prefillQueueScaleUpThreshold],
  ] as const) {
    if (!(down < up)) throw new UsageError(`flag '--${what}-scale-down-threshold' (${down}) must be below '--${what}-scale-up-threshold' (${up})`);
  }
  if (o.mode === 'sla' && o.profile === undefined) {
    throw new UsageError("--mode=sla needs --profile FILE: the worker profile the pools are sized from");
  }
  if (o.mode === 'load' && o.profile !== undefined) {
    throw new UsageError('--profile is read only in sla mode (--mode=sla)');
  }
  validateConnector(o);
  return o;
}

const TEMPLATE_FLAGS: readonly (readonly [Pool, 'workerArgs' | 'prefillWorkerArgs' | 'decodeWorkerArgs', string])[] = [
  ['aggregated', 'workerArgs', 'worker-args'],
  ['prefill', 'prefillWorkerArgs', 'prefill-worker-args'],
  ['decode', 'decodeWorkerArgs', 'decode-worker-args'],
];

/** Each connector's own flags: only with that connector, complete, and compiled into `workerTemplates` / `kubeDeployments`. */
function validateConnector(o: PlannerAppOptions): void {
  const only = (connector: ConnectorKind, flags: readonly (readonly [string, boolean])[]): void => {
    if (o.connector === connector) return;
    for (const [flag, given] of flags) if (given) throw new UsageError(`--${flag} is read only with --connector=${connector}`);
  };
  only('local', [...TEMPLATE_FLAGS.map(([, key, flag]) => [flag, o[key].length > 0] as const), ['state-dir', o.stateDir !== undefined]]);
  only('kubernetes', [
    ['kube-deployment', o.kubeDeployment.length > 0],
    ['kubeconfig', o.kubeconfig !== undefined],
    ['kube-namespace', o.kubeNamespace !== undefined],
  ]);
  if (o.connector === 'local') {
    for (const [pool, key, flag] of TEMPLATE_FLAGS) {
      if (o[key].length === 0) continue;
      let args: string[];
      try {
        args = o[key].flatMap((text) => splitShellWords(text));
      } catch (err) {
        if (err instanceof ShellWordsError) throw new UsageError(`flag '--${flag}': ${err.message}`);
        throw err;
      }
      const template = [...inheritedWorkerFlags(o, args), ...args];
      try {
        parseWorkerTemplate(template, `--${flag}`);
      } catch (err) {
        if (isSwitchyardError(err)) throw new UsageError(err.message);
        throw err;
      }
      o.workerTemplates[pool] = template;
    }
    if (Object.keys(o.workerTemplates).length === 0) {
      throw new UsageError(
        '--connector=local needs the flags of the workers it starts: --worker-args (aggregated pool), --prefill-worker-args and/or --decode-worker-args ' +
          '(use --connector=memory with --dry-run to try the planner without workers)',
      );
    }
    const max = Math.max(o.maxReplicas, o.prefillMaxReplicas ?? 0, o.decodeMaxReplicas ?? 0);
    if (max > MAX_LOCAL_REPLICAS) throw new UsageError(`--connector=local starts at most ${MAX_LOCAL_REPLICAS} workers per pool; a --*max-replicas of ${max} is above that`);
    if (o.stateDir === '') throw new UsageError("flag '--state-dir' must not be empty");
  }
  if (o.connector === 'kubernetes') {
    for (const entry of o.kubeDeployment) {
      const eq = entry.indexOf('=');
      const pool = entry.slice(0, eq) as Pool;
      const name = entry.slice(eq + 1);
      if (eq < 0 || !POOLS.includes(pool) || name === '') throw new UsageError(`flag '--kube-deployment' expects POOL=DEPLOYMENT with POOL one of ${POOLS.join(', ')}, got '${entry}'`);
      if (o.kubeDeployments[pool] !== undefined) throw new UsageError(`--kube-deployment names the ${pool} pool twice`);
      o.kubeDeployments[pool] = name;
    }
    if (o.kubeDeployment.length === 0) throw new UsageError('--connector=kubernetes needs --kube-deployment=POOL=DEPLOYMENT for each pool it sizes');
  }
}

/** `--etcd`, `--nats` and `--namespace` with the planner's values, for each one `args` does not set. */
function inheritedWorkerFlags(o: PlannerAppOptions, args: readonly string[]): string[] {
  return INHERITED_WORKER_FLAGS.filter((flag) => !args.some((a) => a === `--${flag}` || a.startsWith(`--${flag}=`))).map((flag) => `--${flag}=${o[flag]}`);
}

function checkBounds(prefix: string, min: number, max: number): void {
  if (max < 1) throw new UsageError(`flag '--${prefix}max-replicas' must be at least 1, got '${max}'`);
  if (min > max) throw new UsageError(`--${prefix}min-replicas (${min}) must not exceed --${prefix}max-replicas (${max})`);
}

/** One URL, or several separated by commas (a client tries each). */
function checkUrl(flag: string, value: string, protocols: readonly string[]): void {
  for (const part of value.split(',')) {
    let url: URL;
    try {
      url = new URL(part.trim());
    } catch {
      throw new UsageError(`flag '--${flag}' expects a URL such as ${protocols[0]}//127.0.0.1:PORT, got '${value}'`);
    }
    if (!protocols.includes(url.protocol) || url.hostname === '') {
      throw new UsageError(`flag '--${flag}' expects a ${protocols.map((p) => p.slice(0, -1)).join(' or ')} URL, got '${part.trim()}'`);
    }
  }
}

/** Reads and validates the `--profile` file; anything wrong is a UsageError naming the file. */
export function loadProfile(path: string): Profile {
  let text: string;
  try {
    const st = statSync(path);
    if (!st.isFile()) throw new UsageError(`--profile '${path}' is not a file`);
    if (st.size > MAX_PROFILE_BYTES) throw new UsageError(`--profile '${path}' is ${st.size} bytes; at most ${MAX_PROFILE_BYTES} are read`);
    text = readFileSync(path, 'utf8');
  } catch (err) {
    if (err instanceof UsageError) throw err;
    throw new UsageError(`--profile '${path}' cannot be read: ${(err as Error).message}`);
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (err) {
    throw new UsageError(`--profile '${path}' is not JSON: ${(err as Error).message}`);
  }
  try {
    return parseProfile(json);
  } catch (err) {
    if (isSwitchyardError(err)) throw new UsageError(`--profile '${path}': ${err.message}`);
    throw err;
  }
}

/** The decision core's options from the flags (and the profile, read by `loadProfile`). */
export function plannerOptions(o: PlannerAppOptions, profile: Profile | undefined): PlannerOptions {
  const pool = (min: number | undefined, max: number | undefined) => ({ ...(min === undefined ? {} : { minReplicas: min }), ...(max === undefined ? {} : { maxReplicas: max }) });
  return {
    mode: o.mode,
    defaultBounds: { minReplicas: o.minReplicas, maxReplicas: o.maxReplicas },
    bounds: { prefill: pool(o.prefillMinReplicas, o.prefillMaxReplicas), decode: pool(o.decodeMinReplicas, o.decodeMaxReplicas) },
    sla: { ttftMs: o.ttftSloMs, itlMs: o.itlSloMs, percentile: o.sloPercentile },
    loadRules: {
      kvUsageUp: o.decodeKvScaleUpThreshold,
      kvUsageDown: o.decodeKvScaleDownThreshold,
      queueUp: o.prefillQueueScaleUpThreshold,
      queueDown: o.prefillQueueScaleDownThreshold,
      decodeScaleDownCooldownIntervals: o.scaleDownCooldownIntervals,
    },
    predictor:
      o.loadPredictor === 'holt'
        ? DEFAULT_PREDICTOR
        : o.loadPredictor === 'moving-average'
          ? { kind: 'moving-average', window: o.loadPredictionWindowSize }
          : { kind: 'constant' },
    ...(profile === undefined ? {} : { profile }),
  };
}

/** Flags → the compiled decision config; a rule the core refuses is a UsageError. */
export function compileFromFlags(o: PlannerAppOptions, profile: Profile | undefined): PlannerConfig {
  try {
    return compilePlannerConfig(plannerOptions(o, profile));
  } catch (err) {
    if (isSwitchyardError(err)) throw new UsageError(err.message);
    throw err;
  }
}

/** Everything `main` needs from the command line: flags, then the profile, then the compiled config. */
export interface PlannerCommandLine extends PlannerAppOptions {
  readonly config: PlannerConfig | undefined;
}

export function parseCommandLineOptions(argv: readonly string[]): PlannerCommandLine {
  const o = parsePlannerArgs(argv);
  if (o.help) return { ...o, config: undefined };
  const profile = o.profile === undefined ? undefined : loadProfile(o.profile);
  return { ...o, config: compileFromFlags(o, profile) };
}

export function helpText(): string {
  return (
    [
      'usage: switchyard planner --etcd URL --nats URL --model NAME [flags]',
      '',
      "Sizes a model's prefill, decode and aggregated worker pools: every adjustment interval it reads",
      'the load and request figures workers and routers publish, decides (load rules, or SLA sizing',
      'from a worker profile), logs and exports every decision and acts through a connector.',
      'One planner leads per namespace (an etcd lease election); the others wait to take over.',
      '',
      '       switchyard planner profile --url URL --model NAME --out FILE [flags]',
      '',
      'Measures one worker for --mode=sla and writes the profile (`switchyard planner profile --help`).',
      '',
      'flags:',
      ...flagHelpLines(FLAGS),
    ].join('\n') + '\n'
  );
}
