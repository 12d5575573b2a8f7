/**
 * The RequestPlane role: request → ordered stream of responses, on NATS. A request goes to one
 * instance (direct) or to the endpoint's queue group (the transport picks an instance). Responses come
 * back in order and end with an explicit terminal frame; cancellation travels to the worker.
 */
import { randomBytes } from 'node:crypto';
import { type CancelSignal, SwitchyardError } from '@switchyard/common';
import { type EndpointAddress, type InstanceAddress, formatAddress } from './addressing.js';
import type { Payload } from './protocols.js';

export const DEFAULT_REQUEST_TIMEOUT_MS = 0;

/**
 * Ids for the requests and attempts one RequestPlane sends: a random prefix drawn once (96 bits,
 * 16 base64url characters), then a counter — unique across every caller as UUIDs are (a worker runs
 * a request id at most once per endpoint: two callers must never share one), at a counter's cost
 * per request instead of two `randomUUID` calls, and ids half as long in each request envelope.
 */
export function requestIdSource(): () => string {
  const prefix = randomBytes(12).toString('base64url');
  let n = 0;
  return () => `${prefix}.${(n++).toString(36)}`;
}

/** What a handler knows about the request it serves. */
export interface RequestContext {
  readonly requestId: string;
  /**
   * Aborts when the caller cancels (cancel message, or the caller stopped iterating), when the deadline
   * passes, or when the endpoint is stopped without drain. The handler stops producing promptly.
   */
  readonly signal: CancelSignal;
  /** Epoch ms after which the caller no longer listens; `null` = none. */
  readonly deadline: number | null;
}

/**
 * Serves one request: yield payloads in order (a JSON value, or a BinaryPayload whose blobs travel as
 * raw bytes); returning ends the stream with its final marker;
 * throwing ends it with an error frame (a SwitchyardError keeps its code, anything else is `internal`).
 */
export type EndpointHandler = (payload: Payload, context: RequestContext) => AsyncIterable<Payload>;

export interface ServedEndpoint {
  readonly address: InstanceAddress;
  /** The direct subject (`instanceSubject(address)`); goes into InstanceInfo. */
  readonly subject: string;
  /**
   * Stop taking requests. With `drain` (default true) resolves once in-flight requests have finished;
   * without, aborts their signals and ends their streams with a cancelled error frame.
   */
  stop(options?: { drain?: boolean }): Promise<void>;
}

export interface RequestOptions {
  /** Aborting cancels the request: the worker's handler sees its signal abort; iteration throws cancelled. An `AbortSignal` is one. */
  readonly signal?: CancelSignal;
  /** Whole-stream deadline in ms from now; 0 = none (default). On expiry: cancel + deadline_exceeded. */
  readonly timeoutMs?: number;
  /** Default: a fresh id, unique across callers (`requestIdSource`). */
  readonly requestId?: string;
}

export interface RequestPlane {
  /** Called by a worker per endpoint it serves, before registering the instance in Discovery. */
  serve(address: InstanceAddress, handler: EndpointHandler): Promise<ServedEndpoint>;
  /**
   * Called by routers per request. The returned iterable yields the handler's payloads in order and
   * completes after the final marker. Iteration throws:
   * - NoRespondersError (retriable) when nobody serves the target — nothing was processed;
   * - StreamIncompleteError (retriable) when the stream stopped without its final marker — the worker
   *   may have processed part of it (migration resends with what was received);
   * - the handler's error (a SwitchyardError with the frame's code) for an error frame;
   * - cancelled / deadline_exceeded after `signal` / `timeoutMs`.
   * Breaking out of the iteration cancels the request on the worker.
   */
  request(target: EndpointAddress | InstanceAddress, payload: Payload, options?: RequestOptions): AsyncIterable<Payload>;
  /** Stops every endpoint served through this client (without drain) and fails in-flight requests. */
  close(): Promise<void>;
}

/**
 * Nobody serves the target (NATS "no responders"). Retriable: the request reached no worker, so it
 * can go to another instance unchanged. The caller should also drop the instance from its routing.
 */
export class NoRespondersError extends SwitchyardError {
  readonly retriable = true;
  readonly target: EndpointAddress | InstanceAddress;
  constructor(target: EndpointAddress | InstanceAddress, cause?: unknown) {
    super('unavailable', `no responders for ${formatAddress(target)}`, { cause });
    this.target = target;
  }
}

/**
 * The response stream stopped without its final marker (worker died, connection dropped, instance
 * left discovery). Retriable by migration: resend with the `received` data frames taken into account.
 * The caller should locally inhibit the instance until discovery catches up — unless `local`.
 */
export class StreamIncompleteError extends SwitchyardError {
  readonly retriable = true;
  readonly target: EndpointAddress | InstanceAddress;
  /** Data frames received before the stream stopped. */
  readonly received: number;
  /**
   * The caller's own connection failed (a NATS outage on its side): nothing is known against the
   * instance, so it should not be inhibited.
   */
  readonly local: boolean;
  constructor(target: EndpointAddress | InstanceAddress, received: number, cause?: unknown, options?: { readonly local?: boolean }) {
    super('unavailable', `stream from ${formatAddress(target)} ended before its final marker after ${received} responses`, { cause });
    this.target = target;
    this.received = received;
    this.local = options?.local ?? false;
  }
}

/** True for the request-plane failures that may be retried on another instance. */
export function isRetriable(e: unknown): e is NoRespondersError | StreamIncompleteError {
  return e instanceof NoRespondersError || e instanceof StreamIncompleteError;
}
