/**
 * `SessionThread`: one onnxruntime-node `InferenceSession` living on its own worker thread
 * (`worker/onnxruntime-session.mjs`).
 *
 * Why: onnxruntime-node computes `session.run` synchronously on the calling thread. On the
 * main thread a large batch would stall every socket of the server, and the instances of an
 * `instance_group` would only take turns. One thread per instance keeps the event loop free
 * and lets instances compute in parallel, which is what `instance_group { count: N }` means.
 *
 * Ownership: tensors sent to `run` are transferred (their ArrayBuffers are detached), so
 * callers pass buffers made for this call (`toWireTensor` copies). Outputs arrive owned. Strings
 * travel as BYTES bytes and are decoded / encoded on the thread (a 4 MB tensor of 800k strings
 * costs the event loop one buffer transfer, not 800k strings to build and clone).
 * One thread serves one instance. Runs started in the same tick cross in one message and come
 * back in one (a scheduler handing an instance several executions pays one hop for them); they
 * run on the thread one after another, in order. `run` tolerates overlap (replies are matched by id).
 */
import { Worker } from 'node:worker_threads';
import type * as ort from 'onnxruntime-node';
import type { TypedArray } from '@switchyard/kserve';

const WORKER_URL = new URL('../../worker/onnxruntime-session.mjs', import.meta.url);

/**
 * A tensor as it crosses the thread boundary: structured-clone friendly, its buffer transferred.
 * String tensors (`type: 'string'`) carry Triton's BYTES layout (a Uint8Array of uint32 length +
 * UTF-8 bytes per element); the session thread converts them to and from ORT's JavaScript strings.
 */
export interface WireTensor {
  /** ORT's element type name (the codec's `OrtType`). */
  type: ort.Tensor.Type;
  dims: number[];
  data: TypedArray;
}

/** Input/output metadata as onnxruntime reports it (`session.inputMetadata`). */
export interface WireValueMetadata {
  name: string;
  isTensor: boolean;
  type: string | undefined;
  shape: Array<number | string>;
}

/**
 * When a run happened on its thread (`process.hrtime.bigint()`, one clock for every thread of the
 * process): started, inputs converted (BYTES to strings), `session.run` returned, outputs converted.
 */
export interface RunTimes {
  startNs: bigint;
  inferStartNs: bigint;
  inferEndNs: bigint;
  endNs: bigint;
}

/** A run's outputs and when it ran on the thread. */
export interface TimedRun {
  outputs: Record<string, WireTensor>;
  times: RunTimes;
}

type RunResult = { id: number; outputs: Record<string, WireTensor>; times: [bigint, bigint, bigint, bigint] } | { id: number; message: string };

type Reply =
  | { type: 'ready'; inputs: WireValueMetadata[]; outputs: WireValueMetadata[] }
  | { type: 'load-error'; message: string }
  | { type: 'results'; results: RunResult[] }
  | { type: 'released' };

interface PendingRun {
  id: number;
  feeds: Record<string, WireTensor>;
  fetches: readonly string[];
}

/** A session that failed to load: `message` is onnxruntime's own. */
export class SessionLoadError extends Error {
  override readonly name = 'SessionLoadError';
}

export class SessionThread {
  private nextId = 1;
  private readonly pending = new Map<number, { resolve: (run: TimedRun) => void; reject: (e: Error) => void }>();
  /** Runs started in this tick, posted together by `flush`. */
  private outbox: PendingRun[] = [];
  private readonly flush = (): void => {
    const runs = this.outbox;
    if (runs.length === 0) return; // already posted (`release` flushes early)
    this.outbox = [];
    // A buffer shared by two feeds is transferred once (a duplicate in the list would fail the post).
    const transfer = new Set<ArrayBuffer>();
    for (const run of runs) for (const name in run.feeds) transfer.add(run.feeds[name]!.data.buffer as ArrayBuffer);
    try {
      this.worker.postMessage({ type: 'runs', runs }, [...transfer]);
    } catch (e) {
      const error = e instanceof Error ? e : new Error(String(e));
      for (const run of runs) this.settle(run.id, undefined, error);
    }
  };
  private released: Promise<void> | undefined;
  private exitError: Error | undefined;

  private constructor(
    private readonly worker: Worker,
    readonly inputMetadata: readonly WireValueMetadata[],
    readonly outputMetadata: readonly WireValueMetadata[],
  ) {
    worker.on('message', (reply: Reply) => {
      if (reply.type !== 'results') return;
      for (const r of reply.results) {
        if ('message' in r) this.settle(r.id, undefined, new Error(r.message));
        else this.settle(r.id, { outputs: r.outputs, times: { startNs: r.times[0], inferStartNs: r.times[1], inferEndNs: r.times[2], endNs: r.times[3] } });
      }
    });
    // A thread that dies (native crash, OOM) fails what it was running; later runs fail fast.
    const fail = (err: Error): void => {
      this.exitError ??= err;
      for (const w of this.pending.values()) w.reject(err);
      this.pending.clear();
    };
    worker.on('error', fail);
    worker.on('exit', (code) => fail(new Error(`onnxruntime session thread exited with code ${code}`)));
  }

  /** Start a thread and create the session on it. Rejects with `SessionLoadError` when onnxruntime refuses the model. */
  static create(modelFile: string, sessionOptions: ort.InferenceSession.SessionOptions): Promise<SessionThread> {
    return new Promise((resolve, reject) => {
      const worker = new Worker(WORKER_URL, { workerData: { modelFile, sessionOptions } });
      const onError = (err: Error): void => reject(err);
      worker.once('error', onError);
      worker.once('message', (reply: Reply) => {
        worker.off('error', onError);
        if (reply.type === 'ready') {
          resolve(new SessionThread(worker, reply.inputs, reply.outputs));
        } else {
          const message = reply.type === 'load-error' ? reply.message : `unexpected reply '${reply.type}'`;
          void worker.terminate();
          reject(new SessionLoadError(message));
        }
      });
    });
  }

  /** Run the session. Rejects with onnxruntime's message on a run failure. */
  async run(feeds: Record<string, WireTensor>, fetches: readonly string[]): Promise<Record<string, WireTensor>> {
    return (await this.runTimed(feeds, fetches)).outputs;
  }

  /**
   * Run the session; resolves with the outputs and when the run happened on the thread. The feeds'
   * buffers are transferred when the tick's runs are posted (at the end of this tick).
   */
  runTimed(feeds: Record<string, WireTensor>, fetches: readonly string[]): Promise<TimedRun> {
    if (this.exitError !== undefined) return Promise.reject(this.exitError);
    if (this.released !== undefined) return Promise.reject(new Error('session released'));
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      if (this.outbox.push({ id, feeds, fetches }) === 1) queueMicrotask(this.flush);
    });
  }

  private settle(id: number, run: TimedRun | undefined, error?: Error): void {
    const waiter = this.pending.get(id);
    if (waiter === undefined) return;
    this.pending.delete(id);
    if (run !== undefined) waiter.resolve(run);
    else waiter.reject(error ?? new Error('session run failed'));
  }

  /** Release the session on its thread, then end the thread. Idempotent. */
  release(): Promise<void> {
    this.released ??= (async () => {
      if (this.exitError === undefined) {
        const done = new Promise<void>((resolve) => {
          const onMessage = (reply: Reply): void => {
            if (reply.type === 'released') {
              this.worker.off('message', onMessage);
              resolve();
            }
          };
          this.worker.on('message', onMessage);
          this.worker.once('exit', () => resolve());
        });
        // Runs started in this tick go first: the thread answers them before it releases.
        if (this.outbox.length > 0) this.flush();
        this.worker.postMessage({ type: 'release' });
        await done;
      }
      await this.worker.terminate();
    })();
    return this.released;
  }
}
