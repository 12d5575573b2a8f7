// SimulatedExecutor: an Executor with no model (Dynamo's mocker engine). Each step "takes" the timing
// model's time, divided by `speedupRatio`, on the injected clock (a VirtualClock makes replay instant),
// and samples deterministic pseudo-random tokens.
//
// Tokens are a pure function of (seed, request id, position): token at position p of request r is the
// first draw of Xoshiro128 seeded from (fnv1a(r) ^ seed, p). So a sequence generates the same tokens
// whether or not it was preempted and recomputed, and across runs.
//
// KV: there is none; the block manager's bookkeeping and events are the scheduler's (blocks become
// prefix-cache hits after the step that "computes" them, as with a real executor). Cached prefix tokens
// are never scheduled, so they cost no time. Sampling parameters are ignored; `release` is not needed.
//
// KV transfer (with `kvTransfer` options): the layout comes from the model folder's config.json
// (`simulatedKvLayout`); a block's payload is a token — the 8 bytes of its sequence hash — checked on
// write, and the time the real bytes (`bytesPerBlock`) would take is `simulatedTransferMs`, which the
// caller sleeps on the engine's clock.
//
// Pace: a real clock's sleep ends a little after its deadline (the PreciseTimer: tens of microseconds).
// A step that follows the previous one at once (within BACK_TO_BACK_MS of its end) is shortened by
// what that sleep overran, so back-to-back steps keep the timing model's pace instead of drifting by
// the overrun each step; the engine's own work between steps still counts, as it always did. After a
// pause nothing is owed. On a VirtualClock a sleep never overruns, so replay is unchanged.

import { createHash } from 'node:crypto';
import { invalidArgument } from '@switchyard/common';
import type { Executor, ExecutorOutput } from './executor.js';
import type { KvLayout } from './kv-transfer.js';
import type { ScheduledSequence, SchedulerOutput } from './llm-scheduler.js';
import { polynomialTimingModel, stepMs, systemClock, type Clock, type TimingModel } from './timing-model.js';
import type { ModelConfigJson } from './tokenizer/tokenizer-files.js';

export const DEFAULT_SIM_VOCAB_SIZE = 32000;
/** A step starting within this many ms of the previous step's end follows it at once (its overrun is owed). */
export const BACK_TO_BACK_MS = 1;
/** Overrun owed at most (ms): a long stall (a GC pause, a busy host) is not made up by a burst of short steps. */
export const MAX_OWED_MS = 5;
/** Default bandwidth of the simulated KV transfer, Gbit/s (`--kv-transfer-gbps`). */
export const DEFAULT_KV_TRANSFER_GBPS = 25;
/**
 * What `simulatedKvLayout` assumes when config.json lacks a field (a Llama-2-7B-sized model):
 * num_hidden_layers 32, num_attention_heads 32, num_key_value_heads = num_attention_heads,
 * hidden_size 4096, head_dim = hidden_size / num_attention_heads; dtype fp32 unless
 * `torch_dtype` (or `dtype`) is float16 or bfloat16.
 */
export const SIM_KV_DEFAULTS = { numHiddenLayers: 32, numAttentionHeads: 32, hiddenSize: 4096 } as const;
/** Bytes of the mocker's block payload (the block's sequence hash). */
const SIM_PAYLOAD_BYTES = 8;

/**
 * The mocker's KV layout for a model folder's config.json (defaults: SIM_KV_DEFAULTS; a field that is
 * not a positive integer counts as absent). modelId: a digest of the architecture fields and vocab size.
 */
export function simulatedKvLayout(config: ModelConfigJson | undefined, blockSize: number, vocabSize: number): KvLayout {
  const int = (v: unknown): number | undefined => (typeof v === 'number' && Number.isSafeInteger(v) && v > 0 ? v : undefined);
  const numLayers = int(config?.num_hidden_layers) ?? SIM_KV_DEFAULTS.numHiddenLayers;
  const heads = int(config?.num_attention_heads) ?? SIM_KV_DEFAULTS.numAttentionHeads;
  const numKvHeads = int(config?.num_key_value_heads) ?? heads;
  const hidden = int(config?.hidden_size) ?? SIM_KV_DEFAULTS.hiddenSize;
  const headDim = int(config?.head_dim) ?? Math.max(1, Math.floor(hidden / heads));
  const t = config?.['torch_dtype'] ?? config?.['dtype'];
  const dtype = t === 'float16' || t === 'bfloat16' ? 'fp16' : 'fp32';
  const arch = { numLayers, numKvHeads, headDim, hiddenSize: hidden, numAttentionHeads: heads, dtype, vocabSize };
  const modelId = createHash('sha256').update(JSON.stringify(arch)).digest('hex').slice(0, 32);
  const bytesPerBlock = numLayers * 2 * numKvHeads * blockSize * headDim * (dtype === 'fp16' ? 2 : 4);
  return { modelId, engine: 'mocker', dtype, numLayers, numKvHeads, headDim, blockSize, bytesPerBlock };
}

/** KV transfer settings of a simulated executor. */
export interface SimulatedKvTransferOptions {
  /** The engine's block size. */
  readonly blockSize: number;
  /** The model folder's config.json (undefined: SIM_KV_DEFAULTS). */
  readonly modelConfig?: ModelConfigJson;
  /** Default DEFAULT_KV_TRANSFER_GBPS; > 0. */
  readonly gbps?: number;
}

export interface SimulatedExecutorOptions {
  /** Default systemClock (real sleeping); pass a VirtualClock for fast replay. */
  readonly clock?: Clock;
  readonly timingModel?: TimingModel;
  /** Simulated time is divided by this; default 1. */
  readonly speedupRatio?: number;
  readonly seed?: number;
  /** Tokens are drawn from [0, vocabSize). */
  readonly vocabSize?: number;
  /** Support KV transfer (layout, token payloads, simulated transfer time); absent: none. */
  readonly kvTransfer?: SimulatedKvTransferOptions;
}

export class SimulatedExecutor implements Executor {
  private readonly clock: Clock;
  private readonly model: TimingModel;
  private readonly speedup: number;
  private readonly seed: number;
  private readonly vocabSize: number;
  private readonly layout: KvLayout | undefined;
  private readonly gbps: number;
  /** Total simulated prefill tokens and time, for tests and metrics. */
  prefillTokens = 0;
  busyMs = 0;
  /** How far the sleeps so far overran their deadlines, not yet taken off a step (ms, <= MAX_OWED_MS). */
  private owedMs = 0;
  /** When the last step's sleep ended (clock ms). */
  private wokeAt = -Infinity;

  constructor(options: SimulatedExecutorOptions = {}) {
    this.clock = options.clock ?? systemClock;
    this.model = options.timingModel ?? polynomialTimingModel;
    this.speedup = options.speedupRatio ?? 1;
    this.seed = options.seed ?? 0;
    this.vocabSize = options.vocabSize ?? DEFAULT_SIM_VOCAB_SIZE;
    if (!(this.speedup > 0)) throw invalidArgument(`speedupRatio must be > 0, got ${this.speedup}`);
    if (!Number.isSafeInteger(this.vocabSize) || this.vocabSize <= 0) throw invalidArgument(`vocabSize must be a positive integer`);
    const t = options.kvTransfer;
    this.gbps = t?.gbps ?? DEFAULT_KV_TRANSFER_GBPS;
    if (!(Number.isFinite(this.gbps) && this.gbps > 0)) throw invalidArgument(`kvTransferGbps must be a number > 0, got ${this.gbps}`);
    if (t !== undefined && (!Number.isSafeInteger(t.blockSize) || t.blockSize <= 0)) throw invalidArgument(`blockSize must be a positive integer, got ${t.blockSize}`);
    this.layout = t === undefined ? undefined : simulatedKvLayout(t.modelConfig, t.blockSize, this.vocabSize);
  }

  kvLayout(): KvLayout | undefined {
    return this.layout;
  }

  /** The payload must be the block's token: its sequence hash as 8 bytes. */
  checkBlock(hash: string, data: Uint8Array): string | undefined {
    if (!(data instanceof Uint8Array) || data.byteLength !== SIM_PAYLOAD_BYTES) return `a simulated KV block is ${SIM_PAYLOAD_BYTES} bytes, got ${data?.byteLength}`;
    const want = payload(hash);
    for (let i = 0; i < SIM_PAYLOAD_BYTES; i++) if (data[i] !== want[i]) return `the simulated KV block payload does not match block ${hash}`;
    return undefined;
  }

  readBlock(_slot: number, hash: string): Uint8Array {
    return payload(hash);
  }

  /** Nothing to store: the payload was checked (`checkBlock`) and a simulated slot holds no KV. */
  writeBlock(): void {}

  /** blocks × bytesPerBlock at `gbps`, in ms, divided by the speedup ratio (0 without transfer support). */
  simulatedTransferMs(blocks: number): number {
    if (this.layout === undefined || !(blocks > 0)) return 0;
    return ((blocks * this.layout.bytesPerBlock) / ((this.gbps * 1e9) / 8)) * 1000 / this.speedup;
  }

  /** The token a request samples at `position` (= its token count before sampling). */
  tokenAt(requestId: string, position: number): number {
    const key = (fnv1a32(requestId) ^ this.seed) >>> 0;
    return firstDraw(key * 0x10_0000 + (position % 0x10_0000)) % this.vocabSize;
  }

  async execute(output: SchedulerOutput): Promise<ExecutorOutput> {
    let prefill = 0;
    let decodes = 0;
    const scheduled = output.scheduled;
    const tokens = new Array<number>(scheduled.length);
    for (let i = 0; i < scheduled.length; i++) {
      const e = scheduled[i]!;
      if (e.isPrefill) prefill += e.numNewTokens;
      else decodes++;
      tokens[i] = e.samples ? this.tokenAt(e.requestId, e.numComputedTokens + e.numNewTokens) : -1;
    }
    const sampledTokens = new StepTokens(scheduled, tokens);
    const elapsedMs = stepMs(this.model, prefill, decodes, output.kvUsage) / this.speedup;
    this.prefillTokens += prefill;
    this.busyMs += elapsedMs;
    const start = this.clock.now();
    const owed = start - this.wokeAt <= BACK_TO_BACK_MS ? this.owedMs : 0;
    const credit = Math.min(owed, elapsedMs);
    const deadline = start + elapsedMs - credit;
    await this.clock.sleep(deadline - start);
    this.wokeAt = this.clock.now();
    // under a microsecond is the float rounding of `start + (deadline - start)`, not an overrun
    const overrun = this.wokeAt - deadline;
    this.owedMs = Math.min(MAX_OWED_MS, owed - credit + (overrun > 0.001 ? overrun : 0));
    return { sampledTokens, elapsedMs };
  }
}

/**
 * One step's sampled tokens as a ReadonlyMap, by request id, in the step's order — kept as the step's
 * entries and a token per entry (-1: the entry did not sample) instead of a Map built per step. The
 * scheduler reads them back in the step's order, so `get` finds each one at a cursor; any other lookup
 * (and iteration) goes through a Map built once, on first need.
 */
export class StepTokens implements ReadonlyMap<string, number> {
  readonly size: number;
  private readonly entries_: readonly ScheduledSequence[];
  private readonly tokens: readonly number[];
  private cursor = 0;
  private index: Map<string, number> | undefined;

  /** `tokens[i]`: the token entry i sampled, or -1 if it did not sample. */
  constructor(entries: readonly ScheduledSequence[], tokens: readonly number[]) {
    this.entries_ = entries;
    this.tokens = tokens;
    let n = 0;
    for (const t of tokens) if (t >= 0) n++;
    this.size = n;
  }

  get(id: string): number | undefined {
    const tokens = this.tokens;
    let c = this.cursor;
    while (c < tokens.length && tokens[c]! < 0) c++;
    if (c < tokens.length && this.entries_[c]!.requestId === id) {
      this.cursor = c + 1;
      return tokens[c];
    }
    return this.map().get(id);
  }

  has(id: string): boolean {
    return this.map().has(id);
  }

  forEach(fn: (value: number, key: string, map: ReadonlyMap<string, number>) => void, thisArg?: unknown): void {
    this.map().forEach((v, k) => fn.call(thisArg, v, k, this));
  }

  entries(): MapIterator<[string, number]> {
    return this.map().entries();
  }

  keys(): MapIterator<string> {
    return this.map().keys();
  }

  values(): MapIterator<number> {
    return this.map().values();
  }

  [Symbol.iterator](): MapIterator<[string, number]> {
    return this.map().entries();
  }

  private map(): Map<string, number> {
    if (this.index === undefined) {
      this.index = new Map();
      for (let i = 0; i < this.tokens.length; i++) if (this.tokens[i]! >= 0) this.index.set(this.entries_[i]!.requestId, this.tokens[i]!);
    }
    return this.index;
  }
}

/**
 * `new Xoshiro128(seed).nextUint32()` (sampling.ts), without building the generator: one token per
 * sequence per step, so the replay would otherwise allocate a generator for every token. The first
 * output reads only the state word `b`, the second output of the seeding splitmix. The unit test
 * checks it against Xoshiro128.
 */
export function firstDraw(seed: number): number {
  let s = (seed >>> 0) ^ Math.imul(Math.floor(seed / 0x1_0000_0000) | 0, 0x9e3779b9);
  s = (s + 0x9e3779b9) | 0; // state word a (unused by the first output)
  s = (s + 0x9e3779b9) | 0; // state word b
  let z = Math.imul(s ^ (s >>> 16), 0x85ebca6b);
  z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35);
  const b = (z ^ (z >>> 16)) >>> 0;
  const x = Math.imul(b, 5);
  return Math.imul((x << 7) | (x >>> 25), 9) >>> 0;
}

function fnv1a32(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

/** A block hash (16 hex digits) as 8 bytes. */
function payload(hash: string): Uint8Array {
  const out = new Uint8Array(SIM_PAYLOAD_BYTES);
  for (let i = 0; i < SIM_PAYLOAD_BYTES; i++) out[i] = parseInt(hash.slice(2 * i, 2 * i + 2), 16) || 0;
  return out;
}
