import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { Logger } from '@switchyard/common';
import { LoadProgress } from './load-progress.js';

/** A logger that keeps its info lines. */
function recording(): { logger: Logger; lines: Array<{ fields: Record<string, unknown>; msg: string }> } {
  const lines: Array<{ fields: Record<string, unknown>; msg: string }> = [];
  const ignore = (): void => {};
  const logger = {
    info: (fields: Record<string, unknown>, msg: string) => lines.push({ fields, msg }),
    warn: ignore,
    error: ignore,
    debug: ignore,
    trace: ignore,
    fatal: ignore,
    child: () => logger,
  } as unknown as Logger;
  return { logger, lines };
}

describe('LoadProgress', () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());

  it('says every interval that a load is still running, with its step and the seconds so far, until it ends', () => {
    const { logger, lines } = recording();
    const p = new LoadProgress(logger, 10_000, () => Date.now());
    p.onLoadStep({ model: 'big', version: 1, step: 'loading' });
    vi.advanceTimersByTime(9_999);
    expect(lines).toEqual([]);
    vi.advanceTimersByTime(1);
    expect(lines).toEqual([{ fields: { model: 'big', version: 1, step: 'loading', elapsedSecs: 10 }, msg: 'still loading model version: reading the model and building its backend' }]);
    p.onLoadStep({ model: 'big', version: 1, step: 'warmup' });
    vi.advanceTimersByTime(10_000);
    expect(lines[1]).toEqual({ fields: { model: 'big', version: 1, step: 'warmup', elapsedSecs: 20 }, msg: 'still loading model version: running model_warmup' });
    p.onLoadStep({ model: 'big', version: 1, step: 'loaded' });
    vi.advanceTimersByTime(60_000);
    expect(lines).toHaveLength(2);
  });

  it('keeps loads apart, says nothing of a quick one, and stops every report on close', () => {
    const { logger, lines } = recording();
    const p = new LoadProgress(logger, 10_000, () => Date.now());
    p.onLoadStep({ model: 'quick', version: 1, step: 'loading' });
    p.onLoadStep({ model: 'slow', version: 2, step: 'loading' });
    vi.advanceTimersByTime(3_000);
    p.onLoadStep({ model: 'quick', version: 1, step: 'failed' });
    vi.advanceTimersByTime(7_000);
    expect(lines.map((l) => l.fields['model'])).toEqual(['slow']);
    p.close();
    vi.advanceTimersByTime(60_000);
    expect(lines).toHaveLength(1);
  });
});
