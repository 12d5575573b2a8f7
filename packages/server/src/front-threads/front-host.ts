/**
 * The main thread's side of the front threads (`--http-thread-count`, `--grpc-infer-thread-count`): starts them on the door's
 * port, keeps them told which models they may serve (front-state.ts), runs the infer requests they
 * send on the engine (one engine, one owner: scheduling, batching, sequences and statistics stay
 * Triton's), sends back each answer, and cancels a request whose client went away. A gRPC door's
 * streams are served here by the door's own handler, each as a `ThreadStreamCall` (thread-stream.ts).
 *
 * Threads need `reusePort` (Node.js 22.12 / 23.1 and later; `reusePortSupported`). A thread that
 * exits unexpectedly has its requests in flight cancelled (their clients' connections went with it)
 * and is started again on the same port a second later; the other threads serve meanwhile.
 * `close()` has every thread stop accepting, finish its requests in flight and exit (a gRPC door
 * drains its streams first: grpc/stream-infer.ts).
 */
import { Worker } from 'node:worker_threads';
import { status } from '@grpc/grpc-js';
import { Cancellation, type Logger, internal, threadExecArgv, toSwitchyardError } from '@switchyard/common';
import type { InferenceEngine } from '@switchyard/engine';
import type { InferRequest } from '@switchyard/kserve';
import type { ServerSettings } from '../settings.js';
import type { TraceManager } from '../trace/trace-manager.js';
import { type FrontState, buildFrontState } from './front-state.js';
import { type Answer, type Ask, type MetadataEntry, Outbox, type ToMain, type ToThread, postableResponse } from './front-messages.js';
import { ThreadStreamCall } from './thread-stream.js';
import { type FrontDoorConfig, type FrontThreadConfig, onPort, portOf } from './front-config.js';

const THREAD_URL = new URL('../../worker/front.mjs', import.meta.url);
/** A thread that exited unexpectedly is started again after this long (a crash loop stays slow). */
const RESTART_DELAY_MS = 1000;

/** Whether this Node.js binds several listeners to one port (`listen({reusePort})`). */
export function reusePortSupported(version: string = process.versions.node): boolean {
  const [major = 0, minor = 0] = version.split('.').map(Number);
  return major > 23 || (major === 23 && minor >= 1) || (major === 22 && minor >= 12);
}

export interface FrontThreadsOptions {
  readonly count: number;
  /** What every thread serves; its port: where the first thread binds (0: a free one), the others then bind the same. */
  readonly door: FrontDoorConfig;
  readonly engine: InferenceEngine;
  readonly settings: ServerSettings;
  readonly tracer: TraceManager | undefined;
  readonly logger: Logger;
  /** The gRPC door's streams (ModelStreamInfer): served here, their calls on the threads. */
  readonly streams?: FrontStreams;
}

/** How the main thread serves a front thread's gRPC stream. */
export interface FrontStreams {
  /** The door's request deserializer for the method. */
  readonly deserialize: (bytes: Buffer) => unknown;
  /** The door's response serializer for the method. */
  readonly serialize: (value: unknown) => Buffer;
  /** The door's handler, given the call. */
  readonly serve: (call: ThreadStreamCall) => void;
}

interface Thread {
  readonly worker: Worker;
  /** Requests of this thread running on the engine, by the thread's id. */
  readonly running: Map<number, Cancellation>;
  /** Streams of this thread served here, by the thread's id. */
  readonly streams: Map<number, ThreadStreamCall>;
  readonly answers: Outbox<Answer>;
}

export class FrontThreads {
  readonly #o: FrontThreadsOptions;
  readonly #threads = new Set<Thread>();
  #port = 0;
  #closing = false;
  #state: FrontState | undefined;
  #stateVersion = 0;
  #unsubscribe: (() => void) | undefined;

  constructor(options: FrontThreadsOptions) {
    if (!reusePortSupported()) throw internal(`front threads need Node.js 22.12 or later (reusePort); this is ${process.version}`);
    this.#o = options;
  }

  /** Start every thread; resolves with the port they share once all listen. */
  async start(): Promise<number> {
    this.#unsubscribe = this.#o.engine.onModelChange?.(() => void this.#refresh());
    this.#o.settings.onTraceSettingsChange(() => void this.#refresh());
    await this.#refresh();
    let port = portOf(this.#o.door);
    for (let i = 0; i < this.#o.count; i++) port = await this.#spawn(i, port);
    this.#port = port;
    return port;
  }

  async close(): Promise<void> {
    this.#closing = true;
    this.#unsubscribe?.();
    await Promise.all(
      [...this.#threads].map(
        (t) =>
          new Promise<void>((resolve) => {
            t.worker.once('exit', () => resolve());
            t.worker.postMessage({ t: 'close' } satisfies ToThread);
          }),
      ),
    );
  }

  /**
   * Build the state from the engine now and send it to every thread (the newest build wins). Never
   * rejects: a state that cannot be built (an engine shutting down) leaves the threads the last one.
   */
  async #refresh(): Promise<void> {
    if (this.#closing) return;
    const version = ++this.#stateVersion;
    const tracer = this.#o.tracer;
    let state: FrontState;
    try {
      state = await buildFrontState(this.#o.engine, (model) => tracer?.mayTrace(model) ?? false);
    } catch (e) {
      this.#o.logger.warn({ err: e }, 'front threads: the models they may serve could not be read; they keep the last list');
      return;
    }
    if (version !== this.#stateVersion) return;
    this.#state = state;
    for (const t of this.#threads) t.worker.postMessage({ t: 'state', state } satisfies ToThread);
  }

  #spawn(index: number, port: number): Promise<number> {
    const config: FrontThreadConfig = { door: onPort(this.#o.door, port), index };
    const execArgv = threadExecArgv();
    const worker = new Worker(THREAD_URL, { workerData: config, ...(execArgv !== undefined ? { execArgv } : {}) });
    const thread: Thread = { worker, running: new Map(), streams: new Map(), answers: new Outbox((batch, transfer) => worker.postMessage({ t: 'answers', batch } satisfies ToThread, transfer)) };
    this.#threads.add(thread);
    if (this.#state !== undefined) worker.postMessage({ t: 'state', state: this.#state } satisfies ToThread);
    return new Promise<number>((resolve, reject) => {
      let listening = false;
      worker.on('message', (m: ToMain) => {
        switch (m.t) {
          case 'listening':
            listening = true;
            resolve(m.port);
            return;
          case 'failed':
            reject(new Error(m.message));
            return;
          case 'asks':
            for (const a of m.batch) {
              try {
                this.#ask(thread, a);
              } catch (e) {
                // a bug here fails that request or stream, never the process
                this.#o.logger.error({ err: e, ask: a.t }, 'a front thread\'s request failed unexpectedly on the main thread');
                const stream = thread.streams.get(a.id);
                if (stream !== undefined) stream.emit('error', { code: status.INTERNAL, details: toSwitchyardError(e).message });
              }
            }
            return;
          case 'log':
            this.#o.logger[m.level](m.fields, m.msg);
            return;
        }
      });
      worker.on('error', (e) => {
        this.#o.logger.error({ err: e, thread: index, door: this.#o.door.kind }, 'front thread failed');
        if (!listening) reject(e);
      });
      worker.on('exit', (code) => {
        this.#threads.delete(thread);
        for (const c of thread.running.values()) c.abort();
        thread.running.clear();
        for (const s of [...thread.streams.values()]) s.cancel();
        if (!listening) {
          reject(new Error(`${this.#o.door.kind} front thread ${index} exited with code ${code} before listening`));
          return;
        }
        if (this.#closing) return;
        this.#o.logger.error({ thread: index, door: this.#o.door.kind, code }, `front thread exited; starting it again in ${RESTART_DELAY_MS} ms`);
        setTimeout(() => {
          if (this.#closing) return;
          this.#spawn(index, this.#port).catch((e: unknown) => this.#o.logger.error({ err: e, thread: index, door: this.#o.door.kind }, 'front thread did not start again'));
        }, RESTART_DELAY_MS).unref();
      });
    });
  }

  #ask(thread: Thread, a: Ask): void {
    switch (a.t) {
      case 'infer':
        this.#infer(thread, a.id, a.request);
        return;
      case 'cancel':
        thread.running.get(a.id)?.abort();
        thread.streams.get(a.id)?.cancel();
        return;
      case 'open':
        this.#openStream(thread, a.id, a.metadata);
        return;
      case 'data':
        thread.streams.get(a.id)?.receive(a.bytes);
        return;
      case 'half':
        thread.streams.get(a.id)?.halfClose();
        return;
      case 'full':
      case 'drain':
        thread.streams.get(a.id)?.congested(a.t === 'full');
        return;
    }
  }

  #openStream(thread: Thread, id: number, metadata: MetadataEntry[]): void {
    const streams = this.#o.streams;
    if (streams === undefined) {
      thread.answers.add({ t: 'end', id, code: status.UNIMPLEMENTED, details: 'streams are not served by this door' });
      return;
    }
    const call = new ThreadStreamCall(id, metadata, { deserialize: streams.deserialize, serialize: streams.serialize, answers: thread.answers, onDone: () => thread.streams.delete(id) });
    thread.streams.set(id, call);
    try {
      streams.serve(call);
    } catch (e) {
      this.#o.logger.warn({ err: e }, 'a front thread\'s stream failed to start');
      call.emit('error', { code: status.INTERNAL, details: toSwitchyardError(e).message });
    }
  }

  #infer(thread: Thread, id: number, request: InferRequest): void {
    const abort = new Cancellation();
    thread.running.set(id, abort);
    const done = (m: Answer, transfer?: ArrayBuffer[]): void => {
      thread.running.delete(id);
      if (abort.signal.aborted || !this.#threads.has(thread)) return;
      thread.answers.add(m, transfer);
    };
    this.#o.engine.infer(request, { signal: abort.signal }).then(
      (response) => {
        const p = postableResponse(response);
        done({ t: 'result', id, response: p.response }, p.transfer);
      },
      (e: unknown) => {
        const err = toSwitchyardError(e);
        done({ t: 'error', id, code: err.code, message: err.message });
      },
    );
  }
}
