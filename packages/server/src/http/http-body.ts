/**
 * Request bodies and content codings for the HTTP front door.
 *
 * - `readBody` buffers a request body up to `--http-max-input-size`. A larger declared
 *   Content-Length or a stream that grows past the limit is refused without buffering: the rest
 *   of the body is read and discarded so the client (which sends the whole body before reading)
 *   receives the 400 instead of a reset connection.
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
import { SwitchyardError, cancelled, invalidArgument, unsupported } from '@switchyard/common';
import { inflationSlots } from '../inflation-slots.js';

/** Triton's default `--http-max-input-size`: 64 MiB. */
export const DEFAULT_MAX_INPUT_SIZE = 64 * 1024 * 1024;

const unzip = promisify(zlib.unzip);
const gzip = promisify(zlib.gzip);
const deflate = promisify(zlib.deflate);

/**
 * Triton's size-limit error. Upstream's qa (L0_http http_input_size_limit_test) matches the
 * substrings "Request JSON size", "exceeds the maximum allowed value" and "Use
 * --http-max-input-size to increase the limit"; this wording carries all three.
 */
export function inputTooLarge(size: number, limit: number): SwitchyardError {
  return invalidArgument(
    `Request JSON size of ${size} bytes exceeds the maximum allowed value of ${limit} bytes. Use --http-max-input-size to increase the limit.`,
  );
}

/** The declared Content-Length, or undefined when absent or unparsable (chunked bodies). */
export function declaredLength(req: IncomingMessage): number | undefined {
  const v = req.headers['content-length'];
  if (v === undefined) return undefined;
  const n = Number(v);
  return Number.isSafeInteger(n) && n >= 0 ? n : undefined;
}

/**
 * Read the whole body, at most `limit` bytes. Rejects with invalid_argument (Triton's size
 * message) after draining an oversized body, with `cancelled` if the client goes away.
 */
export function readBody(req: IncomingMessage, limit: number): Promise<Buffer> {
  return new Promise<Buffer>((resolve, reject) => {
    const declared = declaredLength(req);
    let tooLarge = declared !== undefined && declared > limit;
    const chunks: Buffer[] = [];
    let received = 0;
    const onData = (chunk: Buffer) => {
      received += chunk.byteLength;
      if (tooLarge) return;
      if (received > limit) {
        tooLarge = true;
        chunks.length = 0;
        return;
      }
      chunks.push(chunk);
    };
    const cleanup = () => {
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onError);
      req.off('close', onClose);
    };
    const onEnd = () => {
      cleanup();
      if (tooLarge) reject(inputTooLarge(declared ?? received, limit));
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
