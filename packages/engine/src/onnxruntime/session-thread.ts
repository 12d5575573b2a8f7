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
 * One thread serves one instance; the scheduler gives it one execution at a time, but `run`
 * tolerates overlap (replies are matched by id).
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

type Reply =
  | { type: 'ready'; inputs: WireValueMetadata[]; outputs: WireValueMetadata[] }
  | { type: 'load-error'; message: string }
  | { type: 'result'; id: number; outputs: Record<string, WireTensor> }
  | { type: 'run-error'; id: number; message: string }
  | { type: 'released' };

/** A session that failed to load: `message` is onnxruntime's own. */
export class SessionLoadError extends Error {
  override readonly name = 'SessionLoadError';
}

export class SessionThread {
  private nextId = 1;
  private readonly pending = new Map<number, { resolve: (o: Record<string, WireTensor>) => void; reject: (e: Error) => void }>();
  private released: Promise<void> | undefined;
  private exitError: Error | undefined;

  private constructor(
    private readonly worker: Worker,
    readonly inputMetadata: readonly WireValueMetadata[],
    readonly outputMetadata: readonly WireValueMetadata[],
  ) {
    worker.on('message', (reply: Reply) => {
      if (reply.type !== 'result' && reply.type !== 'run-error') return;
      const waiter = this.pending.get(reply.id);
      if (waiter === undefined) return;
      this.pending.delete(reply.id);
      if (reply.type === 'result') waiter.resolve(reply.outputs);
      else waiter.reject(new Error(reply.message));
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
  run(feeds: Record<string, WireTensor>, fetches: readonly string[]): Promise<Record<string, WireTensor>> {
    if (this.exitError !== undefined) return Promise.reject(this.exitError);
    if (this.released !== undefined) return Promise.reject(new Error('session released'));
    const id = this.nextId++;
    const transfer: ArrayBuffer[] = [];
    for (const t of Object.values(feeds)) transfer.push(t.data.buffer as ArrayBuffer);
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.worker.postMessage({ type: 'run', id, feeds, fetches }, transfer);
    });
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
        this.worker.postMessage({ type: 'release' });
        await done;
      }
      await this.worker.terminate();
    })();
    return this.released;
  }
}
