import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { DEFAULTS, MAX_REPLICAS, UsageError, helpText, parseCommandLineOptions, parsePlannerArgs } from './options.js';

const INFRA = ['--etcd=http://127.0.0.1:2379', '--nats', 'nats://127.0.0.1:4222', '--model=org/m'];
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
    const o = parsePlannerArgs(INFRA);
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
      help: false,
    });
    expect(o).toMatchObject({ namespace: 'default', mode: 'load', connector: 'memory', adjustmentIntervalSecs: 30, sloPercentile: 90, dryRun: false, minReplicas: 1, maxReplicas: 8 });
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

  it('per-pool bounds fall back to --min-replicas / --max-replicas', () => {
    const o = parseCommandLineOptions([...INFRA, '--min-replicas=2', '--max-replicas=5', '--decode-max-replicas=9']);
    expect(o.config!.bounds).toEqual({
      prefill: { minReplicas: 2, maxReplicas: 5 },
      decode: { minReplicas: 2, maxReplicas: 9 },
      aggregated: { minReplicas: 2, maxReplicas: 5 },
    });
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
    ['connector not in this build', [...INFRA, '--connector=kubernetes'], /--connector' must be one of memory/],
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
