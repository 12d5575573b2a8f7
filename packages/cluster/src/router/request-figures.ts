/**
 * Per-model request figures for planners: what this router served in each period (about a second) →
 * `WireRequestFigures` on `requestFiguresSubject(ns, ROUTER_COMPONENT)`.
 *
 * `RequestFiguresRecorder` is written by the serving paths (`RoutedLlmEndpoint`: the OpenAI door and
 * the KServe `text_input` path alike) on the router's single event loop: a request's arrival and prompt
 * length, its first token (TTFT), each later token (ITL), its output length when it finishes (not when
 * aborted: a cut output says nothing about the lengths clients ask for). Histograms have fixed bounds
 * (figure-histogram.ts), so a period's memory is the same at 1 and at 10 000 requests a second.
 *
 * `RequestFiguresPublisher` takes the period's figures every `intervalMs` and publishes one message per
 * model that had any (arrivals, tokens, finishes, or held requests); a model without traffic gets no
 * message, so the figures never carry an empty mean. A failed publish is logged and the period dropped
 * (the next one is what a planner needs). Held requests are a gauge read at publish time from the
 * router's hold (`heldRequests(model)`), for every model the registry knows and every model that had
 * requests held at the previous publish.
 */
import type { Logger } from '@switchyard/common';
import type { EventPlane } from '@switchyard/runtime';
import { FigureHistogram, ITL_MS_BOUNDS, TOKEN_BOUNDS, TTFT_MS_BOUNDS } from '../figure-histogram.js';
import type { WireRequestFigures } from '../protocols.js';
import { PeriodicRounds } from '../periodic-rounds.js';

export const DEFAULT_REQUEST_FIGURES_INTERVAL_MS = 1000;

/** One model's figures over the current period. */
interface ModelFigures {
  requests: number;
  readonly isl: FigureHistogram;
  readonly osl: FigureHistogram;
  readonly ttftMs: FigureHistogram;
  readonly itlMs: FigureHistogram;
}

/** The period's figures of one model, as taken. */
export type TakenFigures = Omit<WireRequestFigures, 'v' | 'routerId' | 'model' | 'from' | 'to' | 'heldRequests'>;

export class RequestFiguresRecorder {
  private current = new Map<string, ModelFigures>();

  private of(model: string): ModelFigures {
    let f = this.current.get(model);
    if (f === undefined) {
      f = { requests: 0, isl: new FigureHistogram(TOKEN_BOUNDS), osl: new FigureHistogram(TOKEN_BOUNDS), ttftMs: new FigureHistogram(TTFT_MS_BOUNDS), itlMs: new FigureHistogram(ITL_MS_BOUNDS) };
      this.current.set(model, f);
    }
    return f;
  }

  /** A request with a `promptTokens`-token prompt arrived (once per request, not per migration attempt). */
  arrived(model: string, promptTokens: number): void {
    const f = this.of(model);
    f.requests++;
    f.isl.observe(promptTokens);
  }

  /** A request's first token reached the router `ms` after the request arrived. */
  firstToken(model: string, ms: number): void {
    this.of(model).ttftMs.observe(ms);
  }

  /** `count` further tokens arrived together, `gapMs` after the previous ones: `count` gaps of gapMs / count. */
  laterTokens(model: string, gapMs: number, count: number): void {
    if (count > 0) this.of(model).itlMs.observe(gapMs / count, count);
  }

  /** A request finished (stop or length) with `outputTokens` tokens. */
  finished(model: string, outputTokens: number): void {
    this.of(model).osl.observe(outputTokens);
  }

  /** The figures since the last call, per model with any; the next period starts empty. */
  take(): Map<string, TakenFigures> {
    const out = new Map<string, TakenFigures>();
    for (const [model, f] of this.current) {
      out.set(model, { requests: f.requests, isl: f.isl.toWire(), osl: f.osl.toWire(), ttftMs: f.ttftMs.toWire(), itlMs: f.itlMs.toWire() });
    }
    this.current = new Map();
    return out;
  }
}

export interface RequestFiguresPublisherOptions {
  readonly eventPlane: EventPlane;
  readonly subject: string;
  readonly routerId: string;
  readonly recorder: RequestFiguresRecorder;
  /** Models the router serves now (asked for held requests even without traffic). */
  readonly models: () => readonly string[];
  /** Requests held for `model` now because no worker serves it; absent: none are held. Must not throw. */
  readonly heldRequests?: (model: string) => number;
  readonly logger: Logger;
  /** Default DEFAULT_REQUEST_FIGURES_INTERVAL_MS. */
  readonly intervalMs?: number;
  /** Epoch ms; default Date.now. */
  readonly now?: () => number;
}

export class RequestFiguresPublisher {
  private readonly rounds: PeriodicRounds;
  private periodStart: number;
  /** Models with held requests at the last publish: asked again even when the registry forgot them. */
  private heldBefore = new Set<string>();
  private readonly intervalMs: number;
  private readonly now: () => number;

  constructor(private readonly options: RequestFiguresPublisherOptions) {
    this.intervalMs = options.intervalMs ?? DEFAULT_REQUEST_FIGURES_INTERVAL_MS;
    if (!Number.isFinite(this.intervalMs) || this.intervalMs <= 0) throw new RangeError(`request figures interval must be > 0 ms, got ${this.intervalMs}`);
    this.rounds = new PeriodicRounds(this.intervalMs, () => this.round());
    this.now = options.now ?? Date.now;
    this.periodStart = this.now();
  }

  start(): void {
    this.rounds.start();
  }

  /** Stops the timer and publishes the last (partial) period. */
  stop(): Promise<void> {
    return this.rounds.stop();
  }

  /** One period (the timer calls it; tests may too). Rounds never overlap: a call during a round returns that round. */
  tick(): Promise<void> {
    return this.rounds.tick();
  }

  private held(model: string): number {
    if (this.options.heldRequests === undefined) return 0;
    try {
      const n = this.options.heldRequests(model);
      return Number.isSafeInteger(n) && n > 0 ? n : 0;
    } catch (e) {
      this.options.logger.warn({ err: e, model }, 'router: heldRequests threw; reporting 0');
      return 0;
    }
  }

  private async round(): Promise<void> {
    const { eventPlane, subject, routerId, recorder, logger } = this.options;
    const from = this.periodStart;
    const to = Math.max(this.now(), from);
    this.periodStart = to;
    const taken = recorder.take();
    const models = new Set<string>([...taken.keys(), ...(this.options.heldRequests !== undefined ? [...this.options.models(), ...this.heldBefore] : [])]);
    const heldNow = new Set<string>();
    for (const model of [...models].sort()) {
      const heldRequests = this.held(model);
      if (heldRequests > 0) heldNow.add(model);
      const figures = taken.get(model);
      // a model with neither traffic nor held requests gets no message; one whose hold just emptied gets a last 0
      if (figures === undefined && heldRequests === 0 && !this.heldBefore.has(model)) continue;
      const f = figures ?? emptyFigures();
      const message: WireRequestFigures = { v: 1, routerId, model, from, to, ...f, heldRequests };
      try {
        await eventPlane.publish(subject, message);
      } catch (e) {
        logger.warn({ err: e, model, requests: f.requests }, 'router: failed to publish request figures; dropped');
      }
    }
    this.heldBefore = heldNow;
  }
}

/** Zero figures (a model that only has requests held). */
function emptyFigures(): TakenFigures {
  const h = (bounds: readonly number[]) => new FigureHistogram(bounds).toWire();
  return { requests: 0, isl: h(TOKEN_BOUNDS), osl: h(TOKEN_BOUNDS), ttftMs: h(TTFT_MS_BOUNDS), itlMs: h(ITL_MS_BOUNDS) };
}
