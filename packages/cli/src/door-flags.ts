/**
 * The front-door limit flags both apps share (the worker and the router serve through the same
 * doors): how large, how slow and how many, so one client cannot exhaust a process. Each app
 * spreads `DOOR_LIMIT_FLAGS` into its flag table and `DOOR_LIMIT_DEFAULTS` into its defaults, and
 * hands `doorLimits(options)` to the doors.
 *
 * The defaults are the doors' own (`DEFAULT_*` in @switchyard/server), in the flags' units.
 */
import type { FlagTable } from './flags.js';

/** Triton's (and grpc's) largest message: INT32_MAX. */
const INT32_MAX = 2 ** 31 - 1;

export interface DoorLimitOptions {
  /** Seconds a client may take to send a request's headers; 0 = no limit. */
  httpHeaderTimeoutSecs: number;
  /** Seconds a client may take to send a whole request, body included; 0 = no limit. */
  httpRequestTimeoutSecs: number;
  /** Most open HTTP connections; 0 = no limit. */
  httpMaxConnections: number;
  /** Most binary tensor data one HTTP infer request carries after its JSON header (`--http-max-input-size` bounds the JSON). */
  httpMaxBinaryInputSize: number;
  /** Largest gRPC message received, in bytes, after decompression. */
  grpcMaxMessageSize: number;
  /** Most requests of one ModelStreamInfer stream in flight; further ones wait unread. */
  grpcMaxInflightPerStream: number;
  /** Most open gRPC connections; 0 = no limit. */
  grpcMaxConnections: number;
  /** Most concurrent calls on one gRPC connection (HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS); 0 = no limit. */
  grpcMaxConcurrentStreams: number;
  /** Seconds a gRPC connection may stay without calls (or without ever starting HTTP/2) before it is closed; 0 = forever. */
  grpcMaxConnectionIdleSecs: number;
  /** tritonserver's: milliseconds between the server's keepalive pings on a gRPC connection. */
  grpcKeepaliveTime: number;
  /** tritonserver's: milliseconds a keepalive ping may go unanswered before the connection is closed. */
  grpcKeepaliveTimeout: number;
}

export const DOOR_LIMIT_DEFAULTS: Readonly<DoorLimitOptions> = {
  httpHeaderTimeoutSecs: 30,
  httpRequestTimeoutSecs: 120,
  httpMaxConnections: 4096,
  httpMaxBinaryInputSize: 2 ** 32,
  grpcMaxMessageSize: 64 * 1024 * 1024,
  grpcMaxInflightPerStream: 128,
  grpcMaxConnections: 1024,
  grpcMaxConcurrentStreams: 1000,
  grpcMaxConnectionIdleSecs: 300,
  grpcKeepaliveTime: 7_200_000,
  grpcKeepaliveTimeout: 20_000,
};

const D = DOOR_LIMIT_DEFAULTS;

export const DOOR_LIMIT_FLAGS: FlagTable<DoorLimitOptions> = {
  'http-header-timeout-secs': {
    kind: 'int',
    key: 'httpHeaderTimeoutSecs',
    min: 0,
    help: `Seconds a client may take to send a request's headers, at most --http-request-timeout-secs; then 408 and the connection closes (default ${D.httpHeaderTimeoutSecs}; 0 = no limit).`,
  },
  'http-request-timeout-secs': {
    kind: 'int',
    key: 'httpRequestTimeoutSecs',
    min: 0,
    help: `Seconds a client may take to send a whole request, body included; then 408 and the connection closes (default ${D.httpRequestTimeoutSecs}; 0 = no limit).`,
  },
  'http-max-connections': {
    kind: 'int',
    key: 'httpMaxConnections',
    min: 0,
    help: `Most open HTTP connections; further ones are closed at once (default ${D.httpMaxConnections}; 0 = no limit).`,
  },
  'http-max-binary-input-size': {
    kind: 'int',
    key: 'httpMaxBinaryInputSize',
    min: 0,
    help: `Most bytes of binary tensor data one HTTP infer request may carry after its JSON header (the binary tensor extension); --http-max-input-size bounds the JSON header, as in tritonserver (default ${D.httpMaxBinaryInputSize}, 4 GiB, also the most one body buffer holds).`,
  },
  'grpc-max-message-size': {
    kind: 'int',
    key: 'grpcMaxMessageSize',
    min: 1,
    max: INT32_MAX,
    help: `Largest gRPC message received, in bytes after decompression; larger ones are RESOURCE_EXHAUSTED (default ${D.grpcMaxMessageSize}, at most ${INT32_MAX}).`,
  },
  'grpc-max-inflight-per-stream': {
    kind: 'int',
    key: 'grpcMaxInflightPerStream',
    min: 1,
    help: `Most requests of one ModelStreamInfer stream in flight at once; further ones wait, unread, in HTTP/2 flow control (default ${D.grpcMaxInflightPerStream}).`,
  },
  'grpc-max-connections': {
    kind: 'int',
    key: 'grpcMaxConnections',
    min: 0,
    help: `Most open gRPC connections; further ones are closed at once (default ${D.grpcMaxConnections}; 0 = no limit).`,
  },
  'grpc-max-concurrent-streams': {
    kind: 'int',
    key: 'grpcMaxConcurrentStreams',
    min: 0,
    max: 2 ** 32 - 1,
    help: `Most concurrent calls on one gRPC connection; clients queue the rest (default ${D.grpcMaxConcurrentStreams}; 0 = no limit).`,
  },
  'grpc-max-connection-idle-secs': {
    kind: 'int',
    key: 'grpcMaxConnectionIdleSecs',
    min: 0,
    help: `Seconds a gRPC connection may stay without calls before the server closes it (GOAWAY; clients reconnect on their next call); 0 = forever (default ${D.grpcMaxConnectionIdleSecs}).`,
  },
  'grpc-keepalive-time': {
    kind: 'int',
    key: 'grpcKeepaliveTime',
    min: 1,
    max: INT32_MAX - 1,
    help: `Milliseconds between keepalive pings the server sends on each gRPC connection (default ${D.grpcKeepaliveTime}, 2 hours, as tritonserver).`,
  },
  'grpc-keepalive-timeout': {
    kind: 'int',
    key: 'grpcKeepaliveTimeout',
    min: 1,
    max: INT32_MAX - 1,
    help: `Milliseconds a keepalive ping may go unanswered before the connection is closed (default ${D.grpcKeepaliveTimeout}, as tritonserver).`,
  },
};

/** The limits in the doors' terms (`createFrontDoors`' `http` / `grpc` options). */
export interface DoorLimits {
  /** Every node:http door's (KServe/OpenAI and metrics). */
  readonly http: { readonly headerTimeoutMs: number; readonly requestTimeoutMs: number; readonly maxConnections: number };
  /** The KServe/OpenAI door's only. */
  readonly httpInfer: { readonly maxBinaryInputSize: number };
  readonly grpc: {
    readonly maxReceiveMessageBytes: number;
    readonly maxStreamInflight: number;
    readonly maxConnections: number;
    readonly maxConcurrentStreams: number;
    readonly maxConnectionIdleMs: number;
    readonly keepaliveTimeMs: number;
    readonly keepaliveTimeoutMs: number;
  };
}

export function doorLimits(o: DoorLimitOptions): DoorLimits {
  // The headers are part of the request: lowering only --http-request-timeout-secs lowers both.
  const header = o.httpRequestTimeoutSecs > 0 && (o.httpHeaderTimeoutSecs === 0 || o.httpHeaderTimeoutSecs > o.httpRequestTimeoutSecs) ? o.httpRequestTimeoutSecs : o.httpHeaderTimeoutSecs;
  return {
    http: { headerTimeoutMs: header * 1000, requestTimeoutMs: o.httpRequestTimeoutSecs * 1000, maxConnections: o.httpMaxConnections },
    httpInfer: { maxBinaryInputSize: o.httpMaxBinaryInputSize },
    grpc: {
      maxReceiveMessageBytes: o.grpcMaxMessageSize,
      maxStreamInflight: o.grpcMaxInflightPerStream,
      maxConnections: o.grpcMaxConnections,
      maxConcurrentStreams: o.grpcMaxConcurrentStreams,
      maxConnectionIdleMs: o.grpcMaxConnectionIdleSecs * 1000,
      keepaliveTimeMs: o.grpcKeepaliveTime,
      keepaliveTimeoutMs: o.grpcKeepaliveTimeout,
    },
  };
}
