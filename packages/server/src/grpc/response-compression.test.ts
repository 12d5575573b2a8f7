import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { gunzipSync, inflateSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { MAX_INLINE_COMPRESS_BYTES, compressResponse, installResponseCompression, markCompressed, responseEncoding } from './response-compression.js';

describe('responseEncoding (gRPC core: CompressionAlgorithmForLevel)', () => {
  it('picks among what the client accepts, in gzip, deflate order', () => {
    const both = 'identity,deflate,gzip';
    expect(responseEncoding('none', both)).toBeUndefined();
    expect(responseEncoding('low', both)).toBe('gzip');
    expect(responseEncoding('medium', both)).toBe('deflate');
    expect(responseEncoding('high', both)).toBe('deflate');
    expect(responseEncoding('high', 'identity, GZIP')).toBe('gzip');
    expect(responseEncoding('low', 'deflate')).toBe('deflate');
  });

  it('sends uncompressed to a client that accepts neither, or says nothing', () => {
    expect(responseEncoding('high', 'identity')).toBeUndefined();
    expect(responseEncoding('high', 'br,snappy')).toBeUndefined();
    expect(responseEncoding('high', undefined)).toBeUndefined();
  });
});

describe('the serializeMessage hook', () => {
  const require = createRequire(import.meta.url);
  const internals = require(join(dirname(require.resolve('@grpc/grpc-js')), 'server-interceptors.js')) as {
    BaseServerInterceptingCall: { prototype: { serializeMessage(this: unknown, value: unknown): Buffer } };
  };
  installResponseCompression();
  const serializeMessage = (value: object, raw: Buffer): Buffer => internals.BaseServerInterceptingCall.prototype.serializeMessage.call({ handler: { serialize: () => raw } }, value);
  const unframe = (framed: Buffer): { flag: number; body: Buffer } => ({ flag: framed[0]!, body: framed.subarray(5, 5 + framed.readUInt32BE(1)) });

  it('frames unmarked responses as before: flag 0', () => {
    expect(unframe(serializeMessage({}, Buffer.from('plain')))).toEqual({ flag: 0, body: Buffer.from('plain') });
  });

  it('compresses a marked stream response inline up to the limit, and sends a larger one uncompressed', () => {
    const small = Buffer.alloc(1000, 7);
    const framed = unframe(serializeMessage(markCompressed({}, { encoding: 'gzip', zlibLevel: 1 }), small));
    expect(framed.flag).toBe(1);
    expect(gunzipSync(framed.body).equals(small)).toBe(true);
    const large = Buffer.alloc(MAX_INLINE_COMPRESS_BYTES + 1, 7);
    // Buffer.equals, not toEqual: a deep comparison walks a large buffer byte by byte for seconds
    const unmarked = unframe(serializeMessage(markCompressed({}, { encoding: 'gzip', zlibLevel: 1 }), large));
    expect(unmarked.flag).toBe(0);
    expect(unmarked.body.equals(large)).toBe(true);
  });

  it('sends a ModelInfer response compressed off the loop, whatever its size', async () => {
    const large = Buffer.alloc(MAX_INLINE_COMPRESS_BYTES * 4, 3);
    const response = await compressResponse({}, { encoding: 'deflate', zlibLevel: 9 }, () => large);
    const framed = unframe(serializeMessage(response, Buffer.from('not used')));
    expect(framed.flag).toBe(1);
    expect(inflateSync(framed.body).equals(large)).toBe(true);
    expect(await compressResponse({ plain: true }, undefined, () => large)).toEqual({ plain: true });
  });
});
