/**
 * `LoadHandoffs`: the loader's `LoadHandoff` (backend.ts) for one version load. Kept values wait
 * for `loadModel`; `close` releases the ones it did not take, whatever became of the load.
 */
import type { LoadHandoff } from '../backend.js';

export class LoadHandoffs implements LoadHandoff {
  private readonly kept = new Map<string, { value: object; release: () => Promise<void> }>();
  private closed = false;

  keep(key: string, value: object, release: () => Promise<void>): void {
    // After close nothing would release it: release now (a backend that kept too late).
    if (this.closed) {
      void release().catch(() => undefined);
      return;
    }
    const previous = this.kept.get(key);
    this.kept.set(key, { value, release });
    if (previous !== undefined) void previous.release().catch(() => undefined);
  }

  take(key: string): object | undefined {
    const entry = this.kept.get(key);
    this.kept.delete(key);
    return entry?.value;
  }

  /** Release what was kept and not taken; later `keep`s release at once. Never rejects. */
  async close(): Promise<void> {
    this.closed = true;
    const left = [...this.kept.values()];
    this.kept.clear();
    await Promise.all(left.map((e) => e.release().catch(() => undefined)));
  }
}
