/**
 * Model loads that take long, shown on a terminal: the engine logs `loading model version` when a
 * load starts and `model version loaded` when it ends, and a large model (a big ONNX file, an LLM's
 * session, digest and KV cache, a long `model_warmup`) can spend minutes in between without a line.
 * `LoadProgress` follows the engine's load steps (`EngineOptions.onLoadStep`) and, every
 * `intervalMs` a load is still running, logs `still loading model version` with the model, the
 * version, the step it is in and the seconds so far. main.ts installs it only with human log lines:
 * JSON log lines are the same with or without it.
 */
import type { Logger } from '@switchyard/common';
import type { ModelLoadStep } from '@switchyard/engine';

/** How often a running load is reported. */
export const LOAD_PROGRESS_INTERVAL_MS = 10_000;

/** What each step means, as the line says it. */
const STEP_TEXT: Record<Exclude<ModelLoadStep['step'], 'loaded' | 'failed'>, string> = {
  loading: 'reading the model and building its backend',
  instances: 'creating instances',
  warmup: 'running model_warmup',
};

interface Running {
  step: keyof typeof STEP_TEXT;
  readonly startedAt: number;
  readonly timer: ReturnType<typeof setInterval>;
}

export class LoadProgress {
  /** Loads in progress, by `model@version`. */
  private readonly running = new Map<string, Running>();

  constructor(
    private readonly logger: Logger,
    private readonly intervalMs = LOAD_PROGRESS_INTERVAL_MS,
    private readonly now: () => number = () => performance.now(),
  ) {}

  /** The engine's `onLoadStep`. */
  readonly onLoadStep = (s: ModelLoadStep): void => {
    const key = `${s.model}@${s.version}`;
    const current = this.running.get(key);
    if (s.step === 'loaded' || s.step === 'failed') {
      if (current !== undefined) clearInterval(current.timer);
      this.running.delete(key);
      return;
    }
    if (current !== undefined && s.step !== 'loading') {
      current.step = s.step;
      return;
    }
    if (current !== undefined) clearInterval(current.timer); // loading again (a retry)
    const startedAt = this.now();
    const timer = setInterval(() => {
      const r = this.running.get(key);
      if (r === undefined) return;
      const elapsedSecs = Math.round((this.now() - r.startedAt) / 1000);
      this.logger.info({ model: s.model, version: s.version, step: r.step, elapsedSecs }, `still loading model version: ${STEP_TEXT[r.step]}`);
    }, this.intervalMs);
    timer.unref(); // a load in progress does not keep the process alive
    this.running.set(key, { step: s.step, startedAt, timer });
  };

  /** Stop every report (the worker is stopping). */
  close(): void {
    for (const r of this.running.values()) clearInterval(r.timer);
    this.running.clear();
  }
}
