/**
 * `CodecThread`: decodes large KServe inference requests (HTTP bodies, gRPC ModelInfer messages)
 * and encodes large HTTP JSON responses on a worker thread (`worker/codec.mjs`) with the same
 * codecs the event loop uses (kserve's, and for gRPC the protos' own proto-loader deserializer),
 * so the same bytes give the same request, response or error.
 *
 * Why: the JSON of a 4 MB request of 800k BYTES strings costs ~100–300 ms to parse and convert, and
 * as much to write back as JSON; a few of those in a row held `/v2/health/live` and every other
 * request for seconds; a gRPC message carrying the same strings as typed `bytes_contents` costs
 * grpc-js's protobuf decode ~500 ms (a Buffer per string). JSON headers and JSON-rendered outputs
 * from `OFF_LOOP_JSON_BYTES`, and gRPC request messages from `OFF_LOOP_GRPC_BYTES`, go to the
 * thread; smaller ones stay inline, where a thread round trip would cost more than it saves.
 *
 * Ownership: the request body is transferred (copied first unless it owns its whole buffer); a
 * response's tensor bytes are copied, then transferred (they are often views into a batch's
 * buffer); a gRPC message is copied, then transferred; results come back owning their buffers.
 * One thread per door (HTTP, gRPC), started on first use,
 * unref'ed (it never keeps a process alive), restarted after a crash; calls are matched by id, so
 * any number may be in flight. `close()` ends it.
 */
import { Worker } from 'node:worker_threads';
import { ERROR_CODES, type ErrorCode, SwitchyardError, internal, threadExecArgv } from '@switchyard/common';
import type {
  DecodedGrpcInferRequest,
  DecodedHttpInferRequest,
  EncodedHttpInferResponse,
  GrpcModelInferRequest,
  HttpInferBody,
  HttpRequestedOutput,
  HttpResponseOptions,
  InferResponse,
} from '@switchyard/kserve';

const THREAD_URL = new URL('../worker/codec.mjs', import.meta.url);

/** JSON headers, and outputs rendered as JSON, from this many bytes are (de)coded on the thread. */
export const OFF_LOOP_JSON_BYTES = 256 * 1024;

/** gRPC ModelInfer / ModelStreamInfer request messages from this many bytes are decoded on the thread. */
export const OFF_LOOP_GRPC_BYTES = 256 * 1024;

/** The fields of a ModelInferRequest the handlers use before decoding, as proto-loader gives them. */
export type GrpcInferHeader = Pick<GrpcModelInferRequest, 'id' | 'model_name' | 'model_version'>;

/**
 * A gRPC infer request decoded on the thread: the header fields the handlers need before (and
 * beside) the decoded request, and kserve's `decodeModelInferRequest` result or its error.
 * `malformed`: protobuf could not parse the message (grpc-js's deserializer threw this message).
 */
export type DecodedGrpcMessage =
  | { malformed: string }
  | {
      header: GrpcInferHeader;
      result: { decoded: DecodedGrpcInferRequest } | { error: SwitchyardError };
    };

type Reply =
  | { id: number; decoded: Omit<DecodedHttpInferRequest, 'outputs'> & { outputs: Array<[string, HttpRequestedOutput]> } }
  | { id: number; encoded: EncodedHttpInferResponse }
  | { id: number; grpc: { malformed: string } | { header: GrpcInferHeader; decoded?: DecodedGrpcInferRequest; error?: { code: string; message: string } } }
  | { id: number; error: { code: string; message: string } };

interface Waiter {
  resolve: (reply: Reply) => void;
  reject: (e: Error) => void;
}

export class CodecThread {
  private worker: Worker | undefined;
  private nextId = 1;
  private readonly pending = new Map<number, Waiter>();

  /** `decodeHttpInferRequest(src, headerLength)`, on the thread. */
  async decodeHttp(src: HttpInferBody, headerLength: number): Promise<DecodedHttpInferRequest> {
    const b = src.body;
    const owned = b.byteOffset === 0 && b.byteLength === b.buffer.byteLength && b.buffer instanceof ArrayBuffer ? b : new Uint8Array(b);
    const body = new Uint8Array(owned.buffer, 0, owned.byteLength);
    const reply = await this.call({ op: 'decode', body, headerLength, modelName: src.modelName, modelVersion: src.modelVersion }, [body.buffer as ArrayBuffer]);
    if (!('decoded' in reply)) throw internal('request decoding thread: unexpected reply');
    return { ...reply.decoded, outputs: new Map(reply.decoded.outputs) };
  }

  /** `encodeHttpInferResponse(response, options)`, on the thread. */
  async encodeHttp(response: InferResponse, options: HttpResponseOptions): Promise<EncodedHttpInferResponse> {
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

  /**
   * The protos' ModelInfer request deserializer, then `decodeModelInferRequest`, on the thread.
   * Decoding errors are returned (not thrown) beside the header: the handlers check the model
   * first, as for an inline message. Rejects only when the thread itself fails.
   */
  async decodeGrpc(message: Uint8Array): Promise<DecodedGrpcMessage> {
    const bytes = new Uint8Array(message); // an owned copy: grpc-js's buffers are often slices
    const reply = await this.call({ op: 'grpc-decode', bytes }, [bytes.buffer]);
    if (!('grpc' in reply)) throw internal('request decoding thread: unexpected reply');
    const g = reply.grpc;
    if ('malformed' in g) return g;
    if (g.error !== undefined) return { header: g.header, result: { error: rebuildError(g.error) } };
    if (g.decoded === undefined) throw internal('request decoding thread: unexpected reply');
    return { header: g.header, result: { decoded: g.decoded } };
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
    const execArgv = threadExecArgv();
    const worker = new Worker(THREAD_URL, execArgv !== undefined ? { execArgv } : {});
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
      this.failAll(internal(`codec thread failed: ${err.message}`, err));
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

/** A thread's error as the event loop would have thrown it: same code, same message. */
export function rebuildError(e: { code: string; message: string }): SwitchyardError {
  const code = (ERROR_CODES as readonly string[]).includes(e.code) ? (e.code as ErrorCode) : 'internal';
  return new SwitchyardError(code, e.message);
}

