/**
 * Simulated profiling: the planner's SLA-mode profile of a mocker worker, measured the way
 * `switchyard planner profile` measures a real one — by running requests through the engine and
 * timing them — only on a virtual clock (the same EngineCore, scheduler and SimulatedExecutor a
 * replica runs). No figure is written down by hand: change the timing model or the engine's
 * settings and the profile follows.
 *
 * - **prefill**: per input length, one request (max_tokens 1) on a fresh engine: TTFT, and
 *   throughput = input length / TTFT.
 * - **decode**: per (KV usage u, context c), enough sequences of c prompt tokens to fill u of the
 *   cache (at most max_num_seqs; at least one), each generating until measured: once every sequence
 *   has its first token (all prefill done), the mean step time of the next `DECODE_STEPS` steps is
 *   the ITL. When max_num_seqs caps the batch the usage reached is lower than u; the figure is still
 *   recorded at u (the worker cannot be driven higher at that context).
 */
import { EngineCore, KvBlockManager, LlmScheduler, SimulatedExecutor, VirtualClock } from '@switchyard/llm';
import { PROFILE_VERSION, type Profile } from '@switchyard/planner';
import type { MockerConfig } from './options.js';

export interface ProfileGrid {
  readonly isl: readonly number[];
  readonly kvUsage: readonly number[];
  readonly contextLength: readonly number[];
}

export const DEFAULT_PROFILE_GRID: ProfileGrid = {
  isl: [64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384],
  kvUsage: [0.05, 0.1, 0.2, 0.35, 0.5, 0.65, 0.8, 0.95],
  contextLength: [256, 512, 1024, 2048, 4096, 8192],
};

/** Decode steps timed per grid point. */
const DECODE_STEPS = 8;

function engine(m: MockerConfig): { core: EngineCore; clock: VirtualClock } {
  const clock = new VirtualClock();
  const kv = new KvBlockManager({ numBlocks: m.numBlocks, blockSize: m.blockSize });
  const scheduler = new LlmScheduler(kv, { maxNumSeqs: m.maxNumSeqs, maxNumBatchedTokens: m.maxNumBatchedTokens });
  const executor = new SimulatedExecutor({ clock, timingModel: m.timingModel, speedupRatio: m.speedupRatio, vocabSize: m.vocabSize });
  return { core: new EngineCore(scheduler, executor, clock), clock };
}

/** Distinct prompts (no prefix sharing between sequences: the cache must not shorten the work). */
function prompt(seq: number, length: number, vocab: number): number[] {
  const out = new Array<number>(length);
  for (let i = 0; i < length; i++) out[i] = (seq * 7919 + i * 104729 + ((seq * i) % 9973)) % vocab;
  return out;
}

async function measurePrefill(m: MockerConfig, isl: number): Promise<number> {
  const { core, clock } = engine(m);
  core.addRequest({ requestId: 'p', promptTokenIds: prompt(1, isl, m.vocabSize), maxTokens: 1, arrivalTime: 0 });
  while (core.scheduler.hasUnfinished()) await core.step();
  const metrics = core.requestMetrics('p')!;
  return (metrics.firstTokenTime ?? clock.now()) - metrics.arrivalTime;
}

async function measureDecode(m: MockerConfig, usage: number, context: number): Promise<number> {
  const { core, clock } = engine(m);
  const capacity = m.numBlocks * m.blockSize;
  const perSeq = context + DECODE_STEPS + 2;
  const n = Math.max(1, Math.min(m.maxNumSeqs, Math.floor((usage * capacity) / perSeq)));
  const waiting = new Set<string>();
  for (let i = 0; i < n; i++) {
    const id = `d${i}`;
    waiting.add(id);
    core.addRequest({ requestId: id, promptTokenIds: prompt(i + 2, context, m.vocabSize), maxTokens: DECODE_STEPS + 2, arrivalTime: 0 });
  }
  while (waiting.size > 0 && core.scheduler.hasUnfinished()) {
    const r = await core.step();
    for (const o of r.outputs) waiting.delete(o.requestId);
  }
  const start = clock.now();
  let steps = 0;
  while (steps < DECODE_STEPS && core.scheduler.hasUnfinished()) {
    const r = await core.step();
    if (r.numScheduled === 0) break;
    steps++;
  }
  return steps === 0 ? m.timingModel.decodeMs(usage) / m.speedupRatio : (clock.now() - start) / steps;
}

/**
 * Measure a profile of one mocker worker. Grid points the engine cannot run (an input or context
 * longer than its maxModelLen) are left out; the planner's interpolation clamps at the edges.
 */
export async function profileMocker(m: MockerConfig, grid: ProfileGrid = DEFAULT_PROFILE_GRID): Promise<Profile> {
  const isl = grid.isl.filter((x) => x < m.maxModelLen);
  const ttftMs: number[] = [];
  const throughputTokensPerSec: number[] = [];
  for (const x of isl) {
    const ttft = await measurePrefill(m, x);
    ttftMs.push(ttft);
    throughputTokensPerSec.push((x * 1000) / ttft);
  }
  const contextLength = grid.contextLength.filter((c) => c + DECODE_STEPS + 2 <= m.maxModelLen);
  const itlMs: number[][] = [];
  for (const u of grid.kvUsage) {
    const row: number[] = [];
    for (const c of contextLength) row.push(await measureDecode(m, u, c));
    itlMs.push(row);
  }
  return {
    version: PROFILE_VERSION,
    prefill: { isl, ttftMs, throughputTokensPerSec },
    decode: { kvUsage: [...grid.kvUsage], contextLength, itlMs, kvCapacityTokens: m.numBlocks * m.blockSize },
  };
}
