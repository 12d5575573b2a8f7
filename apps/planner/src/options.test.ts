import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { DEFAULTS, MAX_REPLICAS, UsageError, helpText, parseCommandLineOptions, parsePlannerArgs } from './options.js';

const INFRA = ['--etcd=http://127.0.0.1:2379', '--nats', 'nats://127.0.0.1:4222', '--model=org/m', '--connector=memory'];
/** The infrastructure flags without a connector: the default (local) one. */
const CLUSTER = INFRA.slice(0, 4);
const PROFILE = { version: 1, prefill: { isl: [128, 1024], ttftMs: [20, 80], throughputTokensPerSec: [8000, 12000] } };

const usage = (argv: string[]): string => {
  try {
    parseCommandLineOptions(argv);
  } catch (e) {
    expect(e).toBeInstanceOf(UsageError);
    return (e as Error).message;
  }
  throw new Error('expected a UsageError');
};

const tmp = mkdtempSync(join(tmpdir(), 'planner-options-'));
const file = (name: string, text: string): string => {
  const p = join(tmp, name);
  writeFileSync(p, text);
  return p;
};

describe('parsePlannerArgs', () => {
  it('applies the documented defaults', () => {
    const o = parsePlannerArgs([...CLUSTER, '--worker-args=--model-repository=/models']);
    expect(o).toEqual({
      ...DEFAULTS,
      etcd: 'http://127.0.0.1:2379',
      nats: 'nats://127.0.0.1:4222',
      model: 'org/m',
      prefillMinReplicas: undefined,
      prefillMaxReplicas: undefined,
      decodeMinReplicas: undefined,
      decodeMaxReplicas: undefined,
      profile: undefined,
      workerArgs: ['--model-repository=/models'],
      prefillWorkerArgs: [],
      decodeWorkerArgs: [],
      stateDir: undefined,
      kubeDeployment: [],
      kubeconfig: undefined,
      kubeNamespace: undefined,
      workerTemplates: { aggregated: ['--etcd=http://127.0.0.1:2379', '--nats=nats://127.0.0.1:4222', '--namespace=default', '--model-repository=/models'] },
      kubeDeployments: {},
      help: false,
    });
    expect(o).toMatchObject({ namespace: 'default', mode: 'load', connector: 'local', adjustmentIntervalSecs: 30, sloPercentile: 90, dryRun: false, minReplicas: 1, maxReplicas: 8, drainTimeoutSecs: 300 });
  });

  it('reads every flag', () => {
    const profile = file('p.json', JSON.stringify(PROFILE));
    const o = parseCommandLineOptions([
      ...INFRA,
      '--namespace=prod-a',
      '--mode=sla',
      '--connector=memory',
      '--adjustment-interval-secs',
      '5',
      '--metrics-port=0',
      '--metrics-address=127.0.0.1',
      '--min-replicas=0',
      '--max-replicas=4',
      '--prefill-min-replicas=2',
      '--prefill-max-replicas=6',
      '--decode-min-replicas=1',
      '--decode-max-replicas=3',
      '--ttft-slo-ms=250',
      '--itl-slo-ms=12.5',
      '--slo-percentile=99.5',
      `--profile=${profile}`,
      '--dry-run',
      '--leader-lease-ttl-secs=3',
      '--log-verbose=1',
      '--log-format=ISO8601',
    ]);
    expect(o).toMatchObject({
      namespace: 'prod-a',
      mode: 'sla',
      adjustmentIntervalSecs: 5,
      metricsPort: 0,
      metricsAddress: '127.0.0.1',
      dryRun: true,
      leaderLeaseTtlSecs: 3,
      logVerbose: 1,
      logFormat: 'ISO8601',
    });
    // the flags reach the decision core's compiled config
    expect(o.config!.bounds).toEqual({
      prefill: { minReplicas: 2, maxReplicas: 6 },
      decode: { minReplicas: 1, maxReplicas: 3 },
      aggregated: { minReplicas: 0, maxReplicas: 4 },
    });
    expect(o.config!.sla).toEqual({ ttftMs: 250, itlMs: 12.5, percentile: 99.5 });
    expect(o.config!.mode).toBe('sla');
    expect(o.config!.profile!.prefill!.isl).toEqual([128, 1024]);
  });

  it("load rules and the predictor: Dynamo's flag names reach the compiled config", () => {
    const o = parseCommandLineOptions([
      ...INFRA,
      '--decode-kv-scale-up-threshold=0.8',
      '--decode-kv-scale-down-threshold=0.4',
      '--prefill-queue-scale-up-threshold=10',
      '--prefill-queue-scale-down-threshold=2',
      '--scale-down-cooldown-intervals=0',
      '--load-predictor=moving-average',
      '--load-prediction-window-size=7',
    ]);
    expect(o.config!.loadRules).toMatchObject({ kvUsageUp: 0.8, kvUsageDown: 0.4, queueUp: 10, queueDown: 2, decodeScaleDownCooldownIntervals: 0, maxStep: 1 });
    expect(o.config!.predictor).toEqual({ kind: 'moving-average', window: 7 });
    expect(parseCommandLineOptions([...INFRA, '--load-predictor=constant']).config!.predictor).toEqual({ kind: 'constant' });
    expect(parseCommandLineOptions(INFRA).config!.predictor).toMatchObject({ kind: 'holt' });
  });

  it('per-pool bounds fall back to --min-replicas / --max-replicas', () => {
    const o = parseCommandLineOptions([...INFRA, '--min-replicas=2', '--max-replicas=5', '--decode-max-replicas=9']);
    expect(o.config!.bounds).toEqual({
      prefill: { minReplicas: 2, maxReplicas: 5 },
      decode: { minReplicas: 2, maxReplicas: 9 },
      aggregated: { minReplicas: 2, maxReplicas: 5 },
    });
  });

  it('local: per-pool templates split like a shell, repeatable, the cluster flags added unless set', () => {
    const o = parsePlannerArgs([
      ...CLUSTER,
      '--namespace=prod',
      `--prefill-worker-args=--model-repository='/my models' --role=prefill`,
      '--prefill-worker-args=--http-port={http_port} --kv-transfer-port={kv_transfer_port}',
      '--decode-worker-args=--etcd=http://10.0.0.1:2379 --namespace=other --role=decode',
      '--state-dir=/var/lib/sy',
      '--drain-timeout-secs=0',
    ]);
    expect(o.workerTemplates).toEqual({
      prefill: [
        '--etcd=http://127.0.0.1:2379',
        '--nats=nats://127.0.0.1:4222',
        '--namespace=prod',
        '--model-repository=/my models',
        '--role=prefill',
        '--http-port={http_port}',
        '--kv-transfer-port={kv_transfer_port}',
      ],
      decode: ['--nats=nats://127.0.0.1:4222', '--etcd=http://10.0.0.1:2379', '--namespace=other', '--role=decode'],
    });
    expect(o).toMatchObject({ connector: 'local', stateDir: '/var/lib/sy', drainTimeoutSecs: 0 });
  });

  it('kubernetes: pool → Deployment, kubeconfig and namespace', () => {
    const o = parsePlannerArgs([...CLUSTER, '--connector=kubernetes', '--kube-deployment=aggregated=sw-agg', '--kube-deployment', 'decode=sw-dec', '--kubeconfig=/k', '--kube-namespace=ml']);
    expect(o).toMatchObject({ connector: 'kubernetes', kubeDeployments: { aggregated: 'sw-agg', decode: 'sw-dec' }, kubeconfig: '/k', kubeNamespace: 'ml', workerTemplates: {} });
  });

  it('--help needs nothing else', () => {
    expect(parseCommandLineOptions(['--help'])).toMatchObject({ help: true, config: undefined });
    expect(helpText()).toContain('--adjustment-interval-secs=N');
    expect(helpText()).toContain('--prefill-min-replicas=N');
  });

  it.each<[string, string[], RegExp]>([
    ['missing infrastructure', ['--model=m'], /--etcd, --nats are required/],
    ['missing model', INFRA.slice(0, 3), /--model is required/],
    ['unknown flag', [...INFRA, '--replicas=3'], /unknown flag '--replicas'/],
    ['positional argument', [...INFRA, 'sla'], /unexpected argument 'sla'/],
    ['bad etcd URL', ['--etcd=127.0.0.1:2379', ...INFRA.slice(1)], /--etcd' expects a URL such as http:\/\/127.0.0.1:PORT/],
    ['etcd URL of another scheme', ['--etcd=redis://127.0.0.1:2379', ...INFRA.slice(1)], /--etcd' expects a http or https URL/],
    ['bad nats URL', [INFRA[0]!, '--nats=http://x:4222', INFRA[3]!], /--nats' expects a nats or tls or ws or wss URL/],
    ['bad namespace', [...INFRA, '--namespace=Prod A'], /--namespace' must be 1-63 characters/],
    ['control characters in the model', [INFRA[0]!, ...INFRA.slice(1, 3), '--model=a\nb'], /--model' must be 1-256 printable/],
    ['bad mode', [...INFRA, '--mode=fast'], /--mode' must be one of load, sla/],
    ['unknown connector', [...INFRA, '--connector=docker'], /--connector' must be one of local, kubernetes, memory/],
    ['zero interval', [...INFRA, '--adjustment-interval-secs=0'], /--adjustment-interval-secs' must be an integer >= 1/],
    ['interval over a day', [...INFRA, '--adjustment-interval-secs=86401'], /must be an integer <= 86400/],
    ['fractional interval', [...INFRA, '--adjustment-interval-secs=1.5'], /expects an integer/],
    ['negative min', [...INFRA, '--min-replicas=-1'], /--min-replicas' must be an integer >= 0/],
    ['zero max', [...INFRA, '--max-replicas=0'], /--max-replicas' must be an integer >= 1/],
    ['absurd max', [...INFRA, `--max-replicas=${MAX_REPLICAS + 1}`], /must be an integer <= 1000/],
    ['min above max', [...INFRA, '--min-replicas=5', '--max-replicas=2'], /--min-replicas \(5\) must not exceed --max-replicas \(2\)/],
    ['prefill min above max', [...INFRA, '--prefill-min-replicas=3', '--prefill-max-replicas=2'], /--prefill-min-replicas \(3\) must not exceed --prefill-max-replicas \(2\)/],
    ['decode min above the default max', [...INFRA, '--decode-min-replicas=9'], /--decode-min-replicas \(9\) must not exceed --decode-max-replicas \(8\)/],
    ['zero decode max', [...INFRA, '--decode-max-replicas=0'], /--decode-max-replicas' must be at least 1/],
    ['zero SLO', [...INFRA, '--ttft-slo-ms=0'], /--ttft-slo-ms' must be greater than 0/],
    ['NaN SLO', [...INFRA, '--itl-slo-ms=NaN'], /--itl-slo-ms' expects a number/],
    ['huge SLO', [...INFRA, '--itl-slo-ms=1e300'], /--itl-slo-ms' must be a number <= 3600000/],
    ['zero percentile', [...INFRA, '--slo-percentile=0'], /--slo-percentile' must be greater than 0/],
    ['percentile over 100', [...INFRA, '--slo-percentile=100.5'], /--slo-percentile' must be a number <= 100/],
    ['sla without a profile', [...INFRA, '--mode=sla'], /--mode=sla needs --profile FILE/],
    ['profile in load mode', [...INFRA, '--profile=/x.json'], /--profile is read only in sla mode/],
    ['zero lease TTL', [...INFRA, '--leader-lease-ttl-secs=0'], /--leader-lease-ttl-secs' must be an integer >= 1/],
    ['bad dry-run value', [...INFRA, '--dry-run=maybe'], /--dry-run' expects true or false/],
    ['local without a template', CLUSTER, /--connector=local needs the flags of the workers it starts: --worker-args/],
    ['an unclosed quote in a template', [...CLUSTER, `--worker-args=--model-repository='/m`], /--worker-args': unclosed ' at character 20/],
    ['an unknown placeholder', [...CLUSTER, '--decode-worker-args=--http-port={port}'], /--decode-worker-args: argument 3 .*unknown placeholder \{port\}/],
    ['a template with another connector', [...INFRA, '--worker-args=--a'], /--worker-args is read only with --connector=local/],
    ['a state directory with another connector', [...INFRA, '--state-dir=/tmp/x'], /--state-dir is read only with --connector=local/],
    ['an empty state directory', [...CLUSTER, '--worker-args=--a', '--state-dir='], /--state-dir' must not be empty/],
    ['more local workers than the connector starts', [...CLUSTER, '--worker-args=--a', '--max-replicas=257'], /starts at most 256 workers per pool/],
    ['a negative drain timeout', [...CLUSTER, '--worker-args=--a', '--drain-timeout-secs=-1'], /--drain-timeout-secs' must be an integer >= 0/],
    ['kubernetes without deployments', [...CLUSTER, '--connector=kubernetes'], /--connector=kubernetes needs --kube-deployment=POOL=DEPLOYMENT/],
    ['a deployment of an unknown pool', [...CLUSTER, '--connector=kubernetes', '--kube-deployment=gpu=sw'], /--kube-deployment' expects POOL=DEPLOYMENT .* got 'gpu=sw'/],
    ['a deployment without a name', [...CLUSTER, '--connector=kubernetes', '--kube-deployment=decode'], /--kube-deployment' expects POOL=DEPLOYMENT/],
    ['a pool named twice', [...CLUSTER, '--connector=kubernetes', '--kube-deployment=decode=a', '--kube-deployment=decode=b'], /names the decode pool twice/],
    ['a kubeconfig with another connector', [...INFRA, '--kubeconfig=/k'], /--kubeconfig is read only with --connector=kubernetes/],
    ['a KV threshold above 1', [...INFRA, '--decode-kv-scale-up-threshold=1.5'], /--decode-kv-scale-up-threshold' must be a number <= 1/],
    ['a KV scale-down threshold not below scale-up', [...INFRA, '--decode-kv-scale-down-threshold=0.95'], /--decode-kv-scale-down-threshold' \(0.95\) must be below '--decode-kv-scale-up-threshold' \(0.9\)/],
    ['a queue scale-down threshold not below scale-up', [...INFRA, '--prefill-queue-scale-up-threshold=0.1'], /--prefill-queue-scale-down-threshold' \(0.2\) must be below '--prefill-queue-scale-up-threshold' \(0.1\)/],
    ['an unknown predictor', [...INFRA, '--load-predictor=arima'], /--load-predictor' must be one of constant, moving-average, holt/],
    ['a zero prediction window', [...INFRA, '--load-prediction-window-size=0'], /--load-prediction-window-size' must be an integer >= 1/],
  ])('refuses %s', (_name, argv, message) => {
    expect(usage(argv)).toMatch(message);
  });

  it.each<[string, () => string, RegExp]>([
    ['a missing file', () => join(tmp, 'nope.json'), /cannot be read: ENOENT/],
    ['a directory', () => tmp, /is not a file/],
    ['not JSON', () => file('bad.json', '{version: 1'), /is not JSON/],
    ['an invalid profile', () => file('invalid.json', JSON.stringify({ version: 1, prefill: { ...PROFILE.prefill, isl: [1024, 128] } })), /profile\.prefill\.isl must be strictly ascending/],
    ['a wrong version', () => file('v2.json', JSON.stringify({ ...PROFILE, version: 2 })), /profile\.version must be 1/],
  ])('refuses --profile naming %s', (_name, path, message) => {
    const p = path();
    const m = usage([...INFRA, '--mode=sla', `--profile=${p}`]);
    expect(m).toContain(`--profile '${p}'`);
    expect(m).toMatch(message);
  });
});
