/**
 * The consumer-side view of one watch, shared by every Discovery implementation: what has been
 * yielded so far, and the diff that a resync after reconnect must yield so the consumer ends up equal
 * to the store without seeing a gap (Dynamo's watcher Resync).
 */
import type { WatchEvent } from './discovery.js';

export class WatchState {
  /** key → JSON text of the value last yielded for it. */
  private readonly known = new Map<string, string>();

  /** Record a live event; returns it, or null when it changes nothing the consumer saw (a duplicate). */
  apply(event: WatchEvent): WatchEvent | null {
    if (event.type === 'put') {
      const text = JSON.stringify(event.value);
      if (this.known.get(event.key) === text) return null;
      this.known.set(event.key, text);
      return event;
    }
    if (event.type === 'delete') {
      if (!this.known.delete(event.key)) return null;
      return event;
    }
    return event;
  }

  /**
   * Called with a fresh snapshot (initial or after reconnect): the events that take the consumer from
   * what it saw to the snapshot, deletes first (sorted by key, marked `resync`), then puts (sorted),
   * then `synced`.
   */
  resync(snapshot: ReadonlyMap<string, unknown>, revision: number): WatchEvent[] {
    const out: WatchEvent[] = [];
    for (const key of [...this.known.keys()].sort()) {
      if (!snapshot.has(key)) {
        this.known.delete(key);
        out.push({ type: 'delete', key, revision, resync: true });
      }
    }
    for (const key of [...snapshot.keys()].sort()) {
      const value = snapshot.get(key);
      const text = JSON.stringify(value);
      if (this.known.get(key) !== text) {
        this.known.set(key, text);
        out.push({ type: 'put', key, value, revision });
      }
    }
    out.push({ type: 'synced', revision });
    return out;
  }
}
