/**
 * `JavaScriptInstance`: one instance of a JavaScript model (one `instance_group` slot), backed by
 * a `JavaScriptThread`.
 *
 * - execute: requests go to the thread; each request's responses flow back to its
 *   `ResponseSender`. A request the model answered in `execute`'s return value is settled by the
 *   outcome; one answered through its sender is marked `viaSender` and stays open. For a
 *   non-decoupled model a sent response is held back until the final flag, so the front doors
 *   always see exactly one final response.
 * - Hung or dead threads: with `execute_timeout_ms` > 0 an execution that overruns kills the
 *   thread (its requests, and any still streaming on it, fail UNAVAILABLE); a thread that dies on
 *   its own fails its requests the same way. Either way a fresh thread (re-imported,
 *   re-initialized) serves the next execution; the server and other models never notice.
 * - Unload (`beginUnload`, then `release`): in-flight executions and open requests get up to
 *   `lifecycle_timeout_ms` to finish, as Triton waits for them; then the model's `finalize` runs
 *   (same bound) and the thread ends. A thread still busy at the deadline is terminated and what
 *   was open on it fails UNAVAILABLE.
 */
import { unavailable, type Logger, type SwitchyardError } from '@switchyard/common';
import type { BackendInstance, BackendResponse, BackendResult, ExecutionOutcome, ResponseSender } from '../backend.js';
import { requestToWire, responseFromWire, type ThreadData } from './javascript-protocol.js';
import { executeFailure, JavaScriptThread, type OpenRequestHandler, type ThreadOptions } from './javascript-thread.js';
import type { NormalizedRequest } from '../request-normalizer.js';

const now = (): bigint => process.hrtime.bigint();

export interface JavaScriptInstanceOptions {
  name: string;
  modelName: string;
  modelVersion: number;
  decoupled: boolean;
  /** 0: no limit (Triton's behaviour). */
  executeTimeoutMs: number;
  /** Bounds load, unload's wait for in-flight work, and finalize. */
  lifecycleTimeoutMs: number;
  data: ThreadData;
  thread: ThreadOptions;
  logger: Logger;
}

/** A sender for warmup executions: everything is dropped. */
const DISCARD: ResponseSender = { send: () => true, cancelled: false, onCancel: () => undefined };

export class JavaScriptInstance implements BackendInstance {
  private thread: JavaScriptThread | undefined;
  private starting: Promise<JavaScriptThread> | undefined;
  private unloadDeadline: number | undefined;
  private unloadTimer: NodeJS.Timeout | undefined;
  private released: Promise<void> | undefined;

  private constructor(
    private readonly options: JavaScriptInstanceOptions,
    thread: JavaScriptThread,
  ) {
    this.thread = thread;
  }

  get name(): string {
    return this.options.name;
  }

  /** Start the thread and initialize the model. Rejects with `JavaScriptLoadError`. */
  static async create(options: JavaScriptInstanceOptions): Promise<JavaScriptInstance> {
    return new JavaScriptInstance(options, await JavaScriptThread.start(options.name, options.data, options.thread));
  }

  async execute(requests: readonly NormalizedRequest[], senders?: readonly ResponseSender[]): Promise<ExecutionOutcome> {
    const thread = await this.liveThread();
    const computeStartNs = now();
    const transfer: ArrayBuffer[] = [];
    const handlers = new Map<number, OpenRequestHandler>();
    const wire = requests.map((request, i) => {
      const key = thread.allocateKey();
      const sender = senders?.[i] ?? DISCARD;
      handlers.set(key, this.handlerFor(sender));
      sender.onCancel(() => thread.close(key, true));
      return requestToWire(key, request, this.options.modelVersion, transfer);
    });
    let timer: NodeJS.Timeout | undefined;
    if (this.options.executeTimeoutMs > 0) {
      timer = setTimeout(() => {
        const ms = this.options.executeTimeoutMs;
        this.options.logger.error({ instance: this.name, executeTimeoutMs: ms }, 'JavaScript model execute timed out; restarting the instance');
        void this.restart(thread, unavailable(`JavaScript model instance '${this.name}' did not finish executing within ${ms} ms (execute_timeout_ms); the instance was restarted`));
      }, this.options.executeTimeoutMs);
    }
    let reply;
    try {
      reply = await thread.execute(wire, transfer, handlers);
    } catch (e) {
      throw executeFailure(this.name, e);
    } finally {
      if (timer !== undefined) clearTimeout(timer);
    }
    const results: BackendResult[] = new Array<BackendResult>(requests.length);
    const viaSender: boolean[] = [];
    reply.results.forEach((r, i) => {
      viaSender.push(r === null);
      if (r !== null) results[i] = responseFromWire(r);
    });
    return {
      results,
      viaSender,
      timing: { computeStartNs, computeInputEndNs: reply.inputEndNs, computeOutputStartNs: reply.outputStartNs, computeEndNs: now() },
    };
  }

  /** Where a request's streamed responses go; non-decoupled models deliver one final response. */
  private handlerFor(sender: ResponseSender): OpenRequestHandler {
    if (this.options.decoupled) return (response, final, sentNs) => void sender.send(response, final, sentNs);
    let held: BackendResponse | undefined;
    return (response, final, sentNs) => {
      if (!final) {
        held = response;
        return;
      }
      sender.send(response ?? held, true, sentNs);
    };
  }

  /** The thread to run on: the current one, or a fresh one after a timeout or a crash. */
  private async liveThread(): Promise<JavaScriptThread> {
    if (this.thread?.alive === true) return this.thread;
    if (this.unloadDeadline !== undefined || this.released !== undefined) {
      throw unavailable(`JavaScript model instance '${this.name}' is unloading`);
    }
    this.starting ??= JavaScriptThread.start(this.name, this.options.data, this.options.thread).finally(() => {
      this.starting = undefined;
    });
    try {
      this.thread = await this.starting;
      this.options.logger.info({ instance: this.name }, 'JavaScript model instance restarted');
      return this.thread;
    } catch (e) {
      throw unavailable(`JavaScript model instance '${this.name}' could not be restarted: ${e instanceof Error ? e.message : String(e)}`, e);
    }
  }

  private async restart(thread: JavaScriptThread, error: SwitchyardError): Promise<void> {
    await thread.kill(error);
    if (this.unloadDeadline !== undefined || this.released !== undefined) return;
    // Warm the replacement now; a failure surfaces on the next execute.
    this.liveThread().catch(() => undefined);
  }

  /**
   * The model is being unloaded: what runs now may take until `lifecycle_timeout_ms` from now;
   * then the thread is terminated. Idempotent.
   */
  beginUnload(): void {
    if (this.unloadDeadline !== undefined) return;
    const ms = this.options.lifecycleTimeoutMs;
    this.unloadDeadline = Date.now() + ms;
    this.unloadTimer = setTimeout(() => {
      const thread = this.thread;
      if (thread === undefined || !thread.alive || (!thread.executing && thread.openCount === 0)) return;
      this.options.logger.warn({ instance: this.name }, 'JavaScript model instance still busy at the unload deadline; terminating it');
      void thread.kill(unavailable(`JavaScript model '${this.options.modelName}' was unloaded before its request completed (lifecycle_timeout_ms ${ms})`));
    }, ms);
    this.unloadTimer.unref();
  }

  /** Wait (bounded) for open work, run the model's finalize, end the thread. Idempotent. */
  release(): Promise<void> {
    this.released ??= (async () => {
      this.beginUnload();
      await this.starting?.catch(() => undefined);
      const thread = this.thread;
      if (thread?.alive === true) {
        await thread.whenIdle();
        const remaining = Math.max(1000, (this.unloadDeadline ?? Date.now()) - Date.now());
        const error = await thread.finalize(remaining);
        if (error !== undefined) this.options.logger.warn({ instance: this.name, err: error }, 'JavaScript model finalize failed');
      }
      if (this.unloadTimer !== undefined) clearTimeout(this.unloadTimer);
    })();
    return this.released;
  }
}
