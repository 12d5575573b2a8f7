/**
 * Conditional disaggregation (ARCHITECTURE.md flow 5; dynamo-design.md §3): per request, should the
 * prompt be prefilled on a prefill worker ('remote') or by the chosen decode worker itself ('local')?
 * Pure: the caller gathers the figures (the decode worker's overlap from its routing decision, each
 * prefill worker's queued prefill tokens from the routing table's reservations) and acts on the answer.
 *
 * remote iff
 *   - the model has prefill workers at all (`prefillQueues` non-empty), and
 *   - the request wants more than one token (`max_tokens` ≠ 1: a one-token request IS a prefill; sending
 *     it away would only add a transfer), and
 *   - the prompt's uncached tokens on the decode worker (`promptTokens − overlapBlocks × blockSize`) are at
 *     least `minRemoteTokens` (a short or mostly cached prefill is cheaper done where the KV is needed
 *     than moved), and
 *   - at least one prefill worker has fewer than `maxPrefillQueueTokens` queued prefill tokens (a
 *     saturated prefill pool would make the request wait longer than a local prefill takes).
 * The checks run in that order; the first that fails is the reason. On 'remote', `prefillWorkers` are the
 * non-saturated ones (the caller chooses among them KV-aware), in the caller's order.
 *
 * README.md ("Disaggregated prefill and decode") says why the defaults are what they are.
 */
import type { WorkerId } from '@switchyard/kv-router';

/** Uncached prompt tokens at which a prefill goes remote (`--disagg-min-remote-tokens`). */
export const DEFAULT_DISAGG_MIN_REMOTE_TOKENS = 512;
/**
 * Queued prefill tokens at which a prefill worker counts as saturated (`--disagg-max-prefill-queue-tokens`):
 * 4 × the engine's default `max_num_batched_tokens` (2048), i.e. about four full prefill steps of work ahead.
 */
export const DEFAULT_DISAGG_MAX_PREFILL_QUEUE_TOKENS = 8192;

export interface DisaggThresholds {
  /** Uncached tokens at or above which a prefill may go remote. 0: every prompt may. */
  readonly minRemoteTokens: number;
  /** A prefill worker takes remote prefills while its queued prefill tokens are below this. 0: never remote. */
  readonly maxPrefillQueueTokens: number;
}

export interface DisaggInput {
  readonly promptTokens: number;
  /** Leading prompt blocks the chosen decode worker holds (its routing decision's overlap). */
  readonly overlapBlocks: number;
  readonly blockSize: number;
  /** The request's `max_tokens`; null = up to the context length. */
  readonly maxTokens: number | null;
  /** Every usable prefill worker with the prompt tokens queued for prefill on it (reserved, not yet prefilled). */
  readonly prefillQueues: readonly { readonly worker: WorkerId; readonly queuedTokens: number }[];
}

/** Why a prefill stays local (a metric label). */
export type LocalReason = 'no_prefill_workers' | 'single_token' | 'short_prompt' | 'prefill_saturated';

export type DisaggDecision =
  | { readonly path: 'remote'; readonly uncachedTokens: number; readonly prefillWorkers: readonly WorkerId[] }
  | { readonly path: 'local'; readonly uncachedTokens: number; readonly reason: LocalReason };

export function decideDisagg(input: DisaggInput, thresholds: DisaggThresholds): DisaggDecision {
  const uncachedTokens = Math.max(0, input.promptTokens - input.overlapBlocks * input.blockSize);
  const local = (reason: LocalReason): DisaggDecision => ({ path: 'local', uncachedTokens, reason });
  if (input.prefillQueues.length === 0) return local('no_prefill_workers');
  if (input.maxTokens === 1) return local('single_token');
  if (uncachedTokens < thresholds.minRemoteTokens) return local('short_prompt');
  const prefillWorkers = input.prefillQueues.filter((q) => q.queuedTokens < thresholds.maxPrefillQueueTokens).map((q) => q.worker);
  if (prefillWorkers.length === 0) return local('prefill_saturated');
  return { path: 'remote', uncachedTokens, prefillWorkers };
}
