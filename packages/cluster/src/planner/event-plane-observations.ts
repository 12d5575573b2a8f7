/**
 * `EventPlaneObservationSource`: the planner's `ObservationSource` on the cluster's event plane, for
 * one namespace and model. It follows:
 * - discovery: the model's cards (`modelsPrefix(ns)`), for each instance's role (its pool) and the
 *   pools' replica counts as discovery sees them;
 * - the workers' load samples (`loadSubject`) and forward-pass batches (`forwardPassSubject`);
 * - the routers' request figures (`requestFiguresSubject`, every router of the namespace);
 * and hands each decoded message to an `ObservationAccumulator` (the pure half), whose `collect` gives
 * the interval's `Observations`. Their `replicas` are discovery's count (instances with a card, draining
 * ones gone); the planner app may replace them with its connector's, which also counts replicas that
 * are still starting.
 *
 * Subscriptions are durables named after `plannerId` (one per kind) that start at new messages: a
 * planner wants the figures from now on, not the retained hour (so an idle worker's first load
 * sample arrives with its next heartbeat, within LOAD_HEARTBEAT_MS). A subscription that fails (JetStream
 * not there yet) is started again every second; a message that does not decode (garbage, hostile, or
 * from a newer version) is acked, dropped and counted (`counters().invalid`): it never ends a
 * subscription. Decoding bounds every message (wire-codec.ts), the accumulator bounds what is kept.
 *
 * Lifecycle: `start` resolves once discovery has given its first snapshot and every subscription's
 * position is fixed (figures published from then on are seen), or after `readyTimeoutMs` with a
 * warning (the source keeps trying). `close` ends the watch and the subscriptions; the roles stay
 * the caller's.
 */
import { randomUUID } from 'node:crypto';
import { type Logger, pauseUnlessAborted, silentLogger } from '@switchyard/common';
import type { ObservationSource, Observations } from '@switchyard/planner';
import {
  type Discovery,
  type EventMessage,
  type EventPlane,
  componentName,
  decodeModelCard,
  forwardPassSubject,
  loadSubject,
  modelsPrefix,
  namespace as toNamespace,
  parseKey,
  requestFiguresSubject,
} from '@switchyard/runtime';
import { ROUTER_COMPONENT, WORKER_COMPONENT } from '../protocols.js';
import { decodeLlmCardMetadata, decodeWireForwardPass, decodeWireLoad, decodeWireRequestFigures, roleOf } from '../wire-codec.js';
import { type ObservationAccumulatorOptions, type ObservationCounters, ObservationAccumulator } from './observation-accumulator.js';

/** A failed subscription or watch is started again after this long. */
const RETRY_MS = 1000;
export const DEFAULT_OBSERVATIONS_READY_TIMEOUT_MS = 10_000;

export interface EventPlaneObservationSourceOptions extends Omit<ObservationAccumulatorOptions, 'model' | 'start'> {
  readonly eventPlane: EventPlane;
  readonly discovery: Discovery;
  readonly namespace: string;
  readonly model: string;
  /** Names the durables (`planner-<id>-load`, ...; lower-cased, other characters than a-z 0-9 _ - become _, at most 36 kept); default a random UUID. Two sources must not share one (a planner of two models: one id per model). */
  readonly plannerId?: string;
  readonly logger?: Logger;
  /** Epoch ms; default Date.now. */
  readonly now?: () => number;
  /** How long `start` waits for discovery and the subscriptions; default 10 s. */
  readonly readyTimeoutMs?: number;
}

export interface EventPlaneObservationCounters extends ObservationCounters {
  /** Messages (or cards of the model) that did not decode: dropped. */
  readonly invalid: number;
  /** Subscriptions and watches that failed and were started again. */
  readonly failures: number;
}

type Kind = 'load' | 'forward_pass' | 'request_figures';

export class EventPlaneObservationSource implements ObservationSource {
  private readonly acc: ObservationAccumulator;
  private readonly abort = new AbortController();
  private readonly now: () => number;
  private readonly logger: Logger;
  private readonly plannerId: string;
  private invalid = 0;
  private failures = 0;
  private loops: Promise<void>[] = [];

  private constructor(private readonly options: EventPlaneObservationSourceOptions) {
    this.now = options.now ?? Date.now;
    this.logger = options.logger ?? silentLogger;
    this.plannerId = options.plannerId ?? randomUUID();
    this.acc = new ObservationAccumulator({ ...options, model: options.model, start: this.now() });
  }

  static async start(options: EventPlaneObservationSourceOptions): Promise<EventPlaneObservationSource> {
    const source = new EventPlaneObservationSource(options);
    await source.run(options.readyTimeoutMs ?? DEFAULT_OBSERVATIONS_READY_TIMEOUT_MS);
    return source;
  }

  /** See ObservationSource: the figures since the previous call. */
  collect(): Observations {
    return this.acc.collect(this.now());
  }

  counters(): EventPlaneObservationCounters {
    return { ...this.acc.counters(), invalid: this.invalid, failures: this.failures };
  }

  async close(): Promise<void> {
    this.abort.abort();
    await Promise.all(this.loops);
  }

  private async run(readyTimeoutMs: number): Promise<void> {
    const ns = toNamespace(this.options.namespace);
    const workers = componentName(WORKER_COMPONENT);
    const ready: Promise<void>[] = [];
    const readiness = (): { promise: Promise<void>; resolve: () => void } => {
      let resolve!: () => void;
      const promise = new Promise<void>((r) => (resolve = r));
      ready.push(promise);
      return { promise, resolve };
    };
    const watched = readiness();
    this.loops.push(this.keep('discovery watch', () => this.watch(modelsPrefix(ns), watched.resolve)));
    const subjects: [Kind, string][] = [
      ['load', loadSubject(ns, workers)],
      ['forward_pass', forwardPassSubject(ns, workers)],
      ['request_figures', requestFiguresSubject(ns, componentName(ROUTER_COMPONENT))],
    ];
    for (const [kind, subject] of subjects) {
      const r = readiness();
      this.loops.push(this.keep(`${kind} subscription`, () => this.consume(kind, subject, r.resolve)));
    }
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<boolean>((resolve) => {
      timer = setTimeout(() => resolve(true), readyTimeoutMs);
      timer.unref();
    });
    const late = await Promise.race([Promise.all(ready).then(() => false), timedOut]);
    clearTimeout(timer);
    if (late) this.logger.warn({ model: this.options.model, readyTimeoutMs }, 'planner observations: discovery or the event plane not ready yet; collecting what arrives');
  }

  /** Runs `loop` until closed; one that fails or ends is started again after RETRY_MS. */
  private async keep(what: string, loop: () => Promise<void>): Promise<void> {
    const signal = this.abort.signal;
    for (let failures = 0; !signal.aborted; ) {
      try {
        await loop();
        if (signal.aborted) return;
        throw new Error(`the ${what} ended`);
      } catch (err) {
        if (signal.aborted) return;
        if (failures++ === 0) this.logger.error({ err }, `planner observations: ${what} failed; retrying every ${RETRY_MS} ms`);
        this.failures++;
        await pauseUnlessAborted(RETRY_MS, signal);
      }
    }
  }

  private async watch(prefix: string, onSynced: () => void): Promise<void> {
    for await (const ev of this.options.discovery.watch(prefix, this.abort.signal)) {
      if (ev.type === 'synced') {
        onSynced();
        continue;
      }
      const key = parseKey(ev.key);
      if (key === null || key.kind !== 'model' || key.model !== this.options.model) continue;
      if (ev.type === 'delete') {
        this.acc.removeInstance(key.instanceId, this.now(), ev.resync === true);
        continue;
      }
      try {
        const card = decodeModelCard(ev.value);
        // tensor models have no pools: only LLM cards place instances
        if (card.kind !== 'llm') continue;
        this.acc.setInstance(key.instanceId, roleOf(decodeLlmCardMetadata(card.metadata)));
      } catch (err) {
        this.invalid++;
        this.logger.warn({ err, key: ev.key }, 'planner observations: ignoring an invalid model card');
      }
    }
  }

  private async consume(kind: Kind, subject: string, onReady: () => void): Promise<void> {
    // a NAME_PATTERN name: 8 + 36 + 1 + 15 characters at most
    const durable = `planner-${this.plannerId.toLowerCase().replace(/[^a-z0-9_-]/g, '_').slice(0, 36)}-${kind}`;
    for await (const msg of this.options.eventPlane.subscribe({ subject, durable, startAt: 'new', onReady, signal: this.abort.signal })) {
      this.apply(kind, msg);
      msg.ack();
    }
  }

  private apply(kind: Kind, msg: EventMessage): void {
    try {
      if (kind === 'load') this.acc.addLoad(decodeWireLoad(msg.payload), this.now());
      else if (kind === 'forward_pass') this.acc.addForwardPass(decodeWireForwardPass(msg.payload));
      else this.acc.addRequestFigures(decodeWireRequestFigures(msg.payload));
    } catch (err) {
      this.invalid++;
      // one line per bad message would let a hostile publisher flood the log too: every 100th
      if (this.invalid % 100 === 1) this.logger.warn({ err, kind, seq: msg.seq, invalid: this.invalid }, 'planner observations: dropping undecodable messages');
    }
  }
}
