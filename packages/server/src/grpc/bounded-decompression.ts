/**
 * A process-wide bound on gRPC message decompression.
 *
 * grpc-js (1.14.7, pinned) inflates every compressed message in full, in memory, up to
 * `grpc.max_receive_message_length`, and as many at once as messages arrive: 60 streams each
 * carrying a 64 KiB gzip bomb hold 60 × 64 MiB before any is refused (measured: 4 GB of RSS from
 * one connection). It offers no option to bound that, so this module replaces the one method that
 * does it, `BaseServerInterceptingCall.prototype.decompressMessage`, with the same contract (same
 * statuses and messages) inflating through the process-wide `inflationSlots` the HTTP door uses
 * too. A bomb holds its slot only while it inflates to the limit.
 *
 * Installed once, by `createGrpcServer`; a grpc-js without that method fails loudly at start-up.
 */
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import * as zlib from 'node:zlib';
import { status } from '@grpc/grpc-js';
import { inflationSlots } from '../inflation-slots.js';

const inflate = promisify(zlib.inflate);
const gunzip = promisify(zlib.gunzip);

/** What grpc-js's `sendStatus` takes. */
interface CallStatus {
  code: number;
  details: string;
}

/**
 * Inflate one message's payload (after the 5-byte prefix), at most `maxBytes` (-1: unbounded,
 * which createGrpcServer never configures). Rejects with the status grpc-js itself would send.
 */
export async function decompressGrpcMessage(message: Buffer, encoding: string, maxBytes: number): Promise<Buffer> {
  const contents = message.subarray(5);
  if (encoding === 'identity') return contents;
  if (encoding !== 'deflate' && encoding !== 'gzip') {
    throw { code: status.UNIMPLEMENTED, details: `Received message compressed with unsupported encoding "${encoding}"` } satisfies CallStatus;
  }
  try {
    const options = maxBytes === -1 ? {} : { maxOutputLength: maxBytes + 1 };
    const out = await inflationSlots.run(() => (encoding === 'deflate' ? inflate(contents, options) : gunzip(contents, options)));
    if (maxBytes !== -1 && out.byteLength > maxBytes) throw new RangeError('too large');
    return out;
  } catch (e) {
    if (e instanceof RangeError || (e as { code?: string }).code === 'ERR_BUFFER_TOO_LARGE') {
      throw { code: status.RESOURCE_EXHAUSTED, details: `Received message that decompresses to a size larger than ${maxBytes}` } satisfies CallStatus;
    }
    throw { code: status.INTERNAL, details: 'Failed to decompress message' } satisfies CallStatus;
  }
}

let installed = false;

/** Replace grpc-js's decompression with `decompressGrpcMessage` (idempotent). */
export function installBoundedDecompression(): void {
  if (installed) return;
  const require = createRequire(import.meta.url);
  const internals = require(join(dirname(require.resolve('@grpc/grpc-js')), 'server-interceptors.js')) as {
    BaseServerInterceptingCall?: { prototype: { decompressMessage?: unknown; maxReceiveMessageSize?: number } };
  };
  const proto = internals.BaseServerInterceptingCall?.prototype;
  if (proto === undefined || typeof proto.decompressMessage !== 'function') {
    throw new Error('@grpc/grpc-js changed: BaseServerInterceptingCall.prototype.decompressMessage is gone; update bounded-decompression.ts');
  }
  proto.decompressMessage = function (this: { maxReceiveMessageSize: number }, message: Buffer, encoding: string): Promise<Buffer> {
    return decompressGrpcMessage(message, encoding, this.maxReceiveMessageSize);
  };
  installed = true;
}
