/**
 * The serving side of KV transfer on a worker: the `KvBlockProvider` a worker's one transfer server
 * answers pulls with (model → that model's `LlmEndpoint.kvTransfer`), and `kvLayoutDigest`, the
 * layout digest both the puller (kv-import.ts) and this provider name, so a pull between workers whose
 * layouts differ in any field is refused by the server before a byte moves.
 */
import { createHash } from 'node:crypto';
import { invalidArgument, notFound } from '@switchyard/common';
import type { InferenceEngine } from '@switchyard/engine';
import type { KvLayout, LlmKvTransfer } from '@switchyard/llm';
import type { KvBlockProvider, KvPullRequest, KvReleaseRequest, KvTransferBlock } from '@switchyard/runtime';

/** The fields of a KvLayout, in the fixed order the digest is taken over. */
const LAYOUT_FIELDS = ['modelId', 'engine', 'dtype', 'numLayers', 'numKvHeads', 'headDim', 'blockSize', 'bytesPerBlock'] as const satisfies readonly (keyof KvLayout)[];

/**
 * SHA-256 (hex) of the layout's canonical JSON: an array of its fields in `LAYOUT_FIELDS` order, so
 * key order, extra keys and the object's prototype make no difference. Equal digests iff
 * `kvLayoutMismatch` finds no difference.
 */
export function kvLayoutDigest(layout: KvLayout): string {
  return createHash('sha256')
    .update(JSON.stringify(LAYOUT_FIELDS.map((k) => layout[k])))
    .digest('hex');
}

/**
 * The provider over an engine: a pull names a model; the model's current LLM endpoint answers it (a
 * reload replaces the engine, whose leases are gone: not_found). Throws SwitchyardErrors the puller
 * receives with their code: not_found (model not a ready LLM here, no KV transfer, unknown or expired
 * lease), invalid_argument (layout digest differs, a hash named twice, a hash the lease does not hold).
 */
export function engineKvBlockProvider(engine: InferenceEngine): KvBlockProvider {
  const transferOf = (model: string): LlmKvTransfer => {
    const transfer = engine.llmEndpoint?.(model)?.kvTransfer;
    if (transfer === undefined) throw notFound(`model '${model}' is not a ready LLM with KV transfer on this worker`);
    return transfer;
  };
  return {
    read(request: KvPullRequest): readonly KvTransferBlock[] {
      const transfer = transferOf(request.model);
      if (request.layoutDigest !== kvLayoutDigest(transfer.layout)) {
        throw invalidArgument(`KV layout of model '${request.model}' differs between the two workers (layout digest mismatch)`);
      }
      // each hash at most once: a pull cannot make this worker copy one block many times over
      if (new Set(request.hashes).size !== request.hashes.length) throw invalidArgument('a KV pull names the same block more than once');
      return transfer.readBlocks(request.leaseId, request.hashes);
    },
    release(request: KvReleaseRequest): boolean {
      const transfer = engine.llmEndpoint?.(request.model)?.kvTransfer;
      return transfer?.releaseLease(request.leaseId) ?? false;
    },
  };
}

/** KV blocks pinned by leases and imports, summed over the engine's LLM endpoints (`switchyard_worker_kv_pinned_blocks`). */
export function pinnedKvBlocks(engine: Pick<InferenceEngine, 'llmEndpoints'>): number {
  let pinned = 0;
  for (const endpoint of engine.llmEndpoints?.() ?? []) pinned += endpoint.kvTransfer?.pinnedBlocks() ?? 0;
  return pinned;
}
