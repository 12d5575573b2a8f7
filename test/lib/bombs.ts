/**
 * Hostile inputs for the front-door limit suites: compression bombs, raw gRPC frames, and the peak
 * memory of a process under test.
 */
import * as http2 from 'node:http2';
import { readFileSync } from 'node:fs';
import { deflateSync, gzipSync } from 'node:zlib';

const MEMBER_BYTES = 64 * 1024 * 1024;
let member: Buffer | undefined;

/**
 * A gzip stream that inflates to `inflatedBytes` zeros (a multiple of 64 MiB) from about 1/1000 of
 * that: one gzip member of 64 MiB zeros repeated (gzip allows concatenated members).
 */
export function gzipBomb(inflatedBytes: number): Buffer {
  member ??= gzipSync(Buffer.alloc(MEMBER_BYTES), { level: 9 });
  return Buffer.concat(Array.from({ length: Math.ceil(inflatedBytes / MEMBER_BYTES) }, () => member!));
}

/** A zlib-wrapped deflate stream (HTTP `Content-Encoding: deflate`) inflating to `inflatedBytes` spaces. */
export function deflateBomb(inflatedBytes: number): Buffer {
  return deflateSync(Buffer.alloc(inflatedBytes, 0x20), { level: 9 });
}

/** The peak resident set (VmHWM) of a process so far, in bytes. */
export function peakRssBytes(pid: number): number {
  const m = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  if (m === null) throw new Error(`no VmHWM for pid ${pid}`);
  return Number(m[1]) * 1024;
}

export interface RawGrpcStatus {
  code: number;
  details: string;
}

/**
 * One gRPC call written by hand over HTTP/2, as any client may send it: a single length-prefixed
 * message whose bytes are sent as given, flagged compressed with `encoding` unless it is
 * `identity`. Resolves with the call's status; rejects when the connection ends without one.
 */
export function rawGrpcCall(address: string, path: string, message: Buffer, encoding: 'gzip' | 'deflate' | 'identity'): Promise<RawGrpcStatus> {
  return new Promise((resolve, reject) => {
    const session = http2.connect(`http://${address}`);
    session.on('error', reject);
    const req = session.request({
      ':method': 'POST',
      ':path': path,
      'content-type': 'application/grpc',
      te: 'trailers',
      'grpc-encoding': encoding,
      'grpc-accept-encoding': 'identity',
    });
    let status: RawGrpcStatus | undefined;
    const take = (headers: http2.IncomingHttpHeaders): void => {
      const code = headers['grpc-status'];
      if (code !== undefined) status = { code: Number(code), details: decodeURIComponent(String(headers['grpc-message'] ?? '')) };
    };
    req.on('response', take);
    req.on('trailers', take);
    req.on('data', () => {});
    req.on('error', () => {});
    req.on('close', () => {
      session.close();
      if (status !== undefined) resolve(status);
      else reject(new Error(`gRPC call ${path} ended without a status (rst ${req.rstCode})`));
    });
    const prefix = Buffer.alloc(5);
    prefix[0] = encoding === 'identity' ? 0 : 1;
    prefix.writeUInt32BE(message.byteLength, 1);
    req.end(Buffer.concat([prefix, message]));
  });
}
