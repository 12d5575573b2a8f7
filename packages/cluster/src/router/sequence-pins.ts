/**
 * Sequence affinity on a router. Triton's sequence batcher keeps a sequence (correlation id, START …
 * END) in one slot of one instance, with its state; a worker refuses a request of a sequence it does
 * not know ("must specify the START flag"). So every request of a sequence must reach the instance
 * that got its START.
 *
 * - `rendezvousInstance(key, candidates)`: highest-random-weight hashing of the sequence over the
 *   instances serving the model (and version). Pure: two router replicas with the same discovery
 *   view choose the same instance, so a replica that never saw the START still finds the sequence
 *   while membership is unchanged. Adding an instance moves only the sequences it wins.
 * - `SequencePins`: this router's memory of where each open sequence went (set at START, refreshed
 *   by every request, dropped at END, expired after the model's idle time plus
 *   SEQUENCE_PIN_MARGIN_MS — the worker has forgotten the sequence by then). A pin beats the hash:
 *   a sequence stays where it started even when an instance joins mid-sequence.
 *
 * Keys are `<model>\0<kind-qualified correlation id>` (engine `sequenceOf().key`: 5 and "5" differ),
 * as correlation ids are per model.
 */
import { createHash } from 'node:crypto';
import type { InstanceId } from '@switchyard/runtime';

/** Added to the model's sequence idle time before a pin expires (the worker reaps on its own clock). */
export const SEQUENCE_PIN_MARGIN_MS = 1000;
/** Expired pins are swept at most this often (on `pin`), so ids that never END do not pile up. */
export const SEQUENCE_PIN_SWEEP_MS = 1000;

export function sequencePinKey(model: string, sequenceKey: string): string {
  return `${model}\0${sequenceKey}`;
}

/** The candidate with the highest hash of (key, instance); undefined when there is none. */
export function rendezvousInstance(key: string, candidates: Iterable<InstanceId>): InstanceId | undefined {
  let best: InstanceId | undefined;
  let bestScore = -1n;
  for (const id of candidates) {
    const score = createHash('sha256').update(key).update('\0').update(id).digest().readBigUInt64BE(0);
    if (score > bestScore || (score === bestScore && best !== undefined && id < best)) {
      best = id;
      bestScore = score;
    }
  }
  return best;
}

interface Pin {
  instance: InstanceId;
  expiresAt: number;
}

/** Router-local sequence → instance map. Not shared between replicas (the rendezvous hash is). */
export class SequencePins {
  private readonly pins = new Map<string, Pin>();
  private lastSweep: number;

  /** `now`: epoch ms (default Date.now; tests pass a fake clock). */
  constructor(private readonly now: () => number = Date.now) {
    this.lastSweep = now();
  }

  /** The instance a live pin names, or undefined (never pinned, ended, or expired). */
  get(key: string): InstanceId | undefined {
    const pin = this.pins.get(key);
    if (pin === undefined) return undefined;
    if (pin.expiresAt <= this.now()) {
      this.pins.delete(key);
      return undefined;
    }
    return pin.instance;
  }

  /** Pin (or refresh) `key` to `instance` for `idleMs` + SEQUENCE_PIN_MARGIN_MS from now. */
  pin(key: string, instance: InstanceId, idleMs: number): void {
    const now = this.now();
    this.pins.set(key, { instance, expiresAt: now + idleMs + SEQUENCE_PIN_MARGIN_MS });
    if (now - this.lastSweep >= SEQUENCE_PIN_SWEEP_MS) {
      this.lastSweep = now;
      for (const [k, p] of this.pins) if (p.expiresAt <= now) this.pins.delete(k);
    }
  }

  /** The sequence ended (END sent) or is lost. */
  drop(key: string): void {
    this.pins.delete(key);
  }

  /** Pins held, expired ones not yet swept included. */
  get size(): number {
    return this.pins.size;
  }
}
