/**
 * One simulated worker: the engine's own parts (KvBlockManager → LlmScheduler → SimulatedExecutor
 * in an EngineCore), on a clock of its own, plus the lifecycle the planner drives.
 *
 * Time: the simulator keeps one global clock; each replica's `VirtualClock` is moved to it before a
 * step, and the executor's simulated step time advances it further. A step is computed when it
 * starts (its batch is fixed then, as on a real engine: a request that arrives meanwhile joins the
 * next step) and its effects leave the replica only when the global clock reaches its end: the
 * outputs and the KV events the step emitted are held until then (`step` / `finishStep`).
 *
 * Lifecycle (`ReplicaState`):
 *   starting → serving   the start-up delay has passed (or at once: replicas present at t = 0)
 *   starting → stopped   scaled down before it ever served (nothing to drain)
 *   serving  → draining  scaled down: the router stops choosing it; its requests run to the end
 *   draining → stopped   its last request finished (at once if it had none)
 */
import { internal } from '@switchyard/common';
import { EngineCore, KvBlockManager, LlmScheduler, SimulatedExecutor, VirtualClock, type KvCacheEvent, type StepResult } from '@switchyard/llm';
import type { MockerConfig } from './options.js';

export type ReplicaState = 'starting' | 'serving' | 'draining' | 'stopped';

export class SimReplica {
  state: ReplicaState = 'starting';
  readonly createdMs: number;
  stoppedMs: number | undefined;
  readonly core: EngineCore;
  readonly kv: KvBlockManager;
  private readonly clock = new VirtualClock();
  /** KV events of the step in flight (delivered at its end). */
  private events: KvCacheEvent[] = [];
  /** The step in flight and when it ends; undefined while idle. */
  private inFlight: { readonly result: StepResult; readonly endMs: number } | undefined;
  /** Requests routed here and not yet finished. */
  readonly requests = new Set<string>();
  /** Of those, the ones without their first token yet. */
  readonly awaitingFirstToken = new Set<string>();

  constructor(
    readonly id: string,
    nowMs: number,
    mocker: MockerConfig,
    seed: number,
  ) {
    this.createdMs = nowMs;
    this.clock.advanceTo(nowMs);
    this.kv = new KvBlockManager({ numBlocks: mocker.numBlocks, blockSize: mocker.blockSize, onEvent: (e) => this.events.push(e) });
    const scheduler = new LlmScheduler(this.kv, { maxNumSeqs: mocker.maxNumSeqs, maxNumBatchedTokens: mocker.maxNumBatchedTokens });
    const executor = new SimulatedExecutor({ clock: this.clock, timingModel: mocker.timingModel, speedupRatio: mocker.speedupRatio, seed, vocabSize: mocker.vocabSize });
    this.core = new EngineCore(scheduler, executor, this.clock);
  }

  get stepping(): boolean {
    return this.inFlight !== undefined;
  }

  /** Running + waiting sequences (what the worker reports as load). */
  get outstanding(): number {
    return this.requests.size;
  }

  /**
   * Start a step at `nowMs` if idle and there is work. Returns the step's end time, or undefined
   * when there was nothing to do. Throws internal if the engine has work but schedules none (a
   * request larger than the cache: the simulator refuses those before they get here).
   */
  async step(nowMs: number): Promise<number | undefined> {
    if (this.inFlight !== undefined || !this.core.scheduler.hasUnfinished()) return undefined;
    this.clock.advanceTo(nowMs);
    const result = await this.core.step();
    if (result.numScheduled === 0) throw internal(`replica ${this.id}: the engine has unfinished requests but scheduled none`);
    this.inFlight = { result, endMs: this.clock.now() };
    return this.inFlight.endMs;
  }

  /** The step in flight has ended: its outputs and KV events, handed over once. */
  finishStep(): { readonly result: StepResult; readonly events: KvCacheEvent[] } {
    if (this.inFlight === undefined) throw internal(`replica ${this.id}: finishStep without a step`);
    const { result } = this.inFlight;
    this.inFlight = undefined;
    const events = this.events;
    this.events = [];
    return { result, events };
  }
}
