/**
 * Load samples of the worker's LLM models → the event plane, as WireLoad.
 *
 * Every `intervalMs` the publisher reads each ready LLM's metrics; a model's sample is published when
 * it differs from the last one published, or when `heartbeatMs` passed since (so a consumer can tell a
 * quiet worker from a dead one). Hence: at most one sample per model per interval, at least one per
 * heartbeat. A failed publish is logged and the sample is retried at the next tick.
 */
import type { Logger } from '@switchyard/common';
import type { LlmEndpoint } from '@switchyard/llm';
import type { EventPlane, InstanceId } from '@switchyard/runtime';
import type { WireLoad } from '../protocols.js';

export const DEFAULT_LOAD_INTERVAL_MS = 1000;
export const LOAD_HEARTBEAT_MS = 5000;

export interface LoadPublisherOptions {
  readonly eventPlane: EventPlane;
  readonly subject: string;
  readonly instanceId: InstanceId;
  readonly logger: Logger;
  /** The ready LLM endpoints, read at every tick. */
  readonly endpoints: () => readonly LlmEndpoint[];
  /** Default DEFAULT_LOAD_INTERVAL_MS. */
  readonly intervalMs?: number;
  /** Default LOAD_HEARTBEAT_MS (never below intervalMs). */
  readonly heartbeatMs?: number;
  /** Epoch ms; default Date.now. */
  readonly now?: () => number;
}

export class LoadPublisher {
  private readonly last = new Map<string, { key: string; at: number }>();
  private timer: NodeJS.Timeout | undefined;
  private ticking: Promise<void> | undefined;
  private readonly intervalMs: number;
  private readonly heartbeatMs: number;
  private readonly now: () => number;

  constructor(private readonly options: LoadPublisherOptions) {
    this.intervalMs = options.intervalMs ?? DEFAULT_LOAD_INTERVAL_MS;
    if (!Number.isFinite(this.intervalMs) || this.intervalMs <= 0) throw new RangeError(`load interval must be > 0 ms, got ${this.intervalMs}`);
    this.heartbeatMs = Math.max(options.heartbeatMs ?? LOAD_HEARTBEAT_MS, this.intervalMs);
    this.now = options.now ?? Date.now;
  }

  /** Publish a first sample now, then every interval. */
  start(): void {
    if (this.timer !== undefined) return;
    void this.tick();
    this.timer = setInterval(() => void this.tick(), this.intervalMs);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    if (this.timer !== undefined) clearInterval(this.timer);
    this.timer = undefined;
    await this.ticking;
  }

  /** One sampling round (the timer calls it; tests may too). Rounds never overlap. */
  tick(): Promise<void> {
    if (this.ticking !== undefined) return this.ticking;
    this.ticking = this.round().finally(() => (this.ticking = undefined));
    return this.ticking;
  }

  private async round(): Promise<void> {
    const { eventPlane, subject, instanceId, logger } = this.options;
    const seen = new Set<string>();
    for (const llm of this.options.endpoints()) {
      const model = llm.card.name;
      seen.add(model);
      const m = llm.metrics();
      const sample = {
        numRunning: m.numRunning,
        numWaiting: m.numWaiting,
        kvActiveBlocks: m.kvActiveBlocks,
        kvTotalBlocks: m.kvTotalBlocks,
        kvUsage: m.kvUsage,
        prefixCacheQueries: m.prefixCacheQueries,
        prefixCacheHits: m.prefixCacheHits,
      };
      const key = JSON.stringify(sample);
      const now = this.now();
      const last = this.last.get(model);
      if (last !== undefined && last.key === key && now - last.at < this.heartbeatMs) continue;
      const load: WireLoad = { v: 1, instanceId, model, ts: now, ...sample };
      try {
        await eventPlane.publish(subject, load);
        this.last.set(model, { key, at: now });
      } catch (e) {
        logger.warn({ err: e, model }, 'failed to publish load');
      }
    }
    for (const model of [...this.last.keys()]) if (!seen.has(model)) this.last.delete(model);
  }
}
