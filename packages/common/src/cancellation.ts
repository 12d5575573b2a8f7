/**
 * A request's cancellation as the request paths read it. `AbortSignal` satisfies `CancelSignal`, so
 * any caller may pass one; `Cancellation` is the cheap one a front door makes per request. Node's
 * `AbortController` goes through `EventTarget`: creating one and adding and removing one listener
 * costs ~8 µs of event-loop CPU here (and weak references for the collector), ~5% of what a whole
 * small inference request costs the worker; this costs well under 1 µs.
 */
export interface CancelSignal {
  readonly aborted: boolean;
  readonly reason?: unknown;
  /** `once` is accepted for `AbortSignal`'s sake: an abort happens once, so every listener runs once. */
  addEventListener(type: 'abort', listener: () => void, options?: { once?: boolean }): void;
  removeEventListener(type: 'abort', listener: () => void): void;
}

/**
 * Both ends of a cancellation: the owner calls `abort`, the request paths get `signal` (itself).
 * Like `AbortSignal`: a listener added twice runs once, listeners run in the order added, a listener
 * added after the abort never runs (check `aborted` first), and one that throws does not keep the
 * others from running (the first error is rethrown once all have run).
 */
export class Cancellation implements CancelSignal {
  aborted = false;
  reason: unknown = undefined;
  private listeners: (() => void)[] | undefined;

  get signal(): CancelSignal {
    return this;
  }

  addEventListener(_type: 'abort', listener: () => void): void {
    if (this.aborted) return;
    const list = (this.listeners ??= []);
    if (!list.includes(listener)) list.push(listener);
  }

  removeEventListener(_type: 'abort', listener: () => void): void {
    const list = this.listeners;
    if (list === undefined) return;
    const i = list.indexOf(listener);
    if (i >= 0) list.splice(i, 1);
  }

  abort(reason?: unknown): void {
    if (this.aborted) return;
    this.aborted = true;
    this.reason = reason ?? new DOMException('This operation was aborted', 'AbortError');
    const list = this.listeners;
    this.listeners = undefined;
    if (list === undefined) return;
    let failure: { error: unknown } | undefined;
    for (const listener of list) {
      try {
        listener();
      } catch (error) {
        failure ??= { error };
      }
    }
    if (failure !== undefined) throw failure.error;
  }
}
