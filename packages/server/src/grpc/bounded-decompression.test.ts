import { status } from '@grpc/grpc-js';
import { deflateSync, gzipSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { decompressGrpcMessage, installBoundedDecompression } from './bounded-decompression.js';

/** A message as grpc-js hands it over: the 5-byte prefix, then the payload. */
const framed = (payload: Buffer, compressed: boolean): Buffer => {
  const prefix = Buffer.alloc(5);
  prefix[0] = compressed ? 1 : 0;
  prefix.writeUInt32BE(payload.byteLength, 1);
  return Buffer.concat([prefix, payload]);
};

const failure = async (p: Promise<unknown>): Promise<unknown> => p.then(() => 'resolved', (e: unknown) => e);

describe('decompressGrpcMessage (grpc-js contract, bounded)', () => {
  const text = Buffer.from('a message '.repeat(100));

  it('passes identity through and inflates gzip and deflate', async () => {
    expect(await decompressGrpcMessage(framed(text, false), 'identity', 10)).toEqual(text);
    expect(await decompressGrpcMessage(framed(gzipSync(text), true), 'gzip', text.byteLength)).toEqual(text);
    expect(await decompressGrpcMessage(framed(deflateSync(text), true), 'deflate', -1)).toEqual(text);
  });

  it('refuses what inflates past the limit with grpc-js\'s status and message, and garbage or unknown codings likewise', async () => {
    expect(await failure(decompressGrpcMessage(framed(gzipSync(Buffer.alloc(1 << 24)), true), 'gzip', 1000))).toEqual({
      code: status.RESOURCE_EXHAUSTED,
      details: 'Received message that decompresses to a size larger than 1000',
    });
    expect(await failure(decompressGrpcMessage(framed(text, true), 'gzip', 1 << 20))).toEqual({ code: status.INTERNAL, details: 'Failed to decompress message' });
    expect(await failure(decompressGrpcMessage(framed(text, true), 'br', 1 << 20))).toEqual({
      code: status.UNIMPLEMENTED,
      details: 'Received message compressed with unsupported encoding "br"',
    });
  });

  it('many at once all finish (the slots are released on every path)', async () => {
    const ok = framed(gzipSync(text), true);
    const bomb = framed(gzipSync(Buffer.alloc(1 << 22)), true);
    const results = await Promise.all(Array.from({ length: 40 }, (_, i) => failure(decompressGrpcMessage(i % 2 === 0 ? ok : bomb, 'gzip', text.byteLength))));
    expect(results.filter((r) => (r as { code?: number }).code === status.RESOURCE_EXHAUSTED)).toHaveLength(20);
  });

  it('installs over grpc-js 1.14.7 without complaint, once', () => {
    expect(() => {
      installBoundedDecompression();
      installBoundedDecompression();
    }).not.toThrow();
  });
});
