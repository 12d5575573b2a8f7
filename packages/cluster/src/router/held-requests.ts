/**
 * HeldRequests: scale to zero on the router. A request for a model the cluster knows but that no
 * worker serves right now (its pool is at zero replicas while the planner starts one) is held until
 * a worker for it appears in discovery, instead of failing at once.
 *
 * Which models are held for ("known"): those named in `models` (the router's `--model` flags: a
 * router started while the pool is at zero, or restarted, knows them from the start) and every model
 * that had a worker at any time since this router started. A request for any other model is not held:
 * the caller's lookup answers it at once (404 unknown model, as before), so a typo never waits.
 *
 * What it waits for: an instance of the model that takes whole requests (aggregated or decode: a
 * model served only by prefill workers is held too) whose card the registry accepted (an LLM's
 * tokenizer built). The registry's `instance-added` wakes the waiters of that model, in arrival order.
 *
 * Bounds: `timeoutMs` per request (0: nothing is held; a known model with no worker fails at once),
 * after which the request fails `unavailable` (HTTP 503 / gRPC UNAVAILABLE) with the message a
 * request that finds no worker always gets; at most `maxHeld` requests held at once across all
 * models, a request beyond that fails `unavailable` at once; a request whose signal aborts (the client
 * went away) leaves at once, rejected `cancelled`, freeing its slot. `close()` fails every held
 * request `unavailable` (the router is stopping).
 *
 * Concurrency: everything runs on the event loop; the registry's listener is synchronous.
 */
import { type CancelSignal, type Logger, cancelled, silentLogger, unavailable } from '@switchyard/common';
import { type ModelEntry, type ModelRegistry, onlyPrefillWorkers, takesWholeRequests } from './model-registry.js';

/** Default `--queue-timeout-secs`: 0, requests for a model without a worker fail at once. */
export const DEFAULT_QUEUE_TIMEOUT_MS = 0;
/** Default `--max-held-requests`: requests held at once, all models together. */
export const DEFAULT_MAX_HELD_REQUESTS = 1024;

export interface HeldRequestsOptions {
  readonly registry: ModelRegistry;
  /** How long one request may wait for a worker; 0 = never wait. */
  readonly timeoutMs: number;
  /** Requests held at once (all models); beyond that a request fails at once. */
  readonly maxHeld: number;
  /** Models known from configuration, before any worker of theirs was seen. */
  readonly models?: readonly string[];
  readonly logger?: Logger;
}

interface Waiter {
  readonly resolve: () => void;
  readonly reject: (e: Error) => void;
}

export class HeldRequests {
  private readonly known = new Set<string>();
  private readonly waiting = new Map<string, Set<Waiter>>();
  private total = 0;
  private closed = false;
  private readonly logger: Logger;
  private readonly unsubscribe: () => void;

  constructor(private readonly options: HeldRequestsOptions) {
    this.logger = options.logger ?? silentLogger;
    for (const m of options.models ?? []) this.known.add(m);
    for (const e of options.registry.list()) this.known.add(e.name);
    this.unsubscribe = options.registry.onChange((change) => {
      if (change.type === 'instance-added') {
        this.known.add(change.model);
        this.wake(change.model);
      } else if (change.type === 'synced') {
        for (const model of [...this.waiting.keys()]) this.wake(model);
      }
    });
  }

  /** Whether requests for `model` are held when it has no worker (see the file comment). */
  isKnown(model: string): boolean {
    return this.known.has(model);
  }

  /** Requests waiting for a worker of `model` now. */
  held(model: string): number {
    return this.waiting.get(model)?.size ?? 0;
  }

  /** Requests waiting now per known model (0 for a known model nobody waits for), sorted by name. */
  heldByModel(): [string, number][] {
    return [...this.known].sort().map((m) => [m, this.held(m)]);
  }

  /**
   * `undefined` (synchronously) when there is nothing to wait for: `model` has a worker that takes
   * whole requests, or is not known (the caller's own lookup then answers). Otherwise a promise that
   * resolves once such a worker appears, or rejects `unavailable` when none appeared within the
   * timeout (0: at once), when `maxHeld` requests are held already, or on `close()`; `cancelled`
   * when `signal` aborts first.
   */
  untilServable(model: string, signal?: CancelSignal): Promise<void> | undefined {
    const entry = this.options.registry.model(model);
    if (servable(entry) || !this.known.has(model)) return undefined;
    const timeoutMs = this.options.timeoutMs;
    if (this.closed) return Promise.reject(unavailable('Server is stopping'));
    if (timeoutMs <= 0) return Promise.reject(noWorker(model, entry, 0));
    if (signal?.aborted === true) return Promise.reject(cancelled('Request was cancelled'));
    if (this.total >= this.options.maxHeld) {
      return Promise.reject(
        unavailable(`no worker available for model '${model}', and ${this.total} requests are already waiting for workers to start (--max-held-requests ${this.options.maxHeld})`),
      );
    }
    return new Promise<void>((resolve, reject) => {
      let set = this.waiting.get(model);
      if (set === undefined) this.waiting.set(model, (set = new Set()));
      const leave = (): void => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        if (set!.delete(waiter)) this.total--;
        if (set!.size === 0 && this.waiting.get(model) === set) this.waiting.delete(model);
      };
      const waiter: Waiter = {
        resolve: () => {
          leave();
          resolve();
        },
        reject: (e) => {
          leave();
          reject(e);
        },
      };
      const onAbort = (): void => waiter.reject(cancelled('Request was cancelled'));
      const timer = setTimeout(() => {
        this.logger.info({ model, timeoutMs }, 'router: no worker started within the queue timeout; failing a held request');
        waiter.reject(noWorker(model, this.options.registry.model(model), timeoutMs));
      }, timeoutMs);
      signal?.addEventListener('abort', onAbort, { once: true });
      set.add(waiter);
      this.total++;
      if (set.size === 1) this.logger.info({ model, timeoutMs }, 'router: holding requests until a worker for the model starts');
    });
  }

  /** Fails every held request `unavailable`; later calls fail at once. Idempotent. */
  close(): void {
    this.closed = true;
    this.unsubscribe();
    for (const set of [...this.waiting.values()]) for (const w of [...set]) w.reject(unavailable('Server is stopping'));
  }

  private wake(model: string): void {
    const set = this.waiting.get(model);
    if (set === undefined || !servable(this.options.registry.model(model))) return;
    this.logger.info({ model, held: set.size }, 'router: a worker for the model started; releasing held requests');
    for (const w of [...set]) w.resolve();
  }
}

/** Whether `entry` has an instance that takes whole requests. */
export function servable(entry: ModelEntry | undefined): boolean {
  if (entry === undefined) return false;
  for (const id of entry.instances.keys()) if (takesWholeRequests(entry, id)) return true;
  return false;
}

/** The failure of a request for a known model with no worker (the same words as any request that finds none). */
function noWorker(model: string, entry: ModelEntry | undefined, waitedMs: number): Error {
  if (entry !== undefined) {
    const e = onlyPrefillWorkers(entry);
    return waitedMs > 0 ? unavailable(`${e.message} (none started within ${waitedMs / 1000} s)`) : e;
  }
  return unavailable(`no worker available for model '${model}'${waitedMs > 0 ? ` (none started within ${waitedMs / 1000} s)` : ''}`);
}
