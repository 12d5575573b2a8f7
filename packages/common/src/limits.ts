/**
 * The one mechanism for values a client can send that size an allocation or a thread count (an
 * instance count, sequence slots, a KV cache, a warmup tensor, ...): each is stated as a
 * `LimitCheck` and `enforceLimits` refuses the first one over its ceiling, with one message shape,
 * before anything is allocated. Which values and which ceilings: the packages that allocate
 * (the engine's `load-limits.ts` lists them for a model load).
 */
import { invalidArgument } from './errors.js';

export interface LimitCheck {
  /** What is measured, as the user wrote it: `instance_group count (all groups)`, `parameter 'num_gpu_blocks'`. */
  readonly what: string;
  /** The measured value (a product of fields is computed in floating point: it cannot wrap). */
  readonly value: number;
  /** The largest accepted value. */
  readonly max: number;
  /** Unit of value and max, e.g. `instances`, `bytes`. */
  readonly unit: string;
  /** Why there is a ceiling, e.g. `each instance runs on its own thread`. */
  readonly why: string;
}

/** The refusal for one check, e.g. `instance_group count (all groups) is 10000 instances, above the limit of 64 instances (each instance runs on its own thread)`. */
export function limitMessage(check: LimitCheck): string {
  const value = Number.isFinite(check.value) ? String(check.value) : 'unbounded';
  return `${check.what} is ${value} ${check.unit}, above the limit of ${check.max} ${check.unit} (${check.why})`;
}

/**
 * Throw invalid_argument `<prefix>: <limitMessage>` (just the message for an empty prefix) for the
 * first check whose value is over its max (or not a number).
 */
export function enforceLimits(prefix: string, checks: Iterable<LimitCheck>): void {
  for (const check of checks) {
    if (!(check.value <= check.max)) throw invalidArgument(prefix === '' ? limitMessage(check) : `${prefix}: ${limitMessage(check)}`);
  }
}
