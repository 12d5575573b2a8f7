/**
 * `SessionThread`: one onnxruntime-node `InferenceSession` living on its own worker thread
 * (`worker/onnxruntime-session.mjs`).
 *
 * Why: onnxruntime-node computes `session.run` synchronously on the calling thread. On the
 * main thread a large batch would stall every socket of the server, and the instances of an
 * `instance_group` would only take turns. One thread per instance keeps the event loop free
 * and lets instances compute in parallel, which is what `instance_group { count: N }` means.
 *
 * Ownership: a run written into a slot copies its feeds there; a run sent by message transfers
 * them (their ArrayBuffers are detached). So callers pass buffers made for this call
 * (`toWireTensor` copies), or name the feeds that are views of buffers they keep (`borrowed`: a
 * request's bytes), which are copied only when their run goes by message. Outputs arrive owned. Strings
 * travel as BYTES bytes and are decoded / encoded on the thread (a 4 MB tensor of 800k strings
 * costs the event loop one buffer transfer, not 800k strings to build and clone).
 * One thread serves one instance. Runs are written into the slots of a channel shared with the
 * thread (a SharedArrayBuffer: `RING_*` below; the thread sleeps in `Atomics.wait` and answers
 * into the same slot, the parent hears it through `Atomics.waitAsync`), so a run costs no
 * structured clone and no message dispatch either way: that hop was about a third of the event
 * loop's time per request on a small model. Runs that do not fit a slot (string tensors, large
 * tensors, all slots busy) cross as before: the runs started in one tick in one message, their
 * results in one. Either way they run on the thread one after another, in start order. `run`
 * tolerates overlap (replies are matched by id).
 */
import { Worker } from 'node:worker_threads';
import { threadExecArgv } from '@switchyard/common';
import type * as ort from 'onnxruntime-node';
import type { TypedArray } from '@switchyard/kserve';

const WORKER_URL = new URL('../../worker/onnxruntime-session.mjs', import.meta.url);

// The shared channel. Control words (Int32): the request bell (parent rings after publishing slots
// or posting a message), the response bell (thread rings after answering), and from RING_STATE one
// state per slot. Each slot then holds RING_META_WORDS float64 words (request: id, signature, feed
// count, per feed ndims, dims, byte offset, byte length; answer: id, status, output count, per output
// fetch index, type code, ndims, dims, byte offset, byte length), four int64 time stamps, and tensor
// bytes from RING_DATA. The thread (worker/onnxruntime-session.mjs) takes the layout from its
// workerData (`RING_LAYOUT`), so the two sides cannot drift apart.
const RING_REQUEST_BELL = 0;
const RING_RESPONSE_BELL = 1;
const RING_STATE = 8;
const RING_CONTROL_BYTES = 256;
const RING_META_WORDS = 64;
const RING_DATA = RING_META_WORDS * 8 + 32;
/** Slots per session: a default-scheduler instance takes up to 8 executions at once. */
export const RING_SLOTS = 16;
/** Bytes per slot: inputs, then outputs, of one run (pages are touched only as far as runs reach). */
export const RING_SLOT_BYTES = 256 * 1024;
/** Slot states: who may touch the slot. */
const SLOT_FREE = 0; // parent's: unused
const SLOT_READY = 2; // thread's to take: a run written by the parent
const SLOT_TAKEN = 3; // thread's: running
const SLOT_DONE = 4; // parent's: answered (status RING_OK: outputs in the slot; RING_POSTED: by message)
/** Distinct signatures a session announces; runs of further ones cross by message. */
const MAX_SIGNATURES = 256;
const RING_OK = 0;
const RING_POSTED = 1;
const TYPES: readonly string[] = ['float32', 'float64', 'int8', 'uint8', 'int16', 'uint16', 'int32', 'uint32', 'int64', 'uint64', 'bool', 'float16'];
const ARRAYS = [Float32Array, Float64Array, Int8Array, Uint8Array, Int16Array, Uint16Array, Int32Array, Uint32Array, BigInt64Array, BigUint64Array, Uint8Array, Uint16Array] as const;
const TYPE_CODES = new Map(TYPES.map((t, i) => [t, i]));
/** The layout the session thread reads from its workerData (`ring.layout`). */
const RING_LAYOUT = {
  requestBell: RING_REQUEST_BELL,
  responseBell: RING_RESPONSE_BELL,
  state: RING_STATE,
  controlBytes: RING_CONTROL_BYTES,
  metaWords: RING_META_WORDS,
  data: RING_DATA,
  slotReady: SLOT_READY,
  slotTaken: SLOT_TAKEN,
  slotDone: SLOT_DONE,
  ok: RING_OK,
  posted: RING_POSTED,
  types: TYPES,
};

type WaitAsync = (a: Int32Array, index: number, value: number) => { async: false; value: string } | { async: true; value: Promise<string> };
/** `Atomics.waitAsync` (ES2024; Node.js 16+), typed here: the package compiles against ES2023. */
const waitAsync = (Atomics as unknown as { waitAsync: WaitAsync }).waitAsync;

/** The shared channel of one session: the buffer and its views. */
class Ring {
  readonly buffer = new SharedArrayBuffer(RING_CONTROL_BYTES + RING_SLOTS * RING_SLOT_BYTES);
  readonly control = new Int32Array(this.buffer, 0, RING_CONTROL_BYTES / 4);
  readonly meta: Float64Array[] = [];
  readonly times: BigInt64Array[] = [];
  readonly bytes: Uint8Array[] = [];
  /** Per slot: the id and fetches of the run in it (parent's bookkeeping), undefined when free. */
  readonly runs: Array<{ id: number; fetches: readonly string[] } | undefined> = [];
  readonly free: number[] = [];
  constructor() {
    for (let i = RING_SLOTS - 1; i >= 0; i--) this.free.push(i);
    for (let i = 0; i < RING_SLOTS; i++) {
      const base = RING_CONTROL_BYTES + i * RING_SLOT_BYTES;
      this.meta.push(new Float64Array(this.buffer, base, RING_META_WORDS));
      this.times.push(new BigInt64Array(this.buffer, base + RING_META_WORDS * 8, 4));
      this.bytes.push(new Uint8Array(this.buffer, base, RING_SLOT_BYTES));
      this.runs.push(undefined);
    }
  }
}

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
  /** Feeds whose buffers the caller keeps (copied before a message transfers them). */
  borrowed?: readonly string[];
}

/** A session that failed to load: `message` is onnxruntime's own. */
export class SessionLoadError extends Error {
  override readonly name = 'SessionLoadError';
}

export class SessionThread {
  private nextId = 1;
  private readonly pending = new Map<number, { resolve: (run: TimedRun) => void; reject: (e: Error) => void }>();
  /** Runs started in this tick, sent together by `flush`. */
  private outbox: PendingRun[] = [];
  /** Signatures (feed names and types, fetches) announced to the thread, by key. */
  private readonly signatures = new Map<string, number>();
  /** Runs in slots not yet answered; whether an `Atomics.waitAsync` on the response bell is pending. */
  private slotRuns = 0;
  private waiting = false;
  private readonly flush = (): void => {
    const runs = this.outbox;
    if (runs.length === 0) return; // already sent (`release` flushes early)
    this.outbox = [];
    const ring = this.ring;
    const seen = Atomics.load(ring.control, RING_RESPONSE_BELL);
    const written: number[] = [];
    const posted: PendingRun[] = [];
    for (const run of runs) {
      const slot = this.writeSlot(run);
      if (slot === undefined) posted.push(run);
      else written.push(slot);
    }
    if (posted.length > 0) {
      for (const run of posted) {
        if (run.borrowed === undefined) continue;
        for (const name of run.borrowed) {
          const t = run.feeds[name]!;
          run.feeds[name] = { type: t.type, dims: t.dims, data: t.data.slice() };
        }
        run.borrowed = undefined; // (not posted)
      }
      // A buffer shared by two feeds is transferred once (a duplicate in the list would fail the post).
      const transfer = new Set<ArrayBuffer>();
      for (const run of posted) for (const name in run.feeds) transfer.add(run.feeds[name]!.data.buffer as ArrayBuffer);
      try {
        this.worker.postMessage({ type: 'runs', runs: posted }, [...transfer]);
      } catch (e) {
        const error = e instanceof Error ? e : new Error(String(e));
        for (const run of posted) this.settle(run.id, undefined, error);
      }
    }
    // Published after the message: a thread that sees a slot finds every earlier run's message.
    for (const slot of written) Atomics.store(ring.control, RING_STATE + slot, SLOT_READY);
    this.ringBell(RING_REQUEST_BELL);
    if (written.length > 0) {
      this.slotRuns += written.length;
      if (!this.waiting) this.waitForAnswers(seen);
    }
  };
  private readonly onResponseBell = (): void => {
    this.waiting = false;
    const seen = Atomics.load(this.ring.control, RING_RESPONSE_BELL);
    this.collect();
    if (this.slotRuns > 0 && this.exitError === undefined) this.waitForAnswers(seen);
  };
  private released: Promise<void> | undefined;
  private exitError: Error | undefined;

  private constructor(
    private readonly worker: Worker,
    private readonly ring: Ring,
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
      this.slotRuns = 0;
      // Settles a pending waitAsync (it would otherwise hold this object for the process's life).
      this.ringBell(RING_RESPONSE_BELL);
    };
    worker.on('error', fail);
    worker.on('exit', (code) => fail(new Error(`onnxruntime session thread exited with code ${code}`)));
  }

  /**
   * Start a thread and create the session on it. Rejects with `SessionLoadError` when onnxruntime
   * refuses the model. `sampleRows`: a decoder's thread, which samples the rows a run's
   * `#sample_rows` feed asks for (@switchyard/llm's sampling-rows.ts) instead of returning its logits.
   */
  static create(modelFile: string, sessionOptions: ort.InferenceSession.SessionOptions, threadOptions: { sampleRows?: boolean } = {}): Promise<SessionThread> {
    return new Promise((resolve, reject) => {
      const ring = new Ring();
      const sampleRows = threadOptions.sampleRows === true;
      // A sampling thread imports @switchyard/llm's build; under the test runner, whose `source`
      // condition resolves workspace imports to TypeScript sources, it starts without that condition.
      const execArgv = sampleRows ? threadExecArgv() : undefined;
      const worker = new Worker(WORKER_URL, {
        workerData: { modelFile, sessionOptions, sampleRows, ring: { channel: ring.buffer, slots: RING_SLOTS, slotBytes: RING_SLOT_BYTES, layout: RING_LAYOUT } },
        ...(execArgv !== undefined ? { execArgv } : {}),
      });
      const onError = (err: Error): void => reject(err);
      worker.once('error', onError);
      worker.once('message', (reply: Reply) => {
        worker.off('error', onError);
        if (reply.type === 'ready') {
          resolve(new SessionThread(worker, ring, reply.inputs, reply.outputs));
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
   * buffers are copied into a slot, or transferred with a message, when the tick's runs are sent
   * (at the end of this tick): callers pass buffers of their own, except the feeds named in
   * `borrowed` (views of buffers the caller keeps, valid until the end of this tick), which a message
   * copies first.
   */
  runTimed(feeds: Record<string, WireTensor>, fetches: readonly string[], borrowed?: readonly string[]): Promise<TimedRun> {
    if (this.exitError !== undefined) return Promise.reject(this.exitError);
    if (this.released !== undefined) return Promise.reject(new Error('session released'));
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      const run: PendingRun = borrowed === undefined || borrowed.length === 0 ? { id, feeds, fetches } : { id, feeds, fetches, borrowed };
      if (this.outbox.push(run) === 1) queueMicrotask(this.flush);
    });
  }

  /**
   * Write a run into a free slot (not yet published); undefined when it must go by message: a string
   * tensor, more dims or bytes than a slot holds, or every slot busy.
   */
  private writeSlot(run: PendingRun): number | undefined {
    const ring = this.ring;
    const slot = ring.free[ring.free.length - 1];
    if (slot === undefined) return undefined;
    const meta = ring.meta[slot]!;
    const bytes = ring.bytes[slot]!;
    let key = '';
    let w = 3;
    let offset = RING_DATA;
    let count = 0;
    for (const name in run.feeds) {
      const t = run.feeds[name]!;
      if (!TYPE_CODES.has(t.type)) return undefined;
      if (w + 3 + t.dims.length > RING_META_WORDS) return undefined;
      const start = (offset + 7) & ~7;
      offset = start + t.data.byteLength;
      if (offset > RING_SLOT_BYTES) return undefined;
      meta[w++] = t.dims.length;
      for (const d of t.dims) meta[w++] = d;
      meta[w++] = start;
      meta[w++] = t.data.byteLength;
      bytes.set(new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength), start);
      key += `${name.length}:${name}${t.type};`; // length-prefixed: no two signatures share a key
      count++;
    }
    for (const f of run.fetches) key += `${f.length}:${f}`;
    let sig = this.signatures.get(key);
    if (sig === undefined) {
      // Bounded: a client cycling through output orders gets messages past this many.
      if (this.signatures.size >= MAX_SIGNATURES) return undefined;
      sig = this.signatures.size + 1;
      const feeds = Object.keys(run.feeds).map((name) => [name, run.feeds[name]!.type]);
      // Posted before the slot is published (see the thread's loop): the thread always knows it.
      this.worker.postMessage({ type: 'sig', sig, feeds, fetches: [...run.fetches] });
      this.signatures.set(key, sig);
    }
    meta[0] = run.id;
    meta[1] = sig;
    meta[2] = count;
    ring.free.pop();
    ring.runs[slot] = { id: run.id, fetches: run.fetches };
    return slot;
  }

  /** Take every answered slot: settle its run (outputs copied out of the slot) and free it. */
  private collect(): void {
    const ring = this.ring;
    for (let slot = 0; slot < RING_SLOTS; slot++) {
      const run = ring.runs[slot];
      if (run === undefined || Atomics.load(ring.control, RING_STATE + slot) !== SLOT_DONE) continue;
      const meta = ring.meta[slot]!;
      let timed: TimedRun | undefined;
      if (meta[1] === RING_OK) {
        const bytes = ring.bytes[slot]!;
        const outputs: Record<string, WireTensor> = {};
        let w = 3;
        for (let k = 0; k < meta[2]!; k++) {
          const name = run.fetches[meta[w++]!]!;
          const code = meta[w++]!;
          const ndims = meta[w++]!;
          const dims: number[] = [];
          for (let d = 0; d < ndims; d++) dims.push(meta[w++]!);
          const start = meta[w++]!;
          const byteLength = meta[w++]!;
          const Ctor = ARRAYS[code]!;
          const data = new Ctor(byteLength / Ctor.BYTES_PER_ELEMENT);
          new Uint8Array(data.buffer).set(bytes.subarray(start, start + byteLength));
          outputs[name] = { type: TYPES[code] as ort.Tensor.Type, dims, data };
        }
        const t = ring.times[slot]!;
        timed = { outputs, times: { startNs: t[0]!, inferStartNs: t[1]!, inferEndNs: t[2]!, endNs: t[3]! } };
      }
      ring.runs[slot] = undefined;
      Atomics.store(ring.control, RING_STATE + slot, SLOT_FREE);
      ring.free.push(slot);
      this.slotRuns--;
      // RING_POSTED: the 'results' message settles the run.
      if (timed !== undefined) this.settle(run.id, timed);
    }
  }

  private waitForAnswers(seen: number): void {
    this.waiting = true;
    const r = waitAsync(this.ring.control, RING_RESPONSE_BELL, seen);
    if (r.async) void r.value.then(this.onResponseBell);
    else queueMicrotask(this.onResponseBell);
  }

  /** Ring a bell: bump it and wake whoever sleeps on it. */
  private ringBell(bell: number): void {
    Atomics.add(this.ring.control, bell, 1);
    Atomics.notify(this.ring.control, bell);
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
        this.ringBell(RING_REQUEST_BELL);
        await done;
      }
      await this.worker.terminate();
    })();
    return this.released;
  }
}
