/**
 * A front thread's link to the main thread (the worker's parent port): the state it last got
 * (front-state.ts), and its requests on the main thread's engine — sent in batches (`Outbox`),
 * answered by id, cancelled when their client goes away. Shared by the thread's HTTP and gRPC doors.
 */
import type { MessagePort } from 'node:worker_threads';
import type { SwitchyardError } from '@switchyard/common';
import type { InferRequest, InferResponse } from '@switchyard/kserve';
import { rebuildError } from '../codec-thread.js';
import { EMPTY_FRONT_STATE, type FrontState } from './front-state.js';
import { type Ask, Outbox, type ToMain, type ToThread } from './front-messages.js';

/** The engine's answer to one request. */
export type EngineAnswer = { response: InferResponse } | { error: SwitchyardError };

/** One request on the main thread's engine. */
export interface RemoteInfer {
  /** The answer; undefined once `cancel` was called first (the main thread answers no cancelled request). */
  readonly answer: Promise<EngineAnswer | undefined>;
  /** The client went away: cancel the engine's request and settle `answer` with undefined. */
  cancel(): void;
}

export class MainLink {
  #state: FrontState = EMPTY_FRONT_STATE;
  #nextId = 1;
  readonly #waiting = new Map<number, (answer: EngineAnswer | undefined) => void>();
  readonly #port: MessagePort;
  readonly #asks: Outbox<Ask>;

  /** `onClose`: the main thread asks the thread to stop accepting, finish and exit. */
  constructor(port: MessagePort, onClose: () => void) {
    this.#port = port;
    this.#asks = new Outbox<Ask>((batch, transfer) => this.post({ t: 'asks', batch }, transfer));
    port.on('message', (m: ToThread) => {
      switch (m.t) {
        case 'state':
          this.#state = m.state;
          return;
        case 'answers':
          for (const a of m.batch) {
            const resolve = this.#waiting.get(a.id);
            if (resolve === undefined) continue;
            this.#waiting.delete(a.id);
            resolve(a.t === 'result' ? { response: a.response } : { error: rebuildError(a) });
          }
          return;
        case 'close':
          onClose();
          return;
      }
    });
  }

  get state(): FrontState {
    return this.#state;
  }

  post(m: ToMain, transfer?: ArrayBuffer[]): void {
    this.#port.postMessage(m, transfer);
  }

  /** Run `request` (its buffers in `transfer`: `postableRequest`) on the main thread's engine. */
  infer(request: InferRequest, transfer: ArrayBuffer[]): RemoteInfer {
    const id = this.#nextId++;
    let settle: (answer: EngineAnswer | undefined) => void = () => undefined;
    const answer = new Promise<EngineAnswer | undefined>((resolve) => (settle = resolve));
    this.#waiting.set(id, settle);
    this.#asks.add({ t: 'infer', id, request }, transfer);
    return {
      answer,
      cancel: () => {
        if (!this.#waiting.delete(id)) return;
        this.#asks.add({ t: 'cancel', id });
        settle(undefined);
      },
    };
  }

  close(): void {
    this.#port.close();
  }
}
