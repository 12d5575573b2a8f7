/**
 * `switchyard simulate` flags parsed into one options object. The planner flags keep the planner
 * command's names (`--mode`, `--min-replicas`, `--ttft-slo-ms`, `--adjustment-interval-secs`, ...),
 * the engine flags the worker's mocker names (`--num-gpu-blocks`, `--block-size`, ...), the router
 * flag the router's (`--router-mode`). Defaults live in `DEFAULTS`; `parseSimulateArgs` is the one
 * place argv becomes `SimulateArgs`, refusing anything malformed with a `UsageError` (exit 2).
 */
import { UsageError, flagHelpLines, parseFlags, type FlagTable } from '@switchyard/cli';
import { DEFAULT_MOCKER, MAX_SIM_REPLICAS, MAX_TRACE_TOKENS, type SimRouterMode } from '@switchyard/simulator';

export { UsageError };

export interface SimulateArgs {
  help: boolean;
  /** Mooncake JSONL trace. Exactly one of `trace` and `synthetic`. */
  trace: string;
  /** `constant:rate=R` | `sin:min=A,max=B,period=S` | `burst:base=R,peak=Q,every=S,length=S`. */
  synthetic: string;
  /** Tokens per trace hash id; 0 = Mooncake's 512 for --trace, the engine's block size for --synthetic. */
  traceBlockSize: number;
  /** Synthetic traces: seconds of traffic; 0 = one period of a sinusoid or burst, else 3600. */
  durationSecs: number;
  isl: number;
  osl: number;
  islSpread: number;
  oslSpread: number;
  prefixGroups: number;
  prefixBlocks: number;
  seed: number;
  mode: 'static' | 'load' | 'sla';
  /** Replicas at t = 0 (static: for the whole run); 0 = --min-replicas (at least 1 when static). */
  replicas: number;
  minReplicas: number;
  maxReplicas: number;
  adjustmentIntervalSecs: number;
  startupDelaySecs: number;
  ttftSloMs: number;
  itlSloMs: number;
  sloPercentile: number;
  /** SLA mode's profile (JSON, as `switchyard planner profile` writes); '' = measure the mocker. */
  profile: string;
  routerMode: SimRouterMode;
  numGpuBlocks: number;
  blockSize: number;
  maxNumSeqs: number;
  maxNumBatchedTokens: number;
  maxModelLen: number;
  speedupRatio: number;
  queueTimeoutSecs: number;
  outputDir: string;
  /** File name stem of the plot and the JSON; '' = simulate-<time>. */
  name: string;
  json: boolean;
}

export const DEFAULTS: Readonly<SimulateArgs> = {
  help: false,
  trace: '',
  synthetic: '',
  traceBlockSize: 0,
  durationSecs: 0,
  isl: 1024,
  osl: 128,
  islSpread: 0.4,
  oslSpread: 0.4,
  prefixGroups: 8,
  prefixBlocks: 8,
  seed: 0,
  mode: 'load',
  replicas: 0,
  minReplicas: 1,
  maxReplicas: 8,
  adjustmentIntervalSecs: 60,
  startupDelaySecs: 30,
  ttftSloMs: 500,
  itlSloMs: 50,
  sloPercentile: 90,
  profile: '',
  routerMode: 'kv',
  numGpuBlocks: DEFAULT_MOCKER.numBlocks,
  blockSize: DEFAULT_MOCKER.blockSize,
  maxNumSeqs: DEFAULT_MOCKER.maxNumSeqs,
  maxNumBatchedTokens: DEFAULT_MOCKER.maxNumBatchedTokens,
  maxModelLen: DEFAULT_MOCKER.maxModelLen,
  speedupRatio: 1,
  queueTimeoutSecs: 60,
  outputDir: 'bench/results',
  name: '',
  json: false,
};

const FLAGS: FlagTable<SimulateArgs> = {
  trace: { kind: 'string', key: 'trace', help: 'Mooncake JSONL trace (timestamp ms, input_length, output_length, hash_ids), sorted by timestamp.' },
  synthetic: { kind: 'string', key: 'synthetic', help: 'Synthetic arrivals: constant:rate=R | sin:min=A,max=B,period=S[,phase=F] | burst:base=R,peak=Q,every=S,length=S (req/s, s).' },
  'trace-block-size': { kind: 'int', key: 'traceBlockSize', min: 0, max: 1 << 20, help: "Tokens per trace hash id (default: 512 for --trace, the engine's block size for --synthetic)." },
  'duration-secs': { kind: 'number', key: 'durationSecs', min: 0, max: 1e9, help: 'Synthetic: seconds of traffic (default: one period of sin or burst, else 3600).' },
  isl: { kind: 'int', key: 'isl', min: 1, max: MAX_TRACE_TOKENS, help: `Synthetic: mean input length, tokens (default ${DEFAULTS.isl}).` },
  osl: { kind: 'int', key: 'osl', min: 1, max: MAX_TRACE_TOKENS, help: `Synthetic: mean output length, tokens (default ${DEFAULTS.osl}).` },
  'isl-spread': { kind: 'number', key: 'islSpread', min: 0, max: 3, help: `Synthetic: log-normal sigma of input lengths (default ${DEFAULTS.islSpread}).` },
  'osl-spread': { kind: 'number', key: 'oslSpread', min: 0, max: 3, help: `Synthetic: log-normal sigma of output lengths (default ${DEFAULTS.oslSpread}).` },
  'prefix-groups': { kind: 'int', key: 'prefixGroups', min: 0, max: 1_000_000, help: `Synthetic: shared prompt prefixes (default ${DEFAULTS.prefixGroups}; 0: none).` },
  'prefix-blocks': { kind: 'int', key: 'prefixBlocks', min: 0, max: 1_000_000, help: `Synthetic: blocks of each shared prefix (default ${DEFAULTS.prefixBlocks}).` },
  seed: { kind: 'int', key: 'seed', min: 0, help: 'Seed of the trace generator, the router and the engines (default 0).' },
  mode: { kind: 'enum', key: 'mode', values: ['static', 'load', 'sla'], help: 'static: fixed replicas; load / sla: the planner sizes the pool (default load).' },
  replicas: { kind: 'int', key: 'replicas', min: 0, max: MAX_SIM_REPLICAS, help: 'Replicas at t = 0; static mode keeps them (default: --min-replicas, at least 1).' },
  'min-replicas': { kind: 'int', key: 'minReplicas', min: 0, max: MAX_SIM_REPLICAS, help: `Planner bounds (default ${DEFAULTS.minReplicas}..${DEFAULTS.maxReplicas}).` },
  'max-replicas': { kind: 'int', key: 'maxReplicas', min: 1, max: MAX_SIM_REPLICAS, help: 'See --min-replicas.' },
  'adjustment-interval-secs': { kind: 'number', key: 'adjustmentIntervalSecs', min: 1, max: 86400, help: `Seconds between planner decisions (default ${DEFAULTS.adjustmentIntervalSecs}).` },
  'startup-delay-secs': { kind: 'number', key: 'startupDelaySecs', min: 0, max: 86400, help: `A replica the planner adds serves after this long (default ${DEFAULTS.startupDelaySecs}).` },
  'ttft-slo-ms': { kind: 'number', key: 'ttftSloMs', min: 0.001, max: 1e9, help: `TTFT objective, ms (default ${DEFAULTS.ttftSloMs}).` },
  'itl-slo-ms': { kind: 'number', key: 'itlSloMs', min: 0.001, max: 1e9, help: `Inter-token latency objective, ms (default ${DEFAULTS.itlSloMs}).` },
  'slo-percentile': { kind: 'number', key: 'sloPercentile', min: 0.001, max: 100, help: `Percentile the planner sizes for in sla mode (default ${DEFAULTS.sloPercentile}).` },
  profile: { kind: 'string', key: 'profile', help: 'sla mode: the worker profile JSON (default: measured from the mocker by simulated profiling).' },
  'router-mode': { kind: 'enum', key: 'routerMode', values: ['kv', 'least-loaded', 'round-robin', 'random'], help: 'The router\'s selection (default kv).' },
  'num-gpu-blocks': { kind: 'int', key: 'numGpuBlocks', min: 1, max: 1 << 24, help: `Mocker KV blocks per replica (default ${DEFAULTS.numGpuBlocks}).` },
  'block-size': { kind: 'int', key: 'blockSize', min: 1, max: 4096, help: `Mocker tokens per KV block (default ${DEFAULTS.blockSize}).` },
  'max-num-seqs': { kind: 'int', key: 'maxNumSeqs', min: 1, max: 1 << 16, help: `Mocker sequences per step (default ${DEFAULTS.maxNumSeqs}).` },
  'max-num-batched-tokens': { kind: 'int', key: 'maxNumBatchedTokens', min: 1, max: 1 << 24, help: `Mocker token budget per step (default ${DEFAULTS.maxNumBatchedTokens}).` },
  'max-model-len': { kind: 'int', key: 'maxModelLen', min: 2, max: 1 << 30, help: `Longest prompt + output a replica admits; longer requests count as refused (default ${DEFAULTS.maxModelLen}).` },
  'speedup-ratio': { kind: 'number', key: 'speedupRatio', min: 1e-6, max: 1e6, help: 'Mocker step time is divided by this (default 1).' },
  'queue-timeout-secs': { kind: 'number', key: 'queueTimeoutSecs', min: 0, max: 86400, help: `A request with no serving replica waits this long, then fails (default ${DEFAULTS.queueTimeoutSecs}).` },
  'output-dir': { kind: 'string', key: 'outputDir', help: `Where the plot (SVG) and results (JSON) go (default ${DEFAULTS.outputDir}).` },
  name: { kind: 'string', key: 'name', help: 'File name stem of the plot and results (default simulate-<time>).' },
  json: { kind: 'bool', key: 'json', help: 'Print the results as JSON instead of text.' },
};

const NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;

export function parseSimulateArgs(argv: readonly string[]): SimulateArgs {
  const o = parseFlags(argv, FLAGS, { ...DEFAULTS });
  if (o.help) return o;
  if ((o.trace === '') === (o.synthetic === '')) throw new UsageError('give exactly one of --trace FILE and --synthetic SPEC');
  if (o.minReplicas > o.maxReplicas) throw new UsageError(`--min-replicas (${o.minReplicas}) is above --max-replicas (${o.maxReplicas})`);
  if (o.mode !== 'sla' && o.profile !== '') throw new UsageError('--profile is for --mode sla');
  if (o.maxModelLen > o.numGpuBlocks * o.blockSize) throw new UsageError(`--max-model-len (${o.maxModelLen}) exceeds the KV cache (${o.numGpuBlocks} blocks × ${o.blockSize})`);
  if (o.name !== '' && !NAME.test(o.name)) throw new UsageError(`--name must be letters, digits, '.', '_' or '-' (at most 128), got '${o.name}'`);
  return o;
}

export function helpText(): string {
  return (
    [
      'usage: switchyard simulate (--trace FILE | --synthetic SPEC) [flags]',
      '',
      "The cluster simulator: replays a trace in virtual time against mocker engines behind the router's",
      "KV-aware selection, with the planner's decisions sizing the pool. Prints SLO attainment, goodput,",
      'worker-seconds, prefix hit rate and TTFT / ITL percentiles; writes a plot of replicas and load (SVG).',
      '',
      'flags:',
      ...flagHelpLines(FLAGS),
    ].join('\n') + '\n'
  );
}
