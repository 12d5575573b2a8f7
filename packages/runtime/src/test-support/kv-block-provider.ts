/**
 * Test helper for the KV transfer plane suites: a KvBlockProvider over leases of deterministic blocks
 * (model 'm', layout digest 'L'), refusing as an engine does (not_found, invalid_argument).
 */
import { invalidArgument, notFound } from '@switchyard/common';
import type { KvBlockProvider, KvPullRequest, KvTransferBlock } from '../kv-transfer/kv-transfer-plane.js';

export const hashOf = (i: number): string => (0x1234_0000_0000 + i * 7919).toString(16).padStart(16, '0');

/** Deterministic bytes of block `i`, `size` long. */
export function bytesOf(i: number, size: number): Uint8Array {
  const b = new Uint8Array(size);
  for (let k = 0; k < size; k++) b[k] = (i * 31 + k * 7 + (k >> 8)) & 0xff;
  return b;
}

/** A provider over leases of model 'm' with layout digest 'L'; records its calls. */
export class TestProvider implements KvBlockProvider {
  readonly leases = new Map<string, Map<string, Uint8Array>>();
  readonly reads: KvPullRequest[] = [];
  /** Replaces `read` when set. */
  override: ((r: KvPullRequest) => Promise<readonly KvTransferBlock[]> | readonly KvTransferBlock[]) | null = null;

  lease(id: string, sizes: readonly number[]): string[] {
    const blocks = new Map<string, Uint8Array>();
    sizes.forEach((size, i) => blocks.set(hashOf(i), bytesOf(i, size)));
    this.leases.set(id, blocks);
    return [...blocks.keys()];
  }

  read(r: KvPullRequest): Promise<readonly KvTransferBlock[]> | readonly KvTransferBlock[] {
    this.reads.push(r);
    return this.override ? this.override(r) : this.answer(r);
  }

  /** What `read` answers without an override. */
  answer(r: KvPullRequest): KvTransferBlock[] {
    if (r.model !== 'm') throw notFound(`model ${r.model} is not served`);
    const lease = this.leases.get(r.leaseId);
    if (lease === undefined) throw notFound(`lease ${r.leaseId} is unknown or expired`);
    if (r.layoutDigest !== 'L') throw invalidArgument(`layout digest ${r.layoutDigest} differs`);
    return r.hashes.map((hash) => {
      const data = lease.get(hash);
      if (data === undefined) throw invalidArgument(`lease ${r.leaseId} does not hold ${hash}`);
      return { hash, data };
    });
  }

  release(r: { model: string; leaseId: string }): boolean {
    return this.leases.delete(r.leaseId);
  }
}
