/**
 * Request bodies and content codings for the HTTP front door.
 *
 * - `readBody` buffers a request body up to a `BodyBound`. A larger declared Content-Length or a
 *   stream that grows past the bound is refused without buffering: the rest of the body is read
 *   and discarded so the client (which sends the whole body before reading) receives the 400
 *   instead of a reset connection.
 * - `bodyBound` / `inferBodyBound` say what bounds a body. `--http-max-input-size` bounds JSON:
 *   every body, except that an infer request using the binary tensor extension
 *   (`Inference-Header-Content-Length` > 0) has only its JSON header bounded by it, as Triton
 *   does; its binary tensor data is bounded apart, by `maxBinaryInputSize` (default
 *   `MAX_TENSOR_BYTE_SIZE`, the byte bound every tensor has). A raw binary request
 *   (`Inference-Header-Content-Length: 0`) is bounded by `--http-max-input-size` as a whole, and
 *   so is any compressed body, before and after decompression.
 * - `decompressBody` handles `Content-Encoding: gzip|deflate` (zlib or gzip framing, detected),
 *   bounding the decompressed size by the same limit, a few bodies at a time process-wide
 *   (`inflation-slots.ts`); a body that does not decompress is the client's error (400); other
 *   codings are 501.
 * - `responseEncoding` / `compressBody` pick and apply the response coding from
 *   `Accept-Encoding` q-values exactly as Triton's `CompressionTypeUsed` does.
 */
import type { IncomingMessage } from 'node:http';
import { promisify } from 'node:util';
import * as zlib from 'node:zlib';
import { constants as bufferConstants } from 'node:buffer';
import { SwitchyardError, cancelled, invalidArgument, unsupported } from '@switchyard/common';
import { MAX_TENSOR_BYTE_SIZE } from '@switchyard/kserve';
import { inflationSlots } from '../inflation-slots.js';

/** Triton's default `--http-max-input-size`: 64 MiB. */
export const DEFAULT_MAX_INPUT_SIZE = 64 * 1024 * 1024;

/**
 * The default bound of one infer request's binary tensor data (all its binary inputs together):
 * the byte bound of one tensor. A body is one buffer, so header and data together stay within
 * what one buffer holds as well.
 */
export const DEFAULT_MAX_BINARY_INPUT_SIZE = MAX_TENSOR_BYTE_SIZE;

const unzip = promisify(zlib.unzip);
const gzip = promisify(zlib.gzip);
const deflate = promisify(zlib.deflate);

/**
 * Triton's `--http-max-input-size` error, in its current wording (`size` is the JSON header's
 * length for a binary-extension request, else the body's).
 */
export function inputTooLarge(size: number, limit: number): SwitchyardError {
  return invalidArgument(
    `request JSON size of ${size} bytes exceeds the maximum allowed input size of ${limit} bytes. Use --http-max-input-size to increase the limit.`,
  );
}

/** The refusal of binary tensor data past `maxBinaryInputSize` (Switchyard's bound; Triton has no such message). */
export function binaryDataTooLarge(size: number, limit: number): SwitchyardError {
  return invalidArgument(`request binary tensor data of ${size} bytes exceeds the maximum allowed binary data size of ${limit} bytes`);
}

/** What bounds one request body. */
export interface BodyBound {
  /** The most bytes the body may have. */
  readonly limit: number;
  /** The refusal of a body of `size` bytes, past `limit`. */
  readonly tooLarge: (size: number) => SwitchyardError;
  /** Set when the request is refused whatever its body (a JSON header declared past the limit): the body is drained, then this. */
  readonly refusal?: SwitchyardError;
}

/** The bound of every body but an infer request's: `--http-max-input-size`. */
export function bodyBound(maxInputSize: number): BodyBound {
  return { limit: maxInputSize, tooLarge: (size) => inputTooLarge(size, maxInputSize) };
}

/** The largest buffer Node.js makes: a body is read into one. */
const MAX_BODY_BUFFER = bufferConstants.MAX_LENGTH;

/**
 * The bound of an infer request's body. With `Inference-Header-Content-Length` > 0 (and no
 * Content-Encoding) only the JSON header counts against `maxInputSize`, and the binary data
 * after it against `maxBinaryInputSize`; otherwise (JSON only, raw binary, compressed) the whole
 * body counts against `maxInputSize`. A header value that is not a positive integer is bounded
 * as a whole body (the decoder then refuses or reads it as a raw request).
 */
export function inferBodyBound(req: IncomingMessage, maxInputSize: number, maxBinaryInputSize: number): BodyBound {
  const whole = bodyBound(maxInputSize);
  if (requestEncoding(req) !== 'identity') return whole;
  const value = req.headers['inference-header-content-length'];
  const m = /^\s*\+?(\d+)/.exec(Array.isArray(value) ? (value[0] ?? '') : (value ?? ''));
  if (m === null) return whole;
  const headerLength = Number(m[1]);
  if (headerLength === 0) return whole;
  if (headerLength > maxInputSize) return { ...whole, refusal: inputTooLarge(headerLength, maxInputSize) };
  return {
    limit: Math.min(headerLength + maxBinaryInputSize, MAX_BODY_BUFFER),
    tooLarge: (size) => binaryDataTooLarge(size - headerLength, Math.min(maxBinaryInputSize, MAX_BODY_BUFFER - headerLength)),
  };
}

/** The declared Content-Length, or undefined when absent or unparsable (chunked bodies). */
export function declaredLength(req: IncomingMessage): number | undefined {
  const v = req.headers['content-length'];
  if (v === undefined) return undefined;
  const n = Number(v);
  return Number.isSafeInteger(n) && n >= 0 ? n : undefined;
}

/** Bodies from this size with a declared length are assembled in place (see `readBody`). */
const IN_PLACE_FROM_BYTES = 1 << 20;

/**
 * Read the whole body within `bound` (a number is `bodyBound(limit)`). Rejects with the bound's
 * refusal after draining an oversized body, with `cancelled` if the client goes away.
 *
 * Memory follows the bytes received, never a declared length alone: chunks are kept as they
 * arrive; once half of a declared Content-Length (of at least IN_PLACE_FROM_BYTES) has arrived,
 * one buffer of that length is made, the chunks copied into it and dropped, and the rest written
 * straight into it. The peak is then 1.5× the body instead of 2× (chunks + joined copy), and a
 * client that declares gigabytes and sends little costs at most twice what it sent (three times
 * while the chunks are copied).
 */
export function readBody(req: IncomingMessage, bound: number | BodyBound): Promise<Buffer> {
  const { limit, tooLarge: refuse, refusal } = typeof bound === 'number' ? bodyBound(bound) : bound;
  return new Promise<Buffer>((resolve, reject) => {
    const declared = declaredLength(req);
    let tooLarge = refusal !== undefined || (declared !== undefined && declared > limit);
    const chunks: Buffer[] = [];
    let received = 0;
    /** The declared-length buffer the body is assembled in, once half of it has arrived. */
    let whole: Buffer | undefined;
    const onData = (chunk: Buffer) => {
      received += chunk.byteLength;
      if (tooLarge) return;
      if (received > limit) {
        tooLarge = true;
        chunks.length = 0;
        whole = undefined;
        return;
      }
      if (whole !== undefined) {
        // node:http ends a body at its Content-Length, so it never outgrows `whole`.
        chunk.copy(whole, received - chunk.byteLength);
        return;
      }
      chunks.push(chunk);
      if (declared !== undefined && declared >= IN_PLACE_FROM_BYTES && received * 2 >= declared && declared >= received) {
        whole = Buffer.allocUnsafe(declared);
        let at = 0;
        for (const c of chunks) at += c.copy(whole, at);
        chunks.length = 0;
      }
    };
    const cleanup = () => {
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onError);
      req.off('close', onClose);
    };
    const onEnd = () => {
      cleanup();
      if (tooLarge) reject(refusal ?? refuse(declared !== undefined && declared > limit ? declared : received));
      else if (whole !== undefined) resolve(received === whole.byteLength ? whole : whole.subarray(0, received));
      else resolve(chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks, received));
    };
    const onError = (e: Error) => {
      cleanup();
      reject(cancelled('client closed the connection', e));
    };
    const onClose = () => {
      if (!req.complete) {
        cleanup();
        reject(cancelled('client closed the connection'));
      }
    };
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', onError);
    req.on('close', onClose);
  });
}

export type RequestEncoding = 'identity' | 'gzip' | 'deflate' | 'unknown';

/** Triton's `GetRequestCompressionType`: exact `gzip` / `deflate`, empty or `identity` = none. */
export function requestEncoding(req: IncomingMessage): RequestEncoding {
  const v = req.headers['content-encoding'];
  if (v === undefined || v === '' || v === 'identity') return 'identity';
  if (v === 'gzip' || v === 'deflate') return v;
  return 'unknown';
}

/** Marker on the 501 for unknown codings: the reply must carry `Accept-Encoding: gzip, deflate`. */
export const UNSUPPORTED_ENCODING_MESSAGE = 'Unsupported compression type';

/** Decompress a gzip/deflate body, refusing output beyond `limit` bytes. */
export async function decompressBody(body: Buffer, encoding: RequestEncoding, limit: number): Promise<Buffer> {
  if (encoding === 'identity') return body;
  if (encoding === 'unknown') throw unsupported(UNSUPPORTED_ENCODING_MESSAGE);
  try {
    // maxOutputLength one past the limit distinguishes "exactly the limit" from "more".
    const out = await inflationSlots.run(() => unzip(body, { maxOutputLength: limit + 1 }));
    if (out.byteLength > limit) throw inputTooLarge(out.byteLength, limit);
    return out;
  } catch (e) {
    if (e instanceof SwitchyardError) throw e;
    if ((e as { code?: string }).code === 'ERR_BUFFER_TOO_LARGE') throw inputTooLarge(limit + 1, limit);
    // The client's body does not match its Content-Encoding: its error, not the server's.
    throw invalidArgument(`failed to decompress the request body (Content-Encoding: ${encoding}): ${(e as Error).message}`, e);
  }
}

export type ResponseEncoding = 'identity' | 'gzip' | 'deflate';

/**
 * Triton's `CompressionTypeUsed`: split on ',', each entry `type[;q=w]` (leading spaces
 * skipped, malformed entries ignored); the highest weight among identity/deflate/gzip wins,
 * earlier entries win ties; weight 0 never wins.
 */
export function responseEncoding(acceptEncoding: string | undefined): ResponseEncoding {
  if (acceptEncoding === undefined) return 'identity';
  let best: ResponseEncoding = 'identity';
  let weight = 0;
  for (const entry of acceptEncoding.split(',')) {
    const start = entry.search(/[^ ]/);
    const q = entry.indexOf(';q=');
    if (start === -1 || (q !== -1 && start >= q)) continue;
    const type = q === -1 ? entry.slice(start) : entry.slice(start, q);
    let w = 1;
    if (q !== -1) {
      w = parseFloat(entry.slice(q + 3));
      if (Number.isNaN(w)) continue;
    }
    if ((type === 'identity' || type === 'deflate' || type === 'gzip') && w > weight) {
      best = type;
      weight = w;
    }
  }
  return best;
}

/** Compress a response body; deflate is zlib-wrapped (RFC 1950), as the Python client expects. */
export async function compressBody(body: Buffer, encoding: ResponseEncoding): Promise<Buffer> {
  if (encoding === 'gzip') return gzip(body);
  if (encoding === 'deflate') return deflate(body);
  return body;
}
