import type { CancelSignal } from './cancellation.js';

/**
 * Waits `ms`, or less when `signal` aborts; resolves either way and leaves no timer or listener
 * behind. For retry loops that sleep between attempts and must stop at once when closed.
 */
export function pauseUnlessAborted(ms: number, signal: CancelSignal): Promise<void> {
  if (signal.aborted) return Promise.resolve();
  return new Promise<void>((resolve) => {
    const t = setTimeout(done, ms);
    function done(): void {
      clearTimeout(t);
      signal.removeEventListener('abort', done);
      resolve();
    }
    signal.addEventListener('abort', done, { once: true });
  });
}
