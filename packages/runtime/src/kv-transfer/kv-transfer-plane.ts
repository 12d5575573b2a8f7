/**
 * The KvTransferPlane role (ARCHITECTURE.md flow 5): KV blocks move worker to worker, not through a
 * broker. A prefill worker serves the blocks it pinned under a lease; a decode worker pulls the ones it
 * lacks from the address the prefill worker advertises (in its model cards, under its etcd lease), then
 * releases the lease. Implementations: TCP (`node:net`, a binary stream with checksummed chunks and flow
 * control) and a memory twin for unit tests and standalone mode.
 *
 * The plane moves opaque bytes per block hash; it knows nothing of layouts beyond the digest both
 * sides name (the server refuses a pull whose `layoutDigest` is not the one its provider states).
 */
import type { CancelSignal, SwitchyardError } from '@switchyard/common';

/** One block on the plane: its sequence hash (16 hex digits) and its bytes. */
export interface KvTransferBlock {
  readonly hash: string;
  readonly data: Uint8Array;
}

/** A pull: the blocks `hashes` of lease `leaseId` of model `model`, in that order. */
export interface KvPullRequest {
  readonly model: string;
  readonly leaseId: string;
  readonly hashes: readonly string[];
  /** The puller's view of the layout (an opaque digest, e.g. of the KvLayout JSON); must equal the provider's. */
  readonly layoutDigest: string;
}

export interface KvReleaseRequest {
  readonly model: string;
  readonly leaseId: string;
}

/**
 * What a serving worker plugs in: the engine side. `read` returns the blocks in the order asked, or
 * throws a SwitchyardError (not_found: unknown model / lease, expired lease; invalid_argument: a hash
 * the lease does not hold, a layout digest that differs) that the puller receives with its code.
 */
export interface KvBlockProvider {
  read(request: KvPullRequest): Promise<readonly KvTransferBlock[]> | readonly KvTransferBlock[];
  /** false when the lease was unknown (already released or expired): not an error for the caller. */
  release(request: KvReleaseRequest): boolean;
}

export interface KvTransferServeOptions {
  /** Interface to listen on; default '0.0.0.0'. */
  readonly host?: string;
  /** 0 (default) picks a free port. */
  readonly port?: number;
  /** The host other workers reach this one at (`--kv-transfer-address`); default: a non-loopback address of this host, else 127.0.0.1. */
  readonly advertiseHost?: string;
}

export interface KvTransferServer {
  /** `host:port` to advertise. */
  readonly address: string;
  /** Stop listening; open transfers are cut. */
  close(): Promise<void>;
}

export interface KvPullOptions {
  readonly signal?: CancelSignal;
  /** Whole-pull deadline in ms (default DEFAULT_KV_PULL_TIMEOUT_MS). */
  readonly timeoutMs?: number;
}

/** Figures a plane keeps for metrics (`switchyard_worker_kv_transfer_bytes_total{direction}`). */
export interface KvTransferCounters {
  readonly bytesOut: number;
  readonly bytesIn: number;
}

export interface KvTransferPlane {
  serve(provider: KvBlockProvider, options?: KvTransferServeOptions): Promise<KvTransferServer>;
  /**
   * Pull blocks from the worker at `address`. Yields them in the order asked, in chunks as they arrive
   * (each chunk verified: checksum, hash, order); the iteration throws a SwitchyardError when the
   * transfer fails: `unavailable` (cannot connect, connection lost, truncated), `internal` (a corrupt
   * chunk: checksum mismatch), the provider's code for its refusals, `deadline_exceeded`, `cancelled`.
   * A block is never yielded unless its bytes were verified. A yielded block's bytes are the
   * consumer's: the plane never writes to them again, so they stay valid for as long as they are held.
   * They may be views of a larger received buffer (a block the TCP plane received in one socket read
   * is not copied): a consumer that keeps blocks long after the pull should copy them, or it keeps
   * that buffer alive with them.
   */
  pull(address: string, request: KvPullRequest, options?: KvPullOptions): AsyncIterable<readonly KvTransferBlock[]>;
  /** Tell the worker at `address` the lease is done (pins released). Resolves true/false as the provider answered. */
  release(address: string, request: KvReleaseRequest, options?: KvPullOptions): Promise<boolean>;
  counters(): KvTransferCounters;
  /** Close every connection this plane opened (servers close on their own `close`). */
  close(): Promise<void>;
}

export const DEFAULT_KV_PULL_TIMEOUT_MS = 30_000;

export type KvTransferError = SwitchyardError;
