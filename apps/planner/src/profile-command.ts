/**
 * `switchyard planner profile`: measure one worker's LLM (prefill TTFT against input length,
 * decode ITL against KV usage and context length) and write the JSON profile `--profile` reads in
 * sla mode. The sweep and the assembly are `profileWorker` (`@switchyard/planner`); this module is
 * flags, the worker probe, the run's deadline and the output file.
 * Exit codes: 0 profile written, 1 the worker could not be profiled (unreachable, no such model,
 * not an LLM, a failed measurement, out of time, the file not writable), 2 bad usage.
 */
import { rename, writeFile } from 'node:fs/promises';
import { LOG_FORMAT_HELP, LOG_FORMATS, createLogger, logOutputOf, flagHelpLines, parseCommandLine, parseFlags, UsageError, type FlagTable, type LogFormat } from '@switchyard/cli';
import { DEFAULT_SWEEP, MAX_CONCURRENCY, MAX_DECODE_OSL, MAX_REPEATS, MAX_SWEEP_POINTS, planSweep, profileWorker, type SweepOptions } from '@switchyard/planner';
import { readPlannerEnvironment } from './environment.js';
import { readWorkerLimits, WorkerProbe } from './worker-probe.js';

export interface ProfileCommandOptions extends SweepOptions {
  help: boolean;
  url: string;
  model: string;
  out: string;
  timeoutSecs: number;
  requestTimeoutSecs: number;
  logVerbose: number;
  logFormat: LogFormat;
}

export const PROFILE_DEFAULTS = {
  ...DEFAULT_SWEEP,
  timeoutSecs: 600,
  requestTimeoutSecs: 60,
} as const;

const FLAGS: FlagTable<ProfileCommandOptions> = {
  url: { kind: 'string', key: 'url', help: "The worker's HTTP front door, e.g. http://127.0.0.1:8000 (required; one worker, not a router)." },
  model: { kind: 'string', key: 'model', help: 'The LLM to profile (required; backend llm or mocker).' },
  out: { kind: 'string', key: 'out', help: 'Where to write the profile JSON (required).' },
  'max-isl': { kind: 'int', key: 'maxIsl', min: 1, max: 1e9, help: `Longest prefill input and decode context, tokens; clamped to the model's length limit (default ${DEFAULT_SWEEP.maxIsl}).` },
  'isl-points': { kind: 'int', key: 'islPoints', min: 1, max: MAX_SWEEP_POINTS, help: `Prefill input lengths measured (default ${DEFAULT_SWEEP.islPoints}).` },
  'context-points': { kind: 'int', key: 'contextPoints', min: 1, max: MAX_SWEEP_POINTS, help: `Decode context lengths measured (default ${DEFAULT_SWEEP.contextPoints}).` },
  'max-concurrency': { kind: 'int', key: 'maxConcurrency', min: 1, max: MAX_CONCURRENCY, help: `Most concurrent decode requests; also bounded by max_num_seqs and the KV cache (default ${DEFAULT_SWEEP.maxConcurrency}).` },
  'concurrency-points': { kind: 'int', key: 'concurrencyPoints', min: 1, max: MAX_SWEEP_POINTS, help: `Concurrencies measured per context length (default ${DEFAULT_SWEEP.concurrencyPoints}).` },
  'decode-osl': { kind: 'int', key: 'decodeOsl', min: 2, max: MAX_DECODE_OSL, help: `Output tokens of each decode request (default ${DEFAULT_SWEEP.decodeOsl}).` },
  repeats: { kind: 'int', key: 'repeats', min: 1, max: MAX_REPEATS, help: `Runs per point; the median is kept (default ${DEFAULT_SWEEP.repeats}).` },
  'timeout-secs': { kind: 'int', key: 'timeoutSecs', min: 1, max: 86400, help: `The whole sweep's time limit (default ${PROFILE_DEFAULTS.timeoutSecs}).` },
  'request-timeout-secs': { kind: 'int', key: 'requestTimeoutSecs', min: 1, max: 3600, help: `One request's time limit (default ${PROFILE_DEFAULTS.requestTimeoutSecs}).` },
  'log-verbose': { kind: 'int', key: 'logVerbose', min: 0, help: 'Verbose logging level (default 0).' },
  'log-format': { kind: 'enum', key: 'logFormat', values: LOG_FORMATS, help: LOG_FORMAT_HELP },
};

export function parseProfileArgs(argv: readonly string[]): ProfileCommandOptions {
  const out = parseFlags(argv, FLAGS, { ...PROFILE_DEFAULTS, help: false, url: '', model: '', out: '', logVerbose: 0, logFormat: 'default' as LogFormat });
  if (out.help) return out;
  for (const [flag, value] of [['url', out.url], ['model', out.model], ['out', out.out]] as const) {
    if (value === '') throw new UsageError(`flag '--${flag}' is required`);
  }
  let url: URL;
  try {
    url = new URL(out.url);
  } catch {
    throw new UsageError(`flag '--url' must be an http(s) URL, got '${out.url}'`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new UsageError(`flag '--url' must be an http(s) URL, got '${out.url}'`);
  return out;
}

export function profileHelpText(): string {
  return (
    [
      'usage: switchyard planner profile --url URL --model NAME --out FILE [flags]',
      '',
      "Measures one worker's LLM directly over its HTTP front door: prefill TTFT against input length",
      '(one request at a time) and decode ITL against KV usage and context length (concurrent requests),',
      'then writes the JSON profile that `switchyard planner --mode=sla --profile FILE` reads.',
      'Run it on an otherwise idle worker.',
      '',
      'flags:',
      ...flagHelpLines(FLAGS),
    ].join('\n') + '\n'
  );
}

export async function profileMain(argv: readonly string[]): Promise<void> {
  const options = parseCommandLine('planner profile', argv, parseProfileArgs, profileHelpText);
  if (options === undefined) return;
  const output = logOutputOf({ format: options.logFormat, isTerminal: process.stdout.isTTY === true, noColor: readPlannerEnvironment().noColor });
  const logger = createLogger({ verbose: options.logVerbose, format: options.logFormat, output });
  // The whole run's deadline (a held controller and timer: see worker-probe.ts on AbortSignal.timeout).
  const run = new AbortController();
  const timer = setTimeout(() => run.abort(), options.timeoutSecs * 1000);
  const probeOptions = { url: options.url, model: options.model, requestTimeoutMs: options.requestTimeoutSecs * 1000, signal: run.signal };
  try {
    const limits = await readWorkerLimits(probeOptions);
    const plan = planSweep(limits, options);
    logger.info({ event: 'profile_plan', limits, prefillPoints: plan.prefillIsl.length, decodePoints: plan.decode.length, repeats: plan.repeats }, 'profiling');
    const profile = await profileWorker(limits, options, new WorkerProbe(probeOptions), (what) => logger.info({ event: 'profile_point' }, what));
    // Written whole or not at all: a planner reading the file never sees half a profile.
    const tmp = `${options.out}.${process.pid}.tmp`;
    await writeFile(tmp, JSON.stringify(profile, null, 2) + '\n');
    await rename(tmp, options.out);
    logger.info({ event: 'profile_written', out: options.out }, 'profile written');
    logger.flush();
    clearTimeout(timer);
  } catch (err) {
    logger.error({ err }, `profiling failed: ${err instanceof Error ? err.message : String(err)}`);
    logger.flush();
    process.exit(1);
  }
}
