/**
 * `HttpCodecThread`: decodes large KServe HTTP inference requests and encodes large JSON responses
 * on a worker thread (`worker/http-codec.mjs`) with the same kserve codec the event loop uses, so
 * the same bytes give the same request, response or error.
 *
 * Why: the JSON of a 4 MB request of 800k BYTES strings costs ~100–300 ms to parse and convert, and
 * as much to write back as JSON; a few of those in a row held `/v2/health/live` and every other
 * request for seconds. JSON headers and JSON-rendered outputs from `OFF_LOOP_JSON_BYTES` go to the
 * thread; smaller ones stay inline, where a thread round trip would cost more than it saves.
 *
 * Ownership: the request body is transferred (copied first unless it owns its whole buffer); a
 * response's tensor bytes are copied, then transferred (they are often views into a batch's
 * buffer); results come back owning their buffers. One thread per HTTP door, started on first use,
 * unref'ed (it never keeps a process alive), restarted after a crash; calls are matched by id, so
 * any number may be in flight. `close()` ends it.
 */
import { Worker } from 'node:worker_threads';
import { ERROR_CODES, type ErrorCode, SwitchyardError, internal } from '@switchyard/common';
import type {
  DecodedHttpInferRequest,
  EncodedHttpInferResponse,
  HttpInferBody,
  HttpRequestedOutput,
  HttpResponseOptions,
  InferResponse,
} from '@switchyard/kserve';

const THREAD_URL = new URL('../../worker/http-codec.mjs', import.meta.url);

/** JSON headers, and outputs rendered as JSON, from this many bytes are (de)coded on the thread. */
export const OFF_LOOP_JSON_BYTES = 256 * 1024;

type Reply =
  | { id: number; decoded: Omit<DecodedHttpInferRequest, 'outputs'> & { outputs: Array<[string, HttpRequestedOutput]> } }
  | { id: number; encoded: EncodedHttpInferResponse }
  | { id: number; error: { code: string; message: string } };

interface Waiter {
  resolve: (reply: Reply) => void;
  reject: (e: Error) => void;
}

export class HttpCodecThread {
  private worker: Worker | undefined;
  private nextId = 1;
  private readonly pending = new Map<number, Waiter>();

  /** `decodeHttpInferRequest(src, headerLength)`, on the thread. */
  async decode(src: HttpInferBody, headerLength: number): Promise<DecodedHttpInferRequest> {
    const b = src.body;
    const owned = b.byteOffset === 0 && b.byteLength === b.buffer.byteLength && b.buffer instanceof ArrayBuffer ? b : new Uint8Array(b);
    const body = new Uint8Array(owned.buffer, 0, owned.byteLength);
    const reply = await this.call({ op: 'decode', body, headerLength, modelName: src.modelName, modelVersion: src.modelVersion }, [body.buffer as ArrayBuffer]);
    if (!('decoded' in reply)) throw internal('request decoding thread: unexpected reply');
    return { ...reply.decoded, outputs: new Map(reply.decoded.outputs) };
  }

  /** `encodeHttpInferResponse(response, options)`, on the thread. */
  async encode(response: InferResponse, options: HttpResponseOptions): Promise<EncodedHttpInferResponse> {
    const transfer: ArrayBuffer[] = [];
    const outputs = response.outputs.map((t) => {
      const data = new Uint8Array(t.data); // a copy of just this tensor's bytes
      transfer.push(data.buffer);
      return { ...t, data };
    });
    const message = {
      op: 'encode',
      response: { ...response, outputs },
      options: {
        defaultOutputKind: options.defaultOutputKind,
        outputs: [...options.outputs],
        batching: options.batching,
        labels: options.labels === undefined ? undefined : [...options.labels],
      },
    };
    const reply = await this.call(message, transfer);
    if (!('encoded' in reply)) throw internal('response encoding thread: unexpected reply');
    return reply.encoded;
  }

  private call(message: object, transfer: ArrayBuffer[]): Promise<Reply> {
    const worker = this.start();
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      worker.postMessage({ id, ...message }, transfer);
    });
  }

  /** End the thread; requests still in flight fail `unavailable`. */
  async close(): Promise<void> {
    const worker = this.worker;
    this.worker = undefined;
    this.failAll(new SwitchyardError('unavailable', 'Server is stopping'));
    await worker?.terminate();
  }

  private start(): Worker {
    if (this.worker !== undefined) return this.worker;
    const worker = new Worker(THREAD_URL, { execArgv: withoutSourceCondition(process.execArgv) });
    worker.unref();
    worker.on('message', (reply: Reply) => {
      const waiter = this.pending.get(reply.id);
      if (waiter === undefined) return;
      this.pending.delete(reply.id);
      if ('error' in reply) waiter.reject(rebuildError(reply.error));
      else waiter.resolve(reply);
    });
    const fail = (err: Error): void => {
      if (this.worker !== worker) return;
      this.worker = undefined;
      this.failAll(internal(`HTTP codec thread failed: ${err.message}`, err));
    };
    worker.on('error', fail);
    worker.on('exit', (code) => fail(new Error(`exited with code ${code}`)));
    this.worker = worker;
    return worker;
  }

  private failAll(error: Error): void {
    for (const w of this.pending.values()) w.reject(error);
    this.pending.clear();
  }
}

/** The thread's error as the event loop would have thrown it: same code, same message. */
function rebuildError(e: { code: string; message: string }): SwitchyardError {
  const code = (ERROR_CODES as readonly string[]).includes(e.code) ? (e.code as ErrorCode) : 'internal';
  return new SwitchyardError(code, e.message);
}

/**
 * The thread loads the packages' built JavaScript: drop the test runner's `source` export
 * condition (which points workspace imports at TypeScript sources Node cannot load).
 */
function withoutSourceCondition(execArgv: readonly string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < execArgv.length; i++) {
    const a = execArgv[i] as string;
    if ((a === '--conditions' || a === '-C') && execArgv[i + 1] === 'source') {
      i += 1;
      continue;
    }
    if (a === '--conditions=source' || a === '-C=source') continue;
    out.push(a);
  }
  return out;
}
