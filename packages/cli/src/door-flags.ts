/**
 * The front-door limit flags both apps share (the worker and the router serve through the same
 * doors): how large, how slow and how many, so one client cannot exhaust a process. Each app
 * spreads `DOOR_LIMIT_FLAGS` into its flag table and `DOOR_LIMIT_DEFAULTS` into its defaults, and
 * hands `doorLimits(options)` to the doors.
 */
import type { FlagTable } from './flags.js';

/** Triton's (and grpc's) largest message: INT32_MAX. */
const INT32_MAX = 2 ** 31 - 1;

export interface DoorLimitOptions {
  /** Largest gRPC message received, in bytes, after decompression. */
  grpcMaxMessageSize: number;
  /** Most requests of one ModelStreamInfer stream in flight; further ones wait unread. */
  grpcMaxInflightPerStream: number;
}

export const DOOR_LIMIT_DEFAULTS: Readonly<DoorLimitOptions> = {
  grpcMaxMessageSize: 64 * 1024 * 1024,
  grpcMaxInflightPerStream: 128,
};

export const DOOR_LIMIT_FLAGS: FlagTable<DoorLimitOptions> = {
  'grpc-max-message-size': {
    kind: 'int',
    key: 'grpcMaxMessageSize',
    min: 1,
    max: INT32_MAX,
    help: `Largest gRPC message received, in bytes after decompression; larger ones are RESOURCE_EXHAUSTED (default ${DOOR_LIMIT_DEFAULTS.grpcMaxMessageSize}, at most ${INT32_MAX}).`,
  },
  'grpc-max-inflight-per-stream': {
    kind: 'int',
    key: 'grpcMaxInflightPerStream',
    min: 1,
    help: `Most requests of one ModelStreamInfer stream in flight at once; further ones wait, unread, in HTTP/2 flow control (default ${DOOR_LIMIT_DEFAULTS.grpcMaxInflightPerStream}).`,
  },
};

/** The limits in the doors' terms (`createFrontDoors`' `http` / `grpc` options). */
export interface DoorLimits {
  readonly http: Record<string, never>;
  readonly grpc: { readonly maxReceiveMessageBytes: number; readonly maxStreamInflight: number };
}

export function doorLimits(o: DoorLimitOptions): DoorLimits {
  return {
    http: {},
    grpc: { maxReceiveMessageBytes: o.grpcMaxMessageSize, maxStreamInflight: o.grpcMaxInflightPerStream },
  };
}
