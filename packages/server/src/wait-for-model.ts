/**
 * The front doors' one call into `InferenceEngine.waitForModel` (a router holding requests for a
 * model scaled to zero): made before the door's first lookup of the model, stopped when the client
 * goes away (`gone`: an HTTP response's `close`, a gRPC call's `cancelled`). Engines without
 * `waitForModel` (a worker) cost nothing; a router's answers `undefined` at once for a model with a
 * worker, so the signal is a `Cancellation` (a few ns), not an AbortController (~2 µs of CPU to make
 * one and its signal, per request).
 */
import type { EventEmitter } from 'node:events';
import { Cancellation } from '@switchyard/common';
import type { InferenceEngine } from '@switchyard/engine';

export async function waitForModel(engine: InferenceEngine, model: string, client: EventEmitter, gone: 'close' | 'cancelled'): Promise<void> {
  if (engine.waitForModel === undefined) return;
  const abort = new Cancellation();
  const wait = engine.waitForModel(model, abort.signal);
  if (wait === undefined) return;
  const onGone = (): void => abort.abort();
  client.on(gone, onGone);
  try {
    await wait;
  } finally {
    client.off(gone, onGone);
  }
}
