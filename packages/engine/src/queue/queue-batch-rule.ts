/**
 * Which requests form the next batch, and when: Triton's `DynamicBatchScheduler::GetDynamicBatch`
 * as a pure function over the queue (no timers, no IO; time is passed in).
 *
 * Called when an instance is free. Walking the queue in scheduling order, requests join the
 * pending batch until the next one would exceed `max_batch_size` or has different inputs (see
 * `inputsKey`); the first request always starts a batch. Then:
 * - if the pending batch passed through a preferred size, the largest one reached is sent now,
 *   unless the oldest pending request has already waited `max_queue_delay` (then everything
 *   pending goes); reaching a request that would take the batch past the largest preferred size
 *   counts as a preferred point too (upstream marks the cursor there);
 * - else everything pending is sent now when the batch cannot grow (size limit or a mismatch
 *   stopped it, or it reached the largest preferred size), when the delay is 0 ("as large as
 *   possible, no waiting"), or when the oldest pending request has waited the delay;
 * - else nothing is sent yet: wait until the oldest has waited the delay (or the queue changes).
 */
import type { ModelConfig } from '@switchyard/model-config';
import type { NormalizedRequest } from '../request-normalizer.js';

/** The batching settings of one model, compiled once from its config. */
export interface BatchRule {
  /** `max(1, max_batch_size)`: a model without batching runs one request per execution. */
  maxBatch: number;
  preferred: ReadonlySet<number>;
  /** The largest preferred size; 0 when there is none (only when max_batch_size is 0). */
  maxPreferred: number;
  /** `max_queue_delay_microseconds` in ms; 0 = do not wait. */
  delayMs: number;
  /** Inputs whose shape (false) or shape and content (true, shape tensors) must agree in a batch. */
  equalInputs: ReadonlyMap<string, boolean>;
  /** With optional inputs, requests must also present the same set of inputs. */
  hasOptionalInputs: boolean;
}

export function compileBatchRule(config: ModelConfig): BatchRule {
  const db = config.dynamic_batching;
  const preferred = new Set(db?.preferred_batch_size ?? []);
  // Upstream enforces equal shapes only where they can differ: variable-size inputs that are
  // not ragged, and shape tensors (whose values are compared too).
  const equalInputs = new Map<string, boolean>();
  for (const input of config.input) {
    if (input.is_shape_tensor) equalInputs.set(input.name, true);
    else if (!input.allow_ragged_batch && input.dims.some((d) => d === -1)) equalInputs.set(input.name, false);
  }
  return {
    maxBatch: Math.max(1, config.max_batch_size),
    preferred,
    // A loop, not Math.max(...preferred): a load override may list a million sizes.
    maxPreferred: [...preferred].reduce((a, b) => Math.max(a, b), 0),
    delayMs: (db?.max_queue_delay_microseconds ?? 0) / 1000,
    equalInputs,
    hasOptionalInputs: config.input.some((i) => i.optional),
  };
}

/** True when requests must be compared before sharing a batch. */
export function checksInputs(rule: BatchRule): boolean {
  return rule.equalInputs.size > 0 || rule.hasOptionalInputs;
}

/**
 * A string equal for two requests exactly when they may share a batch under `rule`: the
 * per-item shape (batch dimension excluded, after reshape) of each equal-shape input, the
 * bytes of each shape tensor, and with optional inputs the set of inputs present.
 * '' when the rule checks nothing.
 */
export function inputsKey(rule: BatchRule, request: NormalizedRequest, batched: boolean): string {
  if (!checksInputs(rule)) return '';
  const parts: string[] = [];
  const inputs = [...request.inputs].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  for (const input of inputs) {
    const compareData = rule.equalInputs.get(input.name);
    if (compareData === undefined) {
      if (rule.hasOptionalInputs) parts.push(input.name);
      continue;
    }
    const dims = batched && !compareData ? input.shape.slice(1) : input.shape;
    let part = `${input.name}[${dims.join(',')}]`;
    if (compareData) part += Buffer.from(input.data.buffer, input.data.byteOffset, input.data.byteLength).toString('hex');
    parts.push(part);
  }
  return parts.join('\u0000');
}

/** The batcher's view of one queued request. */
export interface BatchCandidate {
  readonly batchSize: number;
  readonly enqueuedMs: number;
  readonly inputsKey: string;
}

/** Send the first `count` queued requests now; or (count 0) wait until `waitUntilMs`. */
export type BatchPick = { count: number; waitUntilMs: number };

/**
 * Decide the next batch from the queue (visited in scheduling order) at `nowMs`. `flush`
 * (the scheduler is stopping) sends what is pending without waiting for the delay.
 * Returns count 0 and waitUntilMs Infinity when the queue is empty.
 */
export function pickBatch(
  rule: BatchRule,
  forEach: (visit: (candidate: BatchCandidate) => boolean) => void,
  nowMs: number,
  flush = false,
): BatchPick {
  let pending = 0;
  let count = 0;
  let best = 0;
  let sendNow = false;
  let oldestMs = Infinity;
  let firstKey = '';
  forEach((c) => {
    const size = c.batchSize;
    if (count === 0) {
      firstKey = c.inputsKey;
    } else {
      if (best === 0 && pending + size > rule.maxPreferred) best = count;
      if (pending + size > rule.maxBatch || c.inputsKey !== firstKey) {
        sendNow = true;
        return false;
      }
    }
    pending += size;
    count++;
    if (c.enqueuedMs < oldestMs) oldestMs = c.enqueuedMs;
    if (rule.preferred.has(pending)) best = count;
    return true;
  });
  if (count === 0) return { count: 0, waitUntilMs: Infinity };
  // Compared as `now >= oldest + delay`, the same sum the wait uses: with a subtraction, float
  // rounding could leave a timer that fired on time still "short" and re-arm it forever.
  const dueMs = oldestMs + rule.delayMs;
  const delayExceeded = rule.delayMs > 0 && nowMs >= dueMs;
  if (best > 0 && !delayExceeded) return { count: best, waitUntilMs: nowMs };
  if (sendNow || pending >= rule.maxPreferred || delayExceeded || rule.delayMs === 0 || flush) {
    return { count, waitUntilMs: nowMs };
  }
  return { count: 0, waitUntilMs: dueMs };
}
