/**
 * A front thread's link to the main thread (the worker's parent port): the state it last got
 * (front-state.ts), its requests on the main thread's engine — sent in batches (`Outbox`),
 * answered by id, cancelled when their client goes away — and its gRPC streams, whose sessions run
 * on the main thread (thread-stream.ts). Shared by the thread's HTTP and gRPC doors.
 */
import type { MessagePort } from 'node:worker_threads';
import type { SwitchyardError } from '@switchyard/common';
import type { InferRequest, InferResponse } from '@switchyard/kserve';
import { rebuildError } from '../codec-thread.js';
import { EMPTY_FRONT_STATE, type FrontState } from './front-state.js';
import { type Ask, type MetadataEntry, Outbox, type ToMain, type ToThread } from './front-messages.js';
import { InFlight } from '../grpc/in-flight.js';

/** The engine's answer to one request. */
export type EngineAnswer = { response: InferResponse } | { error: SwitchyardError };

/** One request on the main thread's engine. */
export interface RemoteInfer {
  /** The answer; undefined once `cancel` was called first (the main thread answers no cancelled request). */
  readonly answer: Promise<EngineAnswer | undefined>;
  /** The client went away: cancel the engine's request and settle `answer` with undefined. */
  cancel(): void;
}

/** What the main thread says to one of this thread's streams. */
export interface StreamListener {
  /** A response message to send. */
  write(bytes: Uint8Array): void;
  /** The main thread's session took `n` more of the messages sent to it. */
  took(n: number): void;
  /** The final status (code 0: OK); nothing follows. */
  end(code: number, details: string): void;
}

/** One stream whose session runs on the main thread. */
export interface RemoteStream {
  /** A message the client sent (its buffer is transferred: `ownedBytes`). */
  data(bytes: Uint8Array): void;
  /** The client half-closed. */
  halfClose(): void;
  /** The client cancelled (or the call failed): the main thread's session is cancelled; nothing more comes. */
  cancel(): void;
  /** The call's write buffer filled (true) or drained (false). */
  congested(full: boolean): void;
}

export class MainLink {
  #state: FrontState = EMPTY_FRONT_STATE;
  #nextId = 1;
  readonly #waiting = new Map<number, (answer: EngineAnswer | undefined) => void>();
  readonly #streams = new Map<number, StreamListener>();
  /** Requests and streams outstanding on the main thread (`whenIdle`). */
  readonly #outstanding = new InFlight();
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
            if (a.t === 'result' || a.t === 'error') {
              const resolve = this.#waiting.get(a.id);
              if (resolve === undefined) continue;
              this.#waiting.delete(a.id);
              resolve(a.t === 'result' ? { response: a.response } : { error: rebuildError(a) });
              this.#outstanding.end();
              continue;
            }
            const stream = this.#streams.get(a.id);
            if (stream === undefined) continue;
            if (a.t === 'write') {
              if (a.took !== undefined) stream.took(a.took);
              stream.write(a.bytes);
            } else if (a.t === 'took') stream.took(a.n);
            else {
              this.#streams.delete(a.id);
              stream.end(a.code, a.details);
              this.#outstanding.end();
            }
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
    this.#outstanding.begin();
    this.#asks.add({ t: 'infer', id, request }, transfer);
    return {
      answer,
      cancel: () => {
        if (!this.#waiting.delete(id)) return;
        this.#asks.add({ t: 'cancel', id });
        settle(undefined);
        this.#outstanding.end();
      },
    };
  }

  /** Open a stream whose session runs on the main thread; `listener` hears what it says. */
  openStream(metadata: MetadataEntry[], listener: StreamListener): RemoteStream {
    const id = this.#nextId++;
    this.#streams.set(id, listener);
    this.#outstanding.begin();
    this.#asks.add({ t: 'open', id, metadata });
    return {
      data: (bytes) => {
        if (this.#streams.has(id)) this.#asks.add({ t: 'data', id, bytes }, [bytes.buffer as ArrayBuffer]);
      },
      halfClose: () => {
        if (this.#streams.has(id)) this.#asks.add({ t: 'half', id });
      },
      cancel: () => {
        if (!this.#streams.delete(id)) return;
        this.#asks.add({ t: 'cancel', id });
        this.#outstanding.end();
      },
      congested: (full) => {
        if (this.#streams.has(id)) this.#asks.add(full ? { t: 'full', id } : { t: 'drain', id });
      },
    };
  }

  /** Resolves once no request and no stream of this thread is outstanding on the main thread. */
  whenIdle(): Promise<void> {
    return this.#outstanding.whenIdle();
  }

  close(): void {
    this.#port.close();
  }
}
