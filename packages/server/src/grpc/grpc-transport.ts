/**
 * The transport of a gRPC door, shared by the door and its front threads: the limits checked, grpc-js's
 * server options for them (with the restricted-protocol interceptor), and the credentials (plaintext
 * or TLS).
 */
import type * as net from 'node:net';
import { type Server, ServerCredentials, type ServerOptions } from '@grpc/grpc-js';
import type { Restrictions } from '../access-control.js';
import { restrictedProtocolInterceptor } from './grpc-access.js';
import { within } from './in-flight.js';

/**
 * The largest message received, after decompression: 64 MiB, as `--http-max-input-size`, so a
 * request that fits one door fits the other. Far above grpc's 4 MiB default (Triton clients send
 * large tensors), far below what a compressed message could inflate to.
 */
export const DEFAULT_GRPC_MAX_RECEIVE_MESSAGE_BYTES = 64 * 1024 * 1024;

/**
 * Most connections at once; one more is closed as soon as it is accepted, while the others are
 * served. gRPC multiplexes calls over a connection, so few clients need more than one.
 */
export const DEFAULT_GRPC_MAX_CONNECTIONS = 1024;

/**
 * Most calls at once on one connection (HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS); clients queue
 * further calls until one ends.
 */
export const DEFAULT_GRPC_MAX_CONCURRENT_STREAMS = 1000;

/**
 * How long a connection may stay without calls before the server closes it (GOAWAY; clients
 * reconnect on their next call). Also what a connection that never starts HTTP/2 may hold a
 * connection slot for.
 */
export const DEFAULT_GRPC_MAX_CONNECTION_IDLE_MS = 300_000;

/** tritonserver's `--grpc-keepalive-time` default: the server pings every connection every 2 hours. */
export const DEFAULT_GRPC_KEEPALIVE_TIME_MS = 7_200_000;

/** tritonserver's `--grpc-keepalive-timeout` default: an unanswered ping closes the connection after 20 s. */
export const DEFAULT_GRPC_KEEPALIVE_TIMEOUT_MS = 20_000;

/** grpc-js cannot hold a message of 2 GiB or more; Triton's own limit is INT32_MAX. */
export const MAX_GRPC_MESSAGE_BYTES = 2 ** 31 - 1;

export interface GrpcTls {
  readonly cert: Uint8Array;
  readonly key: Uint8Array;
  readonly rootCert?: Uint8Array;
  readonly mutual: boolean;
}

/** An option that must be an integer in [min, max]; a bad value is the caller's bug. */
export function integerOption(name: string, value: number, min: number, max = Number.MAX_SAFE_INTEGER): number {
  if (!Number.isSafeInteger(value) || value < min || value > max) throw new RangeError(`${name} must be an integer from ${min} to ${max}, got ${value}`);
  return value;
}

/** The transport limits of a gRPC door, checked (a bad value is the caller's bug: RangeError). */
export interface GrpcTransportLimits {
  readonly maxReceiveBytes: number;
  readonly maxConnections: number;
  readonly maxConcurrentStreams: number;
  readonly maxConnectionIdleMs: number;
  readonly keepaliveTimeMs: number;
  readonly keepaliveTimeoutMs: number;
  readonly maxConnectionAgeMs: number | undefined;
  readonly maxConnectionAgeGraceMs: number | undefined;
}

/** The transport options of a door (`GrpcServerOptions` has them; each left out takes its default). */
export interface GrpcTransportOptions {
  readonly maxReceiveMessageBytes?: number;
  readonly maxConnections?: number;
  readonly maxConcurrentStreams?: number;
  readonly maxConnectionIdleMs?: number;
  readonly keepaliveTimeMs?: number;
  readonly keepaliveTimeoutMs?: number;
  readonly maxConnectionAgeMs?: number;
  readonly maxConnectionAgeGraceMs?: number;
}

export function grpcTransportLimits(options: GrpcTransportOptions): GrpcTransportLimits {
  return {
    // never -1 (unlimited): one compressed message could inflate until the process dies
    maxReceiveBytes: integerOption('maxReceiveMessageBytes', options.maxReceiveMessageBytes ?? DEFAULT_GRPC_MAX_RECEIVE_MESSAGE_BYTES, 1, MAX_GRPC_MESSAGE_BYTES),
    maxConnections: integerOption('maxConnections', options.maxConnections ?? DEFAULT_GRPC_MAX_CONNECTIONS, 0),
    maxConcurrentStreams: integerOption('maxConcurrentStreams', options.maxConcurrentStreams ?? DEFAULT_GRPC_MAX_CONCURRENT_STREAMS, 0, 2 ** 32 - 1),
    // grpc-js takes at most INT32_MAX ms, and that value itself means "never"
    maxConnectionIdleMs: integerOption('maxConnectionIdleMs', options.maxConnectionIdleMs ?? DEFAULT_GRPC_MAX_CONNECTION_IDLE_MS, 0, 2 ** 31 - 2),
    keepaliveTimeMs: integerOption('keepaliveTimeMs', options.keepaliveTimeMs ?? DEFAULT_GRPC_KEEPALIVE_TIME_MS, 1, 2 ** 31 - 2),
    keepaliveTimeoutMs: integerOption('keepaliveTimeoutMs', options.keepaliveTimeoutMs ?? DEFAULT_GRPC_KEEPALIVE_TIMEOUT_MS, 1, 2 ** 31 - 2),
    maxConnectionAgeMs: options.maxConnectionAgeMs === undefined ? undefined : integerOption('maxConnectionAgeMs', options.maxConnectionAgeMs, 1, 2 ** 31 - 2),
    maxConnectionAgeGraceMs: options.maxConnectionAgeGraceMs === undefined ? undefined : integerOption('maxConnectionAgeGraceMs', options.maxConnectionAgeGraceMs, 1, 2 ** 31 - 2),
  };
}

/** grpc-js's server options for `limits`, with the restricted-protocol interceptor when there are restrictions. */
export function grpcJsServerOptions(limits: GrpcTransportLimits, restrictions: Restrictions | undefined): ServerOptions {
  return {
    'grpc.max_receive_message_length': limits.maxReceiveBytes,
    'grpc.max_send_message_length': -1,
    ...(limits.maxConcurrentStreams > 0 ? { 'grpc.max_concurrent_streams': limits.maxConcurrentStreams } : {}),
    ...(limits.maxConnectionIdleMs > 0 ? { 'grpc.max_connection_idle_ms': limits.maxConnectionIdleMs } : {}),
    'grpc.keepalive_time_ms': limits.keepaliveTimeMs,
    'grpc.keepalive_timeout_ms': limits.keepaliveTimeoutMs,
    ...(limits.maxConnectionAgeMs !== undefined ? { 'grpc.max_connection_age_ms': limits.maxConnectionAgeMs } : {}),
    ...(limits.maxConnectionAgeGraceMs !== undefined ? { 'grpc.max_connection_age_grace_ms': limits.maxConnectionAgeGraceMs } : {}),
    // channelz keeps per-call counters, timestamps and closures that only its admin service reads,
    // and this server does not serve it (nor does tritonserver): off, grpc-js takes its plain
    // per-stream handler
    'grpc.enable_channelz': 0,
    interceptors: restrictions !== undefined && restrictions.size > 0 ? [restrictedProtocolInterceptor(restrictions)] : [],
  };
}

/** Plaintext, or TLS with `tls`'s certificate chain and key (client certificates required when mutual). */
export function serverCredentials(tls: GrpcTls | undefined): ServerCredentials {
  return tls === undefined ? ServerCredentials.createInsecure() : ServerCredentials.createSsl(tls.rootCert === undefined ? null : Buffer.from(tls.rootCert), [{ cert_chain: Buffer.from(tls.cert), private_key: Buffer.from(tls.key) }], tls.mutual);
}

/** Once nothing is in flight at close, how long a door's connections get to take the last answers and leave before they are cut. */
export const CONNECTION_CLOSE_GRACE_MS = 1000;

/**
 * The connections `listener` accepts, for a door's close: `cut` gives them CONNECTION_CLOSE_GRACE_MS
 * to take the last answers and leave (clients told GOAWAY do), then cancels what grpc-js still runs
 * and drops them. A session grpc-js has closed may keep its socket until the client leaves, which
 * would keep the door's event loop alive.
 */
export function acceptedConnections(listener: net.Server): { cut(server: Server): Promise<void> } {
  const sockets = new Set<net.Socket>();
  let allClosed: (() => void) | undefined;
  listener.on('connection', (socket: net.Socket) => {
    sockets.add(socket);
    socket.once('close', () => {
      sockets.delete(socket);
      if (sockets.size === 0) allClosed?.();
    });
  });
  return {
    cut: async (server) => {
      await within(
        new Promise<void>((resolve) => {
          if (sockets.size === 0) resolve();
          else allClosed = resolve;
        }),
        CONNECTION_CLOSE_GRACE_MS,
      );
      server.forceShutdown();
      for (const socket of sockets) socket.destroy();
    },
  };
}
