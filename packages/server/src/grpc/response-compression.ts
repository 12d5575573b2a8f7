/**
 * Compressed inference responses (tritonserver's `--grpc-infer-response-compression-level`):
 * ModelInfer and ModelStreamInfer responses are sent gzip- or deflate-compressed when the level is
 * not `none` and the client accepts the algorithm (`grpc-accept-encoding`); every other RPC, and a
 * client that accepts neither, gets them uncompressed.
 *
 * The level picks the algorithm as gRPC core does (`CompressionAlgorithmForLevel`): among the
 * algorithms the client accepts, in gRPC's order (gzip, deflate), `low` takes the first, `medium`
 * the middle one and `high` the last; the zlib level follows (1, 6, 9).
 *
 * grpc-js (1.14.7, pinned) sends every message uncompressed and drops `grpc-accept-encoding` before
 * a handler sees the metadata, so, as bounded-decompression.ts does for the other direction, this
 * module hooks grpc-js at two points, once, failing loudly at start-up if grpc-js changed:
 * - `Metadata.fromHttp2Headers` remembers each call's `grpc-accept-encoding` (a WeakMap keyed by
 *   the call's metadata object, which is what handlers receive as `call.metadata`);
 * - `BaseServerInterceptingCall.prototype.serializeMessage` compresses a response object marked
 *   with `markCompressed` (its message flag set, as the gRPC framing requires).
 * The handler announces the algorithm in the response headers (`grpc-encoding`) before its first
 * message (`startCompressedResponses`).
 *
 * Compression costs 25-35 ms of CPU per MiB. A ModelInfer response is compressed on libuv's thread
 * pool before it is sent (`compressResponse`), whatever its size. ModelStreamInfer responses are
 * written in order from a synchronous path, so they are compressed there only up to
 * `MAX_INLINE_COMPRESS_BYTES` (the codec thread's off-loop threshold); a larger one goes
 * uncompressed (each gRPC message carries its own compressed flag), so no response holds the event
 * loop for long.
 */
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { deflate, deflateSync, gzip, gzipSync } from 'node:zlib';
import { Metadata, type ServerUnaryCall, type ServerDuplexStream } from '@grpc/grpc-js';

/** tritonserver's level names. */
export type CompressionLevel = 'none' | 'low' | 'medium' | 'high';
export type ResponseEncoding = 'gzip' | 'deflate';

/** gRPC core's order of preference among the algorithms a client accepts. */
const ORDER: readonly ResponseEncoding[] = ['gzip', 'deflate'];
const ZLIB_LEVEL: Record<Exclude<CompressionLevel, 'none'>, number> = { low: 1, medium: 6, high: 9 };

/** Largest serialized stream response compressed on the event loop (256 KiB, about 8 ms). */
export const MAX_INLINE_COMPRESS_BYTES = 256 * 1024;

const ENCODING = Symbol('switchyard.responseEncoding');
const acceptEncodings = new WeakMap<Metadata, string>();

interface Marked {
  /** Compress when serialized (inline, up to the limit), or send these already compressed bytes. */
  [ENCODING]?: { encoding: ResponseEncoding; zlibLevel: number; compressed?: Buffer };
}

const gzipAsync = promisify(gzip);
const deflateAsync = promisify(deflate);

/** The algorithm for `level` among those `accept` (a `grpc-accept-encoding` value) lists; undefined = send uncompressed. */
export function responseEncoding(level: CompressionLevel, accept: string | undefined): ResponseEncoding | undefined {
  if (level === 'none' || accept === undefined) return undefined;
  const listed = new Set(accept.split(',').map((s) => s.trim().toLowerCase()));
  const usable = ORDER.filter((a) => listed.has(a));
  if (usable.length === 0) return undefined;
  return level === 'low' ? usable[0] : level === 'medium' ? usable[Math.floor(usable.length / 2)] : usable[usable.length - 1];
}

/** What one call's responses are sent with; decided once per call. */
export interface CallCompression {
  readonly encoding: ResponseEncoding;
  readonly zlibLevel: number;
}

/**
 * For an infer call: pick the algorithm from the call's `grpc-accept-encoding`, and announce it in
 * the response headers (before any message). Returns undefined when responses go uncompressed.
 */
export function startCompressedResponses(
  level: CompressionLevel,
  call: Pick<ServerUnaryCall<unknown, unknown> | ServerDuplexStream<unknown, unknown>, 'metadata' | 'sendMetadata'>,
): CallCompression | undefined {
  if (level === 'none') return undefined;
  const encoding = responseEncoding(level, acceptEncodings.get(call.metadata));
  if (encoding === undefined) return undefined;
  const headers = new Metadata();
  headers.set('grpc-encoding', encoding);
  call.sendMetadata(headers);
  return { encoding, zlibLevel: ZLIB_LEVEL[level] };
}

/**
 * Mark a stream response to be compressed as it is serialized, when it serializes to at most
 * MAX_INLINE_COMPRESS_BYTES (no-op when `compression` is undefined).
 */
export function markCompressed<T extends object>(response: T, compression: CallCompression | undefined): T {
  if (compression !== undefined) (response as Marked)[ENCODING] = { encoding: compression.encoding, zlibLevel: compression.zlibLevel };
  return response;
}

/** Compress `response` off the event loop (libuv's thread pool) and mark it to be sent as those bytes. */
export async function compressResponse<T extends object>(response: T, compression: CallCompression | undefined, serialize: (value: T) => Buffer): Promise<T> {
  if (compression === undefined) return response;
  const raw = serialize(response);
  const level = { level: compression.zlibLevel };
  const compressed = compression.encoding === 'gzip' ? await gzipAsync(raw, level) : await deflateAsync(raw, level);
  (response as Marked)[ENCODING] = { encoding: compression.encoding, zlibLevel: compression.zlibLevel, compressed };
  return response;
}

let installed = false;

/** Install the two grpc-js hooks (idempotent). */
export function installResponseCompression(): void {
  if (installed) return;
  const require = createRequire(import.meta.url);
  const internals = require(join(dirname(require.resolve('@grpc/grpc-js')), 'server-interceptors.js')) as {
    BaseServerInterceptingCall?: { prototype: { serializeMessage?: (value: unknown) => Buffer } };
  };
  const metadataModule = require(join(dirname(require.resolve('@grpc/grpc-js')), 'metadata.js')) as { Metadata?: { fromHttp2Headers?: (headers: Record<string, unknown>) => Metadata } };
  const proto = internals.BaseServerInterceptingCall?.prototype;
  const MetadataClass = metadataModule.Metadata;
  const fromHeaders = MetadataClass?.fromHttp2Headers;
  if (proto === undefined || typeof proto.serializeMessage !== 'function' || MetadataClass === undefined || typeof fromHeaders !== 'function') {
    throw new Error('@grpc/grpc-js changed: serializeMessage or Metadata.fromHttp2Headers is gone; update response-compression.ts');
  }
  MetadataClass.fromHttp2Headers = function (headers: Record<string, unknown>): Metadata {
    const metadata = fromHeaders.call(this, headers);
    const accept = headers['grpc-accept-encoding'];
    if (typeof accept === 'string') acceptEncodings.set(metadata, accept);
    return metadata;
  };
  const plain = proto.serializeMessage;
  proto.serializeMessage = function (this: { handler: { serialize(value: unknown): Buffer } }, value: unknown): Buffer {
    const mark = value !== null && typeof value === 'object' ? (value as Marked)[ENCODING] : undefined;
    if (mark === undefined) return plain.call(this, value);
    let body = mark.compressed;
    if (body === undefined) {
      const raw = this.handler.serialize(value);
      if (raw.byteLength > MAX_INLINE_COMPRESS_BYTES) return frame(raw, 0);
      body = mark.encoding === 'gzip' ? gzipSync(raw, { level: mark.zlibLevel }) : deflateSync(raw, { level: mark.zlibLevel });
    }
    return frame(body, 1); // compressed, with the algorithm of the call's grpc-encoding header
  };
  installed = true;
}

/** One gRPC message: the compressed flag, the length, the bytes. */
function frame(body: Buffer, compressed: 0 | 1): Buffer {
  const framed = Buffer.allocUnsafe(body.byteLength + 5);
  framed.writeUInt8(compressed, 0);
  framed.writeUInt32BE(body.byteLength, 1);
  body.copy(framed, 5);
  return framed;
}
