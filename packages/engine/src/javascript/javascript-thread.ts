/**
 * `JavaScriptThread`: one JavaScript model instance on its own worker thread
 * (`worker/javascript-instance.mjs`). It owns the thread, the executions in flight on it, the
 * requests still open on it (answered through response senders, possibly after their execution
 * returned) and the BLS calls the model made.
 *
 * Why a thread: the model's code must never run on the server's event loop (a CPU-heavy or
 * hung model would stall every socket), and the instances of an `instance_group` compute in
 * parallel, as in Triton (one Python stub process per instance).
 *
 * Ending: `kill(error)` terminates the thread at once (a hung model cannot be asked); everything
 * still running on it fails with `error`. A thread that dies on its own does the same with an
 * internal error. `finalize` asks the model to clean up (bounded by a timeout), then terminates.
 */
import { Worker } from 'node:worker_threads';
import { internal, isSwitchyardError, type Logger, type SwitchyardError } from '@switchyard/common';
import type { BackendResponse } from '../backend.js';
import { runBlsCall, type BlsPort } from './javascript-bls.js';
import { responseFromWire, type FromThread, type ThreadData, type ToThread, type WireRequest, type WireResponse } from './javascript-protocol.js';

const WORKER_URL = new URL('../../worker/javascript-instance.mjs', import.meta.url);

/** Receives the responses of one open request (see `ResponseSender`). */
export type OpenRequestHandler = (response: BackendResponse | undefined, final: boolean, sentNs: bigint) => void;

export interface ExecuteReply {
  /** Aligned with the requests; null where the request answers through its sender. */
  results: (WireResponse | null)[];
  inputEndNs: bigint;
  outputStartNs: bigint;
}

/** The thread could not load the model: `message` says why (import, class, initialize). */
export class JavaScriptLoadError extends Error {
  override readonly name = 'JavaScriptLoadError';
}

/** The model's own execute failure: the message as the model threw it. */
export class JavaScriptExecuteError extends Error {
  override readonly name = 'JavaScriptExecuteError';
}

export interface ThreadOptions {
  logger: Logger;
  bls?: BlsPort | undefined;
  /** Give up (and terminate the thread) when it has not answered within this many ms. */
  timeoutMs: number;
}

interface PendingExecute {
  keys: number[];
  resolve: (reply: ExecuteReply) => void;
  reject: (e: Error) => void;
}

export class JavaScriptThread {
  private nextExecuteId = 1;
  private nextKey = 1;
  private readonly executions = new Map<number, PendingExecute>();
  private readonly open = new Map<number, OpenRequestHandler>();
  private readonly blsAborts = new Map<number, () => void>();
  private deadError: SwitchyardError | undefined;
  private finalizing: ((error: string | undefined) => void) | undefined;
  private idleWaiters: (() => void)[] = [];

  /** Settles with the thread's first answer: `ready` / `autocomplete`, or a load failure. */
  private readonly started: Promise<FromThread>;
  private settleStart: ((msg: FromThread | Error) => void) | undefined;

  private constructor(
    private readonly worker: Worker,
    private readonly name: string,
    private readonly options: ThreadOptions,
  ) {
    this.started = new Promise<FromThread>((resolve, reject) => {
      const timer = setTimeout(() => this.settleStart?.(new JavaScriptLoadError(`the model did not load within ${options.timeoutMs} ms`)), options.timeoutMs);
      this.settleStart = (msg) => {
        clearTimeout(timer);
        this.settleStart = undefined;
        if (msg instanceof Error) reject(msg);
        else resolve(msg);
      };
    });
    worker.on('message', (msg: FromThread) => this.onMessage(msg));
    worker.on('error', (e) => {
      // An exception the model did not catch (e.g. in a timer callback) ends its thread.
      options.logger.error({ instance: name, err: e }, 'JavaScript model thread failed');
      this.die(internal(`JavaScript model instance '${this.name}' failed: ${e.message}`));
    });
    worker.on('exit', (code) => this.die(internal(`JavaScript model instance '${this.name}' stopped (thread exit code ${code})`)));
  }

  private static async spawn(name: string, data: ThreadData, options: ThreadOptions): Promise<{ thread: JavaScriptThread; first: FromThread }> {
    const thread = new JavaScriptThread(new Worker(WORKER_URL, { workerData: data }), name, options);
    try {
      return { thread, first: await thread.started };
    } catch (e) {
      await thread.kill(internal(`JavaScript model instance '${name}' failed to load`));
      throw e;
    }
  }

  /** Start an instance thread: import the model, construct it, `initialize(args)`. Rejects with `JavaScriptLoadError`. */
  static async start(name: string, data: ThreadData, options: ThreadOptions): Promise<JavaScriptThread> {
    return (await JavaScriptThread.spawn(name, { ...data, mode: 'instance' }, options)).thread;
  }

  /** Run the model class's static `autoCompleteConfig` on a short-lived thread; the completed config JSON. */
  static async autoComplete(name: string, data: ThreadData, options: ThreadOptions): Promise<unknown> {
    const { thread, first } = await JavaScriptThread.spawn(name, { ...data, mode: 'autocomplete' }, options);
    await thread.kill(internal('auto-complete done'));
    if (first.type !== 'autocomplete') throw new JavaScriptLoadError(`unexpected reply '${first.type}' to auto-complete`);
    return first.config;
  }

  get alive(): boolean {
    return this.deadError === undefined;
  }

  /** Requests still open on this thread (executing, or streaming after their execution). */
  get openCount(): number {
    return this.open.size;
  }

  get executing(): boolean {
    return this.executions.size > 0;
  }

  /** A key for a request of the next execution (unique on this thread). */
  allocateKey(): number {
    return this.nextKey++;
  }

  /**
   * Run one execution. `handlers` (by request key) receive each request's responses until its
   * final flag; a request answered in the reply (not null) has its handler removed. Rejects with
   * `JavaScriptExecuteError` when the model threw, or the thread's death error.
   */
  execute(requests: WireRequest[], transfer: ArrayBuffer[], handlers: Map<number, OpenRequestHandler>): Promise<ExecuteReply> {
    if (this.deadError !== undefined) return Promise.reject(this.deadError);
    for (const [key, handler] of handlers) this.open.set(key, handler);
    const executeId = this.nextExecuteId++;
    return new Promise<ExecuteReply>((resolve, reject) => {
      this.executions.set(executeId, { keys: [...handlers.keys()], resolve, reject });
      this.post({ type: 'execute', executeId, requests }, transfer);
    });
  }

  /** The request was answered or cancelled on the server side: stop routing its responses. */
  close(key: number, cancelled: boolean): void {
    if (!this.open.delete(key)) return;
    if (cancelled) this.post({ type: 'cancel', key }, []);
    this.checkIdle();
  }

  /** Resolves once no request is open and no execution is in flight (or the thread is dead). */
  whenIdle(): Promise<void> {
    if (this.isIdle()) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  /** Ask the model to finalize (at most `timeoutMs`), then end the thread. The model's finalize error, if any. */
  async finalize(timeoutMs: number): Promise<string | undefined> {
    if (this.deadError !== undefined) return undefined;
    const result = await new Promise<string | undefined>((resolve) => {
      const timer = setTimeout(() => resolve(`finalize did not return within ${timeoutMs} ms`), timeoutMs);
      this.finalizing = (error) => {
        clearTimeout(timer);
        resolve(error);
      };
      this.post({ type: 'finalize' }, []);
    });
    await this.kill(internal(`JavaScript model instance '${this.name}' was finalized`));
    return result;
  }

  /** Terminate the thread now; every execution and open request on it fails with `error`. */
  async kill(error: SwitchyardError): Promise<void> {
    this.die(error);
    await this.worker.terminate();
  }

  private die(error: SwitchyardError): void {
    if (this.deadError !== undefined) return;
    this.deadError = error;
    this.settleStart?.(new JavaScriptLoadError(error.message));
    for (const pending of this.executions.values()) {
      for (const key of pending.keys) this.open.delete(key);
      pending.reject(error);
    }
    this.executions.clear();
    const open = [...this.open.values()];
    this.open.clear();
    for (const handler of open) handler({ error }, true, process.hrtime.bigint());
    for (const abort of this.blsAborts.values()) abort();
    this.blsAborts.clear();
    this.finalizing?.(undefined);
    this.finalizing = undefined;
    this.checkIdle();
  }

  private onMessage(msg: FromThread): void {
    switch (msg.type) {
      case 'ready':
      case 'autocomplete':
        this.settleStart?.(msg);
        return;
      case 'init-error':
        this.settleStart?.(new JavaScriptLoadError(msg.message));
        return;
      case 'response': {
        const handler = this.open.get(msg.key);
        if (handler === undefined) return;
        if (msg.final) this.open.delete(msg.key);
        handler(msg.response === undefined ? undefined : responseFromWire(msg.response), msg.final, msg.sentNs);
        if (msg.final) this.checkIdle();
        return;
      }
      case 'executed': {
        const pending = this.executions.get(msg.executeId);
        if (pending === undefined) return;
        this.executions.delete(msg.executeId);
        pending.keys.forEach((key, i) => {
          if (msg.results[i] !== null) this.open.delete(key);
        });
        pending.resolve({ results: msg.results, inputEndNs: msg.inputEndNs, outputStartNs: msg.outputStartNs });
        this.checkIdle();
        return;
      }
      case 'execute-error': {
        const pending = this.executions.get(msg.executeId);
        if (pending === undefined) return;
        this.executions.delete(msg.executeId);
        for (const key of pending.keys) this.open.delete(key);
        pending.reject(new JavaScriptExecuteError(msg.message));
        this.checkIdle();
        return;
      }
      case 'bls': {
        const abort = runBlsCall(this.options.bls, msg, (reply, transfer) => {
          if (reply.type === 'bls-result' && reply.final) this.blsAborts.delete(msg.callId);
          this.post(reply, transfer);
        });
        if (this.blsAborts.has(msg.callId) || this.deadError !== undefined) abort();
        else this.blsAborts.set(msg.callId, abort);
        return;
      }
      case 'log': {
        const log = this.options.logger;
        const fields = { instance: this.name };
        if (msg.level === 'error') log.error(fields, msg.message);
        else if (msg.level === 'warn') log.warn(fields, msg.message);
        else if (msg.level === 'info') log.info(fields, msg.message);
        else log.debug(fields, msg.message);
        return;
      }
      case 'finalized': {
        this.finalizing?.(msg.error);
        this.finalizing = undefined;
        return;
      }
      default:
        return;
    }
  }

  private post(msg: ToThread, transfer: ArrayBuffer[]): void {
    if (this.deadError !== undefined) return;
    this.worker.postMessage(msg, transfer);
  }

  private isIdle(): boolean {
    return this.deadError !== undefined || (this.executions.size === 0 && this.open.size === 0);
  }

  private checkIdle(): void {
    if (!this.isIdle() || this.idleWaiters.length === 0) return;
    const waiters = this.idleWaiters;
    this.idleWaiters = [];
    for (const resolve of waiters) resolve();
  }
}

/** An execute failure as the error of every request of the execution (Triton's Python-backend wording). */
export function executeFailure(instanceName: string, e: unknown): SwitchyardError {
  if (isSwitchyardError(e)) return e;
  return internal(`Failed to process the request(s) for model instance '${instanceName}', message: ${e instanceof Error ? e.message : String(e)}`);
}
