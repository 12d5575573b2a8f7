// KV transfer, the engine's side (ARCHITECTURE.md flow 5; dynamo-design.md §3): what a prefill engine
// keeps for a decode engine, and what a decode engine takes in. No IO here: the worker moves the bytes
// over the KV transfer plane (@switchyard/runtime `KvTransferPlane`); the engine only pins, reads,
// writes and accounts blocks.
//
// Flow:
//   prefill engine: generate({ prefillOnly: true }) → computes the prompt, samples ONE token with the
//     request's sampling (and seed), finishes with reason 'length' and puts a `KvTransferLease` on that
//     final output: the prompt's full blocks stay pinned under `leaseId` until `releaseLease`, the
//     request is aborted, or the TTL passes. (A first token that ends the request, EOS or a stop id,
//     finishes with 'stop' and no lease: there is nothing to decode.)
//   decode engine: `beginImport(prompt, layout)` pins the prompt's leading blocks it already holds and
//     says which it lacks → the worker pulls exactly those and `write`s them in prefix order → the
//     import is passed to generate({ outputTokenIds: [first], kvImport }) → the imported blocks are
//     prefix-cache hits for that request (and for later ones; `stored` events announce them).
//
// Identity: a block is its sequence hash (block-hash.ts), computed from the prompt's tokens by both
// sides, so nothing but hashes and bytes crosses; the layout says whether the bytes fit.

/**
 * Everything that must match for one engine's KV bytes to be valid in another's. Two engines may
 * exchange blocks iff `kvLayoutMismatch(a, b)` is undefined.
 */
export interface KvLayout {
  /**
   * The model's identity: a digest of what determines its KV (the ONNX file's bytes for `llm`; the
   * model config's architecture fields for `mocker`). Two workers serving the same exported model agree.
   */
  readonly modelId: string;
  readonly engine: 'llm' | 'mocker';
  readonly dtype: 'fp32' | 'fp16';
  readonly numLayers: number;
  readonly numKvHeads: number;
  readonly headDim: number;
  readonly blockSize: number;
  /**
   * KV bytes of one block (layers × 2 × kv heads × block size × head dim × element size). For `llm`
   * it is also the payload size of a block on the wire; the mocker sends a token payload and models
   * the time these bytes would take (`--kv-transfer-gbps`).
   */
  readonly bytesPerBlock: number;
}

/** What a prefill engine hands out with its first token (the worker adds its transfer address). */
export interface KvTransferLease {
  /** Unique per engine; names the pinned blocks until released or expired. */
  readonly leaseId: string;
  /** Sequence hashes of the prompt's full blocks, in order (pinned). May be empty (prompt shorter than a block). */
  readonly blockHashes: readonly string[];
  readonly layout: KvLayout;
  /**
   * The seed the first token was sampled with (the request's, or the one the engine drew for it), so
   * the decode side continues the same random stream.
   */
  readonly seed: number;
  /**
   * Ms on the engine's clock after which the lease is gone (`clock.now()` + TTL at grant: a
   * performance.now() reading for a real engine, simulated time on a VirtualClock), comparable only
   * with that engine's clock.
   */
  readonly expiresAt: number;
}

/** One block as it crosses between engines. */
export interface KvBlockData {
  /** The block's sequence hash (16 hex digits). */
  readonly hash: string;
  readonly data: Uint8Array;
}

/**
 * A decode engine's import in progress. Holds its pins (leading blocks already resident, blocks
 * written so far) until `release`, or until the request it was handed to finishes.
 */
export interface KvImport {
  /** Hashes of the prompt's full blocks this engine lacks, in prefix order: what to pull. */
  readonly missing: readonly string[];
  /** Leading prompt blocks that were already resident (pinned now): the decode side's own cache. */
  readonly cachedBlocks: number;
  /**
   * Write the next missing blocks, in order (`blocks[i].hash` must be the next of `missing`; the data
   * must be `layout.bytesPerBlock` long for `llm`). Synchronous: the blocks become resident full
   * blocks at once (`stored` events). Throws invalid_argument on a wrong hash or size (nothing of the
   * call is kept) and capacity_exhausted when no slot is free.
   */
  write(blocks: readonly KvBlockData[]): void;
  /** Blocks written so far. */
  readonly written: number;
  /** Drop the pins (idempotent). Blocks written stay cached (evictable). */
  release(): void;
}

/** The transfer side of an LLM engine (LlmEndpoint.kvTransfer). */
export interface LlmKvTransfer {
  readonly layout: KvLayout;
  /**
   * The bytes of pinned blocks of a live lease, in the order asked. Throws not_found for an unknown or
   * expired lease, invalid_argument for a hash the lease does not hold.
   */
  readBlocks(leaseId: string, hashes: readonly string[]): KvBlockData[];
  /** The decode side is done with the lease: unpin its blocks. false when unknown (already released or expired). */
  releaseLease(leaseId: string): boolean;
  /**
   * Start importing the full blocks of `promptTokenIds` (the whole prompt; its full blocks are hashed
   * here). Throws failed-precondition-style invalid_argument when `layout` does not match this engine's
   * (`kvLayoutMismatch` gives the reason).
   */
  beginImport(promptTokenIds: readonly number[], layout: KvLayout): KvImport;
  /** Blocks pinned by live leases and imports (the `switchyard_worker_kv_pinned_blocks` gauge). */
  pinnedBlocks(): number;
  /**
   * Simulated engines: how long `blocks` blocks would take to move at the configured bandwidth, in ms
   * on the engine's clock (0 for a real engine, whose bytes really move).
   */
  simulatedTransferMs(blocks: number): number;
}

/** Why two layouts cannot exchange blocks (a sentence naming the first field that differs), else undefined. */
export function kvLayoutMismatch(local: KvLayout, remote: KvLayout): string | undefined {
  for (const k of ['modelId', 'engine', 'dtype', 'numLayers', 'numKvHeads', 'headDim', 'blockSize', 'bytesPerBlock'] as const) {
    if (local[k] !== remote[k]) return `KV layout mismatch: ${k} is ${String(remote[k])} on the prefill worker and ${String(local[k])} here`;
  }
  return undefined;
}
