import { describe, expect, it } from 'vitest';
import type { Logger } from '@switchyard/common';
import { internal } from '@switchyard/common';
import type { InferTensor } from '@switchyard/kserve';
import type { ModelConfig } from '@switchyard/model-config';
import type { NormalizedRequest } from './request-normalizer.js';
import { LruByteCache, ResponseCache, cacheKey, entryByteSize, responseCacheAllowed, type CacheableVersion } from './response-cache.js';
import { ModelStatsCollector } from './statistics.js';

const tensor = (name: string, bytes: number[], shape = [bytes.length]): InferTensor => ({
  name,
  datatype: 'UINT8',
  shape,
  data: Uint8Array.from(bytes),
  parameters: {},
});

function request(id: string, inputs: Array<{ name: string; bytes: number[]; shape?: number[]; datatype?: 'UINT8' | 'INT8' }>, requestedOutputs = ['OUT']): NormalizedRequest {
  return {
    request: { id, modelName: 'm', modelVersion: undefined, parameters: {}, inputs: [], outputs: [] },
    batchSize: 0,
    inputs: inputs.map((i) => {
      const shape = i.shape ?? [i.bytes.length];
      return { name: i.name, datatype: i.datatype ?? 'UINT8', shape, originalShape: shape, data: Uint8Array.from(i.bytes) };
    }),
    requestedOutputs,
  };
}

const config = (extra: Record<string, unknown> = {}): ModelConfig => ({ name: 'm', response_cache: { enable: true }, ...extra }) as unknown as ModelConfig;

function version(cfg = config()): CacheableVersion {
  return { name: 'm', version: 1, config: cfg, stats: new ModelStatsCollector('m', 1) };
}

/** A clock that advances 10 ns per reading. */
function fakeClock(): () => bigint {
  let t = 1_000n;
  return () => (t += 10n);
}

function recordingLogger(): Logger & { warnings: string[] } {
  const warnings: string[] = [];
  const logger = {
    warnings,
    warn: (_obj: unknown, msg?: string) => warnings.push(msg ?? ''),
    error: () => undefined,
    info: () => undefined,
    debug: () => undefined,
    trace: () => undefined,
    child: () => logger,
  };
  return logger as unknown as Logger & { warnings: string[] };
}

describe('LruByteCache', () => {
  it("sizes entries as Triton's cache entry packs them", () => {
    // 4 (count) + 8 (size) + 4+3 (name) + 4+5 (dtype UINT8) + 4+8 (one dim) + 8+2 (data)
    expect(entryByteSize([tensor('OUT', [1, 2])])).toBe(4 + 8 + 7 + 9 + 12 + 10);
    expect(entryByteSize([])).toBe(4);
  });

  it('copies in and out: callers cannot change what is cached', () => {
    const cache = new LruByteCache(1024);
    const out = tensor('OUT', [1, 2, 3]);
    expect(cache.insert('k', { outputs: [out], parameters: { p: 1 } })).toBe('inserted');
    out.data[0] = 99;
    const first = cache.get('k');
    expect(Array.from(first?.outputs[0]?.data ?? [])).toEqual([1, 2, 3]);
    first!.outputs[0]!.data[1] = 42;
    first!.outputs[0]!.shape.push(7);
    expect(Array.from(cache.get('k')?.outputs[0]?.data ?? [])).toEqual([1, 2, 3]);
    expect(cache.get('k')?.outputs[0]?.shape).toEqual([3]);
    expect(cache.get('k')?.parameters).toEqual({ p: 1 });
    expect(cache.get('missing')).toBeUndefined();
  });

  it('evicts least recently used entries by bytes; refuses entries larger than the cache', () => {
    const one = entryByteSize([tensor('OUT', [0, 0, 0, 0])]);
    const cache = new LruByteCache(3 * one);
    for (const k of ['a', 'b', 'c']) expect(cache.insert(k, { outputs: [tensor('OUT', [0, 0, 0, 0])], parameters: {} })).toBe('inserted');
    expect(cache.usedBytes).toBe(3 * one);
    cache.get('a'); // a is now the most recently used; b the least
    expect(cache.insert('d', { outputs: [tensor('OUT', [1, 1, 1, 1])], parameters: {} })).toBe('inserted');
    expect([cache.has('a'), cache.has('b'), cache.has('c'), cache.has('d')]).toEqual([true, false, true, true]);
    // A bigger entry evicts as many as it needs.
    expect(cache.insert('e', { outputs: [tensor('OUT', Array(4 + one).fill(2))], parameters: {} })).toBe('inserted');
    expect([cache.has('a'), cache.has('c'), cache.has('d'), cache.has('e')]).toEqual([false, false, true, true]);
    expect(cache.usedBytes).toBe(3 * one);
    expect(cache.insert('e', { outputs: [], parameters: {} })).toBe('exists');
    expect(cache.insert('huge', { outputs: [tensor('OUT', Array(3 * one).fill(0))], parameters: {} })).toBe('too_large');
    expect(cache.has('e')).toBe(true);
  });

  it('needs a positive capacity', () => {
    expect(() => new LruByteCache(0)).toThrow(RangeError);
  });
});

describe('cacheKey', () => {
  const base = request('a', [{ name: 'X', bytes: [1, 2] }, { name: 'Y', bytes: [3] }]);
  const key = (r: NormalizedRequest, v = 1, g = 1) => cacheKey('m', v, g, r);

  it('ignores the request id and input order', () => {
    expect(key(request('other', [{ name: 'Y', bytes: [3] }, { name: 'X', bytes: [1, 2] }]))).toBe(key(base));
  });

  it('changes with any byte, datatype, shape, name, requested output, version or load', () => {
    const variants = [
      request('a', [{ name: 'X', bytes: [1, 3] }, { name: 'Y', bytes: [3] }]),
      request('a', [{ name: 'X', bytes: [1, 2], datatype: 'INT8' }, { name: 'Y', bytes: [3] }]),
      request('a', [{ name: 'X', bytes: [1, 2], shape: [1, 2] }, { name: 'Y', bytes: [3] }]),
      request('a', [{ name: 'Z', bytes: [1, 2] }, { name: 'Y', bytes: [3] }]),
      // Byte lengths are part of the key: moving a byte between inputs is a different request.
      request('a', [{ name: 'X', bytes: [1] }, { name: 'Y', bytes: [2, 3] }]),
      request('a', [{ name: 'X', bytes: [1, 2] }, { name: 'Y', bytes: [3] }], ['OUT', 'OUT2']),
      request('a', [{ name: 'X', bytes: [1, 2] }, { name: 'Y', bytes: [3] }], []),
    ];
    const keys = new Set([key(base), ...variants.map((r) => key(r)), key(base, 2), key(base, 1, 2), cacheKey('n', 1, 1, base)]);
    expect(keys.size).toBe(variants.length + 4);
  });
});

describe('ResponseCache', () => {
  const ok = (outputs: InferTensor[]) => ({ final: true, response: { id: 'x', modelName: 'm', modelVersion: '1', parameters: {}, outputs } });

  it('a miss inserts the successful response; an identical request is a hit with its own id', () => {
    const cache = new ResponseCache({ capacityBytes: 4096, now: fakeClock() });
    const v = version();
    const miss = cache.lookup(v, request('first', [{ name: 'X', bytes: [1] }]), 0n);
    expect(miss?.response).toBeUndefined();
    miss?.settle?.(ok([tensor('OUT', [7, 8])]));
    expect(cache.store.size).toBe(1);
    let stats = v.stats.snapshot();
    expect(stats.inference_stats.cache_miss.count).toBe(1);
    expect(stats.inference_stats.cache_miss.ns).toBe(20); // lookup (10) + insert (10) on the fake clock
    expect(stats.inference_stats.cache_hit.count).toBe(0);

    const hit = cache.lookup(v, request('second', [{ name: 'X', bytes: [1] }]), 1_000n);
    expect(hit?.response).toMatchObject({ id: 'second', modelName: 'm', modelVersion: '1' });
    expect(Array.from(hit?.response?.outputs[0]?.data ?? [])).toEqual([7, 8]);
    stats = v.stats.snapshot();
    expect(stats.inference_stats.cache_hit).toEqual({ count: 1, ns: 10 });
    expect(stats.inference_stats.success.count).toBe(1);
    expect(stats.inference_stats.queue.count).toBe(1);
    // A hit is not an inference, an execution or compute.
    expect(stats.inference_count).toBe(0);
    expect(stats.execution_count).toBe(0);
    expect(stats.inference_stats.compute_infer.count).toBe(0);
    expect(stats.last_inference).toBe(0);
  });

  it('does not cache failures or count them as misses; settles once', () => {
    const cache = new ResponseCache({ capacityBytes: 4096, now: fakeClock() });
    const v = version();
    const lookup = cache.lookup(v, request('a', [{ name: 'X', bytes: [1] }]), 0n);
    lookup?.settle?.({ final: true, error: internal('backend failed') });
    lookup?.settle?.(ok([tensor('OUT', [1])]));
    expect(cache.store.size).toBe(0);
    expect(v.stats.snapshot().inference_stats.cache_miss.count).toBe(0);
    const again = cache.lookup(v, request('b', [{ name: 'X', bytes: [1] }]), 0n);
    expect(again?.response).toBeUndefined();
  });

  it('counts a miss that is too big to insert, and logs it; an already inserted key counts nothing', () => {
    const logger = recordingLogger();
    const cache = new ResponseCache({ capacityBytes: 64, logger, now: fakeClock() });
    const v = version();
    cache.lookup(v, request('a', [{ name: 'X', bytes: [1] }]), 0n)?.settle?.(ok([tensor('OUT', Array(100).fill(1))]));
    expect(cache.store.size).toBe(0);
    expect(v.stats.snapshot().inference_stats.cache_miss.count).toBe(1);
    expect(logger.warnings[0]).toMatch(/^Failed to insert key \[.+\] into response cache/);

    const first = cache.lookup(v, request('b', [{ name: 'X', bytes: [2] }]), 0n);
    const second = cache.lookup(v, request('c', [{ name: 'X', bytes: [2] }]), 0n);
    first?.settle?.(ok([tensor('OUT', [1])]));
    second?.settle?.(ok([tensor('OUT', [1])]));
    expect(v.stats.snapshot().inference_stats.cache_miss.count).toBe(2);
  });

  it('never matches entries of an earlier load of the same version', () => {
    const cache = new ResponseCache({ capacityBytes: 4096, now: fakeClock() });
    const before = version();
    cache.lookup(before, request('a', [{ name: 'X', bytes: [1] }]), 0n)?.settle?.(ok([tensor('OUT', [1])]));
    expect(cache.lookup(before, request('b', [{ name: 'X', bytes: [1] }]), 0n)?.response).toBeDefined();
    const reloaded = version();
    expect(cache.lookup(reloaded, request('c', [{ name: 'X', bytes: [1] }]), 0n)?.response).toBeUndefined();
  });

  it('leaves models without response_cache, decoupled and sequence models alone', () => {
    const cache = new ResponseCache({ capacityBytes: 4096 });
    expect(cache.lookup(version(config({ response_cache: undefined })), request('a', []), 0n)).toBeUndefined();
    expect(cache.lookup(version(config({ response_cache: { enable: false } })), request('a', []), 0n)).toBeUndefined();
    expect(responseCacheAllowed(config({ model_transaction_policy: { decoupled: true } }))).toBe(false);
    expect(responseCacheAllowed(config({ sequence_batching: {} }))).toBe(false);
    expect(responseCacheAllowed(config({ dynamic_batching: {} }))).toBe(true);
    expect(cache.enabledFor(version())).toBe(true);
  });
});
