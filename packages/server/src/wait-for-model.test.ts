import { EventEmitter } from 'node:events';
import { describe, expect, it } from 'vitest';
import { type CancelSignal, cancelled } from '@switchyard/common';
import type { InferenceEngine } from '@switchyard/engine';
import { waitForModel } from './wait-for-model.js';

/** An engine that holds every request until `release`, or rejects `cancelled` when its signal aborts. */
function holdingEngine() {
  const signals: CancelSignal[] = [];
  let release = (): void => undefined;
  const engine = {
    waitForModel: (_name: string, signal?: CancelSignal) =>
      new Promise<void>((resolve, reject) => {
        signals.push(signal!);
        release = resolve;
        signal?.addEventListener('abort', () => reject(cancelled('Request was cancelled')));
      }),
  } as unknown as InferenceEngine;
  return { engine, signals, release: () => release() };
}

describe('waitForModel', () => {
  it('returns at once for an engine without it, or one with nothing to wait for', async () => {
    await waitForModel({} as InferenceEngine, 'm', new EventEmitter(), 'close');
    await waitForModel({ waitForModel: () => undefined } as unknown as InferenceEngine, 'm', new EventEmitter(), 'close');
  });

  it('waits while the engine holds the request; the client going away stops the wait', async () => {
    const held = holdingEngine();
    const client = new EventEmitter();
    const waiting = waitForModel(held.engine, 'm', client, 'close');
    held.release();
    await waiting;
    expect(client.listenerCount('close')).toBe(0);

    const gone = holdingEngine();
    const call = new EventEmitter();
    const stopped = waitForModel(gone.engine, 'm', call, 'cancelled');
    call.emit('cancelled');
    await expect(stopped).rejects.toMatchObject({ code: 'cancelled' });
    expect(gone.signals[0]!.aborted).toBe(true);
    expect(call.listenerCount('cancelled')).toBe(0);
  });
});
