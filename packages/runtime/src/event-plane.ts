/**
 * The EventPlane role: persistent, ordered event streams (NATS JetStream) for KV events and load
 * metrics. Publishers are workers; consumers are the KV indexer and the planner, through durable
 * consumers that survive restarts.
 */
import { invalidArgument } from '@switchyard/common';
import { NAME_PATTERN } from './addressing.js';

export interface EventMessage {
  /** Stream sequence, from 1; strictly increasing over the stream (not per subject). */
  readonly seq: number;
  readonly subject: string;
  /** Parsed JSON. Decode with the owning package's decoder (e.g. the llm package's KV event decoder). */
  readonly payload: unknown;
  /** How many times this message was delivered to the durable before (0 on first delivery). */
  readonly redeliveries: number;
  /** Called after the consumer has applied the message; a durable resumes after its acked messages. */
  ack(): void;
}

/** The SubscribeOptions checks every EventPlane makes first; throws invalid_argument. Returns the defaults applied. */
export function checkSubscribeOptions(options: SubscribeOptions): { readonly startSeq: number; readonly startAt: 'first' | 'new' } {
  const { durable, startSeq = 1, startAt = 'first' } = options;
  if (!NAME_PATTERN.test(durable)) throw invalidArgument(`invalid durable name '${durable}'`);
  if (!Number.isSafeInteger(startSeq) || startSeq < 1) throw invalidArgument(`startSeq must be an integer >= 1`);
  if (startAt !== 'first' && startAt !== 'new') throw invalidArgument(`startAt must be 'first' or 'new'`);
  return { startSeq, startAt };
}

export interface SubscribeOptions {
  /** Subject filter with NATS wildcards (`*` one token, `>` the rest). */
  readonly subject: string;
  /**
   * Durable consumer name (a NAME_PATTERN name). The durable keeps its position across subscriptions:
   * a new subscription with the same name resumes with the first unacked message.
   */
  readonly durable: string;
  /** Only when the durable is created: first sequence to deliver. Default 1 (everything retained). */
  readonly startSeq?: number;
  /**
   * Only when the durable is created: `'first'` (default) delivers everything retained from `startSeq`;
   * `'new'` delivers only messages published after the durable is created (`startSeq` is then ignored).
   * Like `startSeq`, ignored when the durable already exists (it resumes at its position).
   */
  readonly startAt?: 'first' | 'new';
  /**
   * Called once, when the durable's position is fixed (created or resumed): every message published
   * from then on is delivered to this subscription. Lets a consumer order work after it (e.g. take a
   * snapshot only once no later event can be missed). Not called when the subscription fails first.
   */
  readonly onReady?: () => void;
  /** Ends the subscription; unacked messages are redelivered to the next subscription. */
  readonly signal?: AbortSignal;
}

export interface EventPlane {
  /**
   * Called by a worker for each KV event batch / load sample. Resolves with the stream sequence once
   * the event is stored (at-least-once from here on). Rejects unavailable when it could not be stored.
   */
  publish(subject: string, payload: unknown): Promise<number>;
  /**
   * Called once per consumer at start. Yields messages in sequence order, starting at the durable's
   * position. One live subscription per durable at a time (a second one fails already_exists).
   */
  subscribe(options: SubscribeOptions): AsyncIterable<EventMessage>;
  /** Ends every subscription of this client. Idempotent. */
  close(): Promise<void>;
}
