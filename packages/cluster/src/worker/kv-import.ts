/**
 * The decode side of disaggregation on a worker (disagg design, "Decode worker"): a generate request
 * that came with a `kvTransfer` handle pulls the prompt's KV blocks this engine lacks from the prefill
 * worker, writes them into its own pool, releases the prefill worker's lease, and hands the import to
 * generate. Any failure (layout mismatch, hashes that are not this prompt's, lease gone, transfer
 * failed, truncated or corrupt, no free slot) is not the request's failure: the import is dropped and
 * the request prefills locally, which gives the same tokens (the continuation is exact); the report
 * says why, for the router's log and its `fallback` metric.
 *
 * Only a cancellation (the caller's signal) ends the request here: `cancelled` is thrown, and the
 * pins on both sides are released first.
 */
import { cancelled, toSwitchyardError, type CancelSignal, type Logger } from '@switchyard/common';
import { kvLayoutMismatch, systemClock, type KvImport, type LlmEndpoint } from '@switchyard/llm';
import { DEFAULT_KV_PULL_TIMEOUT_MS, type KvTransferPlane } from '@switchyard/runtime';
import type { WireKvImportReport, WireKvTransferHandle } from '../protocols.js';
import { kvLayoutDigest } from './kv-provider.js';

export interface KvImportOptions {
  readonly plane: KvTransferPlane;
  /** The model's name on both workers (the provider looks it up by name). */
  readonly model: string;
  /** The caller's signal: aborting it cancels the pull and the request. */
  readonly signal: CancelSignal;
  readonly logger: Logger;
  /** Whole-pull deadline, ms (default DEFAULT_KV_PULL_TIMEOUT_MS). */
  readonly timeoutMs?: number;
  /**
   * Waits the simulated engine's transfer time (LlmKvTransfer.simulatedTransferMs) after the pull;
   * rejects when `signal` aborts. Default: `sleep`, on the mocker's clock (its ms are already divided by
   * its speedup ratio).
   */
  readonly sleep?: (ms: number, signal: CancelSignal) => Promise<void>;
}

/** What came of the import: `kvImport` (hand it to generate) when the blocks are in, else a report with `fallback`. */
export interface KvImportOutcome {
  readonly kvImport?: KvImport;
  readonly report: WireKvImportReport;
}

/**
 * A real, abortable wait on the mocker's own clock (`systemClock`: its PreciseTimer, so a simulated
 * transfer of 0.3 ms takes 0.3 ms, not setTimeout's whole millisecond). An abort rejects at once; the
 * clock's sleep then ends by itself, unobserved.
 */
export function sleep(ms: number, signal: CancelSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(toSwitchyardError(signal.reason ?? cancelled('cancelled')));
    const onAbort = (): void => reject(toSwitchyardError(signal.reason ?? cancelled('cancelled')));
    signal.addEventListener('abort', onAbort, { once: true });
    void systemClock.sleep(ms).then(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    });
  });
}

/** Thrown inside the flow for a reason to prefill locally (never leaves this module). */
class Fallback extends Error {}

/**
 * Pull and import the blocks of `promptTokenIds` that `handle` offers and this engine lacks. Resolves
 * with the import (the engine releases it when the request that gets it finishes; the caller releases
 * it if that request never starts) or with a fallback report; rejects only with `cancelled`.
 * The prefill worker's lease is released in every case (best effort, not awaited).
 */
export async function importKvBlocks(llm: LlmEndpoint, promptTokenIds: readonly number[], handle: WireKvTransferHandle, options: KvImportOptions): Promise<KvImportOutcome> {
  const { plane, model, signal, logger } = options;
  const now = (): number => performance.now();
  const started = now();
  let imp: KvImport | undefined;
  let cachedBlocks = 0;
  let pulledBlocks = 0;
  let bytes = 0;
  const releaseLease = (): void => {
    plane.release(handle.address, { model, leaseId: handle.leaseId }).then(
      (known) => {
        if (!known) logger.debug({ model, address: handle.address, leaseId: handle.leaseId }, 'KV lease was already gone on the prefill worker');
      },
      (err: unknown) => logger.debug({ err, model, address: handle.address, leaseId: handle.leaseId }, 'could not release the KV lease on the prefill worker (its TTL frees it)'),
    );
  };
  try {
    const transfer = llm.kvTransfer;
    if (transfer === undefined) throw new Fallback(`model '${model}' cannot import KV blocks on this worker`);
    const mismatch = kvLayoutMismatch(transfer.layout, handle.layout);
    if (mismatch !== undefined) throw new Fallback(mismatch);
    try {
      imp = transfer.beginImport(promptTokenIds, handle.layout);
    } catch (err) {
      throw new Fallback(`KV import refused: ${toSwitchyardError(err).message}`);
    }
    cachedBlocks = imp.cachedBlocks;
    // the handle's hashes must be this prompt's: the blocks this engine lacks are exactly its tail
    const { missing } = imp;
    const offered = handle.blockHashes;
    if (cachedBlocks + missing.length !== offered.length || missing.some((h, i) => offered[cachedBlocks + i] !== h)) {
      throw new Fallback(`the prefill worker's ${offered.length} block hashes are not those of this prompt (${cachedBlocks + missing.length} full blocks)`);
    }
    if (missing.length > 0) {
      const request = { model, leaseId: handle.leaseId, hashes: missing, layoutDigest: kvLayoutDigest(transfer.layout) };
      try {
        for await (const chunk of plane.pull(handle.address, request, { signal, timeoutMs: options.timeoutMs ?? DEFAULT_KV_PULL_TIMEOUT_MS })) {
          imp.write(chunk);
          pulledBlocks += chunk.length;
          for (const block of chunk) bytes += block.data.byteLength;
        }
      } catch (err) {
        if (signal.aborted) throw err;
        throw new Fallback(`KV transfer from ${handle.address} failed: ${toSwitchyardError(err).message}`);
      }
      if (imp.written !== missing.length) throw new Fallback(`KV transfer from ${handle.address} ended after ${imp.written} of ${missing.length} blocks`);
      const simulated = transfer.simulatedTransferMs(missing.length);
      if (simulated > 0) await (options.sleep ?? sleep)(simulated, signal);
    }
    releaseLease();
    return { kvImport: imp, report: { pulledBlocks, cachedBlocks, bytes, ms: now() - started } };
  } catch (err) {
    imp?.release();
    releaseLease();
    if (signal.aborted) throw cancelled(`request cancelled during the KV transfer from ${handle.address}`, err);
    if (!(err instanceof Fallback)) throw err; // a bug, not a transfer failure
    logger.warn({ model, address: handle.address, instanceId: handle.instanceId, reason: err.message }, 'KV transfer not used: prefilling locally');
    return { report: { pulledBlocks, cachedBlocks, bytes, ms: now() - started, fallback: err.message } };
  }
}
