import { describe, expect, it } from 'vitest';
import { responseEncoding } from './response-compression.js';

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
