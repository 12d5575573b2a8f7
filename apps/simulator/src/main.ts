/**
 * `switchyard simulate`: parse flags, build the trace and the options, run the simulator, print the
 * results, write the plot (SVG) and the results (JSON). Exit codes: 0 done, 1 bad input met while
 * running (an unreadable trace line, a bad profile), 2 bad usage. While it runs, a progress line on
 * stderr when stderr is a terminal (virtual time, requests, replicas); nothing otherwise.
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ProgressLine, formatElapsed, parseCommandLine } from '@switchyard/cli';
import { SwitchyardError } from '@switchyard/common';
import { parseProfile, type PlannerOptions } from '@switchyard/planner';
import {
  DEFAULT_MOCKER,
  JsonlTraceSource,
  SyntheticTraceSource,
  formatResult,
  parseRateShape,
  profileMocker,
  renderTimelineSvg,
  simulate,
  type MockerConfig,
  type SimulationProgress,
  type SimulationOptions,
  type TraceSource,
} from '@switchyard/simulator';
import { helpText, parseSimulateArgs, type SimulateArgs } from './options.js';

/** Mooncake's block size: the default tokens per hash id of a --trace file. */
export const MOONCAKE_BLOCK_SIZE = 512;

function traceSource(a: SimulateArgs): TraceSource {
  if (a.trace !== '') return new JsonlTraceSource(a.trace, a.traceBlockSize || MOONCAKE_BLOCK_SIZE);
  const shape = parseRateShape(a.synthetic);
  const durationSec = a.durationSecs || (shape.kind === 'sin' ? shape.periodSec : shape.kind === 'burst' ? shape.everySec : 3600);
  return new SyntheticTraceSource({
    shape,
    durationSec,
    seed: a.seed,
    blockSize: a.traceBlockSize || a.blockSize,
    islMean: a.isl,
    oslMean: a.osl,
    islSpread: a.islSpread,
    oslSpread: a.oslSpread,
    islMax: Math.max(a.isl, a.maxModelLen - 1),
    oslMax: Math.max(a.osl, a.maxModelLen - 1),
    prefixGroups: a.prefixGroups,
    prefixBlocks: a.prefixBlocks,
  });
}

async function plannerOptions(a: SimulateArgs, mocker: MockerConfig): Promise<PlannerOptions | undefined> {
  if (a.mode === 'static') return undefined;
  const profile = a.mode !== 'sla' ? undefined : a.profile !== '' ? parseProfile(JSON.parse(readFileSync(a.profile, 'utf8'))) : await profileMocker(mocker);
  return {
    mode: a.mode,
    defaultBounds: { minReplicas: a.minReplicas, maxReplicas: a.maxReplicas },
    sla: { ttftMs: a.ttftSloMs, itlMs: a.itlSloMs, percentile: a.sloPercentile },
    ...(profile === undefined ? {} : { profile }),
  };
}

/** The progress line: where the run is in virtual time and what it has seen, with the wall time spent. */
export function progressText(p: SimulationProgress, wallSec: number): string {
  return `simulating: ${formatElapsed(p.simulatedMs / 1000)} of trace time, ${p.requests} requests (${p.finished} done, ${p.inFlight} in flight), ${p.replicas} replicas, ${formatElapsed(wallSec)} elapsed`;
}

export async function run(a: SimulateArgs): Promise<void> {
  const mocker: MockerConfig = {
    ...DEFAULT_MOCKER,
    numBlocks: a.numGpuBlocks,
    blockSize: a.blockSize,
    maxNumSeqs: a.maxNumSeqs,
    maxNumBatchedTokens: a.maxNumBatchedTokens,
    maxModelLen: a.maxModelLen,
    speedupRatio: a.speedupRatio,
  };
  const planner = await plannerOptions(a, mocker);
  const options: SimulationOptions = {
    mocker,
    traceBlockSize: a.trace !== '' ? a.traceBlockSize || MOONCAKE_BLOCK_SIZE : a.traceBlockSize || a.blockSize,
    seed: a.seed,
    router: { mode: a.routerMode },
    ...(planner === undefined ? {} : { planner }),
    adjustmentIntervalSec: a.adjustmentIntervalSecs,
    initialReplicas: a.replicas || Math.max(a.mode === 'static' ? 1 : 0, a.minReplicas),
    startupDelaySec: a.startupDelaySecs,
    slo: { ttftMs: a.ttftSloMs, itlMs: a.itlSloMs },
    queueTimeoutSec: a.queueTimeoutSecs,
  };
  const started = performance.now();
  const progress = new ProgressLine(process.stderr);
  let result;
  try {
    result = await simulate(traceSource(a), options, (p) => progress.update(() => progressText(p, (performance.now() - started) / 1000)));
  } finally {
    progress.done();
  }
  const wallSec = (performance.now() - started) / 1000;
  const name = a.name || `simulate-${new Date().toISOString().replace(/[:.]/g, '-')}`;
  mkdirSync(a.outputDir, { recursive: true });
  const svg = join(a.outputDir, `${name}.svg`);
  const json = join(a.outputDir, `${name}.json`);
  const source = a.trace !== '' ? a.trace : a.synthetic;
  writeFileSync(svg, renderTimelineSvg(result.timeline, `${a.mode}: ${source}`));
  writeFileSync(json, JSON.stringify({ source, args: a, result }, null, 1) + '\n');
  if (a.json) process.stdout.write(JSON.stringify({ ...result, timeline: undefined, wallSec, svg, json }) + '\n');
  else process.stdout.write(`${formatResult(result)}\nsimulated in     ${wallSec.toFixed(1)} s\nplot             ${svg}\nresults          ${json}\n`);
}

export async function main(argv: readonly string[]): Promise<void> {
  const args = parseCommandLine('simulate', argv, parseSimulateArgs, helpText);
  if (args === undefined) return;
  try {
    await run(args);
  } catch (err) {
    if (!(err instanceof SwitchyardError || err instanceof SyntaxError || (err as NodeJS.ErrnoException).code !== undefined)) throw err;
    process.stderr.write(`switchyard simulate: ${(err as Error).message}\n`);
    process.exitCode = 1;
  }
}
