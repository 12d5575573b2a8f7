/**
 * The gRPC front door: `inference.GRPCInferenceService` and `grpc.health.v1.Health` on one
 * grpc-js server, wire-compatible with Triton's (default port 8001).
 */
import * as net from 'node:net';
import { Server, ServerCredentials } from '@grpc/grpc-js';
import { silentLogger, type Logger } from '@switchyard/common';
import type { InferenceEngine } from '@switchyard/engine';
import type { Restrictions } from '../access-control.js';
import { CodecThread } from '../codec-thread.js';
import type { ServerSettings } from '../settings.js';
import type { TraceManager } from '../trace/trace-manager.js';
import type { SharedMemoryManager } from '../shared-memory.js';
import { adminHandlers } from './admin-handlers.js';
import { restrictedProtocolInterceptor } from './grpc-access.js';
import { installBoundedDecompression } from './bounded-decompression.js';
import type { HeaderForwardPattern } from '../header-forward.js';
import { installResponseCompression, type CompressionLevel } from './response-compression.js';
import type { GrpcContext } from './grpc-context.js';
import { healthHandlers, modelHandlers } from './model-handlers.js';
import { withOffLoopInferDecoding } from './infer-message.js';
import { modelInferResponseSerializer, withFastInferResponseEncoding } from './infer-response-serializer.js';
import { modelInferHandler } from './model-infer.js';
import { loadGrpcProtos } from './protos.js';
import { modelStreamInferHandler } from './stream-infer.js';

export const DEFAULT_GRPC_PORT = 8001;
export const DEFAULT_GRPC_HOST = '0.0.0.0';
/** Like Triton's `--exit-timeout-secs` default: how long close() waits for in-flight calls. */
export const DEFAULT_GRPC_SHUTDOWN_TIMEOUT_MS = 30_000;
/**
 * The largest message received, after decompression: 64 MiB, as `--http-max-input-size`, so a
 * request that fits one door fits the other. Far above grpc's 4 MiB default (Triton clients send
 * large tensors), far below what a compressed message could inflate to.
 */
export const DEFAULT_GRPC_MAX_RECEIVE_MESSAGE_BYTES = 64 * 1024 * 1024;
/**
 * Most requests of one ModelStreamInfer stream in flight at once; further ones wait unread (HTTP/2
 * flow control holds them at the client). Enough to keep dynamic batching fed from one stream.
 */
export const DEFAULT_GRPC_MAX_STREAM_INFLIGHT = 128;
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

export interface GrpcServerOptions {
  engine: InferenceEngine;
  /** Client system shared memory, shared with the HTTP door. */
  shm: SharedMemoryManager;
  /** Log and trace settings, shared with the HTTP door. */
  settings: ServerSettings;
  /** Request tracing (`--trace-config`), shared with the HTTP door; default none. */
  tracer?: TraceManager;
  /** 0 picks a free port (listen() returns it). */
  port: number;
  /** Default '0.0.0.0' (Triton's `--grpc-address` default). */
  host?: string;
  /**
   * Largest message received, in bytes, after decompression (1 to MAX_GRPC_MESSAGE_BYTES; default
   * DEFAULT_GRPC_MAX_RECEIVE_MESSAGE_BYTES). A larger one ends its call with RESOURCE_EXHAUSTED
   * (grpc-js checks the length prefix, and the inflated size while decompressing). Sent messages
   * are not limited: they are what the models produce.
   */
  maxReceiveMessageBytes?: number;
  /** Most requests of one ModelStreamInfer stream in flight (default DEFAULT_GRPC_MAX_STREAM_INFLIGHT); more wait unread. */
  maxStreamInflight?: number;
  /** Most open connections (default DEFAULT_GRPC_MAX_CONNECTIONS); 0 = no limit. */
  maxConnections?: number;
  /** Most concurrent calls per connection (default DEFAULT_GRPC_MAX_CONCURRENT_STREAMS); 0 = no limit. */
  maxConcurrentStreams?: number;
  /** Close a connection without calls for this long (default DEFAULT_GRPC_MAX_CONNECTION_IDLE_MS); 0 = never. */
  maxConnectionIdleMs?: number;
  /** Ping every connection this often (default DEFAULT_GRPC_KEEPALIVE_TIME_MS) ... */
  keepaliveTimeMs?: number;
  /** ... and close it when a ping is not answered within this (default DEFAULT_GRPC_KEEPALIVE_TIMEOUT_MS): dead peers free their calls and slot. */
  keepaliveTimeoutMs?: number;
  /**
   * tritonserver's `--grpc-max-connection-age`: a connection older than this many ms is sent GOAWAY
   * (clients reconnect), after `maxConnectionAgeGraceMs` more its calls are cancelled. Default
   * undefined (no age limit), as in tritonserver.
   */
  maxConnectionAgeMs?: number;
  maxConnectionAgeGraceMs?: number;
  /**
   * tritonserver's `--grpc-use-ssl` / `--grpc-use-ssl-mutual`: serve gRPC over TLS with this PEM
   * certificate chain and key; `rootCert` (PEM) and `mutual`: require client certificates signed by
   * it. Default undefined: plaintext.
   */
  tls?: GrpcTls;
  /** How long close() lets in-flight calls finish before cancelling them. */
  shutdownTimeoutMs?: number;
  /** `--grpc-restricted-protocol` groups (metadata keys prefixed `triton-grpc-protocol-`); default none. */
  restrictions?: Restrictions;
  /** `--grpc-header-forward-pattern`, compiled (`compileHeaderForwardPattern`); default none. */
  headerForwardPattern?: HeaderForwardPattern;
  /** `--grpc-infer-response-compression-level` (default none); see response-compression.ts. */
  inferResponseCompression?: CompressionLevel;
  logger?: Logger;
}

export interface GrpcTls {
  readonly cert: Buffer;
  readonly key: Buffer;
  readonly rootCert?: Buffer;
  readonly mutual: boolean;
}

export interface GrpcFrontDoor {
  /** Bind and start serving; resolves with the bound port. */
  listen(): Promise<number>;
  /** Stop accepting calls, let in-flight ones finish (up to the shutdown timeout), then cancel the rest. */
  close(): Promise<void>;
}

/** An option that must be an integer in [min, max]; a bad value is the caller's bug. */
function integerOption(name: string, value: number, min: number, max = Number.MAX_SAFE_INTEGER): number {
  if (!Number.isSafeInteger(value) || value < min || value > max) throw new RangeError(`${name} must be an integer from ${min} to ${max}, got ${value}`);
  return value;
}

export function createGrpcServer(options: GrpcServerOptions): GrpcFrontDoor {
  const host = options.host ?? DEFAULT_GRPC_HOST;
  // never -1 (unlimited): one compressed message could inflate until the process dies
  const maxReceiveBytes = integerOption('maxReceiveMessageBytes', options.maxReceiveMessageBytes ?? DEFAULT_GRPC_MAX_RECEIVE_MESSAGE_BYTES, 1, MAX_GRPC_MESSAGE_BYTES);
  const maxStreamInflight = integerOption('maxStreamInflight', options.maxStreamInflight ?? DEFAULT_GRPC_MAX_STREAM_INFLIGHT, 1);
  const maxConnections = integerOption('maxConnections', options.maxConnections ?? DEFAULT_GRPC_MAX_CONNECTIONS, 0);
  const maxConcurrentStreams = integerOption('maxConcurrentStreams', options.maxConcurrentStreams ?? DEFAULT_GRPC_MAX_CONCURRENT_STREAMS, 0, 2 ** 32 - 1);
  // grpc-js takes at most INT32_MAX ms, and that value itself means "never"
  const maxConnectionIdleMs = integerOption('maxConnectionIdleMs', options.maxConnectionIdleMs ?? DEFAULT_GRPC_MAX_CONNECTION_IDLE_MS, 0, 2 ** 31 - 2);
  const keepaliveTimeMs = integerOption('keepaliveTimeMs', options.keepaliveTimeMs ?? DEFAULT_GRPC_KEEPALIVE_TIME_MS, 1, 2 ** 31 - 2);
  const keepaliveTimeoutMs = integerOption('keepaliveTimeoutMs', options.keepaliveTimeoutMs ?? DEFAULT_GRPC_KEEPALIVE_TIMEOUT_MS, 1, 2 ** 31 - 2);
  const maxConnectionAgeMs = options.maxConnectionAgeMs === undefined ? undefined : integerOption('maxConnectionAgeMs', options.maxConnectionAgeMs, 1, 2 ** 31 - 2);
  const maxConnectionAgeGraceMs = options.maxConnectionAgeGraceMs === undefined ? undefined : integerOption('maxConnectionAgeGraceMs', options.maxConnectionAgeGraceMs, 1, 2 ** 31 - 2);
  const shutdownTimeoutMs = options.shutdownTimeoutMs ?? DEFAULT_GRPC_SHUTDOWN_TIMEOUT_MS;
  const logger = (options.logger ?? silentLogger).child({ component: 'grpc' });
  const protos = loadGrpcProtos();
  const serializeInferResponse = modelInferResponseSerializer(protos.inferenceService);
  const ctx: GrpcContext = {
    engine: options.engine,
    shm: options.shm,
    settings: options.settings,
    tracer: options.tracer,
    limits: { maxStreamInflight },
    logger,
    codecThread: new CodecThread(),
    headerForward: options.headerForwardPattern,
    compression: options.inferResponseCompression ?? 'none',
    serializeInferResponse,
  };
  // grpc-js would inflate every compressed message at once, each up to the limit
  installBoundedDecompression();
  if (ctx.compression !== 'none') installResponseCompression();

  const server = new Server({
    'grpc.max_receive_message_length': maxReceiveBytes,
    'grpc.max_send_message_length': -1,
    ...(maxConcurrentStreams > 0 ? { 'grpc.max_concurrent_streams': maxConcurrentStreams } : {}),
    ...(maxConnectionIdleMs > 0 ? { 'grpc.max_connection_idle_ms': maxConnectionIdleMs } : {}),
    'grpc.keepalive_time_ms': keepaliveTimeMs,
    'grpc.keepalive_timeout_ms': keepaliveTimeoutMs,
    ...(maxConnectionAgeMs !== undefined ? { 'grpc.max_connection_age_ms': maxConnectionAgeMs } : {}),
    ...(maxConnectionAgeGraceMs !== undefined ? { 'grpc.max_connection_age_grace_ms': maxConnectionAgeGraceMs } : {}),
    // channelz keeps per-call counters, timestamps and closures that only its admin service reads,
    // and this server does not serve it (nor does tritonserver): off, grpc-js takes its plain
    // per-stream handler
    'grpc.enable_channelz': 0,
    interceptors: options.restrictions !== undefined && options.restrictions.size > 0 ? [restrictedProtocolInterceptor(options.restrictions)] : [],
  });
  // large ModelInfer / ModelStreamInfer messages reach the handlers undecoded (infer-message.ts);
  // their responses are written by kserve's encoder (infer-response-serializer.ts)
  server.addService(withFastInferResponseEncoding(withOffLoopInferDecoding(protos.inferenceService)), {
    ...modelHandlers(ctx),
    ...adminHandlers(ctx),
    ModelInfer: modelInferHandler(ctx),
    ModelStreamInfer: modelStreamInferHandler(ctx),
  });
  server.addService(protos.healthService, healthHandlers(ctx));

  // grpc-js has no connection limit: we own the listening socket (net.Server.maxConnections closes
  // a connection beyond the limit at accept) and hand every accepted one to grpc-js.
  const listener = net.createServer({ noDelay: true });
  if (maxConnections > 0) listener.maxConnections = maxConnections;
  listener.on('drop', (d?: { remoteAddress?: string }) => logger.debug({ remoteAddress: d?.remoteAddress, maxConnections }, 'gRPC connection refused: connection limit reached'));

  let closing: Promise<void> | undefined;
  return {
    listen: () =>
      new Promise<number>((resolve, reject) => {
        let credentials: ServerCredentials;
        try {
          const tls = options.tls;
          credentials =
            tls === undefined
              ? ServerCredentials.createInsecure()
              : ServerCredentials.createSsl(tls.rootCert ?? null, [{ cert_chain: tls.cert, private_key: tls.key }], tls.mutual);
        } catch (e) {
          reject(e instanceof Error ? e : new Error(String(e)));
          return;
        }
        // with TLS credentials grpc-js's own secure server does the handshake on each injected socket
        const injector = server.createConnectionInjector(credentials);
        listener.on('connection', (socket: net.Socket) => injector.injectConnection(socket));
        listener.once('error', reject);
        listener.listen(options.port, host, () => {
          listener.off('error', reject);
          const port = (listener.address() as net.AddressInfo).port;
          logger.info({ port }, 'gRPC server listening');
          resolve(port);
        });
      }),
    close: () => {
      closing ??= new Promise<void>((resolve) => {
        listener.close();
        const timer = setTimeout(() => {
          logger.warn({ timeoutMs: shutdownTimeoutMs }, 'gRPC calls still running at shutdown timeout; cancelling them');
          server.forceShutdown();
          resolve();
        }, shutdownTimeoutMs);
        timer.unref();
        server.tryShutdown(() => {
          clearTimeout(timer);
          resolve();
        });
      }).then(() => ctx.codecThread.close());
      return closing;
    },
  };
}
