/**
 * The gRPC front door: `inference.GRPCInferenceService` and `grpc.health.v1.Health` on one
 * grpc-js server, wire-compatible with Triton's (default port 8001).
 */
import * as net from 'node:net';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type MethodDefinition, Server, ServerCredentials } from '@grpc/grpc-js';
import { silentLogger, type Logger } from '@switchyard/common';
import type { InferenceEngine } from '@switchyard/engine';
import type { Restrictions } from '../access-control.js';
import type { GrpcTls } from './grpc-transport.js';
import { CodecThread } from '../codec-thread.js';
import type { ServerSettings } from '../settings.js';
import type { TraceManager } from '../trace/trace-manager.js';
import type { SharedMemoryManager } from '../shared-memory.js';
import { adminHandlers } from './admin-handlers.js';
import { installBoundedDecompression } from './bounded-decompression.js';
import type { HeaderForwardPattern } from '../header-forward.js';
import { installResponseCompression, type CompressionLevel } from './response-compression.js';
import type { GrpcContext } from './grpc-context.js';
import { healthHandlers, modelHandlers } from './model-handlers.js';
import { withOffLoopInferDecoding } from './infer-message.js';
import { modelInferResponseSerializer, withFastInferResponseEncoding } from './infer-response-serializer.js';
import { modelInferHandler } from './model-infer.js';
import { loadGrpcProtos } from './protos.js';
import { modelStreamInferHandler, serveModelStream, StreamSessions } from './stream-infer.js';
import { InFlight, within } from './in-flight.js';
import { acceptedConnections, grpcJsServerOptions, grpcTransportLimits, integerOption, serverCredentials } from './grpc-transport.js';
import { FrontThreads } from '../front-threads/front-host.js';
import { connectionShare } from '../front-threads/front-config.js';

export const DEFAULT_GRPC_PORT = 8001;
export const DEFAULT_GRPC_HOST = '0.0.0.0';
/** Like Triton's `--exit-timeout-secs` default: how long close() waits for in-flight calls. */
export const DEFAULT_GRPC_SHUTDOWN_TIMEOUT_MS = 30_000;
/**
 * Most requests of one ModelStreamInfer stream in flight at once; further ones wait unread (HTTP/2
 * flow control holds them at the client). Enough to keep dynamic batching fed from one stream.
 */
export const DEFAULT_GRPC_MAX_STREAM_INFLIGHT = 128;

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
  /**
   * `--grpc-infer-thread-count`: gRPC front threads sharing the port (front-threads/front-grpc.ts),
   * which serve ModelInfer themselves, carry ModelStreamInfer calls whose sessions run here, and relay
   * every other call to this door on a private Unix socket. 0 / undefined: every connection on the
   * event loop. Needs `reusePortSupported()` and no response compression.
   */
  threads?: number;
  logger?: Logger;
}


export interface GrpcFrontDoor {
  /** Bind and start serving; resolves with the bound port. */
  listen(): Promise<number>;
  /**
   * Stop accepting calls (GOAWAY), let the ones in flight finish (up to the shutdown timeout): streams
   * read no more and end once their requests are answered (UNAVAILABLE, or OK when the client had
   * half-closed); then cancel the rest and drop the connections.
   */
  close(): Promise<void>;
}


export type { GrpcTls, GrpcTransportLimits } from './grpc-transport.js';
export {
  DEFAULT_GRPC_KEEPALIVE_TIMEOUT_MS,
  DEFAULT_GRPC_KEEPALIVE_TIME_MS,
  DEFAULT_GRPC_MAX_CONCURRENT_STREAMS,
  DEFAULT_GRPC_MAX_CONNECTIONS,
  DEFAULT_GRPC_MAX_CONNECTION_IDLE_MS,
  DEFAULT_GRPC_MAX_RECEIVE_MESSAGE_BYTES,
  MAX_GRPC_MESSAGE_BYTES,
} from './grpc-transport.js';

export function createGrpcServer(options: GrpcServerOptions): GrpcFrontDoor {
  const host = options.host ?? DEFAULT_GRPC_HOST;
  const limits = grpcTransportLimits(options);
  const maxStreamInflight = integerOption('maxStreamInflight', options.maxStreamInflight ?? DEFAULT_GRPC_MAX_STREAM_INFLIGHT, 1);
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
    calls: new InFlight(),
    streams: new StreamSessions(),
  };
  // grpc-js would inflate every compressed message at once, each up to the limit
  installBoundedDecompression();
  if (ctx.compression !== 'none') installResponseCompression();

  const threads = options.threads ?? 0;
  if (threads > 0 && ctx.compression !== 'none') throw new RangeError('gRPC front threads serve responses uncompressed: use them with inferResponseCompression none');
  // With front threads this server only hears them, each over one connection carrying all its
  // clients' relayed calls: the per-connection limits are the threads' to apply, not this server's.
  const served = threads > 0 ? { ...limits, maxConcurrentStreams: 0, maxConnectionIdleMs: 0, maxConnectionAgeMs: undefined, maxConnectionAgeGraceMs: undefined } : limits;
  const server = new Server(grpcJsServerOptions(served, options.restrictions));
  // large ModelInfer / ModelStreamInfer messages reach the handlers undecoded (infer-message.ts);
  // their responses are written by kserve's encoder (infer-response-serializer.ts)
  const inferenceService = withFastInferResponseEncoding(withOffLoopInferDecoding(protos.inferenceService));
  server.addService(inferenceService, {
    ...modelHandlers(ctx),
    ...adminHandlers(ctx),
    ModelInfer: modelInferHandler(ctx),
    ModelStreamInfer: modelStreamInferHandler(ctx),
  });
  server.addService(protos.healthService, healthHandlers(ctx));

  // grpc-js has no connection limit: we own the listening socket (net.Server.maxConnections closes
  // a connection beyond the limit at accept) and hand every accepted one to grpc-js.
  const listener = net.createServer({ noDelay: true });
  const connections = acceptedConnections(listener);
  const maxConnections = limits.maxConnections;
  if (maxConnections > 0) listener.maxConnections = maxConnections;
  listener.on('drop', (d?: { remoteAddress?: string }) => logger.debug({ remoteAddress: d?.remoteAddress, maxConnections }, 'gRPC connection refused: connection limit reached'));

  let closing: Promise<void> | undefined;
  let fronts: { threads: FrontThreads; dir: string } | undefined;
  /** Bind `listener` where `bind` says, each accepted connection handed to grpc-js with `credentials`. */
  const bind = (credentials: ServerCredentials, ...where: [number, string] | [string]) =>
    new Promise<void>((resolve, reject) => {
      // with TLS credentials grpc-js's own secure server does the handshake on each injected socket
      const injector = server.createConnectionInjector(credentials);
      listener.on('connection', (socket: net.Socket) => injector.injectConnection(socket));
      listener.once('error', reject);
      listener.listen(...(where as [number, string]), () => {
        listener.off('error', reject);
        resolve();
      });
    });
  return {
    listen: async () => {
      if (threads <= 0) {
        await bind(serverCredentials(options.tls), options.port, host);
        const port = (listener.address() as net.AddressInfo).port;
        logger.info({ port }, 'gRPC server listening');
        return port;
      }
      // The door itself answers its front threads only, on a socket in a directory only this user can
      // enter; the threads own the port (and its TLS).
      if (options.tls !== undefined) serverCredentials(options.tls); // a bad certificate fails here, as without threads
      const dir = await mkdtemp(join(tmpdir(), 'switchyard-grpc-'));
      const socketPath = join(dir, 'main.sock');
      await bind(ServerCredentials.createInsecure(), socketPath);
      const front = new FrontThreads({
        count: threads,
        door: {
          kind: 'grpc',
          grpc: {
            port: options.port,
            host,
            socketPath,
            limits: { ...limits, maxConnections: connectionShare(limits.maxConnections, threads) },
            ...(options.tls !== undefined ? { tls: options.tls } : {}),
            ...(options.restrictions !== undefined ? { restrictions: options.restrictions } : {}),
            ...(options.headerForwardPattern !== undefined ? { headerForwardSource: options.headerForwardPattern.source } : {}),
            shutdownTimeoutMs,
          },
        },
        engine: options.engine,
        settings: options.settings,
        tracer: options.tracer,
        logger,
        // streams: the call on a thread, this door's own session here (front-threads/thread-stream.ts)
        streams: {
          deserialize: (inferenceService['ModelStreamInfer'] as MethodDefinition<unknown, unknown>).requestDeserialize,
          serialize: (inferenceService['ModelStreamInfer'] as MethodDefinition<unknown, unknown>).responseSerialize,
          serve: (call) => serveModelStream(ctx, call),
        },
      });
      fronts = { threads: front, dir };
      try {
        const port = await front.start();
        logger.info({ port, threads }, 'gRPC server listening');
        return port;
      } catch (e) {
        await front.close();
        throw e;
      }
    },
    // Streams stop reading and end once their requests are answered (grpc/stream-infer.ts); the front
    // threads (if any) stop accepting, finish and exit; then this server stops taking calls (GOAWAY),
    // the calls in flight finish up to the shutdown timeout, the connections get a moment to take the
    // last answers, and whatever is left is cancelled and dropped.
    close: () => {
      closing ??= (async () => {
        ctx.streams.drain();
        await fronts?.threads.close();
        listener.close();
        server.tryShutdown(() => undefined);
        if (!(await within(Promise.all([ctx.calls.whenIdle(), ctx.streams.whenEmpty()]), shutdownTimeoutMs))) {
          logger.warn({ timeoutMs: shutdownTimeoutMs, calls: ctx.calls.count, streams: ctx.streams.size }, 'gRPC calls still running at shutdown timeout; cancelling them');
        }
        await connections.cut(server);
        await ctx.codecThread.close();
        if (fronts !== undefined) await rm(fronts.dir, { recursive: true, force: true });
      })();
      return closing;
    },
  };
}
