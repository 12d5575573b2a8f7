/**
 * The EventPlane role: persistent, ordered event streams (NATS JetStream) for KV events and load
 * metrics. Publishers are workers; consumers are the KV indexer and the planner, through durable
 * consumers that survive restarts.
 */
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
