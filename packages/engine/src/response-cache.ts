/**
 * Triton's response cache (the `local` cache of `--cache-config local,size=N`): successful
 * responses kept in memory, shared by every model, and served again to identical requests
 * without running the model.
 *
 * Two parts:
 * - `LruByteCache`: the store. A byte budget, least-recently-used eviction, entries sized the way
 *   Triton's cache entry packs a response (so `size=N` means about what it means to Triton).
 *   Entries own copies of their bytes: nothing a caller does to a response can change the cache.
 * - `ResponseCache`: what the engine calls around scheduling. `lookup` runs after normalisation,
 *   where Triton's scheduler looks up (`DynamicBatchScheduler::Enqueue`): a hit answers at once
 *   and is counted in `cache_hit`; a miss hands back `settle`, which the engine calls with the
 *   request's final result to insert it and count the miss.
 *
 * Key (Triton's `TritonCache::Hash` hashes model name, version and each input's name and bytes,
 * inputs sorted by name). We hash a superset, so a key never matches more than Triton's would:
 * also each input's datatype and shape (Triton's key ignores them, so `[2,8]` and `[4,4]` holding
 * the same bytes collide there), the requested output names in order (the cached response holds
 * only the outputs that were asked for), and the load generation of the version (a reload that
 * changed the model file must not serve the old file's answers). SHA-256, so collisions are not
 * a practical concern. Request parameters are not part of the key, as in Triton; output
 * parameters (binary_data, classification, shared memory) are applied by the front doors to
 * whatever response they get, cached or not.
 *
 * Counting (Triton's `InferenceStatsAggregator::UpdateSuccessCacheHit` / `...CacheMiss`):
 * - hit: a success with its request and queue time and `cache_hit` (lookup time); no inference,
 *   execution or compute time.
 * - miss: counted when the executed request succeeds, with lookup + insertion time in
 *   `cache_miss`, even when the response is too big to insert (logged). A request that fails is
 *   neither cached nor counted as a miss. When an identical request inserted the same key first,
 *   nothing is counted (Triton's ALREADY_EXISTS case).
 *
 * Eligible models: `response_cache { enable: true }` and a server cache. Config validation already
 * refuses the cache on sequence-batched and decoupled models (Triton's messages); `lookup` checks
 * again so a model that slips through is simply not cached. Single-threaded: event loop only.
 */
import { createHash } from 'node:crypto';
import { silentLogger, type Logger } from '@switchyard/common';
import type { InferResponse, InferTensor, Parameters } from '@switchyard/kserve';
import type { ModelConfig } from '@switchyard/model-config';
import type { NormalizedRequest } from './request-normalizer.js';
import type { ModelStatsCollector } from './statistics.js';
import type { InferResult } from './types.js';

/** Monotonic nanoseconds. */
export type Clock = () => bigint;

const hrtime: Clock = () => process.hrtime.bigint();
const encoder = new TextEncoder();

/** What one cache entry holds: a response's outputs and parameters. */
export interface CachedResponse {
  outputs: InferTensor[];
  parameters: Parameters;
}

export type InsertOutcome = 'inserted' | 'exists' | 'too_large';

/**
 * Bytes an entry takes, as Triton's `CacheEntry` packs a response: a uint32 output count, then
 * per output a uint64 size, name, datatype and shape (each with a uint32 length; dims as int64)
 * and the data with a uint64 length.
 */
export function entryByteSize(outputs: readonly InferTensor[]): number {
  let size = 4;
  for (const t of outputs) {
    size += 8 + 4 + encoder.encode(t.name).byteLength + 4 + t.datatype.length + 4 + 8 * t.shape.length + 8 + t.data.byteLength;
  }
  return size;
}

const copyTensor = (t: InferTensor): InferTensor => ({
  name: t.name,
  datatype: t.datatype,
  shape: [...t.shape],
  data: new Uint8Array(t.data),
  parameters: { ...t.parameters },
});

const copyResponse = (r: CachedResponse): CachedResponse => ({ outputs: r.outputs.map(copyTensor), parameters: { ...r.parameters } });

interface Entry {
  response: CachedResponse;
  byteSize: number;
}

/** A byte-budgeted LRU map from key to response. `capacityBytes` > 0. */
export class LruByteCache {
  /** Insertion order is recency order: the first entry is the least recently used. */
  private readonly entries = new Map<string, Entry>();
  private used = 0;

  constructor(readonly capacityBytes: number) {
    if (!Number.isSafeInteger(capacityBytes) || capacityBytes <= 0) {
      throw new RangeError(`response cache capacity must be a positive number of bytes, got ${String(capacityBytes)}`);
    }
  }

  get size(): number {
    return this.entries.size;
  }

  get usedBytes(): number {
    return this.used;
  }

  has(key: string): boolean {
    return this.entries.has(key);
  }

  /** A copy of the entry (marking it most recently used), or undefined. */
  get(key: string): CachedResponse | undefined {
    const entry = this.entries.get(key);
    if (entry === undefined) return undefined;
    this.entries.delete(key);
    this.entries.set(key, entry);
    return copyResponse(entry.response);
  }

  /**
   * Store a copy of `response` under `key`, evicting least recently used entries until it fits.
   * An existing key is left as it is; a response larger than the whole cache is refused.
   */
  insert(key: string, response: CachedResponse): InsertOutcome {
    if (this.entries.has(key)) return 'exists';
    const byteSize = entryByteSize(response.outputs);
    if (byteSize > this.capacityBytes) return 'too_large';
    for (const [oldest, entry] of this.entries) {
      if (this.used + byteSize <= this.capacityBytes) break;
      this.entries.delete(oldest);
      this.used -= entry.byteSize;
    }
    this.entries.set(key, { response: copyResponse(response), byteSize });
    this.used += byteSize;
    return 'inserted';
  }
}

/** The part of a loaded version the cache needs. */
export interface CacheableVersion {
  readonly name: string;
  readonly version: number;
  readonly config: ModelConfig;
  readonly stats: ModelStatsCollector;
}

/** A lookup: a hit carries the response; a miss carries `settle`, to call with the final result. */
export type CacheLookup = { response: InferResponse; settle?: undefined } | { response?: undefined; settle(result: InferResult): void };

export interface ResponseCacheOptions {
  /** Cache budget in bytes (> 0). */
  capacityBytes: number;
  logger?: Logger;
  /** Injectable for tests. */
  now?: Clock;
}

/** True when the config asks for the cache and its scheduling allows it (see the file comment). */
export function responseCacheAllowed(config: ModelConfig): boolean {
  return config.response_cache?.enable === true && config.model_transaction_policy?.decoupled !== true && config.sequence_batching === undefined;
}

/**
 * The cache key of a normalised request to one load (`generation`) of a model version: SHA-256
 * of a JSON header (every name, datatype, shape and byte length) followed by the inputs' bytes
 * in the header's order. JSON quoting plus the byte lengths make the serialisation unambiguous,
 * and one header keeps the hash to a few native calls (one small update per field cost ~25 µs).
 */
export function cacheKey(modelName: string, version: number, generation: number, request: NormalizedRequest): string {
  const inputs = request.inputs.length > 1 ? [...request.inputs].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0)) : request.inputs;
  const header = JSON.stringify([
    modelName,
    version,
    generation,
    inputs.map((i) => [i.name, i.datatype, i.originalShape, i.data.byteLength]),
    request.requestedOutputs,
  ]);
  const hash = createHash('sha256').update(header);
  for (const input of inputs) hash.update(input.data);
  return hash.digest('base64');
}

/** The server-wide response cache, as the engine uses it. */
export class ResponseCache {
  readonly store: LruByteCache;
  private readonly logger: Logger;
  private readonly now: Clock;
  /** A number per loaded version object, so entries of an earlier load never match. */
  private readonly generations = new WeakMap<CacheableVersion, number>();
  private nextGeneration = 1;

  constructor(options: ResponseCacheOptions) {
    this.store = new LruByteCache(options.capacityBytes);
    this.logger = options.logger ?? silentLogger;
    this.now = options.now ?? hrtime;
  }

  /** Whether requests to this version use the cache (its metrics families are shown then). */
  enabledFor(version: Pick<CacheableVersion, 'config'>): boolean {
    return responseCacheAllowed(version.config);
  }

  /**
   * Look a normalised request up. Undefined when the version does not use the cache; a hit
   * (statistics already recorded); or a miss whose `settle` must get the request's final result.
   */
  lookup(version: CacheableVersion, request: NormalizedRequest, requestStartNs: bigint): CacheLookup | undefined {
    if (!this.enabledFor(version)) return undefined;
    const queueStartNs = this.now();
    const key = cacheKey(version.name, version.version, this.generationOf(version), request);
    const lookupStartNs = this.now();
    const cached = this.store.get(key);
    const lookupEndNs = this.now();
    if (cached !== undefined) {
      const { id, modelName } = request.request;
      const response: InferResponse = { id, modelName, modelVersion: String(version.version), parameters: cached.parameters, outputs: cached.outputs };
      version.stats.recordCacheHit({ requestStartNs, queueStartNs, lookupStartNs, lookupEndNs, requestEndNs: this.now() });
      return { response };
    }
    let settled = false;
    return {
      settle: (result: InferResult) => {
        if (settled || !result.final) return;
        settled = true;
        if (result.error !== undefined || result.response === undefined) return;
        const insertStartNs = this.now();
        const outcome = this.store.insert(key, { outputs: result.response.outputs, parameters: result.response.parameters });
        const insertEndNs = this.now();
        if (outcome === 'exists') return;
        version.stats.recordCacheMiss(lookupEndNs - lookupStartNs, insertEndNs - insertStartNs);
        if (outcome === 'too_large') {
          this.logger.warn(
            { model: version.name, version: version.version, capacityBytes: this.store.capacityBytes, entryBytes: entryByteSize(result.response.outputs) },
            `Failed to insert key [${key}] into response cache: the response is larger than the whole cache`,
          );
        }
      },
    };
  }

  private generationOf(version: CacheableVersion): number {
    let generation = this.generations.get(version);
    if (generation === undefined) {
      generation = this.nextGeneration++;
      this.generations.set(version, generation);
    }
    return generation;
  }
}
